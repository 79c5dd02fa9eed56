"""How IR graphs live in the e-graph: e-node conventions and the IR-side analyses.

Conventions (the rule compiler, the lowering and the extraction all follow them):
- An op e-node's ``op`` is the qualified op name (``"Conv"``, ``"ge.FusedConv"``); its attrs are
  the node's attributes *with schema defaults applied* (so ``Conv{group=1}`` and ``Conv`` are
  one e-node); tensor-valued attributes are ``ConstTensor``; children are its inputs in order.
- Leaves: ``Input{name}`` for a graph input, ``Const{value: ConstTensor}`` for an initializer or
  folded value (identical bytes -> one class), ``Absent`` for an omitted optional input that is
  followed by a present one (trailing omitted inputs are simply dropped). A constant held in a
  blocked format (a FRACTAL_Z weight) also carries ``format`` and its logical ``shape``; its
  value is the physical array (``const_type``).
- A node with several used outputs is a *tuple class* (its e-node carries ``_outputs = n``)
  read through ``Proj{index}`` e-nodes; a node whose only used output is its first is lowered
  as a plain single-output e-node.
- Class data, per analysis name: ``"shape"`` -> ``TensorType`` (``TupleType`` for tuple
  classes, ``None`` when unknown); ``"const"`` -> a weight or ``None``: an ``np.ndarray``,
  or for a folded value over ``DEFER_BYTES`` a ``Deferred`` one (its type from inference,
  computed when a guard reads it or the extracted graph keeps it; inference never sees its
  value); ``"sym"`` ->
  ``ir.symbolic.SymInts`` for small int tensors computed from shapes (dynamic dims kept as
  symbols, so a Reshape target built from ``Shape(x)`` still gives a known output type).
- A ``TermContext`` (registry, opset, graph input types, folding policy) makes each e-graph a
  graph is lowered into: a ``TermEGraph``, whose ``ctx`` is that context, so rule code can add
  ops with the right schema defaults (``context_of(egraph)`` for a plain ``EGraph`` argument).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import AnalysisConflict, ConstantAnalysis, EGraph, ENode, ShapeAnalysis, make_attrs
from ..errors import GeError
from ..ir.formats import ND
from ..ir.graph import TensorType
from ..ir.registry import NONDETERMINISTIC, Call, OpSchema, Registry, default_registry
from ..ir.symbolic import SYM_OPS, SymInts, of_array, sym_eval, sym_output_type
from ..ir.weights import DEFER_BYTES, Deferred, Weight, materialize
from .tensor import ConstTensor

INPUT, CONST, PROJ, ABSENT = "Input", "Const", "Proj", "Absent"
LEAVES = frozenset({INPUT, CONST, ABSENT})
OUTPUTS_ATTR = "_outputs"
SHAPE, VALUE, SYM = "shape", "const", "sym"

SMALL_FOLD_BYTES = 64 << 10  # any constant op with an output this small folds
MAX_FOLD_BYTES = 64 << 20  # never fold an output above this
CONST_WINDOW = 4096  # elements of a shape-like value kept for inference without folding


@dataclass(frozen=True, slots=True)
class TupleType:
    """The type of a tuple class: one entry per output (``None`` when unknown)."""

    items: tuple[TensorType | None, ...]


def split_op(qualified: str) -> tuple[str, str]:
    """``"ge.FusedConv"`` -> ``("ge", "FusedConv")``; ``"Conv"`` -> ``("", "Conv")``."""
    domain, _, op = qualified.rpartition(".")
    return domain, op


def hashable_attr(value: Any) -> Hashable:
    """An IR attribute value as an e-node attribute value (arrays become ``ConstTensor``)."""
    if isinstance(value, np.ndarray):
        return ConstTensor(value)
    if isinstance(value, list):
        return tuple(hashable_attr(v) for v in value)
    return value  # type: ignore[no-any-return]


def ir_attr(value: Any) -> Any:
    """An e-node attribute value back as an IR attribute value."""
    return value.array if isinstance(value, ConstTensor) else value


# mypy cannot follow the package-dir mapping that installs engine/ as gerules.engine, so
# to `mypy gerules engine` the engine's classes are Any here (tests/engine/test_typing.py
# checks the engine itself strictly, under its installed name)
class TermEGraph(EGraph):  # type: ignore[misc]
    """An e-graph of IR terms: the engine's ``EGraph`` with the ``TermContext`` it was made by."""

    def __init__(self, ctx: TermContext, analyses: Sequence[Any], *,
                 explanations: bool = True) -> None:
        super().__init__(analyses, explanations=explanations)
        self.ctx = ctx


def context_of(egraph: EGraph) -> TermContext:
    """The context of an e-graph made by ``TermContext.new_egraph``."""
    if isinstance(egraph, TermEGraph):
        return egraph.ctx
    raise LookupError("this e-graph holds no IR terms (make it with TermContext.new_egraph)")


class TermContext:
    """The IR side of the e-graph: schemas, inference, evaluation and node construction."""

    def __init__(self, registry: Registry | None = None, opset: Mapping[str, int] | None = None,
                 inputs: Mapping[str, TensorType] | None = None, *, fold: bool = True) -> None:
        self.registry = registry or default_registry()
        self.opset = dict(opset or {"": 17})
        self.inputs = dict(inputs or {})
        self.fold = fold
        self._schemas: dict[str, OpSchema] = {}
        self._calls: dict[tuple[str, Any, int], Call] = {}

    # ------------------------------------------------------------ e-graph creation
    def new_egraph(self, *, explanations: bool = True) -> TermEGraph:
        shape = ShapeAnalysis(self.infer, join_types, name=SHAPE,
                              conflicts=(AnalysisConflict,))
        const = _ConstAnalysis(self.evaluate, self.make_const, _nbytes, name=VALUE,
                               max_bytes=MAX_FOLD_BYTES, const_op=CONST)
        return TermEGraph(self, [shape, _SymAnalysis(self), const], explanations=explanations)

    # ------------------------------------------------------------ schemas and calls
    def schema(self, op: str) -> OpSchema:
        found = self._schemas.get(op)
        if found is None:
            domain, name = split_op(op)
            found = self.registry.get(name, domain, self.opset.get(domain))
            self._schemas[op] = found
        return found

    def call(self, enode: ENode, num_outputs: int | None = None) -> Call:
        n = num_outputs if num_outputs is not None else int(enode.get(OUTPUTS_ATTR, 1))
        key = (enode.op, enode.attrs, n)
        found = self._calls.get(key)
        if found is None:
            attrs = {k: ir_attr(v) for k, v in enode.attrs if k != OUTPUTS_ATTR}
            found = Call(attrs, n)
            self._calls[key] = found
        return found

    def op_attrs(self, op: str, attrs: Mapping[str, Any]) -> tuple[tuple[str, Hashable], ...]:
        """Attributes for a new ``op`` e-node: validated, defaults applied, made hashable."""
        resolved = self.schema(op).resolve({k: v for k, v in attrs.items()
                                            if k != OUTPUTS_ATTR})
        if OUTPUTS_ATTR in attrs:
            resolved[OUTPUTS_ATTR] = attrs[OUTPUTS_ATTR]
        made: tuple[tuple[str, Hashable], ...] = make_attrs(
            {k: hashable_attr(v) for k, v in resolved.items()})
        return made

    # ------------------------------------------------------------ analyses
    def infer(self, egraph: EGraph, enode: ENode) -> TensorType | TupleType | None:
        op = enode.op
        if op == CONST:
            return const_type(enode)
        if op == INPUT:
            return self.inputs.get(enode.get("name"))
        if op == ABSENT:
            return None
        if op == PROJ:
            tup = egraph.data(enode.children[0], SHAPE)
            index = int(enode.get("index"))
            if isinstance(tup, TupleType) and index < len(tup.items):
                return tup.items[index]
            return None
        return self._infer_op(egraph, enode)

    def _infer_op(self, egraph: EGraph, enode: ENode) -> TensorType | TupleType | None:
        schema = self.schema(enode.op)
        types = [_tensor_type(egraph.data(c, SHAPE)) for c in enode.children]
        consts = [_known(egraph.data(c, VALUE)) for c in enode.children]
        n = int(enode.get(OUTPUTS_ATTR, 1))
        call = self.call(enode, n)
        try:
            out = list(schema.infer(types, consts, call))
        except (GeError, ValueError, TypeError, IndexError, KeyError, AssertionError):
            return None
        if enode.has(OUTPUTS_ATTR):
            return TupleType(tuple(out[:n]) + (None,) * max(0, n - len(out)))
        if not out:
            return None
        if "." in enode.op:
            return out[0]
        return sym_output_type(enode.op, call.attrs, out[0], types,
                               self._child_syms(egraph, enode))

    # ------------------------------------------------------------ symbolic shape values
    def sym(self, egraph: EGraph, enode: ENode) -> SymInts | None:
        """The symbolic value of a small int tensor (``ir.symbolic``), or ``None``."""
        op = enode.op
        if op == CONST:
            return of_array(_known(enode.get("value").array))
        if op in (INPUT, ABSENT, PROJ) or "." in op or enode.has(OUTPUTS_ATTR):
            return None
        if op not in SYM_OPS:
            return None
        types = [_tensor_type(egraph.data(c, SHAPE)) for c in enode.children]
        return sym_eval(op, self.call(enode, 1).attrs, self._child_syms(egraph, enode), types)

    def _child_syms(self, egraph: EGraph, enode: ENode) -> list[SymInts | None]:
        return [egraph.data(c, SYM) or of_array(_known(egraph.data(c, VALUE)))
                for c in enode.children]

    def evaluate(self, egraph: EGraph, enode: ENode) -> Weight | None:
        op = enode.op
        if op == CONST:
            return enode.get("value").array  # type: ignore[no-any-return]
        if op in (INPUT, ABSENT) or not self.fold:
            return None
        if op == PROJ:
            return self._evaluate_proj(egraph, enode)
        if enode.has(OUTPUTS_ATTR):
            return None
        folded = self._fold_types(egraph, enode)
        if folded is not None:
            return folded
        sym = self.sym(egraph, enode)
        if sym is not None and sym.concrete:
            return sym.array()
        values = self._child_values(egraph, enode)
        if values is None:
            return None
        outs = self._run(egraph, enode, values, 1)
        return outs[0] if outs else None

    def _fold_types(self, egraph: EGraph, enode: ENode) -> np.ndarray | None:
        """Values that follow from the children's types alone (Shape of a static tensor)."""
        schema = self.schema(enode.op)
        if schema.fold_types is None:
            return None
        types = [_tensor_type(egraph.data(c, SHAPE)) for c in enode.children]
        try:
            out = schema.fold_types(types, self.call(enode, 1))
        except (GeError, ValueError, TypeError, IndexError, KeyError):
            return None
        return np.asarray(out[0]) if out else None

    def _evaluate_proj(self, egraph: EGraph, enode: ENode) -> Weight | None:
        index = int(enode.get("index"))
        for node in egraph.nodes(enode.children[0]):
            values = self._child_values(egraph, node)
            if values is not None:
                outs = self._run(egraph, node, values, int(node.get(OUTPUTS_ATTR, 1)))
                return outs[index] if outs and index < len(outs) else None
        return None

    def _child_values(self, egraph: EGraph, enode: ENode) -> list[Weight | None] | None:
        values: list[Weight | None] = []
        for c in enode.children:
            if egraph.data(c, SHAPE) is None and any(n.op == ABSENT for n in egraph.nodes(c)):
                values.append(None)
                continue
            v = egraph.data(c, VALUE)
            if v is None:
                return None
            values.append(v)
        schema = self.schema(enode.op)
        if schema.has(NONDETERMINISTIC):
            return None
        return values

    def _run(self, egraph: EGraph, enode: ENode, values: Sequence[Weight | None], n: int
             ) -> list[Weight] | None:
        schema = self.schema(enode.op)
        budget = max(SMALL_FOLD_BYTES, sum(v.nbytes for v in values if v is not None))
        call = self.call(enode, n)
        try:
            types = [None if v is None else TensorType(v.dtype.name, v.shape) for v in values]
            held = [_tensor_type(egraph.data(c, SHAPE)) for c in enode.children]
            if any(t is not None and t.format != ND for t in held):
                types = held  # formatted values are physical arrays: their types say how
            out_types = schema.infer(types, [_known(v) for v in values], call)
            if any((t.nbytes() or MAX_FOLD_BYTES + 1) > min(budget, MAX_FOLD_BYTES)
                   for t in out_types):
                return None  # Tile / Expand / ConstantOfShape never blow a model up
            call = Call(call.attrs, call.num_outputs, call.node, tuple(types))
            if n == 1 and len(out_types) == 1 and _deferrable(out_types[0], enode):
                return [_deferred(schema, call, out_types[0], values, enode)]
            arrays = [None if v is None else materialize(v) for v in values]
            return [np.asarray(o) for o in schema.kernel(arrays, call)]
        except (GeError, ValueError, TypeError, IndexError, KeyError, ArithmeticError,
                AssertionError, RuntimeError, MemoryError):
            return None

    @staticmethod
    def make_const(value: Weight, t: TensorType | None = None) -> ENode:
        return const_node(value, t)


class _ConstAnalysis(ConstantAnalysis):  # type: ignore[misc]  # Any to mypy: see TermEGraph
    """The engine's constant folding, with constants of blocked formats kept as such: the
    folded value of a FRACTAL_Z class is its physical array, and its ``Const`` carries the
    class's format and logical shape (``const_node``)."""

    def modify(self, egraph: EGraph, class_id: int) -> None:
        value = egraph.data(class_id, self.name)
        if value is None or any(n.op == self.const_op for n in egraph.nodes(class_id)):
            return
        t = _tensor_type(egraph.data(class_id, SHAPE))
        const = egraph.add(const_node(value, t))
        egraph.union(class_id, const, reason=f"analysis:{self.name}")


def _known(value: Weight | None) -> np.ndarray | None:
    """A value inference may read: a deferred one is not computed for it."""
    return None if isinstance(value, Deferred) else value


def _deferrable(out: TensorType, enode: ENode) -> bool:
    """A folded output worth deferring: static, over ``DEFER_BYTES``, and a node whose
    attributes name it fully (no tensor attributes)."""
    size = out.nbytes()
    return (size is not None and size > DEFER_BYTES and out.physical_shape is not None
            and not any(isinstance(v, ConstTensor) for _, v in enode.attrs))


def _deferred(schema: OpSchema, call: Call, out: TensorType, values: Sequence[Weight | None],
              enode: ENode) -> Deferred:
    """``enode``'s folded output, computed later by its kernel with ``call`` (whose types say
    how formatted operands are held). A value in a blocked format is its physical array
    (``ir.formats``), so that is the shape declared."""
    def compute(*arrays: np.ndarray | None) -> np.ndarray:
        return np.asarray(schema.kernel(list(arrays), call)[0])

    shape = out.physical_shape
    assert shape is not None
    label = f"{enode.op}{dict(enode.attrs)!r}"
    formats = [ND if t is None else t.format for t in (*call.types, out)]
    if any(f != ND for f in formats):  # how operands and result are held is part of the value
        label += f"@{','.join(formats)}"
    return Deferred(out.dtype, [int(d) for d in shape], compute, values, label)


class _SymAnalysis:
    """The ``sym`` analysis: ``TermContext.sym`` per node; the first known value wins."""

    name = SYM

    def __init__(self, ctx: TermContext) -> None:
        self.ctx = ctx

    def make(self, egraph: EGraph, enode: ENode) -> SymInts | None:
        return self.ctx.sym(egraph, enode)

    def merge(self, a: SymInts | None, b: SymInts | None) -> tuple[SymInts | None, bool, bool]:
        if a is None:
            return b, b is not None, False
        return a, False, b is None

    def modify(self, egraph: EGraph, class_id: int) -> None:
        return None


def const_node(value: Weight, t: TensorType | None = None) -> ENode:
    """A ``Const`` leaf; with ``t`` in a blocked format whose physical shape ``value`` has, it
    carries ``t``'s format and logical shape (a plain ``t`` adds nothing)."""
    tensor = ConstTensor(value)
    if t is None or t.format == ND or t.shape is None:
        return ENode(CONST, (("value", tensor),), ())
    if tuple(t.physical_shape or ()) != tuple(tensor.array.shape):
        raise ValueError(f"a {t} constant is held as {list(t.physical_shape or ())}, got "
                         f"{list(tensor.array.shape)}")
    return ENode(CONST, (("format", t.format), ("shape", tuple(int(d) for d in t.shape)),
                         ("value", tensor)), ())


def const_type(enode: ENode) -> TensorType:
    """The type of a ``Const`` leaf: its array's, or its logical shape in its format."""
    arr = enode.get("value").array
    fmt = enode.get("format")
    if fmt is None:
        return TensorType(arr.dtype.name, tuple(int(d) for d in arr.shape))
    return TensorType(arr.dtype.name, tuple(enode.get("shape")), str(fmt))


def _nbytes(value: Any) -> int:
    return int(getattr(value, "nbytes", 0))


def _tensor_type(data: Any) -> TensorType | None:
    return data if isinstance(data, TensorType) else None


def join_types(a: Any, b: Any) -> Any:
    """Join two classes' types; raises ``AnalysisConflict`` when they cannot be one tensor."""
    if a is None or a == b:
        return b if a is None else a
    if b is None:
        return a
    if isinstance(a, TupleType) or isinstance(b, TupleType):
        if not (isinstance(a, TupleType) and isinstance(b, TupleType)) or len(a.items) != len(
                b.items):
            raise AnalysisConflict(f"{a} vs {b}")
        return TupleType(tuple(join_types(x, y) for x, y in zip(a.items, b.items, strict=True)))
    if a.dtype != b.dtype:
        raise AnalysisConflict(f"dtype {a.dtype} vs {b.dtype}")
    if a.format != b.format:
        raise AnalysisConflict(f"format {a.format_name} vs {b.format_name}")
    if a.shape is None or b.shape is None:
        return a if b.shape is None else b
    if len(a.shape) != len(b.shape):
        raise AnalysisConflict(f"shape {a} vs {b}")
    dims = []
    for x, y in zip(a.shape, b.shape, strict=True):
        if isinstance(x, int) and isinstance(y, int) and x != y:
            raise AnalysisConflict(f"shape {a} vs {b}")
        dims.append(x if isinstance(x, int) or x != "?" and not isinstance(y, int) else y)
    joined = TensorType(a.dtype, tuple(dims), a.format)
    return a if joined == a else joined


# ---------------------------------------------------------------- read helpers for rules
def class_type(egraph: EGraph, cid: int) -> TensorType | TupleType | None:
    return egraph.data(cid, SHAPE)  # type: ignore[no-any-return]


def class_value(egraph: EGraph, cid: int) -> Weight | None:
    return egraph.data(cid, VALUE)  # type: ignore[no-any-return]


def add_const(egraph: EGraph, value: Weight, t: TensorType | None = None) -> int:
    """Add a constant (held in ``t``'s format when ``t`` is a blocked one)."""
    cid: int = egraph.add(const_node(value if isinstance(value, Deferred) else np.asarray(value),
                                     t))
    return cid


def add_op(egraph: EGraph, op: str, children: Sequence[int],
           attrs: Mapping[str, Any] | None = None) -> int:
    """Add ``op(children) {attrs}`` with schema defaults applied; returns its class."""
    ctx = context_of(egraph)
    cid: int = egraph.add(ENode(op, ctx.op_attrs(op, attrs or {}), tuple(children)))
    return cid
