"""The isolated worker: what it sees, what it may do, and how its failures come back."""

from __future__ import annotations

import json
import os
import select
import tempfile
from pathlib import Path

import pytest

from gerules.errors import ModelError, ResourceLimit
from gerules.frontends import landlock
from gerules.frontends.isolate import IsolationLimits, run_isolated

PROBE = "gerules.testing.isolation_probes:probe"
LIMITS = IsolationLimits(seconds=120, memory_bytes=2 << 30,
                         flags={"memory_bytes": "--max_worker_bytes", "seconds": "--timeout"})


def _landlock() -> bool:
    try:
        landlock.abi_version()
    except landlock.Unavailable:
        return False
    return True


NEEDS_LANDLOCK = pytest.mark.skipif(not _landlock(), reason="the kernel has no Landlock "
                                    "(Linux >= 5.13 with it enabled): nothing to test")


def test_the_request_and_the_copied_inputs_reach_the_function(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.bin").write_bytes(b"AAA")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where the private folder goes
    out = run_isolated(PROBE, {"probe": "echo", "text": "hello"}, limits=LIMITS,
                       inputs=[tmp_path / "a.bin"])
    assert out == b"hello|AAA"
    assert list(temp.iterdir()) == []  # the private folder is gone


def test_the_worker_runs_in_a_private_folder_with_a_scrubbed_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "leak")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    seen = json.loads(run_isolated(PROBE, {"probe": "environment"}, limits=LIMITS))
    folder = Path(seen["cwd"])
    assert seen["env"]["HOME"] == seen["env"]["TMPDIR"] == seen["cwd"]
    assert "AWS_SECRET_ACCESS_KEY" not in seen["env"] and "PYTHONPATH" not in seen["env"]
    assert folder.name == "home" and folder.parent.name.startswith("gerules-isolate-")
    assert "" not in seen["path"] and "/somewhere" not in seen["path"]
    assert seen["umask"] == 0o077 and seen["folder_mode"] == 0o700
    assert not folder.exists()


def test_an_input_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ModelError, match=r"pipe: is a named pipe \(FIFO\)"):
        run_isolated(PROBE, {"probe": "echo"}, limits=LIMITS, inputs=[tmp_path / "pipe"])
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "link").symlink_to("/etc/passwd")
    with pytest.raises(ModelError, match="link: is a symlink"):
        run_isolated(PROBE, {"probe": "echo"}, limits=LIMITS, inputs=[tmp_path / "tree"])


def test_the_workers_own_error_comes_back_as_one_escaped_line() -> None:
    with pytest.raises(ModelError) as info:
        run_isolated(PROBE, {"probe": "model_error"}, limits=LIMITS)
    assert str(info.value) == r"node 'n1' (Conv): bad weights \x1b[31mred"
    with pytest.raises(ResourceLimit, match="too many nodes"):
        run_isolated(PROBE, {"probe": "resource_limit"}, limits=LIMITS)
    with pytest.raises(ModelError, match=r"^RuntimeError: something broke$"):
        run_isolated(PROBE, {"probe": "crash"}, limits=LIMITS)


def test_memory_over_the_limit_is_exit_3_naming_the_flag() -> None:
    with pytest.raises(ResourceLimit, match=r"ran out of its memory limit \(raise it with "
                       r"--max_worker_bytes\)") as info:
        run_isolated(PROBE, {"probe": "allocate", "blocks": 16}, limits=LIMITS)
    assert info.value.exit_code == 3


def test_an_output_over_its_cap_is_refused() -> None:
    limits = IsolationLimits(seconds=120, output_bytes=1000)
    with pytest.raises(ResourceLimit, match="the isolated worker's output: has 5000 bytes"):
        run_isolated(PROBE, {"probe": "big_output", "bytes": 5000}, limits=limits)
    small_files = IsolationLimits(seconds=120, file_bytes=1 << 20)
    with pytest.raises(ResourceLimit, match="tried to write a file over its size limit"):
        run_isolated(PROBE, {"probe": "big_output", "bytes": 2 << 20}, limits=small_files)


def test_the_wall_clock_timeout_kills_the_worker_and_its_children(tmp_path: Path) -> None:
    limits = IsolationLimits(seconds=8, sandbox=False, flags={"seconds": "--timeout"})
    pid_file = tmp_path / "child.pid"
    with pytest.raises(ResourceLimit, match=r"ran longer than 8 s \(raise it with --timeout\)"):
        run_isolated(PROBE, {"probe": "block", "pid_file": str(pid_file)}, limits=limits)
    assert _ends(int(pid_file.read_text()))  # killed with the worker's process group


def _ends(pid: int) -> bool:
    """Whether the process ends (SIGKILL is delivered asynchronously: wait on a pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 60)[0])
    finally:
        os.close(fd)


def test_cpu_time_is_limited() -> None:
    limits = IsolationLimits(seconds=60, cpu_seconds=1, flags={"cpu_seconds": "--timeout"})
    with pytest.raises(ResourceLimit, match=r"used up its CPU time \(raise it with --timeout\)"):
        run_isolated(PROBE, {"probe": "spin"}, limits=limits)


@NEEDS_LANDLOCK
def test_the_sandbox_allows_no_write_outside_the_private_folder(tmp_path: Path) -> None:
    target = tmp_path / "planted"
    with pytest.raises(ModelError, match="PermissionError"):
        run_isolated(PROBE, {"probe": "write_file", "path": str(target)}, limits=LIMITS)
    assert not target.exists()


@NEEDS_LANDLOCK
def test_the_sandbox_allows_no_read_of_the_users_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    with pytest.raises(ModelError, match="PermissionError"):
        run_isolated(PROBE, {"probe": "read_file", "path": str(secret)}, limits=LIMITS)


def test_entry_names_are_checked() -> None:
    with pytest.raises(ValueError, match="package.module:function"):
        run_isolated("os.system('x')", {}, limits=LIMITS)
    with pytest.raises(ValueError, match="reserved"):
        run_isolated(PROBE, {"inputs": []}, limits=LIMITS)

