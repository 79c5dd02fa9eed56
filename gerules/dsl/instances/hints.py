"""What a rule's guards say about its variables, read once so instances satisfy them often.

Random instances must pass the rule's guards to be worth anything. Most guards are met by
chance (shapes that agree, a constant of 1), some almost never are (``approx(c, sqrt(2 / pi))``
on a random constant). ``Hints`` reads the few guard forms that pin a variable down:

- ``const(a, b, ...)``: the variables are initializers, not graph inputs;
- ``rank(v) == k`` and ``shape(v) == [..]``: ``v`` has rank ``k`` (``pinned_ranks``;
  for a binder, the rank its op's result must have, which a ``Reshape`` target follows);
- ``shape(a) == shape(b)``: the one drawn second takes the other's shape (``alike``);
- ``approx(v, EXPR, ..)``, ``v == EXPR`` and ``EXPR == v`` with a closed ``EXPR``: ``v`` holds
  that value everywhere;
- ``splat(v)``: every element of ``v`` is the same number;
- ``numel(v) == 1``: ``v`` is a scalar;
- ``dtype(v) == f16`` and ``dtype(v) in (f16, f32)``: instances are drawn in those types more
  often (``dtypes``); ``dtype(v) == bool``: ``v`` is drawn as a boolean tensor (``bools``).

Invariant: hints only bias the instances; the guards themselves still decide (an instance is
used only when the compiled rule accepts it), so a wrong hint costs time, never soundness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import ast, program
from ..evaluate import evaluate
from ..values import EvalError
from ..walk import is_closed, walk


@dataclass
class Hints:
    constants: set[str] = field(default_factory=set)
    ranks: dict[str, int] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    splats: set[str] = field(default_factory=set)
    scalars: set[str] = field(default_factory=set)
    dtypes: set[str] = field(default_factory=set)
    alike: dict[str, set[str]] = field(default_factory=dict)  # shape(a) == shape(b), both ways
    bools: set[str] = field(default_factory=set)

    @staticmethod
    def of(direction: program.Direction) -> Hints:
        hints = Hints(ranks=pinned_ranks(direction))
        for clause in direction.clauses:
            if isinstance(clause, program.Where):
                for e in walk(clause.expr):
                    if not _negated(e, clause.expr):
                        hints.read(e)
        return hints

    def read(self, e: ast.Expr) -> None:
        """What one (not negated) part of a guard says."""
        if isinstance(e, ast.Call):
            names = [a.name for a in e.args if isinstance(a, ast.Name)]
            if e.func == "const":
                self.constants.update(names)
            elif e.func == "splat" and names:
                self.splats.add(names[0])
            elif e.func == "approx" and len(e.args) >= 2 and isinstance(e.args[0], ast.Name):
                self._value(e.args[0].name, e.args[1])
        elif isinstance(e, ast.Binary) and e.op in ("==", "in") and _is_dtype_of(e.left):
            self.dtypes.update(_dtype_names(e.right))
            arg = e.left.args[0] if isinstance(e.left, ast.Call) else None
            if isinstance(e.right, ast.Name) and e.right.name == "bool" and isinstance(
                    arg, ast.Name):
                self.bools.add(arg.name)
        elif isinstance(e, ast.Binary) and e.op == "==":
            left, right = _shape_of(e.left), _shape_of(e.right)
            if left and right:
                self.alike.setdefault(left, set()).add(right)
                self.alike.setdefault(right, set()).add(left)
            for a, b in ((e.left, e.right), (e.right, e.left)):
                if isinstance(a, ast.Name):
                    self._value(a.name, b)
                if _numel_of(a) and isinstance(b, ast.Num) and b.value == 1:
                    self.scalars.add(_numel_of(a))  # type: ignore[arg-type]

    def _value(self, name: str, expr: ast.Expr) -> None:
        if not is_closed(expr):
            return
        try:
            value = evaluate(expr, _NoNames())
        except EvalError:
            return
        if isinstance(value, (int, float, np.ndarray)) and not isinstance(value, bool):
            self.values.setdefault(name, value)


def _is_dtype_of(e: ast.Expr) -> bool:
    return isinstance(e, ast.Call) and e.func == "dtype" and len(e.args) == 1


def _dtype_names(e: ast.Expr) -> list[str]:
    items = e.items if isinstance(e, (ast.TupleLit, ast.ListLit)) else (e,)
    names = [i.name for i in items if isinstance(i, ast.Name)]
    return [FLOAT_NAMES[n] for n in names if n in FLOAT_NAMES]


FLOAT_NAMES = {"f16": "float16", "f32": "float32", "f64": "float64"}


def _shape_of(e: ast.Expr) -> str | None:
    if isinstance(e, ast.Call) and e.func == "shape" and len(e.args) == 1 and isinstance(
            e.args[0], ast.Name):
        return e.args[0].name
    return None


def _numel_of(e: ast.Expr) -> str | None:
    if isinstance(e, ast.Call) and e.func == "numel" and len(e.args) == 1 and isinstance(
            e.args[0], ast.Name):
        return e.args[0].name
    return None


def pinned_ranks(direction: program.Direction) -> dict[str, int]:
    """Ranks fixed by guards: ``rank(v) == k`` and ``shape(v) == [..]``, through ``and``."""
    out: dict[str, int] = {}
    stack = [c.expr for c in direction.clauses if isinstance(c, program.Where)]
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


class _NoNames:
    def lookup(self, name: str) -> Any:
        raise KeyError(name)

    def node_attr(self, binder: str, attr: str) -> Any:
        raise EvalError("no node is bound here")


def _negated(e: ast.Expr, top: ast.Expr) -> bool:
    """``e`` lies under a ``not`` in ``top`` (``not const(b)`` says b is no constant)."""
    return any(isinstance(n, ast.Unary) and n.op == "not" and any(m is e for m in walk(n))
               for n in walk(top))
