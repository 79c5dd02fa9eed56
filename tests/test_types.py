"""The whole package type-checks: ``mypy gerules engine`` (the project's mypy configuration in
pyproject.toml) reports no error. Type errors had grown from 17 to 97 between sessions while
every test passed; two of those were real bugs (a deferred weight reaching array code).

The cache lives in pytest's cache folder, so only the first run on a machine pays (about 45 s
on 2 cores); later runs take a second or two.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (the dev extra)")
def test_mypy_finds_no_error_in_the_package(tmp_path: Path, pytestconfig: pytest.Config
                                            ) -> None:
    store = getattr(pytestconfig, "cache", None)  # absent under -p no:cacheprovider
    cache = store.mkdir("mypy-package") if store else tmp_path / "cache"
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-error-summary",
         "gerules", "engine"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert not errors and result.returncode == 0, result.stdout + result.stderr
