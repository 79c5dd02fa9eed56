"""Shared paths and helpers for the rule-language tests.

``GE_REGEN_ERR=1 pytest tests/dsl`` rewrites every ``tests/dsl/bad/*.err`` from the current
messages (review the diff before committing); without it the files are only compared.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent
GOOD = HERE / "good"
BAD = HERE / "bad"
REGEN = os.environ.get("GE_REGEN_ERR") == "1"


def expected_message(path: Path, actual: str) -> str:
    """The stored message for ``path`` (``<name>.err``), rewritten first when regenerating."""
    err = path.with_suffix(".err")
    if REGEN:
        err.write_text(actual + "\n", encoding="utf-8")
    return err.read_text(encoding="utf-8").rstrip("\n")


@pytest.fixture
def in_bad(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run inside ``tests/dsl/bad`` so messages name files as ``x.ger``."""
    monkeypatch.chdir(BAD)
    return BAD
