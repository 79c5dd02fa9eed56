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
- No node outputs an empty tensor: an instance where one does proves little (two parts
  concatenated in the wrong order look right when one of them is empty).
- The opset is the newest in which every op of the pattern has the version the rule checker
  picked for it (ReduceMean with an ``axes`` attribute means opset 13..17).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import GeError
from ...ir import formats
from ...ir.attrs import Attrs
from ...ir.composite import with_uses
from ...ir.graph import Graph, Node, TensorType, Value
from ...ir.registry import MAX_OPSET, OpSchema, Registry, default_registry
from ...ir.verify import verify
from ...ir.weights import materialize
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
RANK_TRIES = 8  # proposals drawn before a pinned rank is drawn directly
MAX_RANK = 6  # the largest rank drawn for a guard that pins one
MAX_OUTPUTS = 8  # outputs tried for an op with variadic outputs
OUTPUT = "%out"
Sampler = tuple[float, float] | None  # uniform range, or None for N(0, 1)


@dataclass(frozen=True)
class Instance:
    """A built instance and what the rule's names stand for in it (what guards read)."""

    graph: Graph
    samplers: Mapping[str, Sampler]  # graph input -> how to redraw it
    tensors: Mapping[str, Operand] = field(default_factory=dict)  # variables and binders
    attrs: Mapping[str, Any] = field(default_factory=dict)  # attribute variables
    nodes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # binder -> attrs


@dataclass
class _State:
    draw: Draw
    fixed: Mapping[str, Any] = field(default_factory=dict)  # see ``InstanceBuilder.build``
    tensors: dict[str, str] = field(default_factory=dict)  # variable or binder -> tensor
    operands: dict[str, Operand] = field(default_factory=dict)  # tensor -> its operand
    results: dict[int, str] = field(default_factory=dict)  # Op.key -> tensor
    counts: dict[int, int] = field(default_factory=dict)  # Op.key -> outputs of its node
    # a node matched by output (``Op(..)[k]``): its other outputs, kept as graph outputs so
    # the node lowers as the tuple the pattern reads
    extras: list[Value] = field(default_factory=list)
    kinds: dict[int, list[TensorType]] = field(default_factory=dict)  # Op.key -> out types
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
    def build(self, draw: Draw, *, verified: bool = True,
              fixed: Mapping[str, Any] | None = None) -> Instance | None:
        """A random instance, or ``None`` when some op could not be typed this time.
        ``verified=False`` skips re-checking the graph (its types are the ones each op's
        inference gave while it was built). ``fixed`` pins variables: a ``TensorType`` (the
        variable gets that type, values drawn for it), a value (a constant tensor, or an
        attribute variable's value). Pinned variables are drawn as usual first and then
        replaced, so the rest of the instance stays what the same draw gives."""
        if not self.order:
            return None
        state = _State(draw, dict(fixed or {}))
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
                        for r in roots) + tuple(state.extras)
        bodies = [c.schema.body for c in self.order if c.schema.body is not None]
        graph = Graph(tuple(nodes), tuple(state.inputs), outputs, state.inits,
                      name=self.direction.name, opset={"": self.opset, "ge": 1},
                      functions=with_uses(bodies))
        if not verified:
            return self._instance(graph, state)
        try:
            graph = verify(graph, self.registry)
        except GeError:
            return None
        return self._instance(graph, state)

    def _instance(self, graph: Graph, state: _State) -> Instance:
        tensors = {v: state.operands[t] for v, t in state.tensors.items()}
        return Instance(graph, dict(state.samplers), tensors, dict(state.attr_vars),
                        dict(state.resolved))

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
        ran = _run(schema, done, attrs, call.output or 0, call.output is not None)
        if ran is None:
            return None
        state.counts[call.key], state.kinds[call.key] = ran[1], ran[2]
        return done, attrs, new_attr_vars, ran[0]

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
        arg = call.args[slot]
        name = arg.name if isinstance(arg, program.Var) else (
            arg.attr if isinstance(arg, program.PortVar) else None)
        rank = self.hints.ranks.get(call.binder) if call.binder else None
        found = (int_operand(op, port, draw, data, attrs, rank)
                 or scalar_operand(op, port, draw))
        if found is not None:
            return pin(name, found, state.fixed)
        twin = next((state.operands[state.tensors[n]] for n in sorted(
            self.hints.alike.get(name or "", ())) if n in state.tensors), None)
        pinned = self.hints.ranks.get(name or "")
        like = [o for o in state.operands.values() if o.value is not None and not o.const
                and o.value.dtype.kind == "f" and pinned in (None, o.value.ndim)]
        if twin is not None and twin.value is not None and twin.value.dtype.kind == "f":
            proposal = tensor(draw, twin.shape)  # shape(a) == shape(b)
        elif slot == 0 and op not in SHAPED and like and draw.coin(0.5):  # alike, by chance
            proposal = tensor(draw, draw.pick(like).shape)
        else:
            proposal = self._ranked(name, lambda: float_operand(op, schema, draw, operands,
                                                                slot, attrs), op, draw)
        return pin(name, held_like(schema, operands, self._hinted(name, proposal, draw)),
                   state.fixed)

    def _ranked(self, name: str | None, propose: Callable[[], Operand], op: str, draw: Draw
                ) -> Operand:
        """A proposal of the rank a guard pins (``rank(x) == 6``): drawn a few times, then
        (for ops whose operand has no structure of its own) a shape of that rank directly."""
        proposal = propose()
        rank = self.hints.ranks.get(name or "")
        for _ in range(RANK_TRIES):
            if rank is None or proposal.value is None or proposal.value.ndim == rank:
                return proposal
            proposal = propose()
        if op in SHAPED or rank is None or rank > MAX_RANK:
            return proposal
        return tensor(draw, draw.shape(rank) if rank <= 4 else
                      tuple(draw.integer(1, 3) for _ in range(rank)))

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
                    if var in state.fixed:
                        new[var] = attr_of(item.spec.kind, state.fixed[var])
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
        for arg, o in zip(call.args, operands, strict=True):
            if isinstance(arg, program.PortVar) and o.value is not None:
                state.attr_vars.setdefault(arg.attr, attr_of(arg.spec.kind, o.value))
        k = len(state.nodes)
        count = state.counts[call.key]
        outputs = [f"%t{k}" if i == (call.output or 0) else f"%t{k}_{i}" for i in range(count)]
        node = Node(call.op, tuple(names), tuple(outputs), Attrs(attrs), name=f"n{k}_{call.op}",
                    domain=call.domain)
        state.nodes.append(node)
        result = outputs[call.output or 0]
        if call.output is not None:
            state.extras += [Value(o, t) for i, (o, t) in enumerate(
                zip(outputs, state.kinds[call.key], strict=False)) if i != call.output]
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
        return materialize(input_constant(arg.value, None))
    except EvalError:
        return None


def _run(schema: OpSchema, operands: list[Operand], attrs: dict[str, Any], index: int,
         by_output: bool = False) -> tuple[Operand, int, list[TensorType]] | None:
    """The op's output ``index``, how many outputs its node has and their types, when its
    inference and kernel both accept the operands: at least its required ones (``TopK(x,
    k)[0]`` has its indices too, as in a model; one matched ``by_output`` has all its declared
    outputs); an op with variadic outputs, ``Split(x, s)[0]``, as many as its operands make
    (the first count its inference accepts)."""
    types = [o.type for o in operands]
    consts = [o.value if o.const else None for o in operands]
    variadic = bool(schema.outputs) and schema.outputs[-1].variadic
    required = sum(1 for p in schema.outputs if not p.optional and not p.variadic)
    first = max(index + 1, required)
    if by_output and not variadic:
        first = max(first, len(schema.outputs))
    for count in range(first, first + (MAX_OUTPUTS if variadic else 1)):
        try:
            call = schema.call(attrs, count, types=types)
            out_types = list(schema.infer(types, consts, call))
        except Exception:  # noqa: BLE001 - any refusal only means "not these operands"
            continue
        out = _output(schema, operands, call, out_types, index)
        return None if out is None else (out, count, out_types[:count])
    return None


def _output(schema: OpSchema, operands: list[Operand], call: Any, out_types: list[Any],
            index: int) -> Operand | None:
    try:
        with np.errstate(all="ignore"):
            values = list(schema.kernel([o.value for o in operands], call))
    except Exception:  # noqa: BLE001 - any refusal only means "not these operands"
        return None
    if index >= len(out_types) or index >= len(values):
        return None
    t, value = out_types[index], np.asarray(values[index])
    if t.shape is None or not t.is_static or not 0 < value.size <= 1 << 20 or (
            tuple(value.shape) != tuple(t.physical_shape or ())):
        return None  # (empty, too large, or the kernel and the inference disagree)
    const = all(o.const for o in operands)  # folded in the e-graph as well
    return Operand(TensorType(t.dtype, tuple(int(d) for d in t.shape), t.format), value, const)


def _range(value: np.ndarray) -> Sampler:
    """How a graph input was drawn: normal values, or a positive range (variances...)."""
    if value.size and float(value.min()) >= 0.0:
        return (float(value.min()) * 0.5, max(float(value.max()) * 1.5, 1e-3))
    return None


def held_like(schema: OpSchema, operands: list[Operand | None], o: Operand) -> Operand:
    """An elementwise op's fresh operand in the blocked format of its siblings, when it can
    be held so (its rank, the blocked dims the same): such ops take one format for all
    operands (``ir.layout``); a single number stays plain."""
    if schema.formats is None or schema.formats.kind != "elementwise" or o.value is None:
        return o
    ref = next((x for x in operands if x is not None and x.type is not None
                and x.type.format != formats.ND), None)
    if ref is None or ref.type is None or o.value.size == 1 or o.value.ndim != ref.type.rank:
        return o
    fmt, rank = ref.type.format, o.value.ndim
    if any(o.value.shape[a] != ref.type.shape[a]  # type: ignore[index]
           for a in formats.blocked_dims(fmt, rank)):
        return o
    t = TensorType(o.value.dtype.name, tuple(o.value.shape), fmt)
    return Operand(t, formats.to_format(o.value, fmt), o.const)


def pin(name: str | None, o: Operand, fixed: Mapping[str, Any]) -> Operand:
    """``o``, or what ``fixed`` pins ``name`` to: a type (values drawn for it from a
    generator seeded by the name, so rebuilding gives the same values) or a value (a
    constant, in ``o``'s element type when both are floats or both integers)."""
    pinned = fixed.get(name or "")
    if pinned is None or o.value is None:
        return o
    if isinstance(pinned, TensorType):
        if o.type == pinned:
            return o
        rng = np.random.default_rng(zlib.crc32((name or "").encode()))
        shape = tuple(int(d) for d in pinned.shape or ())
        kind = np.dtype(pinned.dtype).kind
        drawn: np.ndarray
        if kind == "f":
            drawn = rng.standard_normal(shape) if o.value.size == 0 or float(
                o.value.min()) < 0 else rng.uniform(0.1, 2.0, shape)
        elif kind == "b":
            drawn = rng.random(shape) < 0.5
        else:
            drawn = rng.integers(0, 3, shape)
        held = formats.to_format(np.asarray(drawn).astype(pinned.dtype), pinned.format)
        return Operand(pinned, held, o.const)
    value = np.asarray(pinned)
    if value.dtype.kind in "iuf" and o.value.dtype.kind in "iuf" and (
            (value.dtype.kind == "f") == (o.value.dtype.kind == "f")):
        value = value.astype(o.value.dtype)
    elif value.dtype.kind == "i":
        value = value.astype("int64")
    return Operand(TensorType(value.dtype.name, tuple(value.shape)), value, True)


def attr_of(kind: str, value: Any) -> Any:
    """``value`` as an attribute of ``kind`` (an array of ints for ``ints``...)."""
    if isinstance(value, np.ndarray) or isinstance(value, (list, tuple)):
        items = np.asarray(value).reshape(-1).tolist()
        if kind in ("ints", "floats"):
            return tuple(items)
        if len(items) == 1:
            return items[0]
    if kind == "int" and isinstance(value, (bool, int, float, np.generic)):
        return int(value)
    if kind == "float" and isinstance(value, (int, float, np.generic)):
        return float(value)
    return value
