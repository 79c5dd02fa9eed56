"""Expressions back as rule text, for messages that quote part of a guard.

Invariant: ``show(e)`` parses back to an expression equal to ``e`` (spans aside):
parentheses are added exactly where precedence needs them (Python's, as the grammar's).
"""

from __future__ import annotations

from . import ast

PRECEDENCE = {"or": 1, "and": 2, "not": 3, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4,
              ">=": 4, "in": 4, "not in": 4, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6,
              "%": 6, "neg": 7, "**": 8}
ATOM = 9


def show(e: ast.Expr) -> str:
    return _show(e)[0]


def _show(e: ast.Expr) -> tuple[str, int]:
    """The text and the precedence of its outermost operator."""
    if isinstance(e, ast.Binary):
        p = PRECEDENCE.get(e.op, 4)
        right_assoc = e.op == "**"
        left = _wrap(e.left, p + right_assoc)
        signed = right_assoc and isinstance(e.right, ast.Unary) and e.right.op != "not"
        right = _wrap(e.right, PRECEDENCE["neg"] if signed else p + (not right_assoc))
        return f"{left} {e.op} {right}", p
    if isinstance(e, ast.Unary):
        p = PRECEDENCE["not" if e.op == "not" else "neg"]
        sep = " " if e.op == "not" else ""
        return f"{e.op}{sep}{_wrap(e.operand, p)}", p
    return _atom(e), ATOM


def _wrap(e: ast.Expr, least: int) -> str:
    text, p = _show(e)
    return text if p >= least else f"({text})"


def _atom(e: ast.Expr) -> str:
    if isinstance(e, ast.Num):
        return repr(e.value)
    if isinstance(e, ast.Str):
        return f'"{e.value}"'
    if isinstance(e, ast.Bool):
        return "true" if e.value else "false"
    if isinstance(e, ast.NoneLit):
        return "none"
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Wildcard):
        return "_"
    if isinstance(e, ast.ListLit):
        return "[" + ", ".join(show(i) for i in e.items) + "]"
    if isinstance(e, ast.TupleLit):
        inner = ", ".join(show(i) for i in e.items)
        return f"({inner},)" if len(e.items) == 1 else f"({inner})"
    if isinstance(e, ast.AttrRead):
        return f"{e.binder}.{e.attr}"
    if isinstance(e, ast.Index):
        return f"{_wrap(e.base, ATOM)}[{show(e.index)}]"
    if isinstance(e, ast.Slice):
        lo = show(e.lo) if e.lo is not None else ""
        hi = show(e.hi) if e.hi is not None else ""
        return f"{_wrap(e.base, ATOM)}[{lo}:{hi}]"
    if isinstance(e, ast.Call):
        args = [show(a) for a in e.args] + [f"{k.name}={show(k.value)}" for k in e.kwargs]
        return f"{e.func}({', '.join(args)})"
    if isinstance(e, ast.OpRef):
        return e.qualified
    if isinstance(e, ast.OpCall):
        out = f"{e.qualified}({', '.join(show(a) for a in e.args)})"
        return out + (f"[{e.output}]" if e.output is not None else "")
    raise TypeError(f"not an expression: {type(e).__name__}")
