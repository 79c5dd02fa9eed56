"""The conversion report as plain JSON data, from a ``CompileResult``.

Invariants:
- ``conversion_report`` returns only JSON types (dicts, lists, strings, finite numbers, bools,
  None); the HTML renderer reads nothing else, so ``report.json`` alone re-renders the page.
- The arena chart describes the first variant exactly as planned: each block is a tensor with
  its offset and size from ``MemoryPlan.offsets`` and its lifetime (producer to last access, in
  execution positions of ``MemoryPlan.order``) from ``gerules.memory.liveness.analyze``.
- Every cost figure carries ``label`` (the cost model's "estimated by ..." text).
"""

from __future__ import annotations

from typing import Any

from ..build import BuildResult
from ..compiler import CompileResult
from ..cost.model import LABEL
from ..memory.liveness import analyze

FORMAT = 1


def arena_chart(build: BuildResult, variant: int = 0) -> dict[str, Any]:
    v = build.variants[variant]
    live = analyze(v.graph, v.plan.order, v.plan.alignment)
    blocks = [{"tensor": t.name, "offset": int(v.plan.offsets[t.name]), "size": t.size,
               "first": t.first, "last": t.last}
              for t in live.tensors if t.name in v.plan.offsets]
    return {"variant": v.name, "arena_bytes": v.plan.arena_bytes, "steps": live.end,
            "blocks": blocks}


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
    report["arena"] = arena_chart(result.build)
    return report
