"""Sandbox: each kind of outcome, and the worker survives (or is replaced) between cases."""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from gerules.errors import ModelError
from gerules.testing.sandbox import CRASH, DIED, ERROR, OK, TIMEOUT, Sandbox


def _target(case: str) -> None:
    if case == "ok":
        return
    if case == "error":
        raise ModelError("bad file", file="m.onnx")
    if case == "crash":
        raise KeyError("oops")
    if case == "hang":
        threading.Event().wait()  # blocks for ever: only the sandbox's timeout ends it
    if case == "die":
        faulthandler.disable()  # pytest's handler would print the worker's stack
        os.kill(os.getpid(), signal.SIGSEGV)
    if case == "hog":
        np.ones(1 << 34, dtype=np.uint8)  # 16 GiB, over the 256 MiB budget
    if case == "pid":
        raise ModelError(str(os.getpid()))


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(_target, timeout=1.0, memory=256 << 20) as box:
        yield box


def test_ok_error_and_crash(sandbox: Sandbox) -> None:
    assert sandbox.run("ok").kind == OK
    error = sandbox.run("error")
    assert (error.kind, error.error, error.message) == (ERROR, "ModelError", "m.onnx: bad file")
    crash = sandbox.run("crash")
    assert (crash.kind, crash.error) == (CRASH, "KeyError")
    assert "Traceback" in crash.traceback and "_target" in crash.traceback
    assert error.allowed and not crash.allowed


def test_the_worker_is_reused(sandbox: Sandbox) -> None:
    first, second = sandbox.run("pid").message, sandbox.run("pid").message
    assert first == second != str(os.getpid())


def test_a_hang_times_out_and_the_worker_is_replaced(sandbox: Sandbox) -> None:
    before = sandbox.run("pid").message
    hang = sandbox.run("hang")  # returns at all only because the worker was killed
    assert hang.kind == TIMEOUT
    assert sandbox.run("ok").kind == OK
    assert sandbox.run("pid").message != before


def test_a_dead_worker_is_reported_and_replaced(sandbox: Sandbox) -> None:
    died = sandbox.run("die")
    assert died.kind == DIED and str(-signal.SIGSEGV) in died.message
    assert sandbox.run("ok").kind == OK


def test_memory_is_capped(sandbox: Sandbox) -> None:
    hog = sandbox.run("hog")
    assert (hog.kind, hog.error) == (CRASH, "MemoryError")
    assert sandbox.run("ok").kind == OK
