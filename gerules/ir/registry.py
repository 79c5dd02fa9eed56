"""The op registry: one place that says what every op means.

Per ``(domain, op, since_version)`` an ``OpSchema`` holds the signature (inputs, outputs,
attributes with defaults), shape and dtype inference, a NumPy kernel and cost features. The
runtime, constant folding, rule checking and verification and the cost model all read it, so
an op is added in one place.

Invariants:
- ``Registry.get(op, domain, version)`` returns the schema with the largest
  ``since_version <= version``; a model's opset picks the semantics (Softmax at opset 11 and
  at opset 13 are different schemas).
- Kernels are pure: they never write into their inputs and return fresh or view arrays.
- ``infer`` and ``kernel`` agree: for inputs of the inferred types, the kernel's outputs have
  exactly the inferred dtype and (static) shape. The conformance tests check this.
- Failures inside ``infer`` or ``kernel`` raise ``ShapeError``/``KernelError``; callers add the
  node's name with ``GeError.with_place``.
- The default registry is built once and never changes; tests that need extra ops build their
  own ``Registry``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np

from ..errors import ModelError
from .attrs import Attrs, AttrValue
from .graph import TensorType
from .layout import ELEMENTWISE as ELEMENTWISE_RULE
from .layout import PLAIN, FormatRule, rule_of, wrap_infer, wrap_kernel, wrap_kernel_out

AttrKind = Literal["int", "float", "string", "ints", "floats", "strings", "tensor", "graph"]
Unit = Literal["cube", "vector", "scalar"]

# Traits an op may carry (strings, so rules and the cost model can read them as data).
ELEMENTWISE = "elementwise"  # output[i] depends only on inputs[i] (after broadcasting)
COMMUTATIVE = "commutative"  # the first two inputs may be swapped
INPLACE = "inplace"  # the output may reuse the first input's buffer
SHAPE_OP = "shape_op"  # moves or reinterprets data, no arithmetic (Reshape, Transpose...)
NONDETERMINISTIC = "nondeterministic"  # never constant-folded


@dataclass(frozen=True, slots=True)
class Call:
    """What a kernel or an inference function knows besides its operands."""

    attrs: Mapping[str, AttrValue]  # node attributes with schema defaults applied
    num_outputs: int = 1
    node: str = ""  # node name, for messages
    # the operands' logical types (formats included); kernels of ops that run on blocked
    # formats read them (``ir.layout``); empty: every operand is plain
    types: tuple[TensorType | None, ...] = ()


@dataclass(frozen=True, slots=True)
class AttrSpec:
    name: str
    kind: AttrKind
    default: AttrValue | None = None
    required: bool = False


@dataclass(frozen=True, slots=True)
class Port:
    """One input or output slot of an op."""

    name: str
    optional: bool = False
    variadic: bool = False  # the last port may repeat (Concat's inputs, Split's outputs)
    dtype: str | None = None  # the one element type this input takes (int64 for shapes, axes)


InferFn = Callable[[Sequence["TensorType | None"], Sequence["np.ndarray | None"], Call],
                   Sequence[TensorType]]
KernelFn = Callable[[Sequence["np.ndarray | None"], Call], Sequence[np.ndarray]]
# Computes the outputs into the given arrays (the planned dtypes and shapes, e.g. views of
# the runtime's arena) instead of returning new ones; an output shares memory with an input
# only for INPLACE ops, and then the kernel must read that input before writing over it.
KernelOutFn = Callable[[Sequence["np.ndarray | None"], Call, Sequence[np.ndarray]], None]
# For ops whose value follows from their operands' *types* alone (Shape, Size): the constant
# outputs, or None when the types are not static enough.
FoldTypesFn = Callable[[Sequence["TensorType | None"], Call], "Sequence[np.ndarray] | None"]
FlopsFn = Callable[[Sequence["TensorType | None"], Sequence[TensorType], Call], int]
# For ops whose NPU unit depends on the operands (Gather of a shape vector is AI CPU work,
# Gather of an embedding table is not): the unit for these input and output types.
UnitFn = Callable[[Sequence["TensorType | None"], Sequence[TensorType]], Unit]


@dataclass(frozen=True, slots=True)
class OpSchema:
    """Everything the project knows about one version of one op.

    ``infer(input_types, const_values, call)`` returns the output types; ``const_values[i]``
    is the array of input ``i`` when it is known at compile time (else ``None``), so Reshape
    and friends can infer static shapes. ``kernel(inputs, call)`` computes the outputs;
    ``kernel_out(inputs, call, outs)``, when an op has it, computes the same values into
    preallocated ``outs`` (no temporaries for the results: the runtime passes arena views);
    it runs under its caller's floating-point error state, which both runtimes set to ignore
    for a whole run (inf and NaN are values, as in onnxruntime), so the elementwise ones set
    none per call (a step right after a GEMM found NumPy's ``errstate`` cold and slow).
    ``flops`` estimates arithmetic work for the cost model (``None``: one op per output
    element, or zero for shape ops). ``fold_types`` gives outputs that follow from the input
    types alone (Shape of a static tensor is a constant).
    """

    op: str
    since_version: int
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    infer: InferFn
    kernel: KernelFn
    attrs: Mapping[str, AttrSpec] = field(default_factory=dict)
    domain: str = ""
    unit: Unit = "vector"
    traits: frozenset[str] = frozenset()
    flops: FlopsFn | None = None
    fold_types: FoldTypesFn | None = None
    doc: str = ""
    unit_of: UnitFn | None = None
    kernel_out: KernelOutFn | None = None
    body: Any = None  # the ir.composite.CompositeOp an op defined in .ger evaluates
    # which formats the operands may be in (``ir.layout``); None: ELEMENTWISE for ops with
    # that trait, PLAIN for the others. ``infer`` (and the kernels of native ops) are
    # wrapped with it on construction.
    formats: FormatRule | None = None

    def __post_init__(self) -> None:
        if rule_of(self.infer) is not None:
            return  # already wrapped (a copy of a schema)
        rule = self.formats or (ELEMENTWISE_RULE if ELEMENTWISE in self.traits else PLAIN)
        plain_infer = self.infer
        infer = wrap_infer(plain_infer, rule)
        object.__setattr__(self, "formats", rule)
        object.__setattr__(self, "infer", infer)
        if rule.converts:
            plain = self.kernel
            object.__setattr__(self, "kernel", wrap_kernel(plain, rule))
            if self.kernel_out is not None:
                object.__setattr__(self, "kernel_out", wrap_kernel_out(
                    self.kernel_out, plain, plain_infer, rule))

    @property
    def kind(self) -> str:
        """``built-in`` (ai.onnx), ``fused`` (a ge op with its own kernel) or ``composite``
        (defined by a body of other ops)."""
        if self.body is not None:
            return "composite"
        return "built-in" if not self.domain else "fused"

    @property
    def qualified_op(self) -> str:
        return f"{self.domain}.{self.op}" if self.domain else self.op

    @property
    def min_inputs(self) -> int:
        required = [i for i, p in enumerate(self.inputs) if not p.optional and not p.variadic]
        n = required[-1] + 1 if required else 0
        if self.inputs and self.inputs[-1].variadic and not self.inputs[-1].optional:
            n = max(n, len(self.inputs))
        return n

    @property
    def max_inputs(self) -> int | None:
        if self.inputs and self.inputs[-1].variadic:
            return None
        return len(self.inputs)

    @property
    def max_outputs(self) -> int | None:
        if self.outputs and self.outputs[-1].variadic:
            return None
        return len(self.outputs)

    def has(self, trait: str) -> bool:
        return trait in self.traits

    def unit_for(self, inputs: Sequence[TensorType | None],
                 outputs: Sequence[TensorType]) -> Unit:
        """The unit that runs this op on these types (``unit`` unless ``unit_of`` decides)."""
        if self.unit_of is None:
            return self.unit
        try:
            return self.unit_of(inputs, outputs)
        except (TypeError, ValueError, IndexError):
            return self.unit

    def resolve(self, attrs: Mapping[str, AttrValue]) -> dict[str, AttrValue]:
        """Node attributes with defaults filled in. Unknown or missing ones raise."""
        for name in attrs:
            if name not in self.attrs:
                hint = suggest(name, self.attrs)
                raise ModelError(f"{self.qualified_op} has no attribute '{name}'{hint}")
        out: dict[str, AttrValue] = {}
        for spec in self.attrs.values():
            if spec.name in attrs:
                out[spec.name] = attrs[spec.name]
            elif spec.required:
                raise ModelError(f"{self.qualified_op} needs attribute '{spec.name}'")
            elif spec.default is not None:
                out[spec.name] = spec.default
        return out

    def call(self, attrs: Mapping[str, AttrValue], num_outputs: int = 1, node: str = "",
             types: Sequence[TensorType | None] = ()) -> Call:
        return Call(self.resolve(attrs), num_outputs, node, tuple(types))


def suggest(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest choice, or ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class Registry:
    """Op schemas by ``(domain, op)``, each a list ordered by ``since_version``."""

    def __init__(self, schemas: Iterable[OpSchema] = ()) -> None:
        self._schemas: dict[tuple[str, str], list[OpSchema]] = {}
        for s in schemas:
            self.add(s)

    def add(self, schema: OpSchema) -> None:
        versions = self._schemas.setdefault((schema.domain, schema.op), [])
        if any(s.since_version == schema.since_version for s in versions):
            raise ValueError(f"{schema.qualified_op} v{schema.since_version} registered twice")
        versions.append(schema)
        versions.sort(key=lambda s: s.since_version)

    def get(self, op: str, domain: str = "", version: int | None = None) -> OpSchema:
        """The schema in force at opset ``version`` (latest when ``None``)."""
        versions = self._schemas.get((domain, op))
        if not versions:
            qualified = f"{domain}.{op}" if domain else op
            hint = suggest(op, [o for d, o in self._schemas if d == domain])
            raise ModelError(f"unknown op {qualified}{hint}")
        if version is None:
            return versions[-1]
        for s in reversed(versions):
            if s.since_version <= version:
                return s
        raise ModelError(
            f"op {versions[0].qualified_op} needs opset {versions[0].since_version} or newer; "
            f"the model declares opset {version}"
        )

    def has(self, op: str, domain: str = "") -> bool:
        return (domain, op) in self._schemas

    def extend(self, schemas: Iterable[OpSchema]) -> Registry:
        """A new registry with this one's schemas and ``schemas`` (this one is unchanged)."""
        out = Registry()
        out._schemas = {k: list(v) for k, v in self._schemas.items()}
        for s in schemas:
            out.add(s)
        return out

    def ops(self, domain: str | None = None) -> list[tuple[str, str]]:
        """All ``(domain, op)`` pairs, sorted."""
        return sorted(k for k in self._schemas if domain is None or k[0] == domain)

    def versions(self, op: str, domain: str = "") -> list[OpSchema]:
        return list(self._schemas.get((domain, op), []))

    def __iter__(self) -> Any:
        for versions in self._schemas.values():
            yield from versions


# The newest opset per domain that the registry's schemas are written against.
MAX_OPSET: dict[str, int] = {"": 28, "ge": 1, "ai.onnx.preview": 1,
                             "ai.onnx.preview.training": 1}


@cache
def default_registry() -> Registry:
    """The registry with every shipped op (built once, never mutated afterwards)."""
    from .ops import all_schemas

    return Registry(all_schemas())


def attrs_of(**kwargs: Any) -> Attrs:
    return Attrs(kwargs)
