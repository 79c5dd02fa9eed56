"""The pipelined .om: additive format 1.1 (1.2 with data formats), checked stages, inspect and
the report's pictures."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from partition_models import feeds

from gerules.cli.main import main
from gerules.errors import OmError
from gerules.om.reader import OmFile
from gerules.report import conversion_report, render
from gerules.runtime.model import Model

for _folder in ("om", "memory"):  # the .om test helpers (and the graphs they import)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / _folder))
from om_files import model_def, with_model_def  # noqa: E402


def test_an_ordinary_om_stays_format_1_0(compiled) -> None:  # type: ignore[no-untyped-def]
    """1.0 without a pipeline and without data formats; the NPU layout makes it 1.2."""
    for options, minor in (({"layout": False}, 0), ({}, 2)):
        path, _ = compiled("resnet", **options)
        with OmFile(path) as om:
            assert (om.header.major, om.header.minor) == (1, minor)
            assert om.contents.pipeline is None
            assert "pipeline" not in om.raw_model_def()


def test_a_pipelined_om_holds_one_planned_program_per_stage(compiled) -> None:  # type: ignore[no-untyped-def]
    path, result = compiled("encoder", partitions=3, layout=False)
    with OmFile(path) as om:
        assert (om.header.major, om.header.minor) == (1, 1)
        stages = om.contents.pipeline.stages
        assert len(stages) == 3
        everything = list(range(len(om.contents.graph.nodes)))
        assert sorted(k for s in stages for k in s.nodes) == everything
        raw = om.raw_model_def()["pipeline"]["stages"]
    spans = [(s["weights"]["offset"], s["weights"]["offset"] + s["weights"]["nbytes"])
             for s in raw]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # stage by stage
    rec = result.report["figures"]["pipeline"]
    assert [s["arena_bytes"] for s in rec["stages"]] == [
        s.variant.plan.arena_bytes for s in stages]


def test_a_reader_that_ignores_the_stages_runs_the_whole_model(compiled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = compiled("encoder", partitions=3)
    plain = tmp_path / "plain.om"
    doc = model_def(path.read_bytes())
    del doc["pipeline"]
    plain.write_bytes(with_model_def(path.read_bytes(), doc))
    with Model.load(path) as a, Model.load(plain) as b:
        x = feeds("encoder", 1)
        for name, value in a.run(x).items():
            assert value.tobytes() == b.run(x)[name].tobytes()


@pytest.mark.parametrize("edit, match", [
    (lambda p: p["stages"][1]["nodes"].append(p["stages"][0]["nodes"][0]), "already in stage"),
    (lambda p: p["stages"].pop(), "is in no stage"),
    (lambda p: p["stages"].reverse(), "neither a graph input nor an output of an earlier"),
    (lambda p: p["stages"][0]["variant"]["outputs"].append(
        p["stages"][-1]["variant"]["outputs"][0]), "not made by this stage"),
    (lambda p: p["stages"][1]["variant"]["tensors"][0].update(offset=1 << 41),
     "memory plan|outside"),
])
def test_tampered_stages_are_refused(compiled, tmp_path: Path, edit, match: str) -> None:  # type: ignore[no-untyped-def]
    path, _ = compiled("encoder", partitions=3)
    doc = model_def(path.read_bytes())
    edit(doc["pipeline"])
    bad = tmp_path / "bad.om"
    bad.write_bytes(with_model_def(path.read_bytes(), doc))
    with pytest.raises(OmError, match=match) as e:
        OmFile(bad)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)


def test_inspect_shows_the_stages(compiled, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path, _ = compiled("encoder", partitions=3)
    assert main(["inspect", str(path), "--compact"]) == 0
    doc = json.loads(capsys.readouterr().out)
    stages = doc["pipeline"]["stages"]
    assert len(stages) == 3 and stages[0]["transfer_bytes"] == 0
    assert all(s["transfer_bytes"] > 0 and s["weights_bytes"] > 0 and s["arena_bytes"] > 0
               and s["compute_us"] > 0 for s in stages[1:])
    assert doc["pipeline"]["schedule"]["micro_batches"] == 8


def test_the_report_draws_the_partition_and_the_timeline(compiled) -> None:  # type: ignore[no-untyped-def]
    _, result = compiled("encoder", partitions=3)
    page = render(conversion_report(result))
    ET.fromstring(page.split("\n", 1)[1])  # well-formed
    section = page[page.index('<section id="pipeline">'):]
    section = section[:section.index("</section>")]
    assert section.count("stage 2") >= 2 and "pipeline timeline" in section
    assert section.count('class="tl"') == 3 * 8  # every micro-batch on every stage
    assert "by stage" in section and "#cdebd8" in section  # boxes in stage 2's colour


def test_compile_refusals_through_the_cli(tmp_path: Path, compiled,  # type: ignore[no-untyped-def]
                                          capsys: pytest.CaptureFixture[str]) -> None:
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "tiny_resnet.onnx"
    base = ["compile", str(model), "--output", str(tmp_path / "m"), "--input_shape",
            "image:1,3,32,32"]
    assert main([*base, "--partition_by", "memory", "--device_memory", "4K"]) == 3
    err = capsys.readouterr().err.strip()
    assert "alone needs" in err and "node '" in err and err.count("\n") == 0
    assert not (tmp_path / "m.om").exists()
    assert main([*base, "--partitions", "2", "--dynamic_batch_size", "1,2",
                 "--input_shape", "image:-1,3,32,32"]) == 2
    assert "cannot be combined" in capsys.readouterr().err
    assert main([*base, "--partitions", "2", "--partition_by", "memory"]) == 2
    assert "--device_memory" in capsys.readouterr().err


def test_a_tampered_report_leaves_the_pipeline_views_quiet(compiled) -> None:  # type: ignore[no-untyped-def]
    from gerules import figures
    from gerules.cli import summary

    _, result = compiled("encoder", partitions=3)
    good = result.report["figures"]["pipeline"]
    assert summary.pipeline_lines(good) and figures.pipeline_summary(good)
    for bad in ([], {"stages": "x"}, {"stages": [{"nodes": "1"}]}, {**good, "link": 3},
                {**good, "stages": [{**good["stages"][0], "compute_us": None}]}):
        assert summary.pipeline_lines(bad) == [] and figures.pipeline_summary(bad) is None
    odd = {**good, "schedule": {"micro_batches": "8"}}
    assert not any("schedule" in line for line in summary.pipeline_lines(odd))
