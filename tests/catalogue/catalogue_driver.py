"""Run many ``ge-rewrite`` command lines as real processes forked from one pre-imported parent.

The CLI's subcommands and the op registry are imported once; each job is a child forked from
that parent (a real process: real exit code, real stdout/stderr bytes, nothing shared between
jobs) for a few milliseconds instead of a second of imports. The CLI and catalogue tests both
use it. Per job, besides ``argv``, ``cwd``, ``stdout`` and ``stderr`` (file paths):

- ``"no_override": true`` drops root's power to bypass file permissions in the child (the
  capabilities ``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH``; the uid stays 0, so the
  interpreter's own files stay readable), so an unreadable or read-only file is unreadable or
  read-only even when the suite runs as root; the child exits 98 when that is impossible;
- ``"signal": {"name": "SIGTERM", "at": "write" | "phase:<name>", "sent": PATH}`` sends the
  child that signal at that moment, event-driven, never after a delay: when the child
  reaches the moment (``gerules.fileio.write_hook``: a temporary output file was just
  created; or a compile phase whose name starts with ``<name>`` begins) it writes a byte to a
  pipe and blocks reading another; the driver, blocked reading the first pipe, sends the
  signal, which ends the child's wait. ``PATH`` is created when the signal was sent (a
  command that never reaches the moment exits without it);
- ``"env": {NAME: value}`` sets environment variables in the child (``TMPDIR`` included:
  the child forgets the temp folder the parent found);
- ``"memory": bytes`` limits the child's address space (``RLIMIT_AS``), so a case that would
  allocate without bound fails fast instead of swapping the machine;
- ``"timeout": seconds`` (default 120) kills a child that hangs (a FIFO read as a file),
  so one bad case fails instead of the whole run;
- ``"stdout": null`` gives the child a pipe whose reading end is already closed, as
  ``ge-rewrite ... | head -c 0`` would: any write to stdout fails with ``EPIPE``.

An exception escaping ``main`` prints its traceback and exits 99, as an uncaught one would.

    python catalogue_driver.py JOBS.json   # [{"argv", "cwd", "stdout", "stderr", "user"}]

prints a JSON list of exit codes, one per job.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import tempfile
import threading
import traceback

from gerules import fileio
from gerules.cli import progress
from gerules.cli.main import build_parser, main
from gerules.ir.registry import default_registry


def _redirect(job: dict[str, object]) -> None:
    if job.get("stdout") is None:
        read_end, write_end = os.pipe()
        os.close(read_end)
        os.dup2(write_end, 1)
        os.close(write_end)
    else:
        out = os.open(str(job["stdout"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.close(out)
    err = os.open(str(job["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.close(err)


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


CAPABILITY_VERSION_3 = 0x20080522
DAC_BITS = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


def _drop_override() -> None:
    """Remove the permission-bypassing capabilities of this (root) process."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _Header(CAPABILITY_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        os._exit(98)
    data[0].effective &= ~DAC_BITS & 0xFFFFFFFF
    data[0].permitted &= ~DAC_BITS & 0xFFFFFFFF
    if libc.capset(ctypes.byref(header), data) != 0:
        os._exit(98)


def _moment(job: dict[str, object], tell: int, wait: int) -> None:
    """Install the hook that stops at the job's signal moment (see the module docstring).

    The signal gets its default disposition first: a test runner started in the background
    (``cmd &``) passes SIGINT on ignored, and ge-rewrite rightly keeps an ignored signal
    ignored."""
    sig = getattr(signal, str(job["signal"]["name"]))  # type: ignore[index]
    signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    at = str(job["signal"]["at"])  # type: ignore[index]
    fired = []

    def hook(*_: object) -> None:
        if not fired:
            fired.append(True)
            os.write(tell, b"!")
            os.read(wait, 1)  # returns only at EOF; the signal's handler raises first

    if at == "write":
        fileio.write_hook = hook
        return
    phase = at.removeprefix("phase:")
    call = progress.Progress.__call__

    def announce(self: progress.Progress, name: str) -> None:
        if name.startswith(phase):
            hook()
        call(self, name)

    progress.Progress.__call__ = announce  # type: ignore[method-assign]


def _child(job: dict[str, object], pipes: tuple[int, int, int, int] | None) -> None:
    code = 99
    try:
        os.chdir(str(job["cwd"]))
        _redirect(job)
        if job.get("no_override"):
            _drop_override()
        for key, value in dict(job.get("env") or {}).items():  # type: ignore[call-overload]
            os.environ[str(key)] = str(value)
        tempfile.tempdir = None
        if job.get("memory"):
            limit = int(job["memory"])  # type: ignore[arg-type]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if pipes is not None:
            os.close(pipes[0])
            os.close(pipes[3])
            _moment(job, pipes[1], pipes[2])
        code = main([str(a) for a in job["argv"]])  # type: ignore[attr-defined]
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
        except OSError as e:  # what the interpreter would print at exit
            print(f"Exception ignored on flushing sys.stdout: {e!r}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, job: dict[str, object], pipes: tuple[int, int, int, int] | None) -> int:
    """The child's wait status; the job's signal sent when the child reaches its moment."""
    watchdog = threading.Timer(float(job.get("timeout", 120)),  # type: ignore[arg-type]
                               lambda: os.kill(pid, signal.SIGKILL))
    watchdog.start()
    try:
        if pipes is not None:
            os.close(pipes[1])
            os.close(pipes[2])
            reached = os.read(pipes[0], 1)  # b"" when the child ended first
            os.close(pipes[0])
            if reached:
                spec = job["signal"]
                os.kill(pid, getattr(signal, spec["name"]))  # type: ignore[index]
                with open(spec["sent"], "w"):  # type: ignore[index]
                    pass
        status = os.waitpid(pid, 0)[1]
        if pipes is not None:
            os.close(pipes[3])
        return status
    finally:
        watchdog.cancel()


def run_all(jobs: list[dict[str, object]]) -> list[int]:
    build_parser()  # import every subcommand and build the op registry once, before forking
    default_registry()
    codes = []
    for job in jobs:
        sys.stdout.flush()
        pipes = (*os.pipe(), *os.pipe()) if job.get("signal") else None
        pid = os.fork()
        if pid == 0:
            _child(job, pipes)  # type: ignore[arg-type]
        status = _wait(pid, job, pipes)  # type: ignore[arg-type]
        codes.append(os.waitstatus_to_exitcode(status))
    return codes


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(run_all(json.load(f))))
