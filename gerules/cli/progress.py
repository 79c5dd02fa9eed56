"""A one-line progress display on stderr for phases that take more than a second.

Invariants:
- Nothing is written unless the stream is a terminal (``isatty``), so piped or redirected
  output never holds progress text or control characters.
- A phase shows up only after ``delay`` seconds; the line is redrawn in place (``\\r`` and
  erase-line) and erased when the phase ends or the display closes, so the terminal is left as
  it was and the summary that follows starts on a clean line.
- A daemon thread redraws the line; ``close`` (or leaving the ``with`` block) stops it.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

SPINNER = "|/-\\"
ERASE = "\r\x1b[K"


class Progress:
    """Call it with a phase name when the phase starts: ``progress("optimize")``."""

    def __init__(self, stream: TextIO | None = None, *, delay: float = 1.0,
                 enabled: bool | None = None, prefix: str = "ge-rewrite") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream) if enabled is None else enabled
        self.delay, self.prefix = delay, prefix
        self._phase: str | None = None
        self._since = 0.0
        self._shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, phase: str) -> None:
        with self._lock:
            self._erase()
            self._phase, self._since = phase, time.monotonic()
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gerules-progress",
                                            daemon=True)
            self._thread.start()

    def done(self) -> None:
        """The current phase ended (nothing new started yet)."""
        with self._lock:
            self._erase()
            self._phase = None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.done()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _loop(self) -> None:
        tick = 0
        while not self._stop.wait(0.1):
            tick += 1
            with self._lock:
                if self._phase is None:
                    continue
                elapsed = time.monotonic() - self._since
                if elapsed >= self.delay:
                    self._write(f"{ERASE}{self.prefix}: {SPINNER[tick % 4]} {self._phase} "
                                f"{elapsed:.0f} s")
                    self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self._write(ERASE)
            self._shown = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: stop drawing
            self.enabled = False


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
