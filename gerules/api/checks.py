"""Checks a node gets when the builder adds it: arity and attribute kinds.

Invariants:
- Every failure is a ``GraphError`` whose place is the node (its name and qualified op), so
  ``str(error)`` reads ``node 'conv1' (Conv): ...`` as the loader's errors do.
- ``attribute`` returns the value in the canonical form the IR stores for its ``AttrSpec``
  kind (ints as a tuple of int, a float as float, a tensor as an array); it never guesses:
  a float for an ``int``, a single number for ``ints`` or a list for ``string`` is refused.
- ``attributes`` drops ``None`` values (an attribute left at its schema default), refuses
  unknown names with a did-you-mean and reports a missing required attribute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import GraphError
from ..ir import dtypes
from ..ir.attrs import AttrValue
from ..ir.graph import Graph
from ..ir.registry import AttrSpec, OpSchema, Port, suggest

_KIND_WORDS = {
    "int": "an int", "float": "a float", "string": "a str", "ints": "a list of int",
    "floats": "a list of float", "strings": "a list of str", "tensor": "a NumPy array",
    "graph": "a Graph (a subgraph)",
}


def ports_text(schema: OpSchema) -> str:
    """``X, W, B?`` for the op's inputs (``?`` optional, ``...`` variadic)."""
    words = [p.name + ("?" if p.optional else "") + ("..." if p.variadic else "")
             for p in schema.inputs]
    return ", ".join(words) or "no inputs"


def check_arity(schema: OpSchema, inputs: Sequence[str], outputs: int, node: str) -> None:
    """Raise when the node has too few or too many inputs or outputs, naming the port."""
    place = {"node": node, "op": schema.qualified_op}
    for i, name in enumerate(inputs):
        port = _port(schema, i)
        if port is not None and not name and not port.optional:
            raise GraphError(f"required input '{port.name}' is missing "
                             f"({schema.qualified_op} takes {ports_text(schema)})", **place)
    if len(inputs) < schema.min_inputs:
        port = schema.inputs[min(len(inputs), len(schema.inputs) - 1)]
        raise GraphError(f"required input '{port.name}' is missing ({schema.qualified_op} "
                         f"takes {ports_text(schema)})", **place)
    hi = schema.max_inputs
    if hi is not None and len(inputs) > hi:
        raise GraphError(f"takes at most {hi} inputs ({ports_text(schema)}), got "
                         f"{len(inputs)}", **place)
    check_outputs(schema, outputs, node)


def check_outputs(schema: OpSchema, count: int, node: str) -> None:
    """Raise unless the op can give ``count`` outputs."""
    top = schema.max_outputs
    if count >= 1 and (top is None or count <= top):
        return
    gives = "one or more" if top is None else ("1" if top == 1 else f"1 to {top}")
    raise GraphError(f"asked for {count} outputs; {schema.qualified_op} gives {gives}",
                     node=node, op=schema.qualified_op)


def _port(schema: OpSchema, index: int) -> Port | None:
    if index < len(schema.inputs):
        return schema.inputs[index]
    last = schema.inputs[-1] if schema.inputs else None
    return last if last is not None and last.variadic else None


def attributes(schema: OpSchema, given: Mapping[str, Any], node: str) -> dict[str, AttrValue]:
    """The given attributes checked against the schema and put in canonical form."""
    place = {"node": node, "op": schema.qualified_op}
    out: dict[str, AttrValue] = {}
    for name, value in given.items():
        spec = schema.attrs.get(name)
        if spec is None:
            hint = suggest(name, schema.attrs)
            known = ", ".join(schema.attrs) or "none"
            raise GraphError(f"{schema.qualified_op} has no attribute '{name}'{hint} "
                             f"(attributes: {known})", **place)
        if value is not None:
            out[name] = attribute(spec, value, schema.qualified_op, node)
    for spec in schema.attrs.values():
        if spec.required and spec.name not in out:
            raise GraphError(f"attribute '{spec.name}' ({spec.kind}) is required", **place)
    return out


def attribute(spec: AttrSpec, value: Any, op: str, node: str) -> AttrValue:
    """One attribute value in canonical form, or a ``GraphError`` naming node and attribute."""
    converted: AttrValue | None = _CONVERT[spec.kind](value)
    if converted is None:
        raise GraphError(f"attribute '{spec.name}' expects {_KIND_WORDS[spec.kind]} "
                         f"({spec.kind}), got {_shown(value)}", node=node, op=op)
    return converted


def _shown(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype.name}{list(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _int(value: Any) -> int | None:
    if isinstance(value, bool | int | np.integer | np.bool_):
        return int(value)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    return None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _listed(value: Any, one: Any) -> tuple[Any, ...] | None:
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            return None
        value = value.tolist()
    if not isinstance(value, list | tuple):
        return None
    items = [one(v) for v in value]
    return None if any(v is None for v in items) else tuple(items)


def _tensor(value: Any) -> np.ndarray | None:
    if not isinstance(value, np.ndarray | np.generic):
        return None
    array = np.asarray(value)
    return array if array.dtype.name in dtypes.ONNX_CODES else None


_CONVERT: dict[str, Any] = {
    "int": _int, "float": _float, "string": _string, "tensor": _tensor,
    "ints": lambda v: _listed(v, _int), "floats": lambda v: _listed(v, _float),
    "strings": lambda v: _listed(v, _string),
    "graph": lambda v: v if isinstance(v, Graph) else None,
}
