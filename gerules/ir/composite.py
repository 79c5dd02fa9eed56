"""Composite ops: an op defined by a body of other ops (written in `.ger`, stored in `.om`).

A ``CompositeOp`` is a small graph over its inputs, shaped like an ONNX function: ``nodes``
in order, whose attribute values may be ``AttrRef``s (the composite's own attributes,
ONNX's ``ref_attr_name``); a literal or an attribute used as a tensor is a ``Constant`` node,
cast with ``CastLike`` to a tensor of the body when it follows that tensor's element type.
Its ``schema`` is an ordinary
``OpSchema``: inference and the kernel evaluate the body with the registry's inference and
kernels, so the op means exactly what its body means (the verifier holds it to that for
free) and its intermediates live only inside the kernel, never in the memory plan; FLOPs
are the body's; the unit is the cube when the body uses it.

Invariants:
- Imports ``ir`` only (no rule language, no engine): a ``.om`` holding composite ops runs
  with the runtime alone.
- Body nodes are read at ``opset`` (the ai.onnx opset the body was checked at); a body node
  may use an earlier composite op, which is then in ``uses`` (so the op is self-contained).
- ``schema(registry)`` is built once per registry and op.
- An optional input the call omits is ``None`` inside the body (an absent input there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GeError
from .attrs import AttrValue
from .graph import Node, TensorType
from .registry import (
    ELEMENTWISE,
    INPLACE,
    AttrSpec,
    Call,
    OpSchema,
    Port,
    Registry,
    Unit,
)


@dataclass(frozen=True, slots=True)
class AttrRef:
    """An attribute value of a body node that is the composite op's attribute ``name``."""

    name: str


@dataclass(frozen=True, eq=False)
class CompositeOp:
    """``op domain.name(inputs) {attrs} = body``; see the module docstring."""

    domain: str
    name: str
    inputs: tuple[Port, ...]
    outputs: tuple[str, ...]
    attrs: tuple[AttrSpec, ...]
    nodes: tuple[Node, ...]
    opset: int = 17
    uses: tuple[CompositeOp, ...] = ()
    doc: str = ""  # the declaration as written, for people
    where: str = ""  # file:line of the declaration
    _schemas: dict[int, OpSchema] = field(default_factory=dict, repr=False, compare=False)

    @property
    def qualified(self) -> str:
        return f"{self.domain}.{self.name}"

    def schema(self, registry: Registry) -> OpSchema:
        """The op as a registry schema, evaluating its body with ``registry``'s ops."""
        found = self._schemas.get(id(registry))
        if found is None:
            found = self._schemas[id(registry)] = _schema(self, registry)
        return found

    def lookup(self, registry: Registry) -> Callable[[Node], OpSchema]:
        """The schema of a body node: an op this one uses, else the registry's at ``opset``."""
        mine = {(u.domain, u.name): u for u in self.uses}

        def find(node: Node) -> OpSchema:
            used = mine.get((node.domain, node.op))
            if used is not None:
                return used.schema(registry)
            return registry.get(node.op, node.domain, self.opset if not node.domain else None)

        return find

    def all_uses(self) -> list[CompositeOp]:
        """The composite ops this one needs, dependencies first (itself last)."""
        out: dict[str, CompositeOp] = {}
        for u in self.uses:
            for dep in u.all_uses():
                out.setdefault(dep.qualified, dep)
        out.setdefault(self.qualified, self)
        return list(out.values())


def with_uses(ops: Sequence[CompositeOp]) -> tuple[CompositeOp, ...]:
    """``ops`` and everything they use, each once, dependencies first."""
    out: dict[str, CompositeOp] = {}
    for op in ops:
        for dep in op.all_uses():
            out.setdefault(dep.qualified, dep)
    return tuple(out.values())


def inlined_size(nodes: Sequence[Node], functions: Sequence[CompositeOp]) -> int:
    """How many nodes ``nodes`` come to with each call of a composite op of ``functions``
    (or of one they use) replaced by its body, recursively: what a runtime that inlines
    ONNX functions, as onnxruntime does, runs."""
    known = {(f.domain, f.name): f for f in with_uses(functions)}
    sizes: dict[tuple[str, str], int] = {}

    def size(node: Node) -> int:
        op = known.get((node.domain, node.op))
        if op is None:
            return 1
        key = (op.domain, op.name)
        if key not in sizes:
            sizes[key] = sum(size(n) for n in op.nodes)
        return sizes[key]

    return sum(size(n) for n in nodes)


def body_problem(op: CompositeOp, registry: Registry) -> str | None:
    """What is wrong with a body read from a file (``None`` when nothing): every node's op
    known (the registry's at ``opset`` or an op of ``uses``), its inputs defined before it
    (the op's inputs or earlier results), its ``AttrRef``s naming the op's attributes, and
    every output computed."""
    find = op.lookup(registry)
    defined = {p.name for p in op.inputs}
    names = {a.name for a in op.attrs}
    for node in op.nodes:
        if (node.domain, node.op) == (op.domain, op.name):
            return f"node '{node.name}' uses the function itself"
        try:
            find(node)
        except GeError as e:
            return f"node '{node.name}': {e}"
        missing = [i for i in node.inputs if i and i not in defined]
        if missing:
            return f"node '{node.name}' reads '{missing[0]}' before it is computed"
        refs = [v.name for v in node.attrs.values() if isinstance(v, AttrRef)]
        if any(r not in names for r in refs):
            return f"node '{node.name}' refers to an attribute the function does not declare"
        defined.update(o for o in node.outputs if o)
    lost = [o for o in op.outputs if o not in defined]
    return f"output '{lost[0]}' is not computed by the body" if lost else None


def with_functions(registry: Registry, graph: Any) -> Registry:
    """``registry`` with the composite ops ``graph`` carries that it lacks (for an e-graph,
    whose nodes are looked up by name)."""
    missing = [f for f in graph.functions if not registry.has(f.name, f.domain)]
    return registry.extend(f.schema(registry) for f in missing) if missing else registry


# ----------------------------------------------------------------------------- evaluation


def _bind(op: CompositeOp, values: Sequence[Any]) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for k, port in enumerate(op.inputs):
        env[port.name] = values[k] if k < len(values) else None
    return env


def _attrs(node: Node, call: Call) -> dict[str, AttrValue]:
    return {k: call.attrs[v.name] if isinstance(v, AttrRef) else v
            for k, v in node.attrs.items() if not (isinstance(v, AttrRef)
                                                   and call.attrs.get(v.name) is None)}


def _run(op: CompositeOp, registry: Registry, inputs: Sequence[Any], call: Call,
         typed: bool, consts: Sequence[Any] = ()) -> tuple[list[Any], list[Any]]:
    """The body evaluated on types (``typed``: inference, constants propagated) or on
    values (kernels); returns the outputs and, when typed, their known values."""
    find = op.lookup(registry)
    env = _bind(op, inputs)
    known = _bind(op, consts) if typed else {}
    for node in op.nodes:
        schema = find(node)
        inner = schema.call(_attrs(node, call), len(node.outputs), node.name)
        args = [env.get(i) if i else None for i in node.inputs]
        outs: list[Any]
        if typed:
            outs = list(schema.infer(args, [known.get(i) for i in node.inputs], inner))
            values = _fold(schema, inner, args, [known.get(i) for i in node.inputs], outs)
            for name, v in zip(node.outputs, values, strict=False):
                if v is not None:
                    known[name] = v
        else:
            with np.errstate(all="ignore"):
                outs = list(schema.kernel(args, inner))
        for name, value in zip(node.outputs, outs, strict=False):
            env[name] = value
    return [env[o] for o in op.outputs], [known.get(o) for o in op.outputs]


def _fold(schema: OpSchema, call: Call, types: list[Any], consts: list[Any],
          outs: list[TensorType]) -> list[Any]:
    """Small constant results (shape arithmetic inside a body), else nothing."""
    if any(c is None for t, c in zip(types, consts, strict=True) if t is not None):
        return []
    if any((t.numel() or 4097) > 4096 for t in outs):
        return []
    try:
        return [np.asarray(v) for v in schema.kernel(consts, call)]
    except Exception:  # noqa: BLE001 - folding is only an optimization
        return []


def _flops(op: CompositeOp, registry: Registry, ins: Sequence[TensorType | None],
           call: Call) -> int:
    """The body's FLOPs: each node's, on the types the body infers for these inputs."""
    find = op.lookup(registry)
    env: dict[str, Any] = _bind(op, ins)
    known: dict[str, Any] = {}
    total = 0
    for node in op.nodes:
        schema = find(node)
        inner = schema.call(_attrs(node, call), len(node.outputs), node.name)
        args = [env.get(i) if i else None for i in node.inputs]
        consts = [known.get(i) for i in node.inputs]
        outs = list(schema.infer(args, consts, inner))
        for name, v in zip(node.outputs, _fold(schema, inner, args, consts, outs),
                           strict=False):
            known[name] = v
        if node.op == "Constant" and not node.domain:
            pass  # a value of the definition, no work
        elif schema.flops is not None:
            total += int(schema.flops(args, outs, inner))
        elif schema.unit != "scalar":
            total += sum(t.numel() or 0 for t in outs)
        for name, t in zip(node.outputs, outs, strict=False):
            env[name] = t
    return total


def _schema(op: CompositeOp, registry: Registry) -> OpSchema:
    find = op.lookup(registry)
    body = [find(n) for n in op.nodes]
    elementwise = all(s.has(ELEMENTWISE) for s in body) and len(op.outputs) == 1
    unit: Unit = "cube" if any(s.unit == "cube" for s in body) else "vector"

    def infer(types: Sequence[TensorType | None], consts: Sequence[np.ndarray | None],
              call: Call) -> list[TensorType]:
        outs, _ = _run(op, registry, types, call, True, consts)
        return [t if isinstance(t, TensorType) else TensorType("float32", None) for t in outs]

    def kernel(inputs: Sequence[np.ndarray | None], call: Call) -> list[np.ndarray]:
        outs, _ = _run(op, registry, inputs, call, False)
        return [np.asarray(o) for o in outs]

    ports = tuple(Port("Y" if len(op.outputs) == 1 else f"Y{k}") for k in range(len(op.outputs)))
    return OpSchema(op.name, 1, op.inputs, ports, infer, kernel,
                    {a.name: a for a in op.attrs}, op.domain, unit,
                    frozenset({ELEMENTWISE, INPLACE}) if elementwise else frozenset(),
                    lambda ins, outs, call: _flops(op, registry, ins, call), doc=op.doc,
                    body=op)
