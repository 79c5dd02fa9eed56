"""Names the builder gives and reads: domains and opsets, node outputs, unnamed dims.

Invariants:
- Domains are written ``""`` (ai.onnx, also spelled ``"ai.onnx"``) or ``"ge"``; an opset
  version is within what the registry's schemas are written against (``MAX_OPSET``).
- A node's single output is named like the node; several outputs are ``<node>.<port>``
  (``<port><k>`` for a variadic port); a constant made from an op input is
  ``<node>.<port>``; a dim nobody named is ``<tensor>_d<axis>``, as the ONNX reader names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import ModelError, UsageError
from ..ir.graph import Dim, TensorType
from ..ir.registry import MAX_OPSET, OpSchema, Port

DEFAULT_OPSET = 21
"""The ai.onnx opset a builder uses unless told otherwise (onnxruntime runs it)."""
DOMAINS = {"": "", "ai.onnx": "", "ge": "ge"}


def opsets(opset: int | Mapping[str, int]) -> dict[str, int]:
    """``{domain: version}`` from an int (ai.onnx) or a mapping, checked."""
    given = {"": opset} if isinstance(opset, int) else dict(opset)
    out: dict[str, int] = {}
    for domain, version in given.items():
        if domain not in DOMAINS:
            raise UsageError(f"opset: unsupported domain '{domain}' (supported: ai.onnx, ge)")
        top = MAX_OPSET[DOMAINS[domain]]
        if not isinstance(version, int) or not 1 <= version <= top:
            raise UsageError(f"opset: {DOMAINS[domain] or 'ai.onnx'} version must be 1 to "
                             f"{top}, got {version!r}")
        out[DOMAINS[domain]] = version
    out.setdefault("", DEFAULT_OPSET)
    return out


def split_op(op: str, domain: str | None) -> tuple[str, str]:
    """``(domain, op)`` from ``"ge.FusedConv"`` or ``"Conv"`` and ``domain=``."""
    if not isinstance(op, str) or not op:
        raise UsageError(f"op must be an op name like 'Conv', got {op!r}")
    prefix, _, name = op.rpartition(".")
    if prefix and domain is not None and DOMAINS.get(prefix) != DOMAINS.get(domain):
        raise UsageError(f"op '{op}' names domain '{prefix}' but domain='{domain}' was given")
    chosen = prefix or domain or ""
    if chosen not in DOMAINS:
        raise ModelError(f"unsupported domain '{chosen}' (supported: ai.onnx, ge)", op=op)
    return DOMAINS[chosen], name


def input_dim(d: object, axis: int, tensor: str) -> Dim:
    """A graph input's dim: an int >= 0, a symbol, or ``None`` for a fresh symbol."""
    if d is None:
        return f"{tensor}_d{axis}"
    if isinstance(d, str) and d:
        return d
    if isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0:
        return int(d)
    raise UsageError(f"input '{tensor}': dim {axis} must be an int >= 0, a name or None, "
                     f"got {d!r}", tensor=tensor)


def output_names(schema: OpSchema, node: str, count: int) -> list[str]:
    """The names of ``count`` outputs of ``node``."""
    if count == 1:
        return [node]
    return [f"{node}.{port_name(schema.outputs, k)}" for k in range(count)]


def port_name(ports: Sequence[Port], index: int) -> str:
    """The name of port ``index``; ``<name><index>`` for a variadic last port."""
    if not ports:
        return f"input{index}"
    port = ports[min(index, len(ports) - 1)]
    return f"{port.name}{index}" if port.variadic else port.name


def named_dims(t: TensorType, tensor: str) -> TensorType:
    """Unknown dims (``"?"``) named ``<tensor>_d<axis>``, as the ONNX reader names them."""
    if t.shape is None or "?" not in t.shape:
        return t
    dims = tuple(f"{tensor}_d{k}" if d == "?" else d for k, d in enumerate(t.shape))
    return TensorType(t.dtype, dims)
