"""Pausing Python's cyclic garbage collector around allocation-heavy engine phases.

Invariants: saturation and extraction allocate millions of small acyclic objects (e-nodes,
match tuples, index lists); a collection would only scan them, and on a big e-graph full
collections dominate the run time. ``gc_paused`` disables the collector for the ``with`` block
and restores the previous state (nested uses are fine); it never changes reference counting.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
