"""The HTML report renders in a real headless Chromium, offline (when Chromium is installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gerules.compiler import CompileOptions, compile_model
from gerules.onnx_io import load_model
from gerules.report import conversion_report, write_report
from gerules.report.screenshot import find_chromium, png_size, screenshot
from gerules.testing.models import cnn

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="no Chromium on this machine (Chromium is a system package, not a pip extra; 'apt-get install chromium' "
           "to run the browser check; the HTML structure is tested without a browser)")


def test_report_renders_to_a_png(tmp_path: Path) -> None:
    graph = load_model(cnn().model.SerializeToString())
    result = compile_model(graph, CompileOptions(input_shape={"input": (1, 3, 16, 16)},
                                                 precision_mode="allow_mix_precision"),
                           tmp_path / "m.om")
    html, _ = write_report(tmp_path / "report.html", conversion_report(result))
    png = screenshot(html, tmp_path / "report.png", width=900, height=1400)
    assert png_size(png) == (900, 1400)
    assert png.stat().st_size > 20_000  # a rendered page, not a blank one
