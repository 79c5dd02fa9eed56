"""``ge-rewrite rules check|list``: summaries, error reports, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gerules.cli.main import main

from .conftest import BAD, GOOD


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["rules", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_check_good_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check", str(GOOD))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == len(list(GOOD.glob("*.ger")))
    assert f"{GOOD / 'fuse_conv.ger'}: ok, 8 rules in 1 ruleset" in lines


def test_check_reports_every_error(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.ger").write_text("ruleset a\nrule r: Rleu(x) => x\n")
    Path("b.ger").write_text("ruleset b\nrule q: Relu(x, y) => x\nrule r: Relu(x) => x\n")
    Path("c.ger").write_text("ruleset c\nrule t: Relu(x) => x\n")
    code, out, err = run(capsys, "check", "a.ger", "b.ger", "c.ger")
    assert code == 1 and out == "c.ger: ok, 1 rule in 1 ruleset\n"
    assert err.splitlines() == [
        "a.ger:2:9: unknown op Rleu (did you mean Relu?)",
        "    rule r: Rleu(x) => x",
        "            ^~~~",
        "b.ger:2:9: Relu takes 1 input, got 2",
        "    rule q: Relu(x, y) => x",
        "            ^~~~~~~~~~",
        "b.ger:3:6: duplicate rule 'r' (first defined at a.ger:2:6); to replace it, mark "
        "the new rule @replace",
        "    rule r: Relu(x) => x",
        "         ^",
    ]


def test_syntax_error_in_one_file_leaves_the_others_parsed(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "a.ger").write_text("ruleset a\nrule r: Identity(x) => x\n")
    (tmp_path / "b.ger").write_text("ruleset b\nrule q: Identity(x) =>\n")
    code, out, err = run(capsys, "check", str(tmp_path))
    assert code == 1
    assert out.splitlines() == [f"{tmp_path / 'a.ger'}: parsed, not checked (fix the errors "
                                "below first), 1 rule in 1 ruleset"]
    assert err.startswith(f"{tmp_path / 'b.ger'}:2:23: unexpected end of file")


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", str(GOOD / "gelu.ger"))
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["ruleset", "rule", "dir", "contract", "defined", "at"]
    assert rows[0].split()[:4] == ["fuse_gelu", "fuse_gelu_erf", "=>", "@exact"]
    assert "@approx(rtol=0, atol=0.001)" in rows[2]
    assert rows[2].split()[-1] == f"{GOOD / 'gelu.ger'}:20"


def test_list_refuses_a_broken_library(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list", str(BAD / "unknown_op.ger"))
    assert code == 1 and out == "" and "unknown op Rleu" in err


def test_missing_path_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    code, _, err = run(capsys, "check", str(tmp_path / "nope"))
    assert code == 2 and err.strip() == f"ge-rewrite: error: {tmp_path / 'nope'}: no such file " \
                                        "or folder"


def test_subprocess_has_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "deep.ger"
    bad.write_text("ruleset s\nrule r: " + "(" * 10_000 + "x" + ")" * 10_000 + " => x\n")
    proc = subprocess.run([sys.executable, "-m", "gerules.cli.main", "rules", "check", str(bad)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "brackets nest deeper than 100 levels" in proc.stderr
