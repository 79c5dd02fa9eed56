"""Fixtures of the kernel tests."""

from __future__ import annotations

import pytest

from gerules.ir.ops import _jit


@pytest.fixture
def jit_loops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runtime's compiled loops (``ir.ops._jit``) for arrays of any size (the tests'
    arrays are small); the names of the loops the kernels then ran, in order."""
    monkeypatch.setattr(_jit, "MIN_ELEMENTS", 0)
    taken: list[str] = []
    loop = _jit.loop

    def spy(name: str, call: object) -> object:
        fn = loop(name, call)
        if fn is not None:
            taken.append(name)
        return fn

    monkeypatch.setattr(_jit, "loop", spy)
    return taken
