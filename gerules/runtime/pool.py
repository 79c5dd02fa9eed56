"""Spare output buffers for the reference executor, recycled across steps and runs.

A fresh NumPy array above glibc's mmap threshold is mapped anew and every page of it faults
on first write; at batch 1 that costs more than the arithmetic of an elementwise op.
onnxruntime keeps an arena; the executor keeps this pool instead: buffers of dead tensors,
keyed by their size in bytes, handed out again for outputs of the same size.

Invariants:
- A pooled buffer is a flat, C-contiguous ``uint8`` array that owns its memory; ``take``
  hands it out at most once until it is given back (no two holders).
- ``spare`` is the bytes the pool holds; ``give`` drops a buffer rather than let ``spare``
  pass ``limit``.
- Thread-safe: concurrent runs of one executor share the pool.
- ``owner(array)`` is the array that owns the memory ``array`` views (through NumPy views and
  memoryviews), which is what a buffer's holders are counted by.
"""

from __future__ import annotations

import threading

import numpy as np


class BufferPool:
    """Spare ``uint8`` buffers by exact size, at most ``limit`` bytes in all."""

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit
        self.spare = 0
        self.reused = 0  # buffers handed out again (a figure for tests and profiles)
        self._free: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """A buffer of ``nbytes`` bytes: a spare one, else a fresh (uninitialised) one."""
        with self._lock:
            bucket = self._free.get(nbytes)
            if bucket:
                self.spare -= nbytes
                self.reused += 1
                return bucket.pop()
        return np.empty(nbytes, np.uint8)

    def give(self, buf: np.ndarray) -> None:
        """Keep ``buf`` (which nobody views any more) for a later ``take`` if it fits."""
        with self._lock:
            if self.spare + buf.nbytes <= self.limit:
                self._free.setdefault(buf.nbytes, []).append(buf)
                self.spare += buf.nbytes

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self.spare = 0


def owner(array: np.ndarray) -> np.ndarray:
    """The array owning the memory ``array`` views."""
    while True:
        base = array.base
        if isinstance(base, memoryview):
            base = base.obj
        if not isinstance(base, np.ndarray):
            return array
        array = base
