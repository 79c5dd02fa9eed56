"""``verify_plan``: prove that a memory plan is safe for its graph, order and streams.

It trusts nothing the planner decided; it re-derives lifetimes from the graph and checks:
- the order is a permutation of the nodes in which every input is defined before it is read;
- there is one stream id per position, each in ``range(stream_count)``;
- every node output (and nothing else) has a block, aligned, inside the arena;
- any two tensors whose bytes overlap are *ordered* (every access of one happens before the
  other's producer, under the streams' happens-before relation) or are *aliases*: the same
  offset and size, linked by view/in-place edges of the graph (see ``liveness``), and either
  holding the same content (the same last writer) or the older content is finished (every
  access happens before or at the node that overwrites it in place).
Failures raise ``PlanError`` naming the tensors or the node.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..ir.graph import Graph
from ..ir.registry import Registry, default_registry
from .liveness import Liveness, alias_sources, analyze
from .plan import MemoryPlan
from .streams import MAX_STREAMS
from .timeline import StreamOrder, Timeline


class PlanError(ModelError):
    """A memory plan that is inconsistent with its graph or unsafe to run."""


def verify_plan(graph: Graph, plan: MemoryPlan, registry: Registry | None = None) -> None:
    """Raise ``PlanError`` unless ``plan`` is safe for ``graph`` (see the module docstring)."""
    registry = registry or default_registry()
    check_order(graph, plan.order)
    check_streams(plan.streams, len(plan.order), plan.stream_count)
    live = analyze(graph, plan.order, plan.alignment)
    _check_blocks(live, plan)
    family, writer = _aliases(graph, live, plan, registry)
    hb = StreamOrder(graph, plan.order, plan.streams) if plan.stream_count > 1 else None
    tl = Timeline([t.first for t in live.tensors], [t.accesses for t in live.tensors], hb)
    _check_overlaps(live, plan, family, writer, tl)


def check_order(graph: Graph, order: tuple[int, ...]) -> None:
    """A permutation of the nodes in which every input is defined before it is read."""
    if sorted(order) != list(range(len(graph.nodes))):
        raise PlanError(f"the order lists {len(order)} positions that are not a permutation "
                        f"of the {len(graph.nodes)} nodes")
    defined = set(graph.input_names) | set(graph.initializers)
    for k in order:
        node = graph.nodes[k]
        for name in node.present_inputs():
            if name not in defined:
                raise PlanError(f"the order runs it before '{name}' is produced",
                                node=node.label, op=node.qualified_op)
        defined.update(node.outputs)


def check_streams(streams: tuple[int, ...], nodes: int, count: int) -> None:
    """One stream id per position, each in ``range(count)``."""
    if not 1 <= count <= MAX_STREAMS:
        raise PlanError(f"stream count {count} is outside 1..{MAX_STREAMS}")
    if len(streams) != nodes:
        raise PlanError(f"{len(streams)} stream ids for {nodes} nodes")
    bad = [s for s in streams if not 0 <= s < count]
    if bad:
        raise PlanError(f"stream id {bad[0]} is outside 0..{count - 1}")


def _check_blocks(live: Liveness, plan: MemoryPlan) -> None:
    a = plan.alignment
    if a < 1 or a & (a - 1) or a > 4096:
        raise PlanError(f"alignment {a} is not a power of two up to 4096")
    if plan.arena_bytes < 0:
        raise PlanError(f"arena size {plan.arena_bytes} is negative")
    for name in plan.offsets:
        if name not in live.index:
            raise PlanError("the plan places a tensor that no node produces", tensor=name)
    for t in live.tensors:
        off = plan.offsets.get(t.name)
        if off is None:
            raise PlanError("node output has no block in the plan", tensor=t.name)
        if off < 0 or off % a:
            raise PlanError(f"offset {off} is not a non-negative multiple of {a}", tensor=t.name)
        if off + t.nbytes > plan.arena_bytes:
            raise PlanError(f"block [{off}, {off + t.nbytes}) lies outside the arena of "
                            f"{plan.arena_bytes} bytes", tensor=t.name)


def _aliases(graph: Graph, live: Liveness, plan: MemoryPlan, registry: Registry
             ) -> tuple[list[int], list[int]]:
    """Family root and last writer (a position) per tensor, from the graph's alias edges."""
    family = list(range(len(live.tensors)))
    writer = [t.first for t in live.tensors]
    for k in plan.order:
        node = graph.nodes[k]
        if len(node.outputs) != 1:
            continue
        out = live.index[node.outputs[0]]
        for slot, kind in alias_sources(node, graph, registry):
            src = live.index.get(node.inputs[slot]) if slot < len(node.inputs) else None
            if src is None or not _same_block(live, plan, src, out):
                continue
            family[out] = family[src]
            writer[out] = writer[src] if kind == "view" else live.tensors[out].first
            break
    return family, writer


def _same_block(live: Liveness, plan: MemoryPlan, a: int, b: int) -> bool:
    ta, tb = live.tensors[a], live.tensors[b]
    return ta.nbytes == tb.nbytes and plan.offsets[ta.name] == plan.offsets[tb.name]


def _check_overlaps(live: Liveness, plan: MemoryPlan, family: list[int], writer: list[int],
                    tl: Timeline) -> None:
    idx = [i for i, t in enumerate(live.tensors) if t.nbytes > 0]
    idx.sort(key=lambda i: plan.offsets[live.tensors[i].name])
    starts = np.asarray([plan.offsets[live.tensors[i].name] for i in idx], dtype=np.int64)
    order = np.asarray(idx, dtype=np.int64)
    for rank, i in enumerate(idx):
        end = int(starts[rank]) + live.tensors[i].nbytes
        js = order[rank + 1: int(np.searchsorted(starts, end, side="left"))]
        if not len(js):
            continue
        for j in js[~tl.ordered(i, js)].tolist():
            if not _alias_ok(live, plan, family, writer, tl, i, j):
                raise _clash(live, plan, i, j)


def _alias_ok(live: Liveness, plan: MemoryPlan, family: list[int], writer: list[int],
              tl: Timeline, i: int, j: int) -> bool:
    if family[i] != family[j] or not _same_block(live, plan, i, j):
        return False
    if writer[i] == writer[j]:
        return True
    return tl.done_by(i, writer[j], inclusive=True) or tl.done_by(j, writer[i], inclusive=True)


def _clash(live: Liveness, plan: MemoryPlan, i: int, j: int) -> PlanError:
    a, b = live.tensors[i], live.tensors[j]
    oa, ob = plan.offsets[a.name], plan.offsets[b.name]
    return PlanError(f"tensors '{a.name}' [{oa}, {oa + a.nbytes}) and '{b.name}' "
                     f"[{ob}, {ob + b.nbytes}) overlap while both may be alive")
