"""Compiled test models shared by the partition tests (compiled once per session)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from partition_models import MODELS

from gerules.compiler import CompileOptions, compile_model
from gerules.onnx_io import load_model


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., tuple[Path, object]]:
    """``compiled(name, partitions=K, ...)``: (path of the .om, CompileResult), cached."""
    cache: dict[tuple, tuple[Path, object]] = {}
    folder = tmp_path_factory.mktemp("partition")

    def make(name: str, **options: object) -> tuple[Path, object]:
        key = (name, tuple(sorted(options.items())))
        if key not in cache:
            case, shapes = MODELS[name]
            path = folder / f"{name}-{len(cache)}.om"
            result = compile_model(load_model(case.model.SerializeToString()),
                                   CompileOptions(input_shape=shapes, **options), path)
            cache[key] = (path, result)
        return cache[key]

    return make
