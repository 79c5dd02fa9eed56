"""Walking the syntax tree: children, every sub-expression, free names, closed expressions.

Invariant: the walks are iterative (no recursion), so expression depth is bounded only by
the parser's nesting cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

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
