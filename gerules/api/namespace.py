"""``builder.ops``: one Python function per registry op, made from the op's schema.

``g.ops.Conv(x, w, strides=[2, 2])`` is ``g.op("Conv", x, w, strides=[2, 2])``; the function
carries the schema as a signature (inputs positional or by port name, attributes keyword-only
with their defaults, then ``name`` and ``outputs``) and a docstring (the schema's doc, inputs,
outputs, attributes with kinds and defaults), so ``help(g.ops.Conv)`` and IDEs show them.
``g.ops.ge.FusedConv`` reaches domain ``ge``.

Invariants:
- The schema is the one in force at the builder's opset for that domain; a name the registry
  does not know raises ``UnknownOpError`` (a ``GraphError`` and an ``AttributeError``, so
  ``hasattr`` is ``False``) with a did-you-mean; ``dir(g.ops)`` lists the ops available.
- The function adds nothing itself: it reorders keyword inputs into port order and calls
  ``GraphBuilder.op``, so both spellings give the same node, checks and errors.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

from ..errors import GeError, GraphError, UsageError
from ..ir.registry import AttrSpec, OpSchema, Registry

if TYPE_CHECKING:
    from .builder import GraphBuilder
    from .handles import Input, Tensor

_P = inspect.Parameter
_ANNOTATIONS = {"int": "int", "float": "float", "string": "str", "ints": "Sequence[int]",
                "floats": "Sequence[float]", "strings": "Sequence[str]",
                "tensor": "numpy.ndarray", "graph": "gerules.ir.graph.Graph"}
_RESERVED = frozenset({"name", "outputs"})


class UnknownOpError(GraphError, AttributeError):
    """``g.ops.<Name>`` for a name the registry does not know at the builder's opset."""


class OpFunction(Protocol):
    """The type of ``g.ops.<Op>``: inputs, then attributes as keywords."""

    @overload
    def __call__(self, *inputs: Input, outputs: Literal[1] = 1, name: str | None = None,
                 **attrs: Any) -> Tensor: ...

    @overload
    def __call__(self, *inputs: Input, outputs: int | Sequence[str],
                 name: str | None = None, **attrs: Any) -> tuple[Tensor, ...]: ...


class Ops:
    """The ops of one domain as functions that add a node to ``builder``."""

    def __init__(self, builder: GraphBuilder, domain: str = "") -> None:
        self._builder = builder
        self._domain = domain
        self._cache: dict[str, OpFunction] = {}

    @property
    def ge(self) -> Ops:
        """The fused NPU ops of domain ``ge`` (``g.ops.ge.FusedConv(...)``)."""
        return Ops(self._builder, "ge")

    def __getattr__(self, name: str) -> OpFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._cache:
            self._cache[name] = op_function(self._builder, self._schema(name))
        return self._cache[name]

    def _schema(self, name: str) -> OpSchema:
        registry = self._builder.registry
        try:
            return registry.get(name, self._domain, self._builder.opset_of(self._domain))
        except GeError as e:
            raise UnknownOpError(e.message, op=f"{self._domain}.{name}" if self._domain
                                 else name) from None

    def __dir__(self) -> list[str]:
        return available(self._builder.registry, self._domain,
                         self._builder.opset_of(self._domain))

    def __repr__(self) -> str:
        return f"<ops of domain '{self._domain or 'ai.onnx'}' for graph " \
               f"'{self._builder.name}'>"


def available(registry: Registry, domain: str, version: int) -> list[str]:
    """The ops of ``domain`` that exist at opset ``version``, sorted."""
    return sorted(op for d, op in registry.ops(domain)
                  if registry.versions(op, d)[0].since_version <= version)


def op_function(builder: GraphBuilder, schema: OpSchema) -> OpFunction:
    """A function adding ``schema``'s op to ``builder``, with its signature and docstring."""
    params = parameters(schema)
    ports = {p.name: k for k, p in enumerate(params[: len(schema.inputs)])
             if p.kind is _P.POSITIONAL_OR_KEYWORD}

    def call(*args: Input, **kwargs: Any) -> Any:
        inputs = place_inputs(schema, ports, list(args), kwargs)
        return builder.op(schema.op, *inputs, domain=schema.domain, **kwargs)

    call.__name__ = call.__qualname__ = schema.op
    call.__doc__ = docstring(schema)
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation="Tensor")
    op: OpFunction = call
    return op


def place_inputs(schema: OpSchema, ports: dict[str, int], inputs: list[Any],
                 kwargs: dict[str, Any]) -> list[Any]:
    """Inputs in port order: keyword inputs (popped from ``kwargs``) go to their port."""
    for pyname, index in ports.items():
        if pyname not in kwargs:
            continue
        if index < len(inputs):
            raise UsageError(f"{schema.qualified_op}: input '{pyname}' given twice "
                             "(by position and by name)")
        inputs.extend([None] * (index + 1 - len(inputs)))
        inputs[index] = kwargs.pop(pyname)
    return inputs


def parameters(schema: OpSchema) -> list[inspect.Parameter]:
    """Inputs (by position or port name; ``*name`` for a variadic port), then keyword-only
    attributes, ``name`` and ``outputs``."""
    taken = set(schema.attrs) | _RESERVED
    params: list[inspect.Parameter] = []
    defaulted = False
    for port in schema.inputs:
        pyname = _identifier(port.name, taken)
        taken.add(pyname)
        if port.variadic:
            params.append(_P(pyname, _P.VAR_POSITIONAL, annotation="Input"))
            continue
        defaulted = defaulted or port.optional
        params.append(_P(pyname, _P.POSITIONAL_OR_KEYWORD, annotation="Input",
                         default=None if defaulted else _P.empty))
    params.extend(_attr_param(spec) for spec in schema.attrs.values())
    params.append(_P("name", _P.KEYWORD_ONLY, default=None, annotation="str | None"))
    params.append(_P("outputs", _P.KEYWORD_ONLY, default=1,
                     annotation="int | Sequence[str]"))
    return params


def _attr_param(spec: AttrSpec) -> inspect.Parameter:
    default = _P.empty if spec.required else spec.default
    return _P(spec.name, _P.KEYWORD_ONLY, default=default,
              annotation=_ANNOTATIONS[spec.kind] + ("" if spec.required else " | None"))


def _identifier(name: str, taken: set[str]) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "input"
    if out[0].isdigit() or keyword.iskeyword(out):
        out = f"_{out}" if out[0].isdigit() else f"{out}_"
    while out in taken:
        out += "_"
    return out


def docstring(schema: OpSchema) -> str:
    """The op's doc, inputs, outputs and attributes, as ``help()`` shows them."""
    where = f"domain {schema.domain}" if schema.domain else "ai.onnx"
    lines = [f"{schema.doc or schema.op} ({where} {schema.op}, since opset "
             f"{schema.since_version}; NPU unit: {schema.unit}).", "",
             "Inputs: " + _ports(schema.inputs), "Outputs: " + _ports(schema.outputs)]
    if schema.attrs:
        lines += ["", "Attributes:"]
        lines += [f"    {_attr_line(s)}" for s in schema.attrs.values()]
    lines += ["", "Returns the output Tensor; with outputs=n (n > 1) a tuple of n Tensors."]
    return "\n".join(lines)


def _ports(ports: Sequence[Any]) -> str:
    words = [p.name + (" (optional)" if p.optional else "") + (" (variadic)" if p.variadic
                                                               else "") for p in ports]
    return ", ".join(words) or "none"


def _attr_line(spec: AttrSpec) -> str:
    if spec.required:
        return f"{spec.name} ({spec.kind}, required)"
    if spec.default is None:
        return f"{spec.name} ({spec.kind}, optional)"
    return f"{spec.name} ({spec.kind}) = {spec.default!r}"

