"""Evaluating compile-time expressions (guards, lets, computed constants and attributes).

Invariants:
- ``evaluate`` reads names through an ``Env`` and never changes it; ``let`` bindings are
  added by the caller, in clause order.
- ``and`` / ``or`` short-circuit, so ``const(c) and all(c == 0)`` never reads a missing
  constant; their operands must be true or false.
- Every failure is a ``values.EvalError`` whose message is about the values, not Python.
- Recursion is bounded by the parser's nesting cap (``source.MAX_NESTING``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from . import ast
from .builtins import CONSTANTS, FUNCTIONS
from .values import (
    ARITHMETIC,
    ORDERING,
    EvalError,
    arithmetic,
    contains,
    equal,
    index,
    negate,
    order,
    slice_of,
    to_array,
    truth,
)


class Env(Protocol):
    """What an expression can see: variables, lets and bound nodes' attributes."""

    def lookup(self, name: str) -> Any:
        """The value of a variable or let; ``KeyError`` when ``name`` is not bound."""
        ...

    def node_attr(self, binder: str, attr: str) -> Any:
        """Attribute ``attr`` of the node bound to ``binder`` (schema default applied)."""
        ...


def evaluate(expr: ast.Expr, env: Env) -> Any:
    """The value of ``expr`` in ``env``; raises ``EvalError``."""
    handler = _HANDLERS.get(type(expr))
    if handler is None:
        raise EvalError(f"{type(expr).__name__} cannot be evaluated here")
    return handler(expr, env)


def _name(e: ast.Name, env: Env) -> Any:
    try:
        return env.lookup(e.name)
    except KeyError:
        if e.name in CONSTANTS:
            return CONSTANTS[e.name][0]
        raise EvalError(f"'{e.name}' is not bound") from None


def _attr_read(e: ast.AttrRead, env: Env) -> Any:
    return env.node_attr(e.binder, e.attr)


def _call(e: ast.Call, env: Env) -> Any:
    builtin = FUNCTIONS.get(e.func)
    if builtin is None:
        raise EvalError(f"unknown function {e.func}()")
    args = [evaluate(a, env) for a in e.args]
    kwargs = {k.name: evaluate(k.value, env) for k in e.kwargs}
    try:
        return builtin.fn(*args, **kwargs)
    except EvalError as err:
        raise EvalError(f"{e.func}(): {err}") from None
    except (TypeError, ValueError, IndexError, OverflowError, ZeroDivisionError) as err:
        raise EvalError(f"{e.func}(): {err}") from None


def _unary(e: ast.Unary, env: Env) -> Any:
    value = evaluate(e.operand, env)
    if e.op == "not":
        return not truth(value)
    if e.op == "-":
        return negate(value)
    return value if isinstance(value, (int, float)) else to_array(value)


def _binary(e: ast.Binary, env: Env) -> Any:
    if e.op in ("and", "or"):
        left = truth(evaluate(e.left, env))
        if left == (e.op == "or"):
            return left
        return truth(evaluate(e.right, env))
    a, b = evaluate(e.left, env), evaluate(e.right, env)
    return _binop(e.op, a, b)


def _binop(op: str, a: Any, b: Any) -> Any:
    if op in ARITHMETIC:
        return arithmetic(op, a, b)
    if op == "==":
        return equal(a, b)
    if op == "!=":
        result = equal(a, b)
        return np.logical_not(result) if isinstance(result, np.ndarray) else not result
    if op in ORDERING:
        return order(op, a, b)
    if op == "in":
        return contains(b, a)
    if op == "not in":
        return not contains(b, a)
    raise EvalError(f"unknown operator {op}")


def _index(e: ast.Index, env: Env) -> Any:
    return index(evaluate(e.base, env), evaluate(e.index, env))


def _slice(e: ast.Slice, env: Env) -> Any:
    lo = None if e.lo is None else evaluate(e.lo, env)
    hi = None if e.hi is None else evaluate(e.hi, env)
    return slice_of(evaluate(e.base, env), lo, hi)


def _items(e: ast.ListLit | ast.TupleLit, env: Env) -> tuple[Any, ...]:
    return tuple(evaluate(i, env) for i in e.items)


def _op_call(e: ast.OpCall, env: Env) -> Any:
    raise EvalError(f"op {e.qualified} cannot be computed as a value")


_HANDLERS: dict[type, Callable[[Any, Env], Any]] = {
    ast.Num: lambda e, env: e.value,
    ast.Str: lambda e, env: e.value,
    ast.OpRef: lambda e, env: e.qualified,
    ast.Bool: lambda e, env: e.value,
    ast.NoneLit: lambda e, env: None,
    ast.Name: _name,
    ast.AttrRead: _attr_read,
    ast.Call: _call,
    ast.Unary: _unary,
    ast.Binary: _binary,
    ast.Index: _index,
    ast.Slice: _slice,
    ast.ListLit: _items,
    ast.TupleLit: _items,
    ast.OpCall: _op_call,
}
