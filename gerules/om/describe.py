"""What ``ge-rewrite inspect`` shows of a ``.om``: header, sections, MODEL_DEF and REPORT.

Invariant: reads only what ``OmFile`` has already checked; a REPORT whose pipeline record
has the wrong shape (it is checksummed, not schema-checked) is left out, never trusted.
"""

from __future__ import annotations

from typing import Any

from .. import figures
from .reader import OmFile


def describe(om: OmFile) -> dict[str, Any]:
    """Header, sections, MODEL_DEF, REPORT; for a pipelined model first its stages (estimated
    time, weights, arena, bytes received per micro-batch) and the schedule's estimate."""
    h = om.header
    report = om.report()
    pipe = figures.pipeline_summary(figures.of_report(report).get("pipeline"))
    return {
        "file": om.path,
        "header": {"format_version": f"{h.major}.{h.minor}", "flags": h.flags,
                   "header_size": h.header_size, "file_size": h.file_size},
        "sections": [{"kind": s.name, "offset": s.offset, "length": s.length,
                      "sha256": s.digest.hex()} for s in om.sections],
        **({"pipeline": pipe} if pipe else {}),
        "model_def": om.raw_model_def(),
        "report": report,
    }
