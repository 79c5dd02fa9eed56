"""Exact extraction as a 0-1 integer program, solved by HiGHS via ``scipy.optimize.milp``.

Model (over the reachable classes of an ``extract.Problem``):
- ``x[n]`` in {0, 1} per candidate node ``n`` (nodes with a child in their own class are left
  out: they can never be part of an acyclic choice);
- a root class picks exactly one node, any other class at most one;
- a chosen node needs each child class to pick a node: ``x[n] <= sum(x[m] for m in child)``;
- acyclicity, only inside strongly connected components of the class graph (elsewhere no cycle
  can form): an order variable ``o[c]`` in ``[0, K-1]`` per class of a component of size ``K``
  and, for each edge ``c -> d`` of node ``n`` inside it, ``o[c] - o[d] - K*x[n] >= 1 - K``;
- objective: the DAG cost ``sum(cost[n] * x[n])``, cut at the greedy cost (so the search only
  looks for something at least as good).

Invariants: ``ilp_refine`` never returns a result worse than the greedy one it is given; on a
time-out, solver failure or an unusable solution it returns that greedy result with a ``note``.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from .errors import ExtractionError
from .extract import INF, Extraction, Problem, dag_cost, finish

log = logging.getLogger(__name__)


def components(problem: Problem) -> list[int]:
    """Tarjan's strongly connected components (iterative); returns a component id per class."""
    n = problem.size
    edges = [sorted({k for _, _, kids in opts for k in kids}) for opts in problem.nodes]
    index, low, comp = [-1] * n, [0] * n, [-1] * n
    stack: list[int] = []
    on_stack = [False] * n
    counter = count = 0
    for start in range(n):
        if index[start] >= 0:
            continue
        work = [(start, 0)]
        while work:
            v, pos = work[-1]
            if pos == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if pos < len(edges[v]):
                work[-1] = (v, pos + 1)
                w = edges[v][pos]
                if index[w] < 0:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = count
                    if w == v:
                        break
                count += 1
    return comp


class _Model:
    """Variables and sparse constraint rows of the extraction ILP."""

    def __init__(self, problem: Problem, bound: float) -> None:
        self.p = problem
        self.var: dict[tuple[int, int], int] = {}
        for i, opts in enumerate(problem.nodes):
            for j, (_, _, kids) in enumerate(opts):
                if i not in kids:
                    self.var[(i, j)] = len(self.var)
        self.comp = components(problem)
        sizes = np.bincount(np.asarray(self.comp, dtype=np.int64)) if self.comp else np.zeros(0)
        self.cyclic = [i for i in range(problem.size) if sizes[self.comp[i]] > 1]
        self.order = {i: len(self.var) + k for k, i in enumerate(self.cyclic)}
        self.size = len(self.var) + len(self.order)
        self.comp_size = [int(sizes[c]) for c in self.comp]
        self.rows: list[tuple[list[tuple[int, float]], float, float]] = []
        self._build(bound)

    def _by_class(self) -> list[list[int]]:
        per: list[list[int]] = [[] for _ in range(self.p.size)]
        for (i, _), v in self.var.items():
            per[i].append(v)
        return per

    def _build(self, bound: float) -> None:
        per = self._by_class()
        roots = {self.p.index[r] for r in self.p.roots}
        for i, vs in enumerate(per):
            self.rows.append(([(v, 1.0) for v in vs], 1.0 if i in roots else 0.0, 1.0))
        for (i, j), v in self.var.items():
            for k in self.p.nodes[i][j][2]:
                self.rows.append(([(v, 1.0)] + [(m, -1.0) for m in per[k]], -INF, 0.0))
                if self.comp[i] == self.comp[k] and i in self.order:
                    size = float(self.comp_size[i])
                    coeffs = [(self.order[i], 1.0), (self.order[k], -1.0), (v, -size)]
                    self.rows.append((coeffs, 1.0 - size, INF))
        costs = [(v, self.p.nodes[i][j][1]) for (i, j), v in self.var.items()]
        self.rows.append((costs, -INF, bound + 1e-9 * max(1.0, abs(bound))))

    def solve(self, time_limit: float) -> np.ndarray | None:
        data, rows, cols = [], [], []
        for r, (coeffs, _, _) in enumerate(self.rows):
            for col, value in coeffs:
                rows.append(r)
                cols.append(col)
                data.append(value)
        matrix = coo_array((data, (rows, cols)), shape=(len(self.rows), self.size)).tocsr()
        lower = np.array([lo for _, lo, _ in self.rows])
        upper = np.array([hi for _, _, hi in self.rows])
        cost = np.zeros(self.size)
        for (i, j), v in self.var.items():
            cost[v] = self.p.nodes[i][j][1]
        integrality = np.zeros(self.size)
        integrality[: len(self.var)] = 1
        ub = np.ones(self.size)
        for i, col in self.order.items():
            ub[col] = self.comp_size[i] - 1
        res = milp(cost, integrality=integrality, bounds=Bounds(np.zeros(self.size), ub),
                   constraints=LinearConstraint(matrix, lower, upper),
                   options={"time_limit": time_limit, "mip_rel_gap": 1e-9, "disp": False})
        log.debug("ilp: status %s (%s)", res.status, res.message)
        return None if res.x is None else np.asarray(res.x)

    def decode(self, x: np.ndarray) -> list[int]:
        choice = [-1] * self.p.size
        for (i, j), v in self.var.items():
            if x[v] > 0.5:
                choice[i] = j
        return choice


def ilp_refine(problem: Problem, greedy: Extraction, time_limit: float) -> Extraction:
    """The ILP optimum when found in time and cheaper than ``greedy``; else ``greedy``."""
    try:
        model = _Model(problem, greedy.cost)
        x = model.solve(time_limit)
    except (ValueError, MemoryError) as exc:
        return dataclasses.replace(greedy, note=f"ilp failed ({exc}); greedy kept")
    if x is None:
        return dataclasses.replace(greedy, note="ilp found no solution in time; greedy kept")
    choice = model.decode(x)
    try:
        cost = dag_cost(problem, choice)
    except ExtractionError:
        cost = INF
    if cost < greedy.cost - 1e-9 * max(1.0, abs(greedy.cost)):
        return finish(problem, choice, "ilp")
    return dataclasses.replace(greedy, note="ilp found nothing cheaper; greedy kept")
