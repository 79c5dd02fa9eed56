"""Instances that pass a rule's guards: build, find the first guard that fails, solve it,
rebuild.

Random instances seldom pass guards that relate several values (``all(e1 == s2)`` between
two slices, ``p[q] == iota(6)`` between two permutations, ``item(e) == shape(x)[a]``). The
search builds an instance from a draw, evaluates the direction's clauses on it in text order
(each ``where`` cut at its top-level ``and``s into conjuncts), and when a conjunct fails and
has one of the forms below, pins the variable it constrains to the value that makes it hold
and rebuilds from the same draw, for up to ``ROUNDS`` rounds:

- ``v == E`` or ``E == v``: ``v`` gets the value of ``E`` on the instance;
- ``all(v == E)``, ``approx(v, E)``, ``item(v) == E``, ``float(v) == E``, ``int(v) == E``:
  ``v`` is filled with ``E`` in its own shape;
- ``shape(v) == E``: ``v`` gets that shape; ``rank(v) == k``: a shape of rank ``k``;
- ``format(v) == E``: ``v`` is held in that format (a graph input fed in its physical
  layout, ``ir.formats``);
- ``p[q] == E``: ``p`` with ``p[q] = E`` (``p[q] == iota(n)``: ``p`` is ``q``'s inverse);
- ``f(.., a, ..) == f(.., b, ..)`` differing in one argument only: ``a == b`` (either
  side solved, ``norm_axis(item(ax), r) == norm_axis(c, r)`` pins ``ax``);
- ``v >= E``, ``v <= E``, ``v > E``, ``v < E`` (and ``item(v) >= E``...): ``v`` on the bound
  (one past it for a strict one).

``v`` is a variable of the left side (not a binder: a node's output is what its inputs make
it) or an attribute variable. Author examples (``@example(x: f32[2, 4])``) pin variables
from the first round of every other attempt.

A ``guards`` probe (``Draw.probe``) then moves the instance to the edges of its guards: the
variable of every conjunct of the forms ``approx(v, E, rtol, atol)`` (``v`` at ``E`` plus or
minus 0.9 of the tolerance ``atol + rtol * |E|``), ``v > E``, ``v >= E``, ``v < E``,
``v <= E``, ``v != E`` (and ``all(..)`` of them; ``v`` on the bound, or a small step inside)
is pinned at its edge, the instance still passing; sometimes one conjunct is pushed just
past its edge instead (1.5 times the tolerance, or the other side of the bound), where the
guard must reject. A tolerance loosened in a rule's text then lets through a value far from
``E``, which its right side does not compute the same.

Invariants:
- The search only proposes instances; the compiled rule still decides (the verifier and the
  soundness check apply the compiled rewrite to what is found), so a wrong guess costs time,
  never soundness.
- Everything is a function of the draw factory's seed and the pins: reruns reproduce.
- ``Found.blocker`` names the first conjunct that fails on the instance returned (or why no
  instance was built): what the verifier reports when a rule never fires.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import GeError
from ...ir import formats
from ...ir.graph import TensorType
from ...ir.registry import Registry
from .. import ast, program
from ..builtins import approx
from ..evaluate import evaluate
from ..show import show
from ..values import EvalError, Tensor, to_array, truth
from .builder import Instance, InstanceBuilder
from .proposals import GUARDS, Draw

ROUNDS = 4  # rebuilds per attempt, each pinning what the failing guards ask for
BOUNDS = {">=": 0, "<=": 0, ">": 1, "<": -1}  # how far past the bound a pin goes
FLIP = {">=": "<=", "<=": ">=", ">": "<", "<": ">", "!=": "!="}
# Edges (a ``guards`` probe): which way the inside of a bound lies (+1: above it), and
# whether the bound itself is inside.
INSIDE = {">": (1, False), ">=": (1, True), "<": (-1, False), "<=": (-1, True),
          "!=": (1, False)}
STEP = 2.0**-8  # a float bound's edge step, relative to max(|bound|, 1) (float16 holds it)
AT, PAST = 0.9, 1.5  # an approx guard's edge: these fractions of its tolerance from E
PAST_SHARE = 0.3  # guards probes that push one conjunct just past its edge
NO_TYPING = "no typing of the left side found"
SOLVED = ("v == E", "all(v == E)", "approx(v, E)", "item(v) == E", "shape(v) == E",
          "rank(v) == k (k <= 8)", "format(v) == E", "p[q] == E", "f(a) == f(v)",
          "v >= E (<=, >, <)")


@dataclass(frozen=True)
class Found:
    instance: Instance | None
    blocker: str = ""  # the first failing conjunct ('' when every guard holds)
    pins: Mapping[str, Any] | None = None  # what the search pinned


class InstanceEnv:
    """A direction's names on an instance, as the evaluator reads them (what ``MatchEnv``
    gives on the e-graph: a class's type and its value when it is a constant)."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.lets: dict[str, Any] = {}

    def lookup(self, name: str) -> Any:
        if name in self.lets:
            return self.lets[name]
        o = self.instance.tensors.get(name)
        if o is not None:
            return Tensor(name, o.type, o.value if o.const else None)
        if name in self.instance.attrs:
            return self.instance.attrs[name]
        raise KeyError(name)  # the evaluator then reads a built-in constant (pi, f16, inf)

    def node_attr(self, binder: str, attr: str) -> Any:
        node = self.instance.nodes.get(binder)
        if node is None:
            raise EvalError(f"no node is bound to {binder}")
        return node.get(attr)


class Search:
    """Instances of one direction's left side that pass its guards as often as possible."""

    def __init__(self, direction: program.Direction, registry: Registry | None = None,
                 examples: Sequence[Mapping[str, Any]] = ()) -> None:
        self.direction = direction
        self.builder = InstanceBuilder(direction, registry)
        self.examples = tuple(examples)
        self.leaves = (set(direction.names.tensors) - {b for b, _ in direction.names.nodes}
                       ) | set(direction.names.attrs)

    @property
    def hints(self) -> Any:
        return self.builder.hints

    def find(self, draw: Callable[[], Draw], attempt: int = 0, *, verified: bool = True
             ) -> Found:
        """One attempt: ``draw()`` makes the same fresh ``Draw`` each time it is called.
        With author examples, every other attempt (the first included) starts from one's
        pins, in turn."""
        pins: dict[str, Any] = {}
        if self.examples and attempt % 2 == 0:
            pins = dict(self.examples[attempt // 2 % len(self.examples)])
        found = self._solved(draw, pins, verified)
        if found.instance is not None and not found.blocker and draw().probe == GUARDS:
            return self._at_edges(found, draw, verified)
        return found

    def _solved(self, draw: Callable[[], Draw], pins: dict[str, Any], verified: bool
                ) -> Found:
        """Build, solve the failing guards into ``pins``, rebuild (``ROUNDS`` at most)."""
        found = Found(None, NO_TYPING)
        for _ in range(ROUNDS):
            fresh = _with_dtype(draw(), pins)
            instance = self.builder.build(fresh, verified=verified, fixed=pins)
            if instance is None:
                return found if found.instance is not None else Found(None, NO_TYPING, pins)
            blocker, more = self.check(instance)
            found = Found(instance, blocker, dict(pins))
            new = {k: v for k, v in more.items() if not _same(pins.get(k), v)}
            if not blocker or not new:
                return found
            pins.update(new)
        return found

    def _at_edges(self, found: Found, draw: Callable[[], Draw], verified: bool) -> Found:
        """``found`` (which passes every guard) rebuilt with its guards' variables at their
        edges, one of them sometimes just past it (see the module docstring)."""
        assert found.instance is not None
        chooser = draw()
        edges = self.edges(found.instance, chooser)
        if not edges:
            return found
        past = chooser.integer(0, len(edges) - 1) if chooser.coin(PAST_SHARE) else -1
        pins = dict(found.pins or {})
        for k, (at, beyond) in enumerate(edges):
            for name, value in (beyond if k == past else at):
                pins[name] = value
        instance = self.builder.build(_with_dtype(draw(), pins), verified=verified,
                                      fixed=pins)
        if instance is None:
            return found
        return Found(instance, self.check(instance)[0], pins)

    def edges(self, instance: Instance, chooser: Draw
              ) -> list[tuple[list[tuple[str, Any]], list[tuple[str, Any]]]]:
        """Per conjunct with an edge: the pins at its edge and the pins just past it."""
        env = InstanceEnv(instance)
        out: list[tuple[list[tuple[str, Any]], list[tuple[str, Any]]]] = []
        for clause in self.direction.clauses:
            if isinstance(clause, program.Let):
                try:
                    env.lets[clause.name] = evaluate(clause.expr, env)
                except EvalError:
                    return out
                continue
            for part in conjuncts(clause.expr):
                at = list(self._edge(part, env, chooser, past=False))
                beyond = list(self._edge(part, env, chooser, past=True))
                if at and beyond:
                    out.append((at, beyond))
        return out

    def _edge(self, e: ast.Expr, env: InstanceEnv, chooser: Draw, past: bool
              ) -> Iterator[tuple[str, Any]]:
        fill = False
        if isinstance(e, ast.Call) and e.func == "all" and len(e.args) == 1:
            e, fill = e.args[0], True
        if isinstance(e, ast.Call) and e.func == "approx" and len(e.args) >= 2:
            center = _value(e.args[1], env)
            tol = _tolerance(e, env)
            if center is None or tol is None:
                return
            try:
                width = tol[1] + tol[0] * np.abs(np.asarray(to_array(center), np.float64))
            except (EvalError, TypeError, ValueError):
                return
            if not np.all(width > 0):
                return
            sign = 1.0 if chooser.coin() else -1.0
            value = np.asarray(to_array(center), np.float64) + sign * width * (
                PAST if past else AT)
            yield from self._pins(e.args[0], value if value.ndim else float(value), env, True)
        elif isinstance(e, ast.Binary) and e.op in INSIDE:
            for target, other, op in ((e.left, e.right, e.op), (e.right, e.left, FLIP[e.op])):
                bound = _value(other, env)
                if not _leaf(target) or isinstance(bound, bool) or not isinstance(
                        bound, (int, float, np.integer, np.floating)):
                    continue
                found = list(self._pins(target, _beside(bound, op, past), env, fill))
                if found:
                    yield from found
                    return

    def check(self, instance: Instance) -> tuple[str, dict[str, Any]]:
        """The first failing conjunct's text ('' if none) and pins that would fix the
        failing conjuncts that have a solvable form."""
        env = InstanceEnv(instance)
        blocker, pins = "", dict[str, Any]()
        for clause in self.direction.clauses:
            if isinstance(clause, program.Let):
                try:
                    env.lets[clause.name] = evaluate(clause.expr, env)
                except EvalError:
                    return blocker or f"let {clause.text}", pins
                continue
            for part in conjuncts(clause.expr):
                try:
                    ok = truth(evaluate(part, env))
                except EvalError:
                    ok = False
                if ok:
                    continue
                blocker = blocker or show(part)
                for name, value in self.solve(part, env):
                    pins.setdefault(name, value)
        return blocker, pins

    # ------------------------------------------------------------------ solving
    def solve(self, e: ast.Expr, env: InstanceEnv) -> Iterator[tuple[str, Any]]:
        """Pins that make ``e`` hold (see the module docstring), or nothing."""
        if isinstance(e, ast.Call) and e.func == "all" and len(e.args) == 1:
            inner = e.args[0]
            if isinstance(inner, ast.Binary) and inner.op == "==":
                yield from self._equal(inner.left, inner.right, env, fill=True)
                return
        if isinstance(e, ast.Call) and e.func == "approx" and len(e.args) >= 2:
            yield from self._equal(e.args[0], e.args[1], env, fill=True)
            return
        if isinstance(e, ast.Binary) and e.op == "==":
            found = list(self._equal(e.left, e.right, env))
            yield from found or self._equal(e.right, e.left, env)
        elif isinstance(e, ast.Binary) and e.op in BOUNDS:
            yield from self._bound(e, env)

    def _bound(self, e: ast.Binary, env: InstanceEnv) -> Iterator[tuple[str, Any]]:
        """``v >= E`` (``<=``, ``>``, ``<``, either way round): ``v`` on the bound (one past
        it for a strict one), which the guard accepts."""
        for target, other, op in ((e.left, e.right, e.op), (e.right, e.left, FLIP[e.op])):
            bound = _value(other, env)
            if isinstance(bound, (int, float, np.integer, np.floating)) and not isinstance(
                    bound, bool) and _leaf(target):
                step = BOUNDS[op]
                value: int | float = int(bound) + step if isinstance(
                    bound, (int, np.integer)) else float(bound) + 0.5 * step
                found = list(self._equal(target, ast.Num(value, e.span), env))
                if found:
                    yield from found
                    return

    def _equal(self, target: ast.Expr, expr: ast.Expr, env: InstanceEnv, fill: bool = False
               ) -> Iterator[tuple[str, Any]]:
        """Pins making ``target == expr``, where ``target`` has a solvable form."""
        if isinstance(target, ast.Call) and isinstance(expr, ast.Call) and (
                target.func == expr.func and len(target.args) == len(expr.args)):
            differ = [(a, b) for a, b in zip(target.args, expr.args, strict=True)
                      if show(a) != show(b)]
            if len(differ) == 1:
                a, b = differ[0]
                found = list(self._equal(a, b, env))
                yield from found or self._equal(b, a, env)
                return
        value = _value(expr, env)
        if value is not None:
            yield from self._pins(target, value, env, fill)

    def _pins(self, target: ast.Expr, value: Any, env: InstanceEnv, fill: bool
              ) -> Iterator[tuple[str, Any]]:
        """Pins making ``target`` (a solvable form) equal ``value``."""
        name = _leaf(target)
        if isinstance(target, ast.Name) and name in self.leaves:
            yield name, _filled(env, name, value) if fill else _plain(value)
        elif isinstance(target, ast.Call) and name in self.leaves and len(target.args) == 1:
            yield from _call_pin(target.func, name, value, env)
        elif isinstance(target, ast.Index) and name in self.leaves:
            pin = _index_pin(target, value, env)
            if pin is not None:
                yield name, pin


def _tolerance(e: ast.Call, env: InstanceEnv) -> tuple[float, float] | None:
    """``approx``'s ``(rtol, atol)``: its keywords, else the built-in's defaults."""
    defaults = approx.__kwdefaults__ or {}
    tol = {"rtol": float(defaults.get("rtol", 0.0)), "atol": float(defaults.get("atol", 0.0))}
    for k in e.kwargs:
        value = _value(k.value, env)
        if k.name not in tol or isinstance(value, bool) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            return None
        tol[k.name] = float(value)
    for key, a in zip(("rtol", "atol"), e.args[2:], strict=False):  # approx(v, E, rt, at)
        value = _value(a, env)
        if not isinstance(value, (int, float, np.integer, np.floating)):
            return None
        tol[key] = float(value)
    return tol["rtol"], tol["atol"]


def _beside(bound: Any, op: str, past: bool) -> int | float:
    """A value at the edge of ``v op bound`` (inside it), or just past it (outside)."""
    inward, closed = INSIDE[op]
    step: int | float = 1 if isinstance(bound, (int, np.integer)) else STEP * max(
        abs(float(bound)), 1.0)
    if past:
        return bound if not closed else bound - inward * step  # type: ignore[no-any-return]
    return bound if closed else bound + inward * step  # type: ignore[no-any-return]


def conjuncts(e: ast.Expr) -> Iterator[ast.Expr]:
    """``a and b and c`` as ``a``, ``b``, ``c`` (in text order)."""
    if isinstance(e, ast.Binary) and e.op == "and":
        yield from conjuncts(e.left)
        yield from conjuncts(e.right)
    else:
        yield e


def _leaf(e: ast.Expr) -> str:
    """The variable a solvable form constrains: ``v``, ``f(v)``, ``v[q]``."""
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Call) and len(e.args) == 1 and isinstance(e.args[0], ast.Name):
        return e.args[0].name
    if isinstance(e, ast.Index) and isinstance(e.base, ast.Name):
        return e.base.name
    return ""


def _value(e: ast.Expr, env: InstanceEnv) -> Any:
    try:
        value = evaluate(e, env)
    except EvalError:
        return None
    if isinstance(value, Tensor):
        return value.value
    return value


def _current(env: InstanceEnv, name: str) -> np.ndarray | None:
    o = env.instance.tensors.get(name)
    if o is not None:
        return o.value
    if name in env.instance.attrs:
        return np.asarray(env.instance.attrs[name])
    return None


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _filled(env: InstanceEnv, name: str, value: Any) -> Any:
    """``value`` spread over ``name``'s current shape (``all(v == E)``)."""
    now = _current(env, name)
    try:
        array = np.asarray(to_array(value) if not isinstance(value, np.ndarray) else value)
        if now is None:
            return array
        return np.broadcast_to(array, now.shape).copy()
    except (EvalError, ValueError):
        return _plain(value)


def _call_pin(func: str, name: str, value: Any, env: InstanceEnv
              ) -> Iterator[tuple[str, Any]]:
    o = env.instance.tensors.get(name)
    if func in ("item", "float", "int") and not isinstance(value, (tuple, list)):
        yield name, _filled(env, name, value)
    elif func == "shape" and o is not None and o.type is not None:
        try:
            dims = tuple(int(d) for d in np.asarray(to_array(value)).reshape(-1))
        except (EvalError, ValueError, TypeError):
            return
        if all(d >= 0 for d in dims):
            yield name, TensorType(o.type.dtype, dims)
    elif func == "rank" and o is not None and o.type is not None and isinstance(value, int):
        if 0 <= value <= 8:
            now = tuple(o.type.shape or ())
            yield name, TensorType(o.type.dtype, (now + (2,) * value)[:value])
    elif func == "format" and o is not None and o.type is not None and isinstance(value, str):
        try:  # held in that format (a graph input fed in its physical layout)
            fmt = formats.stored(value, o.type.rank)
        except GeError:
            return
        if formats.can_hold(fmt, o.type.shape) is None:
            yield name, TensorType(o.type.dtype, o.type.shape, fmt)


def _index_pin(target: ast.Index, value: Any, env: InstanceEnv) -> Any:
    """``p[q] == E``: ``p`` with the entries ``q`` names set to ``E``."""
    now = _current(env, _leaf(target))
    q = _value(target.index, env)
    if now is None or q is None:
        return None
    try:
        p = np.array(now).reshape(-1).copy()
        p[np.asarray(to_array(q)).astype(np.int64)] = np.asarray(to_array(value))
    except (EvalError, ValueError, IndexError, TypeError):
        return None
    return tuple(int(v) for v in p) if name_is_attr(env, _leaf(target)) else p.reshape(
        np.shape(now))


def name_is_attr(env: InstanceEnv, name: str) -> bool:
    return name in env.instance.attrs and name not in env.instance.tensors


def _same(a: Any, b: Any) -> bool:
    if a is None:
        return False
    if isinstance(a, TensorType) or isinstance(b, TensorType):
        return bool(a == b)
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (ValueError, TypeError):
        return False


def _with_dtype(draw: Draw, pins: Mapping[str, Any]) -> Draw:
    """A draw in the float type a pinned tensor type names (``x: f16[..]``)."""
    for pin in pins.values():
        if isinstance(pin, TensorType) and np.dtype(pin.dtype).kind == "f":
            draw.dtype = pin.dtype
            break
    return draw
