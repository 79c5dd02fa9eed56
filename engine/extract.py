"""Extraction: choose one e-node per needed class so the chosen DAG is cheapest.

The cost function is local: ``cost(egraph, class_id, enode) -> float`` (>= 0; ``inf`` forbids a
node); it may read analysis data. The cost of a choice is its *DAG cost*: the sum of the chosen
nodes' local costs over the classes reachable from the roots, each class paid once.

Methods:
- ``"greedy"`` (default): extraction-gym's faster-greedy-dag. A candidate node's cost is the sum
  over the *union* of its children's class sets, so shared classes count once. Sets are Python
  ints used as bitsets; disjoint and nested unions are summed without looking at bits, partial
  overlaps exactly (a masked sum) up to ``EXACT_LIMIT`` classes and estimated from bit counts
  above it (the returned ``cost`` is always exact).
- ``"tree"``: egg's classic bottom-up extractor (a shared class is paid per use).
- ``"ilp"``: an exact ILP (``engine.ilp``) with a time limit, never worse than greedy.

Invariants:
- The returned choice is acyclic, even when classes contain self-loops or cycles: a candidate
  whose children's set contains its own class is skipped, and any cycle left by stale sets is
  broken by switching the classes on it to their tree-cost choice (which is provably acyclic:
  tree costs only ever strictly decrease, so a chosen cycle cannot form).
- ``choices`` covers exactly the classes reachable from the roots through chosen nodes;
  ``order`` lists them children first; ``cost`` is their DAG cost.
- Extraction rebuilds the e-graph first and never changes it otherwise.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .enode import ENode
from .errors import EngineError, ExtractionError
from .pause import gc_paused

if TYPE_CHECKING:
    from .egraph import EGraph

CostFunction = Callable[["EGraph", int, ENode], float]
INF = math.inf


def ast_size(egraph: EGraph, class_id: int, enode: ENode) -> float:
    """Every node costs 1 (DAG cost = number of distinct classes used)."""
    return 1.0


@dataclass(frozen=True, slots=True)
class Extraction:
    """The chosen e-node per reachable class (canonical ids), DAG cost and a topological order."""

    roots: tuple[int, ...]
    choices: Mapping[int, ENode]
    cost: float
    order: tuple[int, ...]
    method: str
    note: str = ""

    def term(self, root: int) -> Any:
        """The chosen term under ``root`` as nested tuples ``(op, attrs, children...)``."""
        done: dict[int, Any] = {}
        for cid in self.order:
            node = self.choices[cid]
            done[cid] = (node.op, node.attrs, *[done[c] for c in node.children])
        return done[root]

    def to_sexpr(self, root: int) -> str:
        """The chosen term as an s-expression (shared classes are printed at each use)."""
        done: dict[int, str] = {}
        for cid in self.order:
            node = self.choices[cid]
            attrs = "".join(f" :{k} {_fmt(v)}" for k, v in node.attrs)
            if not node.children and not attrs:
                done[cid] = node.op
            else:
                kids = "".join(f" {done[c]}" for c in node.children)
                done[cid] = f"({node.op}{kids}{attrs})"
        return done[root]


def _fmt(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + " ".join(_fmt(v) for v in value) + "]"
    return f'"{value}"' if isinstance(value, str) else str(value)


@dataclass(slots=True)
class Problem:
    """The reachable part of an e-graph with local costs, indexed densely for extraction."""

    egraph: EGraph
    roots: tuple[int, ...]
    ids: list[int] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)
    nodes: list[list[tuple[ENode, float, tuple[int, ...]]]] = field(default_factory=list)
    users: list[list[tuple[int, int]]] = field(default_factory=list)

    @classmethod
    def build(cls, egraph: EGraph, roots: Iterable[int], cost: CostFunction) -> Problem:
        egraph.rebuild()
        root_ids = tuple(egraph.find(r) for r in roots)
        problem = cls(egraph, root_ids)
        stack = list(dict.fromkeys(root_ids))
        for cid in stack:
            problem._slot(cid)
        while stack:
            cid = stack.pop()
            for node in egraph.nodes(cid):
                for child in node.children:
                    if child not in problem.index:
                        problem._slot(child)
                        stack.append(child)
        problem._fill(cost)
        return problem

    def _slot(self, cid: int) -> None:
        self.index[cid] = len(self.ids)
        self.ids.append(cid)

    def _fill(self, cost: CostFunction) -> None:
        egraph, index = self.egraph, self.index
        self.nodes = [[] for _ in self.ids]
        self.users = [[] for _ in self.ids]
        for i, cid in enumerate(self.ids):
            for node in egraph.nodes(cid):
                weight = float(cost(egraph, cid, node))
                if weight < 0 or math.isnan(weight):
                    raise EngineError(f"cost of {node} is {weight}: costs must be >= 0")
                if weight == INF:
                    continue
                kids = tuple([index[c] for c in node.children])
                if len(kids) > 1 and len(set(kids)) < len(kids):
                    kids = tuple(dict.fromkeys(kids))
                for kid in kids:
                    self.users[kid].append((i, len(self.nodes[i])))
                self.nodes[i].append((node, weight, kids))

    @property
    def size(self) -> int:
        return len(self.ids)


# ---------------------------------------------------------------------- tree
def tree_choice(problem: Problem) -> list[int]:
    """egg's bottom-up extractor: node index per class (-1: none), tree costs strictly drop."""
    best, choice = [INF] * problem.size, [-1] * problem.size
    queue = deque((i, j) for i, opts in enumerate(problem.nodes)
                  for j, (_, _, kids) in enumerate(opts) if not kids)
    while queue:
        i, j = queue.popleft()
        _, weight, kids = problem.nodes[i][j]
        total = weight + sum(best[k] for k in kids)
        if total < best[i]:
            best[i], choice[i] = total, j
            queue.extend(problem.users[i])
    return choice


# ----------------------------------------------------------------- greedy DAG
EXACT_LIMIT = 20_000  # classes; above it, partial overlaps of class sets are estimated
_EPS = 1e-12


class _Greedy:
    """faster-greedy-dag with bitset class sets (see the module doc)."""

    def __init__(self, problem: Problem) -> None:
        self.p = problem
        n = problem.size
        self.total, self.sets, self.choice = [INF] * n, [0] * n, [-1] * n
        self.weights = np.zeros(max(n, 1))
        self.nbytes = (n + 7) // 8 + 1
        self.exact = n <= EXACT_LIMIT

    def run(self) -> list[int]:
        nodes, users, improve = self.p.nodes, self.p.users, self._improve
        queue = deque((i, j) for i, opts in enumerate(nodes)
                      for j, (_, _, kids) in enumerate(opts) if not kids)
        queued = set(queue)
        budget = 64 * sum(len(opts) for opts in nodes) + 1024
        while queue and budget > 0:
            budget -= 1
            item = queue.popleft()
            queued.discard(item)
            if improve(*item):
                for user in users[item[0]]:
                    if user not in queued:
                        queued.add(user)
                        queue.append(user)
        return self.choice

    def _improve(self, i: int, j: int) -> bool:
        _, weight, kids = self.p.nodes[i][j]
        union, total = self._union(kids)
        if union < 0 or union >> i & 1:
            return False
        total += weight
        if total >= self.total[i] - _EPS * (1.0 + abs(total)):
            return False
        self.total[i], self.sets[i], self.choice[i] = total, union | 1 << i, j
        self.weights[i] = weight
        return True

    def _union(self, kids: tuple[int, ...]) -> tuple[int, float]:
        """Union of the kids' sets and its cost (-1 when a kid has no choice yet)."""
        sets, totals = self.sets, self.total
        if len(kids) == 1:
            k = kids[0]
            return (sets[k], totals[k]) if totals[k] < INF else (-1, 0.0)
        if len(kids) == 2:
            a, b = kids
            if totals[a] == INF or totals[b] == INF:
                return -1, 0.0
            return self._pair(sets[a], totals[a], sets[b], totals[b])
        if not kids:
            return 0, 0.0
        if any(totals[k] == INF for k in kids):
            return -1, 0.0
        union, total = 0, 0.0
        for k in sorted(kids, key=totals.__getitem__, reverse=True):
            union, total = self._pair(union, total, sets[k], totals[k])
        return union, total

    def _pair(self, sa: int, ta: float, sb: int, tb: float) -> tuple[int, float]:
        """Cost of ``sa | sb`` from the parts: disjoint and nested unions need no bit counts."""
        common = sa & sb
        if not common:
            return sa | sb, ta + tb
        if common == sb:
            return sa, ta
        if common == sa:
            return sb, tb
        union = sa | sb
        if self.exact:
            return union, self._sum(union)
        return union, ta + tb * (1.0 - common.bit_count() / sb.bit_count())

    def _sum(self, bits: int) -> float:
        raw = np.frombuffer(bits.to_bytes(self.nbytes, "little"), dtype=np.uint8)
        mask = np.unpackbits(raw, bitorder="little")[: self.p.size].view(bool)
        return float(self.weights[mask].sum())


def greedy_choice(problem: Problem) -> list[int]:
    """Greedy-DAG choice per class; classes it left open (work budget) take the tree choice."""
    choice = _Greedy(problem).run()
    if -1 in choice:
        tree = tree_choice(problem)
        choice = [t if c < 0 else c for c, t in zip(choice, tree, strict=True)]
    return choice


# ------------------------------------------------------------ sharing pass
SHARE_CANDIDATES = 4_096  # exact re-costings the sharing pass may spend


def share(problem: Problem, choice: list[int]) -> list[int]:
    """Local search after greedy: use what the chosen DAG already pays for.

    Greedy judges each class alone, so a class keeps its own node even when another of its
    nodes is cheaper *given* the classes chosen elsewhere (a fused op's second output, say,
    whose tuple node another class already pays for). Here a class switches to a locally
    cheaper node whose children are all in the chosen DAG, and the switch is kept only when
    the exact DAG cost (which also rejects any cycle) drops.
    """
    choice = list(choice)
    budget = SHARE_CANDIDATES
    while budget > 0:
        order, cycle = _find_cycle(problem, choice)
        if cycle:
            return choice
        chosen = set(order)
        best = math.fsum(problem.nodes[i][choice[i]][1] for i in order)
        improved = False
        for i in order:
            current = problem.nodes[i][choice[i]][1]
            for j, (_, weight, kids) in enumerate(problem.nodes[i]):
                if j == choice[i] or weight >= current or not chosen.issuperset(kids):
                    continue
                budget -= 1
                old, choice[i] = choice[i], j
                cost = dag_cost(problem, choice)
                if cost < best - _EPS * (1.0 + abs(best)):
                    best, improved, current = cost, True, weight
                else:
                    choice[i] = old
        if not improved:
            break
    return share_new(problem, choice, budget)


def share_new(problem: Problem, choice: list[int], budget: int) -> list[int]:
    """Group moves: a class switches to a node that needs classes the DAG does not hold yet
    (a fused multi-output node), and every chosen class that can then read one of those new
    classes (its other outputs) switches too; kept when the exact DAG cost drops. Greedy
    judges each class alone, so it never pays a shared node that only pays off for several
    classes together (horizontal fusion: three MatMuls as one MatMul and a Split). Only
    nodes reading a new class that another chosen class could read too are tried."""
    choice = list(choice)
    order, cycle = _find_cycle(problem, choice)
    if cycle:
        return choice
    chosen, best = set(order), dag_cost(problem, choice)
    for i in order:
        for j, (_, _, kids) in enumerate(problem.nodes[i]):
            fresh = [c for c in kids if c not in chosen]
            if j == choice[i] or not fresh or not any(
                    len({u for u, _ in problem.users[c] if u in chosen}) > 1 for c in fresh):
                continue
            if budget <= 0:
                return choice
            budget -= 1
            trial = _group(problem, choice, chosen, i, j)
            try:
                cost = dag_cost(problem, trial) if trial is not None else INF
            except ExtractionError:  # a node needs a class without a finite term
                continue
            if cost < best - _EPS * (1.0 + abs(best)):
                best, choice = cost, trial  # type: ignore[assignment]
                chosen = set(_find_cycle(problem, choice)[0])
    return choice


def _group(problem: Problem, choice: list[int], chosen: set[int], i: int, j: int
           ) -> list[int] | None:
    """``choice`` with class ``i`` on node ``j`` and every chosen class that can read a
    class ``j`` brings in moved onto its cheapest such node (``None``: not acyclic)."""
    trial = list(choice)
    trial[i] = j
    try:
        reach, cycle = _find_cycle(problem, trial)
    except ExtractionError:
        return None
    new = set(reach) - chosen
    if cycle or not new:
        return None
    within = set(reach)
    options: dict[int, list[tuple[float, int]]] = {}
    for c in new:  # the nodes that can read a new class are its users' (not every chosen
        for k, m in problem.users[c]:  # class's every node: that was most of extraction)
            if k != i and k in chosen:
                _, w, kk = problem.nodes[k][m]
                if within.issuperset(kk):
                    options.setdefault(k, []).append((w, m))
    for k, found in options.items():
        trial[k] = min(found)[1]
    return trial


# -------------------------------------------------------------- finishing up
def _find_cycle(problem: Problem, choice: list[int]) -> tuple[list[int], list[int]]:
    """(post-order of the chosen DAG, classes on one chosen cycle or [])."""
    state = [0] * problem.size  # 0 new, 1 on stack, 2 done
    order: list[int] = []
    for root in (problem.index[r] for r in problem.roots):
        if state[root]:
            continue
        stack: list[tuple[int, int]] = [(root, 0)]
        state[root] = 1
        while stack:
            i, pos = stack[-1]
            if choice[i] < 0:
                raise ExtractionError(f"class #{problem.ids[i]} has no finite-cost acyclic term")
            kids = problem.nodes[i][choice[i]][2]
            if pos < len(kids):
                stack[-1] = (i, pos + 1)
                k = kids[pos]
                if state[k] == 1:
                    members = [s for s, _ in stack]
                    return order, members[members.index(k):]
                if state[k] == 0:
                    state[k] = 1
                    stack.append((k, 0))
            else:
                state[i] = 2
                order.append(i)
                stack.pop()
    return order, []


def acyclic(problem: Problem, choice: list[int]) -> list[int]:
    """Post-order of ``choice``, after switching classes on chosen cycles to tree choices."""
    tree: list[int] | None = None
    switched: set[int] = set()
    while True:
        order, cycle = _find_cycle(problem, choice)
        if not cycle:
            return order
        tree = tree if tree is not None else tree_choice(problem)
        fresh = [i for i in cycle if i not in switched]
        if not fresh:  # cannot happen: tree choices never form a cycle
            raise EngineError("extraction could not break a cycle")
        for i in fresh:
            choice[i] = tree[i]
            switched.add(i)


def finish(problem: Problem, choice: list[int], method: str, note: str = "") -> Extraction:
    """Break any chosen cycle, then package the choice as an ``Extraction``."""
    fixed = list(choice)
    order = acyclic(problem, fixed)
    return _result(problem, fixed, order, method, note)


def _result(problem: Problem, choice: list[int], order: list[int], method: str,
            note: str) -> Extraction:
    ids, nodes = problem.ids, problem.nodes
    choices = {ids[i]: nodes[i][choice[i]][0] for i in order}
    cost = math.fsum(nodes[i][choice[i]][1] for i in order)
    return Extraction(problem.roots, choices, cost, tuple(ids[i] for i in order), method, note)


def dag_cost(problem: Problem, choice: list[int]) -> float:
    order, cycle = _find_cycle(problem, choice)
    return INF if cycle else math.fsum(problem.nodes[i][choice[i]][1] for i in order)


def extract(
    egraph: EGraph,
    roots: int | Iterable[int],
    cost: CostFunction = ast_size,
    *,
    method: str = "greedy",
    time_limit: float = 10.0,
) -> Extraction:
    """Extract the cheapest DAG for ``roots`` (see the module doc for ``method``)."""
    if method not in ("greedy", "tree", "ilp"):
        raise EngineError(f"unknown extraction method {method!r} (greedy, tree, ilp)")
    with gc_paused():
        problem = Problem.build(egraph, (roots,) if isinstance(roots, int) else roots, cost)
        if method == "tree":
            return finish(problem, tree_choice(problem), "tree")
        greedy = finish(problem, share(problem, greedy_choice(problem)), "greedy")
    if method == "greedy":
        return greedy
    from .ilp import ilp_refine

    return ilp_refine(problem, greedy, time_limit)
