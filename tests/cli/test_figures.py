"""One source of figures: the summary, the report and ``--mode=6`` agree for one conversion,
every phase is timed, and the precision check is a choice (``--check_precision``)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import onnx
import pytest

from gerules.cli.main import main
from gerules.testing.models import cnn


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One conversion whose final graph differs from the optimized one (float16 Casts), with
    its summary, report and ``--mode=6`` output."""
    folder = tmp_path_factory.mktemp("figures")
    onnx.save(cnn().model, folder / "cnn.onnx")
    out = folder / "cnn"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main([f"--model={folder / 'cnn.onnx'}", "--framework=5", f"--output={out}",
                     "--input_shape=input:2,3,16,16", "--precision_mode=force_fp16",
                     f"--report={out}.html", "--log=error"]) == 0
    summary = stdout.getvalue()
    info = io.StringIO()
    with contextlib.redirect_stdout(info):
        assert main(["--mode=6", f"--om={out}.om", f"--json={folder / 'info.json'}"]) == 0
    return {"summary": summary, "report": json.loads(Path(f"{out}.json").read_text()),
            "html": Path(f"{out}.html").read_text(), "info": info.getvalue(),
            "info_json": json.loads((folder / "info.json").read_text())}


def test_summary_report_and_mode_6_give_the_same_figures(converted: dict) -> None:
    rec = converted["report"]["figures"]
    nodes, us = rec["nodes"], rec["estimate_us"]
    assert nodes["final"] != nodes["optimized"], "float16 adds Casts: the stages differ"
    assert us["final"] != us["optimized"]
    # the terminal's headline
    head = converted["summary"].splitlines()[0]
    m = re.search(r"(\d+) -> (\d+) nodes, ([\d.]+) -> ([\d.]+) us", head)
    assert m is not None, head
    assert (int(m[1]), int(m[2])) == (nodes["source"], nodes["final"])
    assert (float(m[3]), float(m[4])) == (round(us["source"], 1), round(us["final"], 1))
    # the HTML report's cards
    html = converted["html"]
    assert f"<b>{nodes['source']} \u2192 {nodes['final']}</b>" in html
    assert f"<b>{us['source']:,.0f} \u2192 {us['final']:,.0f} \u00b5s</b>" in html
    # atc's --mode=6, as text and JSON
    info = converted["info_json"]
    assert info["nodes"] == nodes["final"] and info["estimate_us"] == us["final"]
    assert f"latency: {us['final']:.1f} us" in converted["info"]
    assert f"nodes: {nodes['final']} (" in converted["info"]
    # the graph in the .om is the one counted
    assert sum(info["ops"].values()) == nodes["final"]
    assert info["variants"][0]["memory"] == rec["memory"]["default"]


def test_precision_error_is_reported_the_same_everywhere(converted: dict) -> None:
    checked = converted["report"]["figures"]["precision"]
    assert checked["status"] == "measured" and checked["check"] == "quick"
    rel = checked["outputs"][0]["max_rel"]
    assert f"max rel {rel:.2e}" in converted["summary"]
    assert f"max rel {rel:.2e}" in converted["info"]
    assert f"{rel:.2e}" in converted["html"]


def test_time_line_covers_every_phase(converted: dict) -> None:
    line = next(x for x in converted["summary"].splitlines() if x.startswith("time: "))
    names = re.findall(r"([a-z ]+) [\d.]+ s", line[len("time: "):].split(";")[0])
    assert [n.strip(", ") for n in names] == ["start", "load", "shapes", "optimize",
                                             "precision", "check precision", "plan memory",
                                             "write", "report"]
    phases = converted["report"]["phases_s"]
    assert {"load", "check precision", "write"} <= set(phases)
    total = float(re.search(r"total ([\d.]+) s", line)[1])  # type: ignore[index]
    assert total >= sum(phases.values()) - 0.01


@pytest.mark.parametrize(("level", "status"), [("off", "not measured"), ("full", "measured")])
def test_check_precision_is_a_choice(tmp_path: Path, level: str, status: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    onnx.save(cnn().model, tmp_path / "cnn.onnx")
    out = tmp_path / "m"
    assert main(["compile", str(tmp_path / "cnn.onnx"), f"--output={out}",
                 "--input_shape=input:-1,3,16,16", "--dynamic_batch_size=1,2",
                 "--precision_mode=force_fp16", f"--check_precision={level}",
                 f"--report={out}.json"]) == 0
    text = capsys.readouterr().out
    checked = json.loads(Path(f"{out}.json").read_text())["figures"]["precision"]
    assert checked["status"] == status and checked["check"] == level
    if level == "off":
        assert "not measured (--check_precision=off)" in text
    else:  # every gear, several draws
        assert "N=1, N=2" in checked["note"]
        assert "3 random draw(s)" in checked["note"]


def test_quick_check_skips_work_over_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from gerules.precision import measure

    monkeypatch.setattr(measure, "QUICK_GFLOP", 0.0)
    out = measure.check_precision(None, None, [{}], "quick", flops=10**9)  # type: ignore[arg-type]
    assert out["status"] == "not measured"
    assert "2 GFLOP" in out["note"] and "--check_precision=full" in out["note"]


def test_bad_check_precision_value_is_a_usage_error(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    onnx.save(cnn().model, tmp_path / "cnn.onnx")
    assert main(["compile", str(tmp_path / "cnn.onnx"), f"--output={tmp_path / 'm'}",
                 "--check_precision=fast"]) == 2
    assert "--check_precision: unknown value 'fast'" in capsys.readouterr().err
    assert not (tmp_path / "m.om").exists()
