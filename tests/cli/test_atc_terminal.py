"""What reaches the terminal: warnings on stderr, progress only on a TTY, clean pipes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import types
from pathlib import Path

import onnx
import pytest

from gerules.cli.progress import ERASE, Progress
from gerules.testing.models import cnn

DRIVER = Path(__file__).resolve().parents[1] / "catalogue" / "catalogue_driver.py"


def _run_all(tmp: Path, argvs: list[list[str]]) -> list[tuple[int, str, str]]:
    """Each command line in its own forked process (real stdout/stderr files)."""
    jobs = [{"argv": argv, "cwd": str(tmp), "stdout": str(tmp / f"{k}.out"),
             "stderr": str(tmp / f"{k}.err")} for k, argv in enumerate(argvs)]
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, str(DRIVER), str(tmp / "jobs.json")],
                          capture_output=True, text=True, timeout=300, check=True)
    codes = json.loads(done.stdout.splitlines()[-1])
    return [(code, (tmp / f"{k}.out").read_text(), (tmp / f"{k}.err").read_text())
            for k, code in enumerate(codes)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, str, str]]:
    tmp = tmp_path_factory.mktemp("terminal")
    onnx.save(cnn().model, tmp / "cnn.onnx")
    (tmp / "switch.json").write_text(json.dumps(
        {"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "off", "fuse_conv_rleu": "off"},
                    "UBFusion": {"TbeConvReluFusionPass": "off"}}}))
    (tmp / "switch.txt").write_text("fold_conv_bn:off\nNoSuchPass:off\n")
    base = ["compile", "cnn.onnx", "--input_shape=input:1,3,16,16"]
    return _run_all(tmp, [
        [*base, "--output=a", "--fusion_switch_file=switch.json"],
        [*base, "--output=b", "--fusion_switch_file=switch.txt"],
        [*base, "--output=c", "--fusion_switch_file=switch.txt", "--log=null"],
        ["--log=null", *base, "--output=d", "--fusion_switch_file=switch.txt"],
    ])


def test_unknown_switch_names_warn_on_stderr_with_the_valid_names(
        runs: list[tuple[int, str, str]]) -> None:
    code, out, err = runs[0]
    assert code == 0 and "wrote a.om" in out
    assert "unknown fusion switch 'fuse_conv_rleu' (did you mean fuse_conv_gelu?)" in err
    assert "the rulesets fold, fuse_attention" in err and "ConvBatchnormFusionPass" in err
    assert "unknown fusion switch" not in out  # the summary on stdout stays clean
    code, out, err = runs[1]
    assert code == 0 and "unknown fusion switch 'NoSuchPass'" in err
    assert "fold_conv_bn" not in out.split("rule ")[1].split("\n\n")[0]  # switched off


def test_log_null_silences_warnings_in_both_places(runs: list[tuple[int, str, str]]) -> None:
    for code, out, err in runs[2:]:
        assert code == 0 and err == "" and "wrote" in out


def test_piped_output_has_no_progress_or_control_characters(
        runs: list[tuple[int, str, str]]) -> None:
    for _, out, err in runs:
        assert "\r" not in out + err and "\x1b" not in out + err


class _Tty(io.StringIO):
    """A terminal that tells when something was drawn on it."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.drawn.set()
        return super().write(text)


def test_progress_draws_only_on_a_tty_after_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock is the test's: a phase is drawn once its time passed the delay (the drawing
    thread is waited for through an event), one whose time has not passed never is."""
    from gerules.cli import progress as module

    now = [0.0]
    monkeypatch.setattr(module, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    tty = _Tty()
    with Progress(tty, delay=0.5) as progress:
        progress("optimize")
        now[0] = 2.0  # optimize has run for 2 s
        assert tty.drawn.wait(60), "the spinner never drew"
        progress("quick")  # erases the line; a phase shorter than the delay never shows
    text = tty.getvalue()
    assert "ge-rewrite: " in text and " optimize 2 s" in text and "quick" not in text
    assert text.endswith(ERASE)  # the terminal is left clean
    pipe = io.StringIO()
    with Progress(pipe, delay=0.0) as progress:
        progress("optimize")
        now[0] = 10.0
        assert progress._thread is None  # nothing draws on a pipe
    assert pipe.getvalue() == ""
