"""The conversion report: JSON data, a self-contained HTML page, and atc's pre-check.

Public API:
- ``conversion_report(result, command_line=...) -> dict`` (``collect``);
- ``render(report) -> str``: the HTML page (``html``);
- ``write_report(path, report) -> list[Path]``: ``NAME.html`` writes the page and ``NAME.json``
  beside it; ``NAME.json`` writes only the JSON; both atomically.
- ``precheck(path) -> dict``: atc ``--mode=3``'s per-node support check (``precheck``).

Invariant: nothing here prints; files are written atomically (``gerules.fileio``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..fileio import atomic_write
from .collect import conversion_report
from .html import SECTIONS, render

__all__ = ["SECTIONS", "conversion_report", "render", "report_paths", "write_report"]


def report_paths(path: str | Path) -> tuple[Path | None, Path]:
    """``(html or None, json)`` for ``--report PATH``."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".html", ".htm"):
        return p, p.with_suffix(".json")
    if suffix == ".json":
        return None, p
    raise UsageError(f"--report {p}: give a .html file (the JSON goes beside it) or a .json file")


def write_report(path: str | Path, report: Mapping[str, Any]) -> list[Path]:
    html_path, json_path = report_paths(path)
    written = [atomic_write(json_path, json.dumps(report, indent=1, allow_nan=False).encode())]
    if html_path is not None:
        written.insert(0, atomic_write(html_path, render(report).encode("utf-8")))
    return written
