"""The conversion report: JSON content, a well-formed self-contained HTML page, escaping."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import onnx
import pytest

from gerules.compiler import CompileOptions, CompileResult, compile_model
from gerules.errors import UsageError
from gerules.onnx_io import load_model
from gerules.report import SECTIONS, conversion_report, render, write_report
from gerules.testing.models import cnn

EVIL = '<img src=x onerror="alert(1)">&amp;'
XHTML = "{http://www.w3.org/1999/xhtml}"


def _evil_cnn() -> onnx.ModelProto:
    """The test CNN with hostile node and tensor names (names are user data)."""
    model = cnn().model
    for node in model.graph.node:
        node.name = f"{node.name}{EVIL}"
    return model


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> CompileResult:
    folder = tmp_path_factory.mktemp("report")
    graph = load_model(_evil_cnn().SerializeToString())
    options = CompileOptions(soc_version="Ascend310P3", input_shape={"input": (2, 3, 16, 16)},
                             precision_mode="force_fp16")
    return compile_model(graph, options, folder / "m.om", command_line=f"ge-rewrite {EVIL}",
                         source="evil.onnx")


@pytest.fixture(scope="module")
def report(result: CompileResult) -> dict:
    return conversion_report(result, command_line=f"ge-rewrite compile {EVIL}")


@pytest.fixture(scope="module")
def page(report: dict) -> ET.Element:
    text = render(report)
    assert text.startswith("<!DOCTYPE html>\n")
    return ET.fromstring(text.split("\n", 1)[1])  # well-formed XML, or this raises


def test_report_holds_what_the_issue_asks_for(report: dict) -> None:
    opt = report["optimize"]
    assert opt["ops"]["before"]["BatchNormalization"] == 2
    assert "BatchNormalization" not in opt["ops"]["after"]
    assert all(f["rule"] and f["replaced"] for f in opt["fusions"])
    assert any(stats["rejected"] for stats in opt["rules"].values())
    assert opt["estimate"]["after"]["label"].startswith("estimated")
    assert report["figures"]["precision"]["outputs"][0]["max_rel"] < 1e-2
    memory = report["figures"]["memory"]["default"]
    assert set(memory) >= {"no_reuse", "lower_bound", "arena", "weights"}
    assert report["phases_s"]["optimize"] > 0 and opt["saturation"]["stop_reason"]
    blocks = report["arenas"][0]["blocks"]
    assert blocks and all(b["offset"] + b["size"] <= report["arenas"][0]["arena_bytes"]
                          for b in blocks)
    json.dumps(report, allow_nan=False)  # plain JSON


def test_arena_blocks_never_overlap_while_alive(report: dict) -> None:
    blocks = report["arenas"][0]["blocks"]
    for i, a in enumerate(blocks):
        for b in blocks[i + 1:]:
            alive = a["first"] <= b["last"] and b["first"] <= a["last"]
            apart = a["offset"] + a["size"] <= b["offset"] or b["offset"] + b["size"] <= a["offset"]
            same_block = a["offset"] == b["offset"] and a["size"] == b["size"]
            assert not alive or apart or same_block, (a, b)


def test_page_has_every_section_and_no_script_or_network(page: ET.Element) -> None:
    ids = {e.get("id") for e in page.iter(f"{XHTML}section")}
    assert ids == set(SECTIONS)
    tags = {e.tag.split("}")[-1] for e in page.iter()}
    assert not tags & {"script", "img", "link", "iframe", "object", "embed"}
    for element in page.iter():
        assert not set(element.attrib) & {"src", "onerror", "onload"}, element.attrib
        # links only jump inside the page (the graph pictures to their node rows)
        assert element.get("href", "#").startswith("#"), element.attrib
    style = next(page.iter(f"{XHTML}style")).text or ""
    assert "url(" not in style and "@import" not in style


def test_model_strings_are_escaped(page: ET.Element, report: dict) -> None:
    text = render(report)
    assert EVIL not in text and "<img" not in text
    fusions = next(e for e in page.iter(f"{XHTML}section") if e.get("id") == "fusions")
    cells = "".join(fusions.itertext())
    assert EVIL in cells  # shown to the reader, literally


def test_cost_figures_are_labelled_estimates(page: ET.Element) -> None:
    for key in ("ops", "latency"):
        section = next(e for e in page.iter(f"{XHTML}section") if e.get("id") == key)
        assert "estimate" in "".join(section.itertext())


def test_charts_are_inline_svg(page: ET.Element, report: dict) -> None:
    svgs = list(page.iter("{http://www.w3.org/2000/svg}svg"))
    # latency bars, two graph pictures, the in-use curve, one lifetime chart per variant
    assert len(svgs) == 4 + len(report["arenas"])
    lifetimes = next(s for s in svgs if s.get("aria-label", "").startswith("arena lifetimes"))
    rects = [r for r in lifetimes.iter("{http://www.w3.org/2000/svg}rect")
             if r.find("{http://www.w3.org/2000/svg}title") is not None]
    assert len(rects) == len(report["arenas"][0]["blocks"])


def test_json_alone_renders_the_same_page(tmp_path: Path, report: dict) -> None:
    written = write_report(tmp_path / "r.html", report)
    assert [p.name for p in written] == ["r.html", "r.json"]
    again = json.loads((tmp_path / "r.json").read_text())
    assert render(again) == (tmp_path / "r.html").read_text()
    assert [p.name for p in write_report(tmp_path / "only.json", report)] == ["only.json"]
    assert not (tmp_path / "only.html").exists()
    with pytest.raises(UsageError, match="give a .html file"):
        write_report(tmp_path / "r.txt", report)


def test_keep_mode_reports_what_fp16_would_save(tmp_path: Path) -> None:
    graph = load_model(cnn().model.SerializeToString())
    result = compile_model(graph, CompileOptions(input_shape={"input": (1, 3, 16, 16)}),
                           tmp_path / "k.om")
    report = conversion_report(result)
    assert "estimated_us_fp16" in report["precision"]["estimate"]
    assert "Under <code>force_fp16</code> the model would take" in render(report)
