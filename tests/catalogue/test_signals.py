"""Signals (X4) and a reader that closes stdout early (X5), event-driven: never a sleep.

A signal is sent at a chosen moment of a command, when the command itself says it got there
(a hook writes a byte to a pipe and then waits; the test, blocked reading that pipe, sends the
signal). SIGINT, SIGTERM and SIGHUP must each end the command with 130, 143 and 129, one line
on stderr, no temporary file and no output at all (a compile's outputs appear together or not
at all), whatever the moment.

To repeat them on a loaded machine (the done criterion loops them 50 times):
``for i in $(seq 50); do python -m pytest -q tests/catalogue/test_signals.py || break; done``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gerules.build import build_om
from gerules.ir.graph import Graph, Node, Value
from gerules.testing.models import cnn

DRIVER = Path(__file__).resolve().parent / "catalogue_driver.py"
CLI = [sys.executable, "-m", "gerules.cli.main"]
SIGNALS = {"SIGINT": (130, "interrupted"), "SIGTERM": (143, "terminated (SIGTERM)"),
           "SIGHUP": (129, "hung up (SIGHUP)")}
# Moments of `compile --report`: each phase, and the first temporary output file.
MOMENTS = ("phase:load", "phase:optimize", "phase:plan memory", "phase:write", "write",
           "phase:write the report")


def write_cnn(path: Path) -> None:
    path.write_bytes(cnn(size=16).model.SerializeToString())


def _left(folder: Path) -> list[str]:
    """What a command may not leave: temporary files and partial outputs."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".")
                  or p.name.startswith("out"))


@pytest.fixture(scope="module")
def signalled(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple]:
    """Every signal at every moment, each a child forked from the pre-imported driver."""
    base = tmp_path_factory.mktemp("signals")
    jobs, where = [], []
    for name in SIGNALS:
        for moment in MOMENTS:
            folder = base / f"{name}-{moment.replace(':', '-').replace(' ', '_')}"
            folder.mkdir()
            write_cnn(folder / "m.onnx")
            logs = folder / "logs"
            logs.mkdir()
            jobs.append({"argv": ["--log", "error", "compile", "m.onnx", "--output", "out",
                                  "--report", "out.html"], "cwd": str(folder),
                         "stdout": str(logs / "stdout"), "stderr": str(logs / "stderr"),
                         "signal": {"name": name, "at": moment, "sent": str(logs / "sent")}})
            where.append(((name, moment), folder))
    spec = base / "jobs.json"
    spec.write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, str(DRIVER), str(spec)], capture_output=True,
                          text=True, timeout=900, check=True)
    codes = json.loads(done.stdout.splitlines()[-1])
    return {key: (folder, code) for (key, folder), code in zip(where, codes, strict=True)}


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("name", list(SIGNALS))
def test_a_signal_at_any_moment_leaves_nothing(name: str, moment: str,
                                               signalled: dict[tuple[str, str], tuple]
                                               ) -> None:
    folder, code = signalled[(name, moment)]
    logs = folder / "logs"
    assert (logs / "sent").exists(), f"the command never reached {moment}"
    err = (logs / "stderr").read_text()
    want_code, words = SIGNALS[name]
    assert code == want_code, err
    assert err == f"ge-rewrite: {words}\n"
    assert (logs / "stdout").read_text() == ""
    assert _left(folder) == []  # no temporary file, no .om, no report: all or none


# Both launchers first give the signals their defaults: a test runner started in the
# background (``cmd &``) passes SIGINT on ignored, and ge-rewrite keeps ignored signals ignored.
DEFAULTS = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_DFL)
"""
LAUNCHER = DEFAULTS + """
import os, sys
from gerules import fileio
tell, wait = int(sys.argv[1]), int(sys.argv[2])
def hook(target):
    os.write(tell, b"!")
    os.read(wait, 1)
fileio.write_hook = hook
from gerules.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


def _signal_when_told(script: str, name: str, folder: Path) -> None:
    """Run ``script`` (a launcher that writes to the pipe it is given and then waits on the
    other) on ``compile m.onnx``; send signal ``name`` when it tells; check how it ended."""
    write_cnn(folder / "m.onnx")
    tell_r, tell_w = os.pipe()
    wait_r, wait_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", script, str(tell_w), str(wait_r),
                             "--log", "error", "compile", "m.onnx", "--output", "out"],
                            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, pass_fds=(tell_w, wait_r))
    os.close(tell_w)
    os.close(wait_r)
    try:
        assert os.read(tell_r, 1) == b"!", "the command never reached the moment"
        proc.send_signal(getattr(signal, name))
        out, err = proc.communicate(timeout=300)
    finally:
        os.close(tell_r)
        os.close(wait_w)
    want_code, words = SIGNALS[name]
    assert (proc.returncode, err, out) == (want_code, f"ge-rewrite: {words}\n", "")
    assert _left(folder) == []


@pytest.mark.parametrize("name", list(SIGNALS))
def test_a_real_interpreter_stops_cleanly_when_the_om_write_begins(name: str,
                                                                  tmp_path: Path) -> None:
    """The same through a fresh interpreter (its BLAS threads may take the signal)."""
    _signal_when_told(LAUNCHER, name, tmp_path)


IMPORT_WATCH = DEFAULTS + """
import os, sys
tell, wait = int(sys.argv[1]), int(sys.argv[2])
def watch(event, args):
    if event == "import" and args[0] == "gerules.opt.optimize":
        os.write(tell, b"!")
        os.read(wait, 1)
sys.addaudithook(watch)
from gerules.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("name", list(SIGNALS))
def test_a_signal_while_the_optimizer_is_imported(name: str, tmp_path: Path) -> None:
    """While a module is being imported (the optimizer's, imported on first use) the signal
    ends the command with the same one line and exit code."""
    _signal_when_told(IMPORT_WATCH, name, tmp_path)


@pytest.fixture(scope="module")
def big_om(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1,000-node chain: ``inspect`` prints far more than a pipe buffer holds."""
    nodes = [Node("Relu", (f"t{k}",), (f"t{k + 1}",), name=f"relu{k}") for k in range(1000)]
    graph = Graph(tuple(nodes), (Value.of("t0", "float32", (2, 2)),),
                  (Value.of("t1000", "float32", (2, 2)),))
    return build_om(graph, tmp_path_factory.mktemp("om") / "chain.om").path


def test_stdout_closed_before_anything_is_written(big_om: Path) -> None:
    proc = subprocess.Popen([*CLI, "inspect", str(big_om)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""  # no BrokenPipeError, no "Exception ignored"


def test_stdout_piped_into_head(big_om: Path) -> None:
    done = subprocess.run(f"{' '.join(CLI)} inspect {big_om} | head -n 2; "
                          "echo \"status ${PIPESTATUS[0]}\"", shell=True, executable="/bin/bash",
                          capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "0"})
    lines = done.stdout.splitlines()
    assert lines[0] == "{" and lines[-1] == "status 141", done.stdout
    assert done.stderr == "", done.stderr


def test_a_signal_started_ignored_stays_ignored(tmp_path: Path) -> None:
    """``nohup ge-rewrite ...``: a SIGHUP ignored at start stays ignored; SIGTERM is handled."""
    write_cnn(tmp_path / "m.onnx")
    script = ("import signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
              "from gerules.cli.main import main; from gerules.cli import signals; "
              "signals.handle_signals(); "
              "print(signal.getsignal(signal.SIGHUP) == signal.SIG_IGN, "
              "signal.getsignal(signal.SIGTERM) == signals._stop)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.stdout.split() == ["True", "True"], done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="this system has no /dev/full")
def test_stdout_on_a_full_disk_is_one_line(big_om: Path) -> None:
    """``> /dev/full``: every write fails with ENOSPC; one line, exit 1, no traceback."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([*CLI, "inspect", str(big_om)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (
        1, "ge-rewrite: error: cannot write to standard output: no space left on device\n")
