"""How a command ends early: Ctrl-C, SIGTERM, SIGHUP and the ``--timeout`` alarm.

Invariants:
- ``handle_signals()`` (the CLI calls it first thing) turns SIGTERM and SIGHUP into a
  ``Stopped`` exception, as Python turns SIGINT into ``KeyboardInterrupt``, so every
  ``finally`` and every ``except BaseException`` cleanup runs (the temporary files of
  ``gerules.fileio`` are removed) before the process exits with ``128 + signal``: 130, 143,
  129. The default action of SIGTERM/SIGHUP would kill the process mid-write. A signal the
  process was started ignoring (``nohup``, a background job's SIGINT) stays ignored.
- ``deadline(seconds)`` raises ``Timeout`` in the main thread when the wall clock runs out
  (SIGALRM). ``Stopped`` and ``Timeout`` are ``BaseException``s: library code that catches
  ``Exception`` to re-word errors never swallows them.
- ``gerules.fileio.signals_held`` defers all four around the moments a temporary file is
  created, renamed or removed.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)",
         signal.SIGHUP: "hung up (SIGHUP)"}


class Stopped(BaseException):
    """The process was asked to stop (SIGTERM or SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Timeout(BaseException):
    """``--timeout`` ran out."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"{seconds:g} s")
        self.seconds = seconds


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


def handle_signals() -> None:
    """SIGTERM and SIGHUP raise ``Stopped`` (SIGINT keeps Python's ``KeyboardInterrupt``),
    unless the process was started with them ignored."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, _stop)


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise ``Timeout`` if the block runs longer than ``seconds`` (None: no limit)."""
    if not seconds:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise Timeout(seconds)

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def exit_code(e: BaseException) -> int:
    if isinstance(e, KeyboardInterrupt):
        return EXIT[signal.SIGINT]
    assert isinstance(e, Stopped)
    return EXIT.get(signal.Signals(e.signum), 128 + e.signum)


def words(e: BaseException) -> str:
    if isinstance(e, KeyboardInterrupt):
        return WORDS[signal.SIGINT]
    assert isinstance(e, Stopped)
    return WORDS.get(signal.Signals(e.signum), f"stopped by {signal.Signals(e.signum).name}")
