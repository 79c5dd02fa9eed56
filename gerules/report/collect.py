"""The conversion report as plain JSON data, from a ``CompileResult``.

Invariants:
- ``conversion_report`` returns only JSON types (dicts, lists, strings, finite numbers, bools,
  None); the HTML renderer reads nothing else, so ``report.json`` alone re-renders the page.
- ``graphs``: the source graph (input shapes fixed) and the graph written, node by node
  (name, op, the nodes it reads, its estimated microseconds) with the nodes a fusion replaced
  (``gone``) and the nodes a rule created (``fused``), for the layered drawings.
- ``arenas``: per variant, every tensor with its offset and size from ``MemoryPlan.offsets``
  and its lifetime (producer to last access, in positions of ``MemoryPlan.order``) from
  ``gerules.memory.liveness.analyze``, and ``in_use``: per position the bytes of the arena that
  hold a live tensor (aliases counted once).
- Every cost figure carries ``label`` (the cost model's "estimated by ..." text).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ..build import BuildResult
from ..compiler import CompileResult
from ..cost.model import LABEL
from ..ir.graph import Graph
from ..memory.liveness import analyze

FORMAT = 2


def arena_chart(build: BuildResult, variant: int = 0) -> dict[str, Any]:
    v = build.variants[variant]
    live = analyze(v.graph, v.plan.order, v.plan.alignment)
    blocks = [{"tensor": t.name, "offset": int(v.plan.offsets[t.name]), "size": t.size,
               "first": t.first, "last": t.last}
              for t in live.tensors if t.name in v.plan.offsets]
    return {"variant": v.name, "arena_bytes": v.plan.arena_bytes, "steps": live.end,
            "blocks": blocks, "in_use": in_use(blocks, live.end)}


def in_use(blocks: list[dict[str, Any]], steps: int) -> list[int]:
    """Per position, the arena bytes covered by live tensors (a shared block counts once)."""
    out = []
    for t in range(steps + 1):
        spans = sorted((b["offset"], b["offset"] + b["size"]) for b in blocks
                       if b["first"] <= t <= b["last"])
        total, reach = 0, 0
        for lo, hi in spans:
            if hi > reach:
                total += hi - max(lo, reach)
                reach = hi
        out.append(total)
    return out


def graph_data(graph: Graph, estimate: Mapping[str, float], fused: Collection[str] = (),
               gone: Collection[str] = ()) -> dict[str, Any]:
    """The graph's nodes for drawing: name, op, readers' indices, estimate, marks."""
    producer = {o: k for k, n in enumerate(graph.nodes) for o in n.outputs}
    nodes = []
    for k, n in enumerate(graph.nodes):
        preds = sorted({producer[i] for i in n.present_inputs() if producer.get(i, k) < k})
        nodes.append({"name": n.label, "op": n.qualified_op, "in": preds,
                      "us": round(float(estimate.get(n.label, 0.0)), 3),
                      "mark": "fused" if n.label in fused else "gone" if n.label in gone
                      else ""})
    return {"nodes": nodes}


def conversion_report(result: CompileResult, *, command_line: str = "") -> dict[str, Any]:
    """Everything the HTML page shows (see the module invariants)."""
    report = dict(result.report)
    report["format"] = FORMAT
    report["command_line"] = command_line
    report["output"] = str(result.path)
    report["seconds"] = round(result.seconds, 3)
    report["estimate_label"] = LABEL
    report["variants"] = [{"name": v.name, "dims": dict(v.dims),
                           "inputs": [{"name": x.name, "type": str(x.type)}
                                      for x in v.graph.inputs]} for v in result.build.variants]
    report["arenas"] = [arena_chart(result.build, k) for k in range(len(result.build.variants))]
    report["graphs"] = _graphs(result)
    return report


def _graphs(result: CompileResult) -> dict[str, Any]:
    fusions = result.optimize.fusions
    created = {f.node for f in fusions}
    replaced = {name for f in fusions for name, _ in f.replaced}
    out: dict[str, Any] = {}
    if result.source is not None:
        est = {name: e.us for name, e in result.optimize.estimate_before.nodes}
        out["before"] = graph_data(result.source, est, gone=replaced)
    after = result.estimate.nodes if result.estimate is not None else ()
    out["after"] = graph_data(result.graph, {name: e.us for name, e in after}, fused=created)
    return out
