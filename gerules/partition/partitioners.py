"""Cut a scheduled graph into pipeline stages: by depth, by memory or by estimated time.

Every partitioner cuts one topological order (the memory plan's, or the graph's own) into
``k`` contiguous segments, one per stage. Any tensors may cross a cut: a stage reads every
value it needs from the stages before it (or the graph inputs), not only from its neighbour.

Invariants:
- A ``Partition`` covers every node exactly once; stage ``s`` holds ``order[cuts[s]:cuts[s+1]]``
  and is never empty. A stage's ``inputs`` are the values it reads and does not make (graph
  inputs and other stages' outputs, weights excluded), its ``outputs`` the values it makes
  that a later stage or the graph's outputs need; ``transfer_bytes`` counts the inputs made by
  other stages (what crosses the link per micro-batch).
- Tensor sizes come from the memory planner (``memory.liveness.analyze``: aligned, physical
  bytes), weights from ``memory.plan.weights_bytes``, times from the NPU cost model; so stage
  figures follow the planner and the cost model when they change.
- ``partition_by_cost`` is exact over its cut points (``cuts.best_cuts``: the slowest stage,
  compute plus the transfer of its inputs over the SoC profile's link, is minimal, then the
  sum); the cut points are every node up to ``cuts.MAX_BLOCKS`` nodes, an even grid above.
- ``partition_by_memory`` keeps every stage's weights + inputs + peak live activations under
  ``limit`` (the fewest stages that fit when ``stages`` is not given) and balances time among
  the splits that fit; a single op that cannot fit alone is refused naming the op and its
  bytes (``ResourceLimit``). ``partition_by_depth`` gives every stage the same number of
  compute nodes (views and constants are free riders).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cost import NpuCostModel, SocProfile, profile_for
from ..cost.profile import DEFAULT_SOC
from ..errors import ResourceLimit, UsageError
from ..ir.graph import Graph
from ..ir.registry import Registry, default_registry
from ..ir.weights import unique_arrays
from ..memory.liveness import Liveness, analyze
from . import cuts as cutlib

METHODS = ("depth", "memory", "cost")
MAX_STAGES = 64


@dataclass(frozen=True, slots=True)
class Link:
    """The interconnect between two devices: bandwidth and a fixed cost per transfer."""

    bytes_per_us: float
    latency_us: float

    def us(self, nbytes: int) -> float:
        return 0.0 if nbytes <= 0 else self.latency_us + nbytes / self.bytes_per_us

    def to_json(self) -> dict[str, float]:
        return {"gbps": round(self.bytes_per_us / 1e3, 3), "latency_us": self.latency_us}

    @staticmethod
    def of(profile: SocProfile) -> Link:
        return Link(profile.link_bytes_per_us, profile.link_latency_us)


@dataclass(frozen=True, slots=True)
class StageInfo:
    index: int
    nodes: tuple[int, ...]  # indices into graph.nodes, in execution order
    inputs: tuple[str, ...]  # graph inputs and other stages' outputs it reads, first use first
    outputs: tuple[str, ...]  # what later stages or the graph's outputs need from it
    compute_us: float  # estimated
    transfer_bytes: int  # its inputs made by other stages, per micro-batch
    transfer_us: float  # estimated, over the link
    weights_bytes: int
    activation_bytes: int  # inputs + the most node outputs alive at once (estimate)

    @property
    def us(self) -> float:
        """Estimated time per micro-batch: receive the inputs, then compute."""
        return self.compute_us + self.transfer_us

    @property
    def memory_bytes(self) -> int:
        return self.weights_bytes + self.activation_bytes

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.index, "nodes": len(self.nodes), "inputs": list(self.inputs),
                "outputs": list(self.outputs), "compute_us": round(self.compute_us, 3),
                "transfer_bytes": self.transfer_bytes, "transfer_us": round(self.transfer_us, 3),
                "weights_bytes": self.weights_bytes, "activation_bytes": self.activation_bytes,
                "us": round(self.us, 3)}


@dataclass(frozen=True, slots=True)
class Partition:
    """``graph`` cut into ``stages`` along ``order`` (see the module invariants)."""

    graph: Graph
    order: tuple[int, ...]
    stages: tuple[StageInfo, ...]
    method: str
    soc: str
    link: Link
    limit: int | None = None  # the per-device memory limit it was made under

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    @property
    def balance(self) -> float:
        """Slowest stage / mean stage (1.0 is perfectly balanced)."""
        times = [s.us for s in self.stages]
        mean = sum(times) / len(times)
        return max(times) / mean if mean > 0 else 1.0

    def stage_of(self) -> dict[int, int]:
        """Node index -> its stage."""
        return {k: s.index for s in self.stages for k in s.nodes}

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "soc": self.soc, "link": self.link.to_json(),
                "limit_bytes": self.limit, "balance": round(self.balance, 4),
                "transfer_bytes": sum(s.transfer_bytes for s in self.stages),
                "stages": [s.to_json() for s in self.stages]}


class _Figures:
    """Per-node and per-segment figures of one order, shared by the partitioners."""

    def __init__(self, graph: Graph, order: Sequence[int], profile: SocProfile,
                 registry: Registry) -> None:
        self.graph, self.order, self.profile = graph, tuple(order), profile
        self.link = Link.of(profile)
        model = NpuCostModel(profile, registry)
        self.us = [model.node(graph.nodes[k], graph).us for k in self.order]
        self.live: Liveness = analyze(graph, self.order)
        self.starts = cutlib.blocks_of(len(self.order))
        self.block = np.searchsorted(self.starts, np.arange(len(self.order)), side="right") - 1
        self.m = len(self.starts)

    def uses(self) -> tuple[list[cutlib.Use], list[cutlib.Use], list[cutlib.Use]]:
        """(cut tensors, graph inputs, weights) as ``cuts.Use`` in block positions."""
        readers: dict[str, set[int]] = {}
        own: dict[int, int] = {}  # block -> bytes of its nodes' attribute tensors
        for pos, k in enumerate(self.order):
            node, b = self.graph.nodes[k], int(self.block[pos])
            for name in node.present_inputs():
                readers.setdefault(name, set()).add(b)
            own[b] = own.get(b, 0) + _attr_bytes(node)
        for name in self.graph.output_names:
            readers.setdefault(name, set()).add(self.m)
        cut = [cutlib.Use(t.size, int(self.block[t.first]), tuple(readers.get(t.name, ())))
               for t in self.live.tensors]
        feeds = [cutlib.Use(v.type.nbytes() or 0, -1, tuple(readers.get(v.name, ())))
                 for v in self.graph.inputs if v.name not in self.graph.initializers]
        weights = [cutlib.Use(int(a.nbytes), -1, tuple(readers.get(name, ())))
                   for name, a in self.graph.initializers.items()]
        weights += [cutlib.Use(n, -1, (b,)) for b, n in own.items() if n]
        return cut, feeds, weights

    def matrices(self) -> dict[str, np.ndarray]:
        cut, feeds, weights = self.uses()
        m = self.m
        xfer = cutlib.needs(cut, m)
        lasts = [t.last for t in self.live.tensors]
        act = cutlib.peak_live([t.size for t in self.live.tensors],
                               [t.first for t in self.live.tensors], lasts,
                               self.block.tolist(), m)
        per_block = np.zeros(m)
        np.add.at(per_block, self.block, self.us)
        link = self.link
        transfer = np.where(xfer > 0, link.latency_us + xfer / link.bytes_per_us, 0.0)
        memory = cutlib.needs(weights, m) + cutlib.needs(feeds, m) + xfer + act
        return {"time": cutlib.prefix_sums(per_block) + transfer, "memory": memory}

    def cut_at(self, block_cuts: Sequence[int]) -> list[int]:
        """Block cut points as node positions."""
        return [self.starts[c] if c < self.m else len(self.order) for c in block_cuts]


def _attr_bytes(node: Any) -> int:
    return sum(int(v.nbytes) for v in node.attrs.values() if isinstance(v, np.ndarray))


def partition_by_cost(graph: Graph, stages: int, *, soc: str | SocProfile = DEFAULT_SOC,
                      order: Sequence[int] | None = None,
                      registry: Registry | None = None) -> Partition:
    """``stages`` stages whose slowest (compute + input transfer, estimated) is minimal."""
    fig = _prepare(graph, stages, soc, order, registry)
    found = cutlib.best_cuts(fig.matrices()["time"], stages)
    assert found is not None  # every segment is allowed, and stages <= blocks
    return _finish(fig, fig.cut_at(found[0]), "cost", registry)


def partition_by_depth(graph: Graph, stages: int, *, soc: str | SocProfile = DEFAULT_SOC,
                       order: Sequence[int] | None = None,
                       registry: Registry | None = None) -> Partition:
    """``stages`` stages with equal numbers of compute nodes (layers)."""
    fig = _prepare(graph, stages, soc, order, registry)
    heavy = [pos for pos, k in enumerate(fig.order) if _is_layer(graph, k)]
    if len(heavy) < stages:
        heavy = list(range(len(fig.order)))
    points = [0] + [heavy[round(s * len(heavy) / stages)] for s in range(1, stages)]
    return _finish(fig, [*points, len(fig.order)], "depth", registry)


def partition_by_memory(graph: Graph, limit: int, stages: int | None = None, *,
                        soc: str | SocProfile = DEFAULT_SOC, order: Sequence[int] | None = None,
                        registry: Registry | None = None) -> Partition:
    """Stages that each fit ``limit`` bytes (weights + inputs + live activations, estimated):
    ``stages`` of them, or the fewest that fit; time balanced among the splits that fit."""
    if limit <= 0:
        raise UsageError(f"--device_memory must be positive, got {limit}")
    fig = _prepare(graph, stages or 1, soc, order, registry)
    mats = fig.matrices()
    fits = np.where(mats["memory"] <= limit, mats["time"], np.inf)
    _refuse_single_ops(fig, limit)
    most = min(MAX_STAGES, fig.m)
    fewest = cutlib.fewest_segments(fits, most)
    if fewest is not None and (stages is None or stages >= fewest):
        found = cutlib.best_cuts(fits, stages or fewest)
        if found is not None:
            return _finish(fig, fig.cut_at(found[0]), "memory", registry, limit)
    hint = f"; {fewest} stages fit" if fewest else f"; not even {most} stages fit"
    raise ResourceLimit(f"no split into {stages or most} stage(s) keeps every stage under "
                        f"{_human(limit)}{hint} (--partitions)")


def _refuse_single_ops(fig: _Figures, limit: int) -> None:
    """A node that cannot fit a device alone, named with its bytes."""
    for k in fig.order:
        node = fig.graph.nodes[k]
        need = _node_bytes(fig, node)
        if need > limit:
            raise ResourceLimit(f"this op alone needs {_human(need)} (weights, inputs and "
                                f"outputs), over the device memory of {_human(limit)}",
                                node=node.label, op=node.qualified_op)


def _node_bytes(fig: _Figures, node: Any) -> int:
    """What a stage of this node alone holds, counted as the segment matrices count it:
    weights, inputs and outputs (node outputs at the planner's aligned sizes)."""
    g, live = fig.graph, fig.live
    names = dict.fromkeys([*node.present_inputs(), *node.outputs])
    return _attr_bytes(node) + sum(live[n].size if n in live.index else _nbytes(g, n)
                                   for n in names)


def _is_layer(graph: Graph, k: int) -> bool:
    from ..cost.model import FREE_OPS, VIEW_OPS

    node = graph.nodes[k]
    return not (not node.domain and (node.op in VIEW_OPS or node.op in FREE_OPS))


def _prepare(graph: Graph, stages: int, soc: str | SocProfile, order: Sequence[int] | None,
             registry: Registry | None) -> _Figures:
    if not 1 <= stages <= MAX_STAGES:
        raise UsageError(f"--partitions must be between 1 and {MAX_STAGES}, got {stages}")
    if len(graph.nodes) < stages:
        raise UsageError(f"cannot cut {len(graph.nodes)} node(s) into {stages} stages "
                         "(--partitions)")
    registry = registry or default_registry()
    profile = soc if isinstance(soc, SocProfile) else profile_for(soc)
    return _Figures(graph, order if order is not None else range(len(graph.nodes)), profile,
                    registry)


def _finish(fig: _Figures, points: Sequence[int], method: str, registry: Registry | None,
            limit: int | None = None) -> Partition:
    graph, order = fig.graph, fig.order
    stage_of: dict[str, int] = {}
    spans = list(zip(points, points[1:], strict=False))
    for s, (a, b) in enumerate(spans):
        for pos in range(a, b):
            for out in graph.nodes[order[pos]].outputs:
                stage_of[out] = s
    needed: dict[str, int] = {name: len(spans) for name in graph.output_names}
    reads: list[dict[str, None]] = []
    for s, (a, b) in enumerate(spans):
        seen: dict[str, None] = {}
        for pos in range(a, b):
            for name in graph.nodes[order[pos]].present_inputs():
                if name not in graph.initializers and stage_of.get(name, -1) != s:
                    seen.setdefault(name)
                    needed[name] = max(needed.get(name, -1), s)
        reads.append(seen)
    live = {t.name: t for t in fig.live.tensors}
    infos = []
    for s, (a, b) in enumerate(spans):
        nodes = tuple(order[a:b])
        outs = tuple(o for k in nodes for o in graph.nodes[k].outputs
                     if needed.get(o, -1) > s)
        moved = sum(live[n].size for n in reads[s] if n in live)
        feeds = sum(_nbytes(graph, n) for n in reads[s] if n not in live)
        infos.append(StageInfo(
            s, nodes, tuple(reads[s]), outs, float(sum(fig.us[a:b])), moved,
            fig.link.us(moved), _weights(graph, nodes),
            feeds + moved + _peak(fig, a, b)))
    return Partition(graph, order, tuple(infos), method, fig.profile.name, fig.link, limit)


def _weights(graph: Graph, nodes: Sequence[int]) -> int:
    arrays = []
    for k in nodes:
        node = graph.nodes[k]
        arrays += [graph.initializers[n] for n in node.present_inputs()
                   if n in graph.initializers]
        arrays += [v for v in node.attrs.values() if isinstance(v, np.ndarray)]
    return sum(int(a.nbytes) for a in unique_arrays(arrays)[0])


def _peak(fig: _Figures, a: int, b: int) -> int:
    """The most bytes of node outputs alive at one position of ``[a, b)``."""
    alive = np.zeros(b - a + 1, dtype=np.int64)
    for t in fig.live.tensors:  # the stage's inputs are counted with its inputs
        if a <= t.first < b:
            alive[t.first - a] += t.size
            alive[min(t.last, b - 1) - a + 1] -= t.size
    return int(np.max(np.cumsum(alive))) if b > a else 0


def parse_bytes(text: str) -> int:
    """``8G``, ``512M``, ``64K``, ``1.5G`` or plain bytes (powers of 1024)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1] if t and t[-1] in units else ""
    try:
        value = float(t[:-1] if unit else t)
    except ValueError:
        raise UsageError(f"--device_memory: expected a size like 8G or 512M, got '{text}'"
                         ) from None
    if not value > 0 or not np.isfinite(value):
        raise UsageError(f"--device_memory must be positive, got '{text}'")
    return int(value * units[unit])


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def make_partition(graph: Graph, method: str, stages: int | None, *, limit: int | None = None,
                   soc: str | SocProfile = DEFAULT_SOC, order: Sequence[int] | None = None,
                   registry: Registry | None = None) -> Partition:
    """The partitioner ``method`` names (``depth``, ``memory`` or ``cost``)."""
    if method not in METHODS:
        from ..ir.registry import suggest

        raise UsageError(f"--partition_by: unknown method '{method}'{suggest(method, METHODS)}; "
                         f"choose one of {', '.join(METHODS)}")
    if method == "memory":
        if limit is None:
            raise UsageError("--partition_by memory needs --device_memory (e.g. 8G)")
        return partition_by_memory(graph, limit, stages, soc=soc, order=order,
                                   registry=registry)
    if stages is None:
        raise UsageError(f"--partition_by {method} needs --partitions K")
    fn = partition_by_cost if method == "cost" else partition_by_depth
    part = fn(graph, stages, soc=soc, order=order, registry=registry)
    if limit is not None:
        check_limit(part, limit)
    return part


def check_limit(part: Partition, limit: int, arenas: Mapping[int, int] | None = None) -> None:
    """Refuse a partition with a stage over ``limit`` (``arenas``: planned arena per stage,
    which replaces the estimate of live activations when given)."""
    for s in part.stages:
        act = s.activation_bytes if arenas is None else arenas[s.index] + _feeds(part, s)
        if s.weights_bytes + act > limit:
            raise ResourceLimit(f"stage {s.index} needs {_human(s.weights_bytes + act)} "
                                f"(weights {_human(s.weights_bytes)}, activations "
                                f"{_human(act)}), over --device_memory {_human(limit)}")


def _feeds(part: Partition, s: StageInfo) -> int:
    return sum(_nbytes(part.graph, n) for n in s.inputs)


def _nbytes(graph: Graph, name: str) -> int:
    t = graph.type_of(name)
    return (t.nbytes() or 0) if t is not None else 0


__all__ = ["METHODS", "Link", "Partition", "StageInfo", "make_partition",
           "parse_bytes", "partition_by_cost", "partition_by_depth", "partition_by_memory"]
