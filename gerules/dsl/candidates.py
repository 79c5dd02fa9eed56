"""Candidate typings for the soundness check: strategies, dims, values, pattern order.

Invariants:
- Everything here is deterministic: the same rule always gets the same candidates, in the
  same order (``configs``), with the same values (``random_value`` reads a fixed pool).
- ``topo_ops`` orders a pattern's ops so each comes after its operands and after the nodes
  its names refer to (DAG patterns); it returns ``None`` for a cyclic pattern.
- ``pinned_ranks`` reads only the shapes guards make certain (``rank(v) == k`` and
  ``shape(v) == [..]``, possibly inside ``and``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.graph import TensorType
from . import ast
from .rulecheck import children

BASE = (5, 4, 3, 2, 6, 7)  # dims from the right in the "aligned" strategy
BASE_LEFT = (2, 3, 4, 5, 6, 7)  # dims from the left in the "left" strategy (Conv's N, C...)
RANK_ORDERS = ((4, 3, 2, 1, 0), (2, 3, 4, 1, 0))
DIM_STRATEGIES = ("left", "aligned", "square", "ones_first", "ones_rest")


@dataclass(frozen=True, slots=True)
class Config:
    ranks: tuple[int, ...]
    dims: str
    shift: bool  # later operands prefer the next rank up (exposes broadcasting)



def configs() -> list[Config]:
    """Candidate typings, the most telling first (different strategies early)."""
    deep, shallow = RANK_ORDERS
    return [Config(deep, "left", False), Config(deep, "aligned", True),
            Config(deep, "ones_first", False), Config(shallow, "left", False),
            Config(deep, "square", False), Config(deep, "ones_rest", False),
            Config(shallow, "aligned", True)]


def dims(rank: int, strategy: str, k: int) -> tuple[int, ...]:
    """Concrete dims for the ``k``-th open operand of an op under ``strategy``."""
    aligned = tuple(BASE[rank - 1 - i] for i in range(rank))
    if strategy == "square":
        return (3,) * rank
    if strategy == "left":
        return BASE_LEFT[:rank]
    if (strategy == "ones_first" and k == 0) or (strategy == "ones_rest" and k > 0):
        return (1,) * rank
    return aligned


_POOL = np.random.default_rng(0).uniform(0.5, 1.5, 1 << 12).astype(np.float32)


def random_value(t: TensorType) -> np.ndarray | None:
    """Deterministic values in [0.5, 1.5) (ones for integers) of a static type."""
    if not t.is_static:
        return None
    shape = tuple(int(d) for d in t.shape)  # type: ignore[union-attr]
    if not t.dtype.startswith("float"):
        return np.ones(shape, dtype=t.dtype)
    n = math.prod(shape)
    flat = _POOL[:n] if n <= _POOL.size else np.resize(_POOL, n)
    return flat.reshape(shape).astype(t.dtype)


def topo_ops(lhs: ast.Expr, binders: set[str]) -> list[ast.OpCall] | None:
    """The pattern's ops, each after its operands and after nodes its names refer to."""
    calls: list[ast.OpCall] = []
    by_binder: dict[str, ast.OpCall] = {}
    stack: list[ast.Expr] = [lhs]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.OpCall):
            calls.append(e)
            if e.binder:
                by_binder[e.binder] = e
        stack.extend(children(e))
    deps = {id(c): [a for a in c.args if isinstance(a, ast.OpCall)] +
            [by_binder[a.name] for a in c.args if isinstance(a, ast.Name) and a.name in binders
             and a.name in by_binder] for c in calls}
    order: list[ast.OpCall] = []
    state: dict[int, int] = {}
    for c in calls:
        if not _visit(c, deps, state, order):
            return None
    return order


def _visit(c: ast.OpCall, deps: dict[int, list[ast.OpCall]], state: dict[int, int],
           order: list[ast.OpCall]) -> bool:
    """Iterative post-order DFS; ``False`` on a cycle."""
    stack = [(c, iter(deps[id(c)]))]
    if state.get(id(c)) == 2:
        return True
    state[id(c)] = 1
    while stack:
        node, it = stack[-1]
        child = next(it, None)
        if child is None:
            stack.pop()
            state[id(node)] = 2
            order.append(node)
        elif state.get(id(child)) == 1:
            return False
        elif state.get(id(child)) != 2:
            state[id(child)] = 1
            stack.append((child, iter(deps[id(child)])))
    return True


def pinned_ranks(rule: ast.Rule) -> dict[str, int]:
    """Ranks fixed by guards: ``rank(v) == k`` and ``shape(v) == [..]``, through ``and``."""
    out: dict[str, int] = {}
    stack = [c.expr for c in rule.clauses if isinstance(c, ast.Where)]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Binary) and e.op == "and":
            stack += [e.left, e.right]
        elif isinstance(e, ast.Binary) and e.op == "==":
            for a, b in ((e.left, e.right), (e.right, e.left)):
                name, rank = _pin(a, b)
                if name is not None:
                    out.setdefault(name, rank)
    return out


def _pin(call: ast.Expr, value: ast.Expr) -> tuple[str | None, int]:
    if not (isinstance(call, ast.Call) and len(call.args) == 1
            and isinstance(call.args[0], ast.Name)):
        return None, 0
    name = call.args[0].name
    if call.func == "rank" and isinstance(value, ast.Num) and isinstance(value.value, int):
        return name, value.value
    if call.func == "shape" and isinstance(value, ast.ListLit):
        return name, len(value.items)
    return None, 0
