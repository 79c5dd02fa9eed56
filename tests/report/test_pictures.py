"""The report's pictures: the graph before and after (fused nodes marked, boxes linking to
their rows, large graphs by block), the 20 most expensive nodes, a memory chart per variant
with printed labels, the in-use curve, the Cast warning, and the optimized ONNX on request."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import onnx
import pytest

from gerules import figures
from gerules.cli.main import main
from gerules.report import render
from gerules.report.layout import blocks, layered
from gerules.testing.models import cnn

XHTML = "{http://www.w3.org/1999/xhtml}"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    folder = tmp_path_factory.mktemp("pictures")
    onnx.save(cnn().model, folder / "cnn.onnx")
    out = folder / "cnn"
    assert main(["compile", str(folder / "cnn.onnx"), f"--output={out}", "--quiet",
                 "--input_shape=input:-1,3,16,16", "--dynamic_batch_size=1,4",
                 f"--report={out}.html", "--save_onnx"]) == 0
    return json.loads(Path(f"{out}.json").read_text()), Path(f"{out}.html").read_text(), out


def test_both_graphs_are_drawn_with_fusions_marked(converted: tuple[dict, str, Path]) -> None:
    report, html, _ = converted
    before, after = report["graphs"]["before"]["nodes"], report["graphs"]["after"]["nodes"]
    assert len(before) == report["figures"]["nodes"]["source"]
    assert len(after) == report["figures"]["nodes"]["final"]
    assert {n["mark"] for n in before} == {"", "gone"}  # BN, Conv, Relu folded away
    assert "fused" in {n["mark"] for n in after}
    section = re.search(r'<section id="graph">.*?</section>', html, re.S)
    assert section is not None and section.group(0).count("<svg") == 2
    links = set(re.findall(r'<a href="#((?:before|after)-\d+)">', section.group(0)))
    assert len(links) == len(before) + len(after)
    for target in links:  # every box lands on its row
        assert f'<tr id="{target}">' in html


def test_the_20_most_expensive_nodes(converted: tuple[dict, str, Path]) -> None:
    report, html, _ = converted
    top = report["figures"]["nodes_us"]
    assert 0 < len(top) <= figures.TOP_NODES
    assert [row[2] for row in top] == sorted((row[2] for row in top), reverse=True)
    assert f"<code>{top[0][0]}</code>" in html


def test_memory_per_variant_with_printed_labels_and_a_curve(
        converted: tuple[dict, str, Path]) -> None:
    report, html, _ = converted
    assert [a["variant"] for a in report["arenas"]] == ["N=1", "N=4"]
    for a in report["arenas"]:
        assert len(a["in_use"]) == a["steps"] + 1
        assert max(a["in_use"]) <= a["arena_bytes"]
        assert max(a["in_use"]) == report["figures"]["memory"][a["variant"]]["lower_bound"]
    memory = re.search(r'<section id="memory">.*?</section>', html, re.S).group(0)  # type: ignore[union-attr]
    assert memory.count("arena lifetimes") >= 2 and "<polyline" in memory
    assert 'class="blk"' in memory  # block labels as text, not only tooltips
    assert "N=4: peak" in memory and "@media print" in html


def test_the_page_stays_well_formed(converted: tuple[dict, str, Path]) -> None:
    _, html, _ = converted
    ET.fromstring(html.split("\n", 1)[1])


def test_optimized_onnx_beside_the_om(converted: tuple[dict, str, Path]) -> None:
    report, _, out = converted
    model = onnx.load(f"{out}.optimized.onnx")
    # ONNX types say no formats: each weight held in one is written plain + a TransData
    stated = [n for n in model.graph.node if n.input and n.input[0].endswith("/plain")]
    assert stated and all(n.op_type == "TransData" for n in stated)
    assert len(model.graph.node) - len(stated) == report["figures"]["nodes"]["final"]
    assert "ge" in {o.domain for o in model.opset_import}


def test_large_graphs_are_drawn_by_block() -> None:
    names = [f"/layers.{k // 10}/op{k}" for k in range(300)]
    groups = blocks(names, 120)
    assert len(set(groups)) == 30 and groups[0] == "layers/0"
    nodes = [{"name": n, "op": "Relu", "in": [k - 1] if k else [], "us": 1.0, "mark": ""}
             for k, n in enumerate(names)]
    page = render({"graphs": {"after": {"nodes": nodes}}})
    assert "300 nodes, by 30 blocks" in page and "10 nodes" in page


def test_layers_follow_the_longest_path() -> None:
    placed = layered([[], [0], [0], [1, 2], [0]])  # a diamond and a skip edge
    assert [p.layer for p in placed] == [0, 1, 1, 2, 1]
    assert len({(p.layer, p.slot) for p in placed}) == 5


def test_a_cast_heavy_graph_gets_a_warning() -> None:
    record = {"estimate_us": {"final": 100.0}, "by_op_us": {"final": {"Cast": 18.0}},
              "ops": {"final": {"Cast": 54}}}
    warning = figures.cast_warning(record)
    assert warning is not None and "54 Casts take 18.0 us, 18% of the estimate" in warning
    assert figures.cast_warning({**record, "by_op_us": {"final": {"Cast": 5.0}}}) is None
    page = render({"figures": record, "precision": {"mode": "allow_fp32_to_fp16"}})
    assert "54 Casts take 18.0 us" in page
