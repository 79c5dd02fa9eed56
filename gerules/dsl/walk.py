"""Walking the syntax tree: children, every sub-expression, free names, closed expressions.

Invariant: the walks are iterative (no recursion), so expression depth is bounded only by
the parser's nesting cap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

from . import ast
from .builtins import CONSTANTS


def children(e: ast.Expr) -> list[ast.Expr]:
    """The direct sub-expressions of ``e`` (an op's inputs, keywords and attribute values)."""
    if isinstance(e, ast.Unary):
        return [e.operand]
    if isinstance(e, ast.Binary):
        return [e.left, e.right]
    if isinstance(e, ast.Index):
        return [e.base, e.index]
    if isinstance(e, ast.Slice):
        return [x for x in (e.base, e.lo, e.hi) if x is not None]
    if isinstance(e, (ast.ListLit, ast.TupleLit)):
        return list(e.items)
    if isinstance(e, ast.Call):
        return [*e.args, *(k.value for k in e.kwargs)]
    if isinstance(e, ast.OpCall):
        values = [a.value for a in e.attrs if isinstance(a, ast.AttrSet)]
        return [*e.args, *(k.value for k in e.kwargs), *values]
    return []


def walk(expr: ast.Expr) -> Iterator[ast.Expr]:
    """``expr`` and every expression below it."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(children(e))


def free_names(expr: ast.Expr) -> Iterable[ast.Name | ast.AttrRead | ast.Wildcard]:
    """Every name, attribute read and wildcard in ``expr`` (ops' children included)."""
    return (e for e in walk(expr) if isinstance(e, (ast.Name, ast.AttrRead, ast.Wildcard)))


def is_closed(expr: ast.Expr) -> bool:
    """True when ``expr`` mentions no variable and no op (built-in constants are fine)."""
    if any(isinstance(e, ast.OpCall) for e in walk(expr)):
        return False
    return all(isinstance(n, ast.Name) and n.name in CONSTANTS for n in free_names(expr))


def with_children(e: ast.Expr, kids: list[ast.Expr]) -> ast.Expr:
    """``e`` with its direct sub-expressions (in ``children`` order) replaced by ``kids``."""
    if isinstance(e, ast.Unary):
        return dataclasses.replace(e, operand=kids[0])
    if isinstance(e, ast.Binary):
        return dataclasses.replace(e, left=kids[0], right=kids[1])
    if isinstance(e, ast.Index):
        return dataclasses.replace(e, base=kids[0], index=kids[1])
    if isinstance(e, ast.Slice):
        it = iter(kids)
        base = next(it)
        lo = next(it) if e.lo is not None else None
        hi = next(it) if e.hi is not None else None
        return dataclasses.replace(e, base=base, lo=lo, hi=hi)
    if isinstance(e, (ast.ListLit, ast.TupleLit)):
        return dataclasses.replace(e, items=tuple(kids))
    if isinstance(e, ast.Call):
        n = len(e.args)
        kwargs = tuple(dataclasses.replace(k, value=v) for k, v in zip(e.kwargs, kids[n:],
                                                                       strict=True))
        return dataclasses.replace(e, args=tuple(kids[:n]), kwargs=kwargs)
    if isinstance(e, ast.OpCall):
        n, m = len(e.args), len(e.kwargs)
        kwargs = tuple(dataclasses.replace(k, value=v) for k, v in zip(e.kwargs, kids[n:n + m],
                                                                       strict=True))
        values = iter(kids[n + m:])
        attrs = tuple(dataclasses.replace(a, value=next(values)) if isinstance(a, ast.AttrSet)
                      else a for a in e.attrs)
        return dataclasses.replace(e, args=tuple(kids[:n]), kwargs=kwargs, attrs=attrs)
    return e


def replace_ops(expr: ast.Expr, ops: Mapping[str, tuple[str, str]]) -> ast.Expr:
    """``expr`` with the op variables of ``ops`` (``F`` -> ``(domain, op)``) replaced, in op
    calls and op values alike (iterative, so any depth the parser accepts works)."""
    done: dict[int, ast.Expr] = {}
    stack: list[tuple[ast.Expr, bool]] = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        if not ready:
            stack.append((e, True))
            stack.extend((c, False) for c in children(e))
            continue
        kids = [done[id(c)] for c in children(e)]
        new = with_children(e, kids) if any(k is not c for k, c in zip(kids, children(e),
                                                                         strict=True)) else e
        if isinstance(new, (ast.OpCall, ast.OpRef)) and not new.domain and new.op in ops:
            domain, op = ops[new.op]
            new = dataclasses.replace(new, domain=domain, op=op)
        done[id(e)] = new
    return done[id(expr)]
