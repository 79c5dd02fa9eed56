"""Habits of good command lines: both spellings of every flag, "did you mean" for a misspelled
one, --version, --quiet, --log in any case with debug lines per phase and ruleset, which gear
a run used, and one exit code per kind of mistake."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest

from gerules.cli.main import EXIT_CODES, build_parser, main
from gerules.testing.models import cnn


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("habits") / "cnn.onnx"
    onnx.save(cnn().model, path)
    return path


@pytest.fixture(scope="module")
def geared(model: Path) -> Path:
    """A .om compiled for batch 1 and 4."""
    out = model.parent / "geared"
    assert main(["compile", str(model), f"--output={out}", "--input_shape=input:-1,3,16,16",
                 "--dynamic_batch_size=1,4", "--quiet"]) == 0
    return Path(f"{out}.om")


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _parsers(child)
    return found


def test_every_long_flag_works_in_both_spellings() -> None:
    checked = 0
    for parser in _parsers(build_parser()):
        for flag, action in parser._option_string_actions.items():
            if not flag.startswith("--") or ("_" not in flag and "-" not in flag[2:]):
                continue
            for other in ("--" + flag[2:].replace("_", "-"), "--" + flag[2:].replace("-", "_")):
                assert parser.respell(other) == flag or (  # type: ignore[attr-defined]
                    parser._option_string_actions[parser.respell(other)] is action), (
                    parser.prog, other)
                checked += 1
    assert checked > 50


def test_the_spellings_the_docs_promised(model: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    assert main(["compile", str(model), f"--output={out}", "--input-shape=input:1,3,16,16",
                 "--precision-mode=force_fp16", "--check-precision=off"]) == 0
    assert "precision: force_fp16" in capsys.readouterr().out
    assert main(["run", f"{out}.om", "--output_dir", str(tmp_path / "outs"),
                 "--input_shape", "input:1,3,16,16"]) == 0
    assert (tmp_path / "outs" / "logits.npy").is_file()


def test_a_misspelled_flag_gets_a_suggestion(model: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main([f"--model={model}", "--framwork=5", "--output=x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--framwork=5 (did you mean --framework?)" in err
    assert main(["run", str(model), "--seeed", "3"]) == 2
    assert "(did you mean --seed?)" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("ge-rewrite 0.")


def test_quiet_prints_nothing_but_writes(model: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "q"
    assert main(["compile", str(model), f"--output={out}", "--input_shape=input:1,3,16,16",
                 "-q"]) == 0
    assert main(["--quiet", "run", f"{out}.om"]) == 0
    assert capsys.readouterr() == ("", "")
    assert Path(f"{out}.om").is_file()


def test_log_level_in_any_case_with_debug_lines(model: Path, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    assert main(["compile", str(model), f"--output={tmp_path / 'd'}", "--log=DEBUG",
                 "--input_shape=input:1,3,16,16"]) == 0
    text = "\n".join(r.getMessage() for r in caplog.records)
    for line in ("phase load: ", "phase optimize: ", "phase plan memory: ",
                 "ruleset fuse_conv: ", "rule fold_conv_bn: 2 matched, 2 applied, 2 kept",
                 "optimize phase saturate: "):
        assert line in text, line
    assert main(["--log=Info", "compile", str(model), f"--output={tmp_path / 'e'}",
                 "--input_shape=input:1,3,16,16"]) == 0
    with pytest.raises(SystemExit) as e:
        main(["compile", str(model), "--log=loud", f"--output={tmp_path / 'f'}"])
    assert e.value.code == 2 and "'loud' is not a log level" in capsys.readouterr().err


def test_run_says_which_gear_it_ran(geared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(geared)]) == 0
    out, err = capsys.readouterr()
    assert err == "ge-rewrite: running the gear N=1 (compiled: N=1; N=4)\n"
    assert "[1, 10]" in out
    assert main(["run", str(geared), "--input-shape", "input:4,3,16,16"]) == 0
    assert "running the gear N=4" in capsys.readouterr().err


@pytest.mark.parametrize(("shape", "message"), [
    ((3, 3, 16, 16), "N=3 was not compiled; the model has N=1, N=4"),
    ((1, 3, 15, 16), "does not fit float32[N,3,16,16]")])
def test_one_exit_code_per_kind_of_mistake(geared: Path, tmp_path: Path, shape: tuple,
                                           message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The same wrong shape is a usage error on the command line (2) and bad input in a
    file (1), whether the batch or a spatial dim is wrong."""
    spec = f"input:{','.join(map(str, shape))}"
    assert main(["run", str(geared), "--input-shape", spec]) == 2
    assert message in capsys.readouterr().err or "does not fit" in message
    np.save(tmp_path / "x.npy", np.zeros(shape, np.float32))
    assert main(["run", str(geared), "--input", f"input={tmp_path / 'x.npy'}"]) == 1
    err = capsys.readouterr().err
    assert "x.npy" in err and err.count("\n") == 1


def test_exit_codes_are_documented(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code in (1, 2, 3, 70, 130):
        assert f"{code} {EXIT_CODES[code]}" in text
    doc = (Path(__file__).resolve().parents[2] / "docs" / "CONVERTING.md").read_text()
    assert "| 3 |" in doc and "| 130 |" in doc


def test_only_the_program_itself_freezes_the_collector_at_its_end(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import gc
    import sys

    frozen: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(1))
    with pytest.raises(SystemExit):
        main(["--version"])
    assert frozen == []  # a caller's collector is left alone
    monkeypatch.setattr(sys, "argv", ["ge-rewrite", "--version"])
    with pytest.raises(SystemExit):
        main()
    assert frozen == [1]  # the process is ending: no collections at its end
    capsys.readouterr()
