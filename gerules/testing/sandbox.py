"""Run a function on untrusted input in a forked worker with a time and memory budget.

A fuzzer hands each case (bytes, text, any picklable value) to ``Sandbox.run``; the worker
calls the target and reports an ``Outcome``:

- ``ok``: the target returned;
- ``error``: it raised one of the expected types (``GeError`` by default) - a clean refusal;
- ``crash``: it raised anything else (``KeyError``, ``RecursionError``, ``MemoryError``...);
- ``timeout``: no answer within ``timeout`` seconds (the worker is killed and replaced);
- ``died``: the worker process ended (a segfault, an abort, the kernel's OOM killer).

Invariants:
- The worker is forked once and reused, so a case costs a pipe round trip, not a process
  start; state the target leaves behind (caches) is shared between cases of one sandbox.
- The worker's address space is capped at its size when forked plus ``memory`` bytes
  (``RLIMIT_AS``), so an unbounded allocation fails in the worker instead of exhausting the
  machine; a ``MemoryError`` is a ``crash`` (the code should have refused the size earlier).
- ``Outcome.allowed`` is true exactly for ``ok`` and ``error``.
- POSIX only (``fork``, ``resource``); the parent never runs the target itself.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from ..errors import GeError

OK, ERROR, CRASH, TIMEOUT, DIED = "ok", "error", "crash", "timeout", "died"


@dataclass(frozen=True)
class Outcome:
    """What happened to one case."""

    kind: str
    error: str = ""  # the exception's type name
    message: str = ""  # str(exception), or the reason for a timeout / death
    traceback: str = ""
    seconds: float = 0.0

    @property
    def allowed(self) -> bool:
        return self.kind in (OK, ERROR)

    def describe(self) -> str:
        head = f"{self.kind}: {self.error}: {self.message}" if self.error else (
            f"{self.kind}: {self.message}" if self.message else self.kind)
        return f"{head}\n{self.traceback}" if self.traceback else head


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _limit_memory(extra: int) -> None:
    try:
        cap = _address_space() + extra
    except OSError:  # no /proc: cap the budget alone
        cap = extra
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _serve(conn: Connection, other_end: Connection, target: Callable[[Any], object],
           memory: int, expected: tuple[type[BaseException], ...]) -> None:
    other_end.close()  # so that the parent closing its end is an EOF here
    _limit_memory(memory)
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        conn.send(_call(target, case, expected))


def _call(target: Callable[[Any], object], case: Any,
          expected: tuple[type[BaseException], ...]) -> Outcome:
    start = time.perf_counter()
    try:
        target(case)
        return Outcome(OK, seconds=time.perf_counter() - start)
    except expected as e:
        return Outcome(ERROR, type(e).__name__, str(e), seconds=time.perf_counter() - start)
    except BaseException as e:  # a crash is what we are looking for: report it, keep serving
        text = _safe_str(e)
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-12))
        return Outcome(CRASH, type(e).__name__, text, tb, time.perf_counter() - start)


def _safe_str(e: BaseException) -> str:
    try:
        return str(e)[:2000]
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails is still a crash
        return "<unprintable>"


class Sandbox:
    """A reusable forked worker that runs ``target(case)`` under a time and memory budget."""

    def __init__(self, target: Callable[[Any], object], *, timeout: float = 10.0,
                 memory: int = 2 << 30,
                 expected: tuple[type[BaseException], ...] = (GeError,)) -> None:
        self.target, self.timeout, self.memory, self.expected = target, timeout, memory, expected
        self._ctx = multiprocessing.get_context("fork")
        self._proc: Any = None
        self._conn: Connection | None = None
        self.restarts = 0

    def _start(self) -> Connection:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, daemon=True,
                                       args=(child, parent, self.target, self.memory,
                                             self.expected))
        self._proc.start()
        child.close()
        self._conn = parent
        return parent

    def run(self, case: Any) -> Outcome:
        """Run one case; a hung or dead worker is replaced before the next case."""
        conn = self._conn or self._start()
        start = time.perf_counter()
        try:
            conn.send(case)
            if conn.poll(self.timeout):
                return conn.recv()  # type: ignore[no-any-return]
            self._stop()
            return Outcome(TIMEOUT, message=f"no answer within {self.timeout:g} s",
                           seconds=time.perf_counter() - start)
        except (EOFError, OSError):
            code = self._stop()
            return Outcome(DIED, message=f"worker exited with {code}",
                           seconds=time.perf_counter() - start)

    def _stop(self) -> int | None:
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is None:
            return None
        proc.kill()
        proc.join(5)
        self.restarts += 1
        return proc.exitcode  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            self._proc.join(2)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(2)
            self._proc = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
