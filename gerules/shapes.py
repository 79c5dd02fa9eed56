"""Shape overrides checked before any work: every gear infers, or the error names the fix.

``check_gears(graph, gears, exported)`` runs shape inference on the graph once per gear (its
symbolic dims bound), which takes a fraction of a second even for BERT-base, so a conversion
that cannot work fails before optimizing and planning, not deep inside them. When a gear fails
it looks for what an exporter does when it traces a model at one batch size: a constant
Reshape target whose first entry is that size (``[1, 128, -1]``). It names those nodes and
the two fixes: re-export with dynamic axes, or ``--fix_batch_dims``.

``fix_batch_dims(graph, gears, exported)`` rewrites those targets: the first entry becomes 0
("copy the input's dim", when the input's first dim is the varying one) or -1 (when the target
has no -1 yet). The rewrite is accepted only when shape inference proves it: every gear infers,
and at the exported size every tensor has exactly the type it had before (the model computes
what it computed).

Invariants: nothing here changes a graph unless asked (``fix_batch_dims``); every failure is
a ``ModelError`` naming a node, with the gear and the fix in its text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .errors import GeError, ModelError
from .ir.dims import bind_dims
from .ir.graph import Graph, Node
from .ir.registry import Registry
from .ir.verify import verify

FIX_FLAG = "--fix_batch_dims"
RESHAPE_FIXES = 5  # nodes named in a message


@dataclass(frozen=True, slots=True)
class HardCoded:
    """A Reshape whose constant target fixes a varying dim to its exported size."""

    node: Node
    target: str  # the constant's name
    value: tuple[int, ...]
    symbol: str
    exported: int
    copy: bool  # the data input's first dim is the symbol: 0 copies it


def gear_name(dims: Mapping[str, int]) -> str:
    return ",".join(f"{k}={n}" for k, n in sorted(dims.items())) or "the static shapes"


def check_gears(graph: Graph, gears: Sequence[Mapping[str, int]],
                exported: Mapping[str, int], registry: Registry | None = None) -> None:
    """Raise ``ModelError`` when a gear does not infer (see the module docstring)."""
    for dims in gears:
        if not dims:
            continue
        try:
            verify(bind_dims(graph, dims), registry)
        except GeError as e:
            raise _explain(graph, dims, exported, e) from None


def _explain(graph: Graph, dims: Mapping[str, int], exported: Mapping[str, int],
             error: GeError) -> ModelError:
    found = hard_coded(graph, exported)
    if not found:
        e = ModelError(f"with {gear_name(dims)}: {error.message}", node=error.node, op=error.op,
                       tensor=error.tensor)
        return e
    first = found[0]
    names = ", ".join(f"'{h.node.label}'" for h in found[:RESHAPE_FIXES])
    more = f" and {len(found) - RESHAPE_FIXES} more" if len(found) > RESHAPE_FIXES else ""
    return ModelError(
        f"cannot take {gear_name(dims)}: its target shape '{first.target}' = "
        f"{list(first.value)} hard-codes dim '{first.symbol}' as {first.exported}, the size the "
        f"model was exported with ({len(found)} Reshape(s) do: {names}{more}). Re-export the "
        f"model with that dim dynamic (torch.onnx.export(..., dynamic_axes={{input: {{0: "
        f"'{first.symbol}'}}}})), or add {FIX_FLAG} to rewrite those targets (checked by shape "
        f"inference for every size)", node=first.node.label, op=first.node.qualified_op)


def hard_coded(graph: Graph, exported: Mapping[str, int]) -> list[HardCoded]:
    """Reshapes whose constant target's first entry is a varying dim's exported size, read in
    the graph with symbolic dims (shape-inferred)."""
    consts = _constants(graph)
    found = []
    for node in graph.nodes:
        if node.op != "Reshape" or node.domain or len(node.inputs) < 2:
            continue
        value = consts.get(node.inputs[1])
        data = graph.type_of(node.inputs[0])
        if value is None or value.ndim != 1 or not value.size or data is None or not data.shape:
            continue
        first = data.shape[0]
        for symbol, size in exported.items():
            if int(value[0]) == size and _depends(first, symbol):
                found.append(HardCoded(node, node.inputs[1], tuple(int(v) for v in value),
                                       symbol, size, first == symbol))
                break
    return found


def _depends(dim: object, symbol: str) -> bool:
    """The dim is the symbol or an expression of it (symbolic inference writes products)."""
    return isinstance(dim, str) and (dim == symbol or symbol in dim.replace("*", " ").split())


def _constants(graph: Graph) -> dict[str, np.ndarray]:
    out = {k: np.asarray(v) for k, v in graph.initializers.items()}
    for node in graph.nodes:
        if node.op == "Constant" and not node.domain and "value" in node.attrs:
            out[node.outputs[0]] = np.asarray(node.attrs["value"])
    return out


def fix_batch_dims(graph: Graph, gears: Sequence[Mapping[str, int]],
                   exported: Mapping[str, int], registry: Registry | None = None
                   ) -> tuple[Graph, list[str]]:
    """The graph with hard-coded Reshape targets rewritten, proven by inference; and the
    names of the nodes rewritten (see the module docstring)."""
    found = hard_coded(graph, exported)
    if not found:
        return graph, []
    inits = dict(graph.initializers)
    nodes = {id(h.node): h for h in found}
    new_nodes = []
    for node in graph.nodes:
        h = nodes.get(id(node))
        if h is None:
            new_nodes.append(node)
            continue
        if not h.copy and -1 in h.value:
            raise ModelError(f"{FIX_FLAG} cannot rewrite its target {list(h.value)}: the input's "
                             f"first dim is not '{h.symbol}' itself and the target already has a "
                             "-1; re-export the model with that dim dynamic",
                             node=node.label, op=node.qualified_op)
        fixed = np.array([0 if h.copy else -1, *h.value[1:]], dtype=np.int64)
        name = _fresh(f"{h.target}.{h.symbol}", inits, graph)
        inits[name] = fixed
        new_nodes.append(replace(node, inputs=(node.inputs[0], name, *node.inputs[2:])))
    result = graph.replace(nodes=tuple(new_nodes), initializers=inits, value_info={})
    _prove(graph, result, gears, exported, registry)
    return verify(result, registry), [h.node.label for h in found]


def _fresh(name: str, inits: Mapping[str, object], graph: Graph) -> str:
    taken = set(inits) | {o for n in graph.nodes for o in n.outputs} | set(graph.input_names)
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name}.{k}"
    return out


def _prove(before: Graph, after: Graph, gears: Sequence[Mapping[str, int]],
           exported: Mapping[str, int], registry: Registry | None) -> None:
    """Every gear infers, and at the exported sizes every tensor keeps its type."""
    for dims in gears:
        try:
            verify(bind_dims(after, dims), registry)
        except GeError as e:
            raise ModelError(f"{FIX_FLAG} cannot make {gear_name(dims)} work: {e.message}",
                             node=e.node, op=e.op, tensor=e.tensor) from None
    at = {s: n for s, n in exported.items() if s in _symbols(before)}
    if not at:
        return
    old, new = verify(bind_dims(before, at), registry), verify(bind_dims(after, at), registry)
    for name, v in old.value_info.items():
        w = new.value_info.get(name)
        if w is not None and w.type != v.type:
            raise ModelError(f"{FIX_FLAG} would change what the model computes at "
                             f"{gear_name(at)}: tensor '{name}' becomes {w.type} instead of "
                             f"{v.type}", tensor=name)


def _symbols(graph: Graph) -> set[str]:
    return {d for v in graph.inputs for d in v.shape or () if isinstance(d, str)}
