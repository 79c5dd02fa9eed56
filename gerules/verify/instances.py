"""Random instances of a rule's left side, as small verified graphs.

``InstanceBuilder(rule, pattern).build(draw)`` walks the pattern's ops children first. Each
op's operands are what is known already (an inner op's result, a variable seen before, a
binder), a literal (a constant initializer), or fresh: a variable or wildcard gets a type
and value from ``proposals`` (shaped after its siblings), with the guards' ``Hints`` applied.
Attributes come from the pattern (attribute variables get candidates) over randomly sampled
open ones. The op's inference and kernel must accept the result, else the op is re-drawn a
few times before the instance is given up.

Invariants:
- An instance is a function of the ``Draw`` (seeded): replaying a seed rebuilds it.
- The graph passes ``verify``; its single output ``%out`` is the pattern's root
  (``Op(..)[k]`` takes output ``k``). Variables keep their names; wildcards and literals are
  named ``%<k>`` and node outputs ``%t<k>``: no rule variable can be spelled with ``%``.
- Float variables are graph inputs unless a guard needs them constant (``const(..)``); integer
  operands, literals and hinted values are initializers. ``samplers`` says how to redraw each
  input for another run (the range it was drawn from).
- The opset is the newest in which every op of the pattern has the version the rule checker
  picked for it (ReduceMean with an ``axes`` attribute means opset 13..17).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dsl import ast
from ..dsl.build import attr_value, input_constant
from ..dsl.builtins import CONSTANTS
from ..dsl.candidates import topo_ops
from ..dsl.evaluate import evaluate
from ..dsl.rulecheck import RuleChecker, Scope
from ..dsl.values import EvalError
from ..errors import GeError
from ..ir.attrs import Attrs
from ..ir.graph import Graph, Node, TensorType, Value
from ..ir.registry import MAX_OPSET, OpSchema, Registry, default_registry
from ..ir.verify import verify
from .attributes import attr_candidate, sample_attrs
from .hints import Hints
from .proposals import (
    ABSENT,
    SHAPED,
    Draw,
    Operand,
    broadcast_variant,
    float_operand,
    int_operand,
    is_int_port,
    reference,
    scalar_operand,
    tensor,
)

TRIES = 6  # draws per op before the instance is given up
OUTPUT = "%out"
Sampler = tuple[float, float] | None  # uniform range, or None for N(0, 1)


@dataclass(frozen=True)
class Instance:
    graph: Graph
    samplers: Mapping[str, Sampler]  # graph input -> how to redraw it


@dataclass
class _State:
    draw: Draw
    tensors: dict[str, str] = field(default_factory=dict)  # variable or binder -> tensor
    operands: dict[str, Operand] = field(default_factory=dict)  # tensor -> its operand
    results: dict[int, str] = field(default_factory=dict)  # id(OpCall) -> tensor
    attr_vars: dict[str, Any] = field(default_factory=dict)
    resolved: dict[str, dict[str, Any]] = field(default_factory=dict)  # binder -> attrs
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    samplers: dict[str, Sampler] = field(default_factory=dict)
    fresh: int = 0

    def name(self, base: str = "") -> str:
        self.fresh += 1
        return f"%{self.fresh}" if not base else base


class InstanceBuilder:
    """Builds instances of one side (``pattern``) of ``rule``; see the module docstring."""

    def __init__(self, rule: ast.Rule, pattern: ast.Expr, registry: Registry | None = None
                 ) -> None:
        self.rule = rule
        self.pattern = pattern
        self.registry = registry or default_registry()
        checker = RuleChecker(rule, self.registry)
        checker.check()
        self.scope: Scope = checker.scope
        self.order = topo_ops(pattern, set(self.scope.nodes)) or []
        self.hints = Hints.of(rule)
        self.opset = self._opset()

    def schema(self, call: ast.OpCall) -> OpSchema:
        found = self.scope.schemas.get(id(call))
        return found if found is not None else self.registry.get(call.op, call.domain)

    def _opset(self) -> int:
        lo, hi = 1, MAX_OPSET[""]
        for call in self.order:
            if call.domain:
                continue
            schema = self.schema(call)
            later = [s.since_version for s in self.registry.versions(call.op)
                     if s.since_version > schema.since_version]
            lo = max(lo, schema.since_version)
            hi = min(hi, min(later) - 1 if later else hi)
        return hi if lo <= hi else MAX_OPSET[""]

    # ------------------------------------------------------------------ building
    def build(self, draw: Draw) -> Instance | None:
        """A random instance, or ``None`` when some op could not be typed this time."""
        if not isinstance(self.pattern, ast.OpCall) or not self.order:
            return None
        state = _State(draw)
        for call in self.order:
            if not self._place(call, state):
                return None
        root = state.results[id(self.pattern)]
        return self._graph(state, root)

    def _graph(self, state: _State, root: str) -> Instance | None:
        nodes = list(state.nodes)
        if root in state.inits or root in {v.name for v in state.inputs}:
            return None
        last = next(n for n in nodes if root in n.outputs)
        outputs = tuple(OUTPUT if o == root else o for o in last.outputs)
        nodes[nodes.index(last)] = last.with_(outputs=outputs)
        nodes = [n.with_(inputs=tuple(OUTPUT if i == root else i for i in n.inputs))
                 for n in nodes]
        t = state.operands[root].type
        assert t is not None
        graph = Graph(tuple(nodes), tuple(state.inputs), (Value(OUTPUT, t),), state.inits,
                      name=self.rule.name, opset={"": self.opset, "ge": 1})
        try:
            return Instance(verify(graph, self.registry), dict(state.samplers))
        except GeError:
            return None

    def _place(self, call: ast.OpCall, state: _State) -> bool:
        schema = self.schema(call)
        for _ in range(TRIES):
            state.draw.memo.clear()
            attempt = self._try(call, schema, state)
            if attempt is not None:
                self._commit(call, schema, state, *attempt)
                return True
        return False

    def _try(self, call: ast.OpCall, schema: OpSchema, state: _State
             ) -> tuple[list[Operand], dict[str, Any], dict[str, Any], Operand] | None:
        operands: list[Operand | None] = [self._known(a, state) for a in call.args]
        literals = {i: v for i, a in enumerate(call.args) if operands[i] is None
                    and (v := _literal(a)) is not None}
        new_attr_vars: dict[str, Any] = {}
        if call.args and operands[0] is None and 0 not in literals:
            operands[0] = self._fresh(call, schema, 0, operands, {}, state)
        attrs = {**sample_attrs(call.qualified, state.draw, operands[0] if operands else None),
                 **self._pattern_attrs(call, schema, operands, state, new_attr_vars)}
        for i in range(len(call.args)):
            if i in literals:
                operands[i] = self._literal(call, schema, i, literals[i], operands, state)
            elif operands[i] is None:
                operands[i] = self._fresh(call, schema, i, operands, attrs, state)
        done = [o for o in operands if o is not None]
        out = _run(schema, done, attrs, call.output or 0)
        if out is None:
            return None
        return done, attrs, new_attr_vars, out

    # ------------------------------------------------------------------ operands
    def _known(self, arg: ast.Expr, state: _State) -> Operand | None:
        if isinstance(arg, ast.OpCall):
            return state.operands[state.results[id(arg)]]
        if isinstance(arg, ast.NoneLit):
            return ABSENT
        if isinstance(arg, ast.Name) and arg.name in state.tensors:
            return state.operands[state.tensors[arg.name]]
        return None  # a fresh variable, a wildcard or a literal

    def _literal(self, call: ast.OpCall, schema: OpSchema, slot: int, value: np.ndarray,
                 operands: list[Operand | None], state: _State) -> Operand:
        """A pattern constant: integer for integer inputs, else the instance's float type,
        a scalar or (sometimes) the literal spread over a broadcasting shape."""
        port = schema.inputs[min(slot, len(schema.inputs) - 1)].name
        if not is_int_port(call.qualified, port):
            value = value.astype(state.draw.dtype)
            ref = reference(operands)
            if value.ndim == 0 and ref is not None and ref.value is not None and (
                    state.draw.coin(0.3)):
                value = np.full(broadcast_variant(state.draw, ref.shape), value, value.dtype)
        return Operand(TensorType(value.dtype.name, tuple(value.shape)), value, True)

    def _fresh(self, call: ast.OpCall, schema: OpSchema, slot: int,
               operands: list[Operand | None], attrs: dict[str, Any], state: _State
               ) -> Operand:
        port = schema.inputs[min(slot, len(schema.inputs) - 1)].name
        op, draw = call.qualified, state.draw
        data = operands[0] if slot else None
        rank = self.hints.ranks.get(call.binder) if call.binder else None
        found = (int_operand(op, port, draw, data, attrs, rank)
                 or scalar_operand(op, port, draw))
        if found is not None:
            return found
        arg = call.args[slot]
        name = arg.name if isinstance(arg, ast.Name) else None
        twin = next((state.operands[state.tensors[n]] for n in sorted(
            self.hints.alike.get(name or "", ())) if n in state.tensors), None)
        if twin is not None and twin.value is not None and twin.value.dtype.kind == "f":
            return self._hinted(name, tensor(draw, twin.shape), draw)  # shape(a) == shape(b)
        pinned = self.hints.ranks.get(name or "")
        like = [o for o in state.operands.values() if o.value is not None and not o.const
                and o.value.dtype.kind == "f" and pinned in (None, o.value.ndim)]
        if slot == 0 and op not in SHAPED and like and draw.coin(0.5):  # shape(a) == shape(b)
            proposal = tensor(draw, draw.pick(like).shape)
            return self._hinted(name, proposal, draw)
        proposal = float_operand(op, schema, draw, operands, slot, attrs)
        for _ in range(20):  # a guard pins its rank: draw until it fits
            if name not in self.hints.ranks or proposal.value is None or (
                    proposal.value.ndim == self.hints.ranks[name]):
                break
            proposal = float_operand(op, schema, draw, operands, slot, attrs)
        return self._hinted(name, proposal, draw)

    def _hinted(self, name: str | None, o: Operand, draw: Draw) -> Operand:
        if name is None or o.value is None:
            return o
        value = o.value
        if name in self.hints.bools:
            value = np.asarray(value > 0)
        if name in self.hints.scalars:
            value = value.reshape(-1)[:1].reshape(()) if value.size else value
        if name in self.hints.values:
            value = np.full(value.shape, self.hints.values[name], dtype=value.dtype)
        elif name in self.hints.splats:
            value = np.full(value.shape, value.reshape(-1)[0] if value.size else 1, value.dtype)
        const = o.const or name in self.hints.constants or name in self.hints.values
        return Operand(TensorType(value.dtype.name, tuple(value.shape)), value, const)

    def _pattern_attrs(self, call: ast.OpCall, schema: OpSchema,
                       operands: list[Operand | None], state: _State,
                       new: dict[str, Any]) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        x = operands[0] if operands else None
        for item in call.attrs:
            if not isinstance(item, ast.AttrSet) or isinstance(item.value, ast.Wildcard):
                continue
            spec = schema.attrs[item.name]
            if isinstance(item.value, ast.Name) and item.value.name not in CONSTANTS:
                var = item.value.name
                if var not in state.attr_vars and var not in new:
                    earlier = [*state.attr_vars.values(), *new.values()]
                    new[var] = attr_candidate(item.name, spec.kind, state.draw, x, earlier)
                value = state.attr_vars.get(var, new.get(var))
            else:
                try:
                    value = attr_value(spec, evaluate(item.value, _Empty()))
                except EvalError:
                    continue
            if value is not None:
                attrs[item.name] = value
        return attrs

    # ------------------------------------------------------------------ commit
    def _commit(self, call: ast.OpCall, schema: OpSchema, state: _State,
                operands: list[Operand], attrs: dict[str, Any], new_attr_vars: dict[str, Any],
                out: Operand) -> None:
        names = [self._bind(arg, o, state) for arg, o in zip(call.args, operands, strict=True)]
        k = len(state.nodes)
        count = (call.output or 0) + 1
        outputs = [f"%t{k}" if i == (call.output or 0) else f"%t{k}_{i}" for i in range(count)]
        node = Node(call.op, tuple(names), tuple(outputs), Attrs(attrs), name=f"n{k}_{call.op}",
                    domain=call.domain)
        state.nodes.append(node)
        result = outputs[call.output or 0]
        state.operands[result] = out
        state.results[id(call)] = result
        state.attr_vars.update(new_attr_vars)
        if call.binder:
            state.tensors[call.binder] = result
            state.resolved[call.binder] = schema.resolve(attrs)

    def _bind(self, arg: ast.Expr, o: Operand, state: _State) -> str:
        if isinstance(arg, ast.OpCall):
            return state.results[id(arg)]
        if o.type is None:
            return ""
        if isinstance(arg, ast.Name) and arg.name in state.tensors:
            return state.tensors[arg.name]
        is_var = isinstance(arg, ast.Name) and arg.name not in CONSTANTS
        name = state.name(arg.name if is_var else "")  # type: ignore[union-attr]
        if is_var:
            state.tensors[arg.name] = name  # type: ignore[union-attr]
        state.operands[name] = o
        assert o.value is not None
        if o.const or o.value.dtype.kind not in "f":
            state.inits[name] = o.value
        else:
            state.inputs.append(Value(name, o.type))
            state.samplers[name] = _range(o.value)
        return name


def _literal(arg: ast.Expr) -> np.ndarray | None:
    """The value of a pattern literal (``1``, ``0.5``, ``[0, 1]``, ``sqrt(2)``), else None."""
    if isinstance(arg, (ast.Name, ast.Wildcard, ast.OpCall, ast.NoneLit)) and not (
            isinstance(arg, ast.Name) and arg.name in CONSTANTS):
        return None
    try:
        return input_constant(evaluate(arg, _Empty()), None)
    except (EvalError, KeyError):
        return None


def _run(schema: OpSchema, operands: list[Operand], attrs: dict[str, Any], index: int
         ) -> Operand | None:
    """The op's output ``index`` when its inference and kernel both accept the operands."""
    types = [o.type for o in operands]
    consts = [o.value if o.const else None for o in operands]
    try:
        call = schema.call(attrs, index + 1)
        out_types = list(schema.infer(types, consts, call))
        with np.errstate(all="ignore"):
            values = list(schema.kernel([o.value for o in operands], call))
    except Exception:  # noqa: BLE001 - any refusal only means "not these operands"
        return None
    if index >= len(out_types) or index >= len(values):
        return None
    t, value = out_types[index], np.asarray(values[index])
    if t.shape is None or not t.is_static or value.size > 1 << 20:
        return None
    return Operand(TensorType(t.dtype, tuple(int(d) for d in t.shape)), value, False)


def _range(value: np.ndarray) -> Sampler:
    """How a graph input was drawn: normal values, or a positive range (variances...)."""
    if value.size and float(value.min()) >= 0.0:
        return (float(value.min()) * 0.5, max(float(value.max()) * 1.5, 1e-3))
    return None


class _Empty:
    def lookup(self, name: str) -> Any:
        raise KeyError(name)

    def node_attr(self, binder: str, attr: str) -> Any:
        raise EvalError("no node is bound here")
