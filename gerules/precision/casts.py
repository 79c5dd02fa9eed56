"""Cast placement: give every float op the dtype its precision mode asks for.

``convert(graph, rules)`` walks the nodes in order and decides per node whether it computes
in the *source* float dtype ``S`` (float32 when narrowing) or the *target* ``T`` (float16):
``T`` when the mode says so, ``S`` when it is pinned or black-listed, the current dtype of its
inputs when it is gray ("follow"). Then it brings each float input to that dtype:

- a weight (initializer) is converted once, ahead of time, into a new initializer (never a
  Cast per weight at run time), values beyond float16's range saturating to +-65504 (counted
  in the report: a mask of float32's minimum stays a large negative, not -inf); the original
  disappears when nothing reads it any more;
- any other tensor gets one Cast per (tensor, dtype), shared by every reader;
- a ``Cast`` whose ``to`` is ``S`` is retargeted to ``T`` (a later rule drops it when it
  became a no-op).

Invariants:
- Graph inputs and outputs keep their names and dtypes: inputs are cast on the way in,
  outputs computed in another dtype are cast back (the producer writes a fresh name).
- Integer-derived values (a Cast from an integer or bool and what is computed from such values
  and weights only: shape arithmetic, masks) keep ``S``: narrowing them could change indices.
- A node whose op refuses ``T`` in shape inference keeps ``S`` (reason recorded); ``Shape`` and
  ``Size`` are never touched; input slots in ``FIXED_SLOTS`` (Resize scales, Cast's input) are
  never converted.
- The result is verified (SSA, shapes, dtypes) before it is returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import GeError
from ..ir.attrs import Attrs
from ..ir.dtypes import ONNX_CODES
from ..ir.formats import PADDED, c0
from ..ir.graph import Graph, Node, TensorType, Value
from ..ir.infer import infer_node, schema_for
from ..ir.registry import Registry
from ..ir.verify import verify
from ..ir.weights import Weight, materialize, unique_arrays

log = logging.getLogger(__name__)

FLOATS = ("float16", "float32")
SHORT = {"float16": "fp16", "float32": "fp32"}
PASSTHROUGH = frozenset({"Shape", "Size"})
FIXED_SLOTS: dict[str, frozenset[int]] = {
    "Resize": frozenset({1, 2}), "Upsample": frozenset({1}), "OneHot": frozenset({1}),
    "Cast": frozenset({0}), "CastLike": frozenset({0}),
}

# A decision: "T" (target dtype), "S" (source dtype) or "follow" (T when an input already is),
# with the reason shown in the report.
Decide = Callable[[Node, Graph], tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Kept:
    node: str
    op: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"node": self.node, "op": self.op, "reason": self.reason}


@dataclass
class Conversion:
    """What ``convert`` did."""

    source: str
    target: str
    converted: int = 0  # nodes computing in the target dtype
    kept: list[Kept] = field(default_factory=list)  # float nodes left in the source dtype
    casts: int = 0  # Cast nodes inserted
    retargeted: int = 0  # existing Casts whose ``to`` changed
    weights: int = 0  # initializers converted ahead of time
    weight_bytes: tuple[int, int] = (0, 0)  # bytes of those weights before, after
    overflow: int = 0  # weight values beyond the target's range (saturated to its largest)
    # estimate only: converted weight -> the source array its placeholder stands for
    sources: dict[str, Weight] = field(default_factory=dict)


class _Rewriter:
    def __init__(self, graph: Graph, source: str, target: str, decide: Decide,
                 registry: Registry, estimate: bool) -> None:
        self.graph, self.registry, self.decide = graph, registry, decide
        self.estimate = estimate
        self.S, self.T = source, target
        self.orig: dict[str, str] = {}
        for v in (*graph.inputs, *graph.value_info.values()):
            self.orig[v.name] = v.dtype
        for name, arr in graph.initializers.items():
            self.orig.setdefault(name, arr.dtype.name)
        self.cur = dict(self.orig)
        self.alias: dict[tuple[str, str], str] = {}
        self.int_derived: set[str] = set()
        self.inits = dict(graph.initializers)
        # weights held in a blocked format (their arrays are physical): their types
        self.held = graph.held_weights()
        self.nodes: list[Node] = []
        self.taken = set(self.orig) | {n.name for n in graph.nodes}
        self.outputs = {v.name: v.dtype for v in graph.outputs}
        self.report = Conversion(source, target)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def run(self) -> Graph:
        for node in self.graph.nodes:
            self.visit(node)
        used = {i for n in self.nodes for i in n.inputs} | set(self.outputs)
        inits = {k: v for k, v in self.inits.items() if k in used}
        held = {k: v for k, v in self.held.items() if k in inits}
        return self.graph.replace(nodes=tuple(self.nodes), initializers=inits, value_info=held)

    # ------------------------------------------------------------------ decisions

    def float_slots(self, node: Node) -> list[int]:
        fixed = FIXED_SLOTS.get(node.op, frozenset()) if not node.domain else frozenset()
        return [k for k, i in enumerate(node.inputs)
                if i and k not in fixed and self.orig.get(i) == self.S]

    def visit(self, node: Node) -> None:
        slots = self.float_slots(node)
        touches = slots or any(self.orig.get(o) == self.S for o in node.outputs)
        if node.op in PASSTHROUGH or not touches:
            self.emit(node, node)
            return
        want, reason = self.choose(node, slots)
        if want == self.T and self.try_emit(node, slots, self.T):
            self.report.converted += 1
            return
        if want == self.T:
            reason = f"no {self.T} support in shape inference"
        self.report.kept.append(Kept(node.label, node.qualified_op, reason))
        if not self.try_emit(node, slots, self.S):
            raise RuntimeError(f"precision: node '{node.label}' no longer infers in {self.S}")

    def choose(self, node: Node, slots: list[int]) -> tuple[str, str]:
        if self.from_integers(node, slots):
            for o in node.outputs:
                self.int_derived.add(o)
            return self.S, "computed from integers"
        want, reason = self.decide(node, self.graph)
        if want == "follow":
            live = [node.inputs[k] for k in slots if node.inputs[k] not in self.inits]
            if not slots and node.inputs:
                live = [node.inputs[0]]
            follows = not live or any(self.cur.get(i) == self.T or (i, self.T) in self.alias
                                      for i in live)
            return (self.T, "") if follows else (self.S, reason)
        return (self.T, "") if want == "T" else (self.S, reason)

    def from_integers(self, node: Node, slots: list[int]) -> bool:
        if node.op == "Cast" and not node.domain:
            source = self.orig.get(node.inputs[0]) if node.inputs else None
            return source is not None and source not in ("float16", "float32", "float64")
        live = [node.inputs[k] for k in slots if node.inputs[k] not in self.inits]
        return bool(live) and all(i in self.int_derived for i in live)

    # ------------------------------------------------------------------ rewriting

    def try_emit(self, node: Node, slots: list[int], dtype: str) -> bool:
        """Emit ``node`` computing in ``dtype`` if its op infers that; False otherwise."""
        attrs = node.attrs
        if node.op == "Cast" and not node.domain and attrs.get("to") == ONNX_CODES[self.S] \
                and dtype == self.T:
            attrs = attrs.set(to=ONNX_CODES[self.T])
        trial = node.with_(attrs=attrs)
        types = self.infer(trial, [self.type_for(i, dtype if k in slots else None)
                                   for k, i in enumerate(node.inputs)])
        if types is None:
            return False
        inputs = list(node.inputs)
        for k in slots:
            inputs[k] = self.version(node.inputs[k], dtype)
        if attrs is not node.attrs:
            self.report.retargeted += 1
        self.emit(node, trial.with_(inputs=tuple(inputs)), types)
        return True

    def infer(self, node: Node, types: list[TensorType | None]) -> list[TensorType] | None:
        consts = [_array(self.inits.get(i)) if i else None for i in node.inputs]
        try:
            schema = schema_for(node, self.graph, self.registry)
            out, _ = infer_node(node, schema, types, consts)
        except GeError as e:
            log.debug("precision: %s", e)
            return None
        return out

    def type_for(self, name: str, dtype: str | None) -> TensorType | None:
        """The type ``name`` has when read as ``dtype`` (None: as it currently is)."""
        t = self.graph.type_of(name) if name else None
        if t is None:
            return None
        dtype = dtype or self.cur.get(name, t.dtype)
        if t.format in PADDED and c0(dtype) != c0(t.dtype):
            return None  # another block size: a blocked tensor keeps its element size class
        return TensorType(dtype, t.shape, t.format)

    def version(self, name: str, dtype: str) -> str:
        """``name`` as a tensor of ``dtype``: itself, a converted weight or a (shared) Cast."""
        if self.cur.get(name) == dtype:
            return name
        if (name, dtype) in self.alias:
            return self.alias[(name, dtype)]
        new = self.fresh(f"{name}_{SHORT[dtype]}")
        if name in self.inits and name not in self.outputs:
            self.convert_weight(name, new, dtype)
        else:
            self.nodes.append(Node("Cast", (name,), (new,), Attrs({"to": ONNX_CODES[dtype]}),
                                   name=self.fresh(f"{name}_to_{SHORT[dtype]}")))
            self.report.casts += 1
        self.alias[(name, dtype)] = new
        self.cur[new] = dtype
        return new

    def convert_weight(self, name: str, new: str, dtype: str) -> None:
        held = self.inits[name]
        if self.estimate:  # a zero-stride stand-in of the new type: no bytes, no copy
            self.inits[new] = np.broadcast_to(np.zeros((), dtype), held.shape)
            self.report.sources[new] = held
            self.report.weights += 1
            self.hold(name, new, dtype)
            return
        old = materialize(held)
        with np.errstate(over="ignore"):  # overflowing values are replaced just below
            arr = old.astype(dtype)
        if arr.dtype.itemsize < old.dtype.itemsize:  # narrowing: saturate, never inf
            top = float(np.finfo(dtype).max)
            over = np.isfinite(old) & (np.abs(old) > top)
            if over.any():
                self.report.overflow += int(np.count_nonzero(over))
                arr = np.clip(old, -top, top).astype(dtype)
        arr.setflags(write=False)  # ours alone: the Graph keeps it without copying
        self.inits[new] = arr
        self.hold(name, new, dtype)
        before, after = self.report.weight_bytes
        self.report.weight_bytes = (before + old.nbytes, after + arr.nbytes)
        self.report.weights += 1

    def hold(self, name: str, new: str, dtype: str) -> None:
        """A converted weight keeps the format its source is held in (a float16 FRACTAL_Z
        weight from a float32 one: the same physical shape, the block size is the same)."""
        if name in self.held:
            t = self.held[name].type
            self.held[new] = Value(new, TensorType(dtype, t.shape, t.format))

    def emit(self, source: Node, node: Node, types: list[TensorType] | None = None) -> None:
        """Append ``node``; a graph output computed in another dtype is cast back to it."""
        outputs = list(node.outputs)
        for k, name in enumerate(source.outputs):
            dtype = types[k].dtype if name and types and k < len(types) else self.orig.get(name)
            if not name or dtype is None:
                continue
            self.cur[name] = dtype
            declared = self.outputs.get(name)
            if declared is not None and dtype != declared:
                outputs[k] = self.fresh(f"{name}_{SHORT.get(dtype, dtype)}")
                self.cur[outputs[k]], self.cur[name] = dtype, declared
                self.alias[(name, dtype)] = outputs[k]
        self.nodes.append(node.with_(outputs=tuple(outputs)))
        for k, name in enumerate(source.outputs):
            if outputs[k] != name:
                self.cast_back(outputs[k], name)

    def cast_back(self, tensor: str, output: str) -> None:
        dtype = self.outputs[output]
        self.nodes.append(Node("Cast", (tensor,), (output,), Attrs({"to": ONNX_CODES[dtype]}),
                               name=self.fresh(f"{output}_to_{SHORT.get(dtype, dtype)}")))
        self.report.casts += 1


def _array(weight: Weight | None) -> np.ndarray | None:
    """A weight inference may read (a deferred one is not computed for it)."""
    return weight if isinstance(weight, np.ndarray) else None


def convert(graph: Graph, source: str, target: str, decide: Decide,
            registry: Registry, *, estimate: bool = False) -> tuple[Graph, Conversion]:
    """``graph`` (shape-inferred) with its ``source`` float ops moved to ``target`` as decided.

    ``estimate``: only the types matter (the cost model's estimate of a mode nobody asked
    for). Converted weights are then zero-stride stand-ins of the new dtype, not copies;
    ``Conversion.sources`` names what each stands for, and ``weights_bytes`` counts them.
    """
    rewriter = _Rewriter(graph, source, target, decide, registry, estimate)
    result = verify(rewriter.run(), registry)
    return result, rewriter.report


def estimated_weights_bytes(graph: Graph, conversion: Conversion) -> int:
    """Bytes of ``graph``'s weights, identical ones once, stand-ins at their would-be size."""
    inits = graph.initializers
    real = [a for k, a in inits.items() if k not in conversion.sources]
    stood = {k: conversion.sources[k] for k in inits if k in conversion.sources}
    size = {k: inits[k].nbytes for k in stood}
    by_source = {id(a): k for k, a in stood.items()}
    return (sum(a.nbytes for a in unique_arrays(real)[0])
            + sum(size[by_source[id(a)]] for a in unique_arrays(stood.values())[0]))
