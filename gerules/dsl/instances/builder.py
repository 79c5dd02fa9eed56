"""Random instances of a rule's left side, as small verified graphs.

``InstanceBuilder(direction).build(draw)`` walks the direction's pattern ops (children and
binders first). Each op's operands are what is known already (an inner op's result, a
variable seen before, a binder), a literal (a constant initializer), or fresh: a variable or
wildcard gets a type and value from ``proposals`` (shaped after its siblings), with the
guards' ``Hints`` applied. Attributes come from the pattern (attribute variables get
candidates) over randomly sampled open ones. The op's inference and kernel must accept the
result, else the op is re-drawn a few times before the instance is given up.

The shape soundness check and the verifier both draw their instances here.

Invariants:
- An instance is a function of the ``Draw`` (seeded): replaying a seed rebuilds it.
- The graph passes ``verify`` and carries the composite ops it uses; its outputs are the
  pattern's roots in order, ``%out`` for a
  single root (``Op(..)[k]`` takes output ``k``). Variables keep their names; wildcards and
  literals are named ``%<k>`` and node outputs ``%t<k>``: no rule variable can be spelled
  with ``%``.
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

from ...errors import GeError
from ...ir.attrs import Attrs
from ...ir.composite import with_uses
from ...ir.graph import Graph, Node, TensorType, Value
from ...ir.registry import MAX_OPSET, OpSchema, Registry, default_registry
from ...ir.verify import verify
from .. import program
from ..build import input_constant
from ..values import EvalError
from .attributes import attr_candidate, sample_attrs
from .hints import Hints
from .proposals import (
    ABSENT,
    SHAPED,
    Draw,
    Operand,
    broadcast_variant,
    float_operand,
    grown_variant,
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
    results: dict[int, str] = field(default_factory=dict)  # Op.key -> tensor
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
    """Builds instances of one direction's left side; see the module docstring."""

    def __init__(self, direction: program.Direction, registry: Registry | None = None
                 ) -> None:
        self.direction = direction
        self.registry = registry or default_registry()
        self.order = direction.ops
        self.hints = Hints.of(direction)
        self.opset = self._opset()

    def _opset(self) -> int:
        lo, hi = 1, MAX_OPSET[""]
        for call in self.order:
            if call.domain:
                continue
            later = [s.since_version for s in self.registry.versions(call.op)
                     if s.since_version > call.schema.since_version]
            lo = max(lo, call.schema.since_version)
            hi = min(hi, min(later) - 1 if later else hi)
        return hi if lo <= hi else MAX_OPSET[""]

    # ------------------------------------------------------------------ building
    def build(self, draw: Draw, *, verified: bool = True) -> Instance | None:
        """A random instance, or ``None`` when some op could not be typed this time.
        ``verified=False`` skips re-checking the graph (its types are the ones each op's
        inference gave while it was built)."""
        if not self.order:
            return None
        state = _State(draw)
        for call in self.order:
            if not self._place(call, state):
                return None
        roots = [state.results[r.key] for r in self.direction.roots]
        return self._graph(state, roots, verified)

    def _graph(self, state: _State, roots: list[str], verified: bool) -> Instance | None:
        given = set(state.inits) | {v.name for v in state.inputs}
        if given & set(roots) or len(set(roots)) != len(roots):
            return None
        names = {r: OUTPUT if len(roots) == 1 else f"{OUTPUT}{k}" for k, r in enumerate(roots)}
        nodes = [n.with_(inputs=tuple(names.get(i, i) for i in n.inputs),
                         outputs=tuple(names.get(o, o) for o in n.outputs))
                 for n in state.nodes]
        outputs = tuple(Value(names[r], state.operands[r].type)  # type: ignore[arg-type]
                        for r in roots)
        bodies = [c.schema.body for c in self.order if c.schema.body is not None]
        graph = Graph(tuple(nodes), tuple(state.inputs), outputs, state.inits,
                      name=self.direction.name, opset={"": self.opset, "ge": 1},
                      functions=with_uses(bodies))
        if not verified:
            return Instance(graph, dict(state.samplers))
        try:
            return Instance(verify(graph, self.registry), dict(state.samplers))
        except GeError:
            return None

    def _place(self, call: program.Op, state: _State) -> bool:
        for _ in range(TRIES):
            state.draw.memo.clear()
            attempt = self._try(call, call.schema, state)
            if attempt is not None:
                self._commit(call, call.schema, state, *attempt)
                return True
        return False

    def _try(self, call: program.Op, schema: OpSchema, state: _State
             ) -> tuple[list[Operand], dict[str, Any], dict[str, Any], Operand] | None:
        operands: list[Operand | None] = [self._known(a, state) for a in call.args]
        literals = {i: v for i, a in enumerate(call.args) if operands[i] is None
                    and (v := _literal(a)) is not None}
        new_attr_vars: dict[str, Any] = {}
        if call.args and operands[0] is None and 0 not in literals:
            operands[0] = self._fresh(call, schema, 0, operands, {}, state)
        attrs = {**sample_attrs(call.qualified, state.draw, operands[0] if operands else None),
                 **self._pattern_attrs(call, operands, state, new_attr_vars)}
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
    def _known(self, arg: program.Term, state: _State) -> Operand | None:
        if isinstance(arg, program.Op):
            return state.operands[state.results[arg.key]]
        if isinstance(arg, program.Absent):
            return ABSENT
        if isinstance(arg, program.Var) and arg.name in state.tensors:
            return state.operands[state.tensors[arg.name]]
        return None  # a fresh variable, a wildcard or a literal

    def _literal(self, call: program.Op, schema: OpSchema, slot: int, value: np.ndarray,
                 operands: list[Operand | None], state: _State) -> Operand:
        """A pattern constant: integer for integer inputs, else the instance's float type,
        a scalar or (sometimes) the literal spread over a shape that broadcasts to its
        sibling's, or (less often) over one its sibling broadcasts to (``Mul(x, 1)`` is not
        ``x`` when the 1 is larger than ``x``)."""
        port = schema.inputs[min(slot, len(schema.inputs) - 1)].name
        if not is_int_port(call.qualified, port):
            value = value.astype(state.draw.dtype)
            ref = reference(operands)
            if value.ndim == 0 and ref is not None and ref.value is not None:
                draw = state.draw
                if draw.edge and draw.coin(0.7):
                    value = np.full(grown_variant(draw, ref.shape), value, value.dtype)
                elif not draw.edge and draw.coin(0.3):
                    value = np.full(broadcast_variant(draw, ref.shape), value, value.dtype)
        return Operand(TensorType(value.dtype.name, tuple(value.shape)), value, True)

    def _fresh(self, call: program.Op, schema: OpSchema, slot: int,
               operands: list[Operand | None], attrs: dict[str, Any], state: _State
               ) -> Operand:
        port = schema.inputs[min(slot, len(schema.inputs) - 1)].name
        op, draw = call.qualified, state.draw
        data = operands[0] if slot else None
        found = int_operand(op, port, draw, data, attrs) or scalar_operand(op, port, draw)
        if found is not None:
            return found
        arg = call.args[slot]
        name = arg.name if isinstance(arg, program.Var) else None
        like = [o for o in state.operands.values() if o.value is not None and not o.const
                and o.value.dtype.kind == "f"]
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
        if name in self.hints.scalars:
            value = value.reshape(-1)[:1].reshape(()) if value.size else value
        if name in self.hints.values:
            value = np.full(value.shape, self.hints.values[name], dtype=value.dtype)
        elif name in self.hints.splats:
            value = np.full(value.shape, value.reshape(-1)[0] if value.size else 1, value.dtype)
        const = o.const or name in self.hints.constants or name in self.hints.values
        return Operand(TensorType(value.dtype.name, tuple(value.shape)), value, const)

    def _pattern_attrs(self, call: program.Op, operands: list[Operand | None],
                       state: _State, new: dict[str, Any]) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        x = operands[0] if operands else None
        for item in call.attr_items():
            if item.kind == "var":
                var = item.value
                if var not in state.attr_vars and var not in new:
                    earlier = [*state.attr_vars.values(), *new.values()]
                    new[var] = attr_candidate(item.name, item.spec.kind, state.draw, x,
                                              earlier)
                value = state.attr_vars.get(var, new.get(var))
            else:
                value = item.value
            if value is not None:
                attrs[item.name] = value
        return attrs

    # ------------------------------------------------------------------ commit
    def _commit(self, call: program.Op, schema: OpSchema, state: _State,
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
        state.results[call.key] = result
        state.attr_vars.update(new_attr_vars)
        if call.binder:
            state.tensors[call.binder] = result
            state.resolved[call.binder] = schema.resolve(attrs)

    def _bind(self, arg: program.Term, o: Operand, state: _State) -> str:
        if isinstance(arg, program.Op):
            return state.results[arg.key]
        if o.type is None:
            return ""
        if isinstance(arg, program.Var) and arg.name in state.tensors:
            return state.tensors[arg.name]
        is_var = isinstance(arg, program.Var)
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


def _literal(arg: program.Term) -> np.ndarray | None:
    """The value of a pattern literal (``1``, ``0.5``, ``[0, 1]``, ``sqrt(2)``), else None."""
    if not isinstance(arg, program.Const):
        return None
    try:
        return input_constant(arg.value, None)
    except EvalError:
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
