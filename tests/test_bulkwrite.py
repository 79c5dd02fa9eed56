"""``BulkWriter``: a stream written in aligned chunks, observed in order, header last."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from gerules.bulkwrite import ALIGN, BulkWriter


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)


@pytest.mark.parametrize("direct", [True, False])
def test_the_file_holds_the_stream_with_its_head_written_last(tmp_path: Path,
                                                               direct: bool) -> None:
    pieces = [os.urandom(n) for n in (5, 4096, 3 * ALIGN + 17, 1, 20000)]
    seen: list[tuple[int, bytes]] = []
    fd = _open(tmp_path / "out")
    try:
        with BulkWriter(fd, chunk=2 * ALIGN, buffers=2, direct=direct,
                        observe=lambda off, chunk: seen.append((off, bytes(chunk)))) as out:
            out.zeros(64)
            for p in pieces:
                out.write(p)
            out.zeros(3)
            total = out.finish(lambda n: n.to_bytes(8, "little"))
    finally:
        os.close(fd)
    stream = bytes(64) + b"".join(pieces) + bytes(3)
    data = (tmp_path / "out").read_bytes()
    assert total == len(stream) == len(data)
    assert data[:8] == total.to_bytes(8, "little") and data[8:] == stream[8:]
    assert b"".join(c for _, c in seen) == stream  # every byte observed once, in order
    assert [off for off, _ in seen] == list(range(0, len(stream), 2 * ALIGN))


def test_a_failing_observer_stops_the_writer_and_is_raised(tmp_path: Path) -> None:
    def observe(offset: int, chunk: memoryview) -> None:
        if offset >= ALIGN:
            raise OSError("disk on fire")

    fd = _open(tmp_path / "out")
    try:
        with pytest.raises(OSError, match="disk on fire"), BulkWriter(
                fd, chunk=ALIGN, buffers=2, observe=observe) as out:
            for _ in range(50):  # far more chunks than buffers: never blocks on the failure
                out.write(bytes(ALIGN))
            out.finish()
    finally:
        os.close(fd)
    assert not [t for t in threading.enumerate() if t.name.startswith("gerules-bulk")]


def test_hashing_in_the_observer_matches_the_file(tmp_path: Path) -> None:
    h = hashlib.sha256()
    blob = os.urandom(5 * ALIGN + 123)
    fd = _open(tmp_path / "out")
    try:
        with BulkWriter(fd, chunk=ALIGN, observe=lambda _, c: h.update(c)) as out:
            out.write(blob)
            out.finish()
    finally:
        os.close(fd)
    assert h.hexdigest() == hashlib.sha256((tmp_path / "out").read_bytes()).hexdigest()
