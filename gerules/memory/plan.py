"""The memory planner: from a shape-inferred graph to a verified arena plan.

Invariants:
- A ``MemoryPlan`` gives every node output (and nothing else) an offset that is a multiple of
  ``alignment``; every block lies inside ``arena_bytes``; two tensors that may be alive at the
  same time under the plan's order and streams never overlap unless they are aliases (a view of
  the same bytes, or an in-place overwrite of an input that dies there). ``plan_memory`` checks
  its own result with ``verify_plan`` before returning it.
- Tensors that share a block form a *family*: a root, views of members, and in-place outputs
  whose input family is finished (every access happens before or at the overwriting node).
- The order is the graph's own or a memory-aware one, whichever gives the smaller arena; offsets
  come from two strategies (greedy by size, first fit), the smaller arena wins, ties go to the
  earlier candidate (file order, then greedy by size), so results are deterministic. Without
  reuse (``reuse=False``) every tensor gets its own block, one after the other.
- Figures are in aligned bytes: ``no_reuse`` (every tensor its own block), ``lower_bound`` (most
  bytes alive at once in the chosen order, with aliases), ``file_order_bound`` (the same for the
  graph's order without aliases: the bound a plain planner can reach at best), ``arena``,
  ``weights`` (unique initializer bytes) and ``inputs`` (caller-owned, outside the arena).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from types import MappingProxyType
from typing import Any

from ..errors import ModelError
from ..ir.graph import Graph
from ..ir.registry import Registry, default_registry
from ..ir.weights import unique_arrays
from .liveness import ALIGNMENT, Liveness, alias_sources, analyze
from .offsets import arena_size, first_fit, greedy_by_size
from .schedule import memory_aware_order
from .streams import assign_streams
from .timeline import StreamOrder, Timeline


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    no_reuse: int
    lower_bound: int
    file_order_bound: int
    arena: int
    weights: int
    inputs: int
    inplace: int  # tensors written over their input's block
    views: int  # tensors sharing their input's block unchanged
    strategy: str  # "greedy_by_size", "first_fit" or "no_reuse"
    order: str  # "file" or "memory_aware"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    order: tuple[int, ...]  # indices into graph.nodes, in execution order
    streams: tuple[int, ...]  # stream id per position of ``order``
    offsets: Mapping[str, int]  # arena tensor -> byte offset
    arena_bytes: int
    alignment: int = ALIGNMENT
    figures: MemoryFigures | None = None
    stream_count: int = field(default=1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", MappingProxyType(dict(self.offsets)))


@dataclass(frozen=True, slots=True)
class _Candidate:
    live: Liveness
    streams: tuple[int, ...]
    offsets: dict[str, int]
    arena: int
    strategy: str
    lower_bound: int
    inplace: int
    views: int


def plan_memory(graph: Graph, *, streams: int = 1, memory_aware: bool = True,
                inplace: bool = True, views: bool = True, reuse: bool = True,
                order: Sequence[int] | None = None, assignment: Sequence[int] | None = None,
                registry: Registry | None = None) -> MemoryPlan:
    """Plan the arena of a shape-inferred graph with static shapes (see the module invariants).

    ``order`` fixes the node order (no other is tried); ``assignment`` fixes the stream of each
    position (``streams`` is then the stream count); both exist for tests and callers that
    schedule themselves. ``reuse=False`` (atc's ``--disable_reuse_memory``, for debugging)
    gives every tensor its own block: no in-place, no views, offsets one after the other.
    """
    from .verify import PlanError, check_order, check_streams, verify_plan

    registry = registry or default_registry()
    file_live = analyze(graph, range(len(graph.nodes)))
    orders = {"file": file_live.order} if order is None else {"given": tuple(order)}
    if order is not None:
        check_order(graph, tuple(order))
    if assignment is not None:
        check_streams(tuple(assignment), len(graph.nodes), streams)
    if memory_aware and order is None and assignment is None:
        sizes = {t.name: t.size for t in file_live.tensors}
        aware = memory_aware_order(graph, sizes)
        if len(aware) != len(graph.nodes):
            raise ModelError("the graph has a cycle; cannot schedule it")
        if aware != file_live.order:
            orders["memory_aware"] = aware
    best: tuple[str, _Candidate] | None = None
    for name, candidate in orders.items():
        cand = _plan_order(graph, candidate, streams, assignment, inplace and reuse,
                           views and reuse, registry, reuse)
        if best is None or cand.arena < best[1].arena:
            best = (name, cand)
    assert best is not None
    plan = _finish(graph, best[0], best[1], file_live, streams)
    try:
        verify_plan(graph, plan, registry)
    except PlanError as e:  # a planner bug, not bad input
        raise RuntimeError(f"the memory planner produced an invalid plan: {e}") from None
    return plan


def _plan_order(graph: Graph, order: Sequence[int], stream_count: int,
                assignment: Sequence[int] | None, inplace: bool, views: bool,
                registry: Registry, reuse: bool = True) -> _Candidate:
    live = analyze(graph, order)
    sizes = {t.name: t.size for t in live.tensors}
    streams = (assign_streams(graph, order, stream_count, sizes) if assignment is None
               else tuple(assignment))
    hb = StreamOrder(graph, order, streams) if stream_count > 1 else None
    tl = Timeline([t.first for t in live.tensors], [t.accesses for t in live.tensors], hb)
    family, kinds = _families(graph, live, tl, registry, inplace, views)
    roots = sorted(set(family))
    members: dict[int, list[int]] = {r: [] for r in roots}
    for i, r in enumerate(family):
        members[r].append(i)
    accesses = [sorted({a for m in members[r] for a in live.tensors[m].accesses}) for r in roots]
    btl = Timeline([live.tensors[r].first for r in roots], accesses, hb)
    bsizes = [live.tensors[r].size for r in roots]

    def clash(i: int, js: Any) -> Any:
        return ~btl.ordered(i, js)

    if reuse:
        firsts = [live.tensors[r].first for r in roots]
        strategies = {"greedy_by_size": greedy_by_size(bsizes, clash),
                      "first_fit": first_fit(bsizes, firsts, clash)}
    else:  # every block after the previous one
        strategies = {"no_reuse": list(accumulate(bsizes[:-1], initial=0))[:len(bsizes)]}
    strategy = min(strategies, key=lambda s: arena_size(bsizes, strategies[s]))
    block = dict(zip(roots, strategies[strategy], strict=True))
    offsets = {t.name: block[family[i]] for i, t in enumerate(live.tensors)}
    return _Candidate(live, streams, offsets, arena_size(bsizes, strategies[strategy]), strategy,
                      peak(bsizes, [live.tensors[r].first for r in roots],
                           [a[-1] for a in accesses], live.end),
                      kinds.count("inplace"), kinds.count("view"))


def _families(graph: Graph, live: Liveness, tl: Timeline, registry: Registry, inplace: bool,
              views: bool) -> tuple[list[int], list[str]]:
    """Family root per tensor, and the kind of every alias taken."""
    family = list(range(len(live.tensors)))
    members: dict[int, list[int]] = {i: [i] for i in family}
    kinds: list[str] = []
    for pos, k in enumerate(live.order):
        node = graph.nodes[k]
        if len(node.outputs) != 1:
            continue
        out = live.index[node.outputs[0]]
        for slot, kind in alias_sources(node, graph, registry):
            src = live.index.get(node.inputs[slot]) if slot < len(node.inputs) else None
            if src is None or live.tensors[src].nbytes != live.tensors[out].nbytes:
                continue
            root = family[src]
            if kind == "view" and not views:
                continue
            if kind == "inplace" and not (inplace and all(
                    tl.done_by(m, pos, inclusive=True) for m in members[root])):
                continue
            family[out] = root
            members[root].append(out)
            kinds.append(kind)
            break
    return family, kinds


def peak(sizes: Sequence[int], firsts: Sequence[int], lasts: Sequence[int], end: int) -> int:
    """Most bytes alive at one position, each block alive from its first to its last access."""
    delta = [0] * (end + 2)
    for s, a, b in zip(sizes, firsts, lasts, strict=True):
        delta[a] += s
        delta[b + 1] -= s
    best = alive = 0
    for d in delta:
        alive += d
        best = max(best, alive)
    return best


def _finish(graph: Graph, order_name: str, cand: _Candidate, file_live: Liveness,
            stream_count: int) -> MemoryPlan:
    ts = file_live.tensors
    figures = MemoryFigures(
        no_reuse=sum(t.size for t in ts),
        lower_bound=cand.lower_bound,
        file_order_bound=peak([t.size for t in ts], [t.first for t in ts],
                              [t.last for t in ts], file_live.end),
        arena=cand.arena,
        weights=weights_bytes(graph),
        inputs=sum(v.type.nbytes() or 0 for v in graph.inputs),
        inplace=cand.inplace, views=cand.views, strategy=cand.strategy, order=order_name)
    return MemoryPlan(cand.live.order, cand.streams, cand.offsets, cand.arena, ALIGNMENT,
                      figures, stream_count)


def weights_bytes(graph: Graph) -> int:
    """Bytes of the initializers, identical ones counted once (``unique_arrays``)."""
    return sum(a.nbytes for a in unique_arrays(graph.initializers.values())[0])
