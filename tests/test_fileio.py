"""``fileio.map_input``: the safe reader's checks, with the file mapped instead of read."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from gerules.errors import ModelError
from gerules.fileio import map_input


def test_a_regular_file_is_mapped_read_only(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x08\x07" * 1000)
    mapped = map_input(path, limit=1 << 20)
    assert isinstance(mapped, mmap.mmap) and mapped[:] == path.read_bytes()
    with pytest.raises(TypeError):
        mapped[0] = 1


def test_the_cap_and_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(bytes(100))
    with pytest.raises(ModelError, match="has 100 bytes; a model may have at most 64 bytes"):
        map_input(path, limit=64, what="a model")
    path.write_bytes(b"")
    assert map_input(path, limit=64) == b""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match="named pipe"):
        map_input(fifo, limit=1 << 20)
