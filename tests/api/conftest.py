"""Fixtures for the API tests: the tiny CNN of ``api_graphs`` compiled once per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_graphs import tiny_cnn

import gerules as ge


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tiny_cnn`` compiled for batch 2 (module-scoped: compiled once per test file)."""
    folder = tmp_path_factory.mktemp("om")
    options = ge.CompileOptions(input_shape={"x": (2, 3, 8, 8)})
    return ge.compile(tiny_cnn(), options, output=folder / "tiny")
