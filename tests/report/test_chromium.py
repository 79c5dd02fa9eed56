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
    reason="no Chromium on this machine (Chromium is a system package, not a pip extra; "
           "'apt-get install chromium' to run the browser check; the HTML structure is tested "
           "without a browser)")


def test_report_renders_to_a_png(tmp_path: Path) -> None:
    graph = load_model(cnn().model.SerializeToString())
    result = compile_model(graph, CompileOptions(input_shape={"input": (1, 3, 16, 16)},
                                                 precision_mode="allow_mix_precision"),
                           tmp_path / "m.om")
    html, _ = write_report(tmp_path / "report.html", conversion_report(result))
    png = screenshot(html, tmp_path / "report.png", width=900, height=1400)
    assert png_size(png) == (900, 1400)
    assert png.stat().st_size > 20_000  # a rendered page, not a blank one


def test_the_graph_pictures_render(tmp_path: Path) -> None:
    """The graph section alone, in a real browser: an SVG of boxes and links draws pixels."""
    import re

    graph = load_model(cnn().model.SerializeToString())
    result = compile_model(graph, CompileOptions(input_shape={"input": (1, 3, 16, 16)}),
                           tmp_path / "m.om")
    html, _ = write_report(tmp_path / "report.html", conversion_report(result))
    text = html.read_text()
    head, body = text.split("<main>", 1)
    section = re.search(r'<section id="graph">.*?</section>', body, re.S)
    assert section is not None
    page = tmp_path / "graph.html"
    page.write_text(f"{head}<main>{section.group(0)}</main></body></html>")
    png = screenshot(page, tmp_path / "graph.png", width=800, height=900)
    assert png_size(png) == (800, 900) and png.stat().st_size > 15_000
