"""``BulkWriter``: a large output's bytes written in aligned chunks, around the page cache.

An output of hundreds of megabytes (a ``.om``'s weights) is written by ``fileio.atomic_open``
and synced (``fsync``) before it is renamed into place, so every byte has to reach the disk
before the command ends anyway. Written through the page cache, each byte is first copied
into a new cache page (memory the system must find first, and count against this process's
budget of dirty pages) and then written out by the sync.
The bulk writer copies the stream into a few reused, page-aligned buffers instead and writes
each full buffer with ``O_DIRECT`` where the file system allows it (Linux; otherwise plain
writes of the same chunks), while the caller fills the next buffer.

Invariants:
- Bytes land at consecutive offsets from 0, in order; ``finish(head)`` writes the last
  chunk, waits for all of them, then writes ``head(length)`` over the start of the file (a
  header known only at the end, such as the digests of what the observer saw), and cuts the
  file to the bytes written (the last chunk is padded to the alignment on disk).
- ``observe(offset, chunk)`` (optional) sees every chunk in file order on a worker thread,
  before it is written and never after its buffer is reused: the ``.om`` writer hashes its
  sections there. Observing and writing run on two threads, so copying, hashing and the
  disk overlap (each releases the GIL).
- At most ``buffers`` chunks exist, so memory stays ``buffers * chunk`` whatever the output.
- A failure on a worker thread is raised in the caller at its next ``write``, ``finish`` or
  on leaving the ``with`` block; leaving the block (error, Ctrl-C) stops both threads. The
  caller owns the file: it is only ever written at offsets, never closed here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import queue
import threading
from collections.abc import Callable
from types import TracebackType

ALIGN = 4096  # O_DIRECT needs offsets, lengths and buffer addresses on this boundary
CHUNK = 8 << 20
BUFFERS = 3
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_STOP = None

Observer = Callable[[int, memoryview], None]


class BulkWriter:
    """Writes one stream of bytes to ``fd`` from offset 0 (see the module docstring)."""

    def __init__(self, fd: int, *, observe: Observer | None = None, chunk: int = CHUNK,
                 buffers: int = BUFFERS, direct: bool = True) -> None:
        assert chunk % ALIGN == 0 and buffers >= 1
        self.fd, self.chunk, self._observe, self._buffers = fd, chunk, observe, buffers
        self.direct = direct and _set_direct(fd, True)
        self._free: queue.Queue[mmap.mmap] = queue.Queue()
        for _ in range(buffers):
            self._free.put(mmap.mmap(-1, chunk))
        self._seen: queue.Queue[tuple[mmap.mmap, int, int] | None] = queue.Queue()
        self._out: queue.Queue[tuple[mmap.mmap, int, int] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._buf: mmap.mmap | None = None
        self._fill = 0  # bytes in the current buffer
        self._base = 0  # file offset of the current buffer
        self._first = mmap.mmap(-1, ALIGN)  # the file's first page, kept for ``head``
        self._threads = [threading.Thread(target=self._run, args=(self._seen, self._look),
                                          name="gerules-bulk-observe", daemon=True),
                         threading.Thread(target=self._run, args=(self._out, self._put),
                                          name="gerules-bulk-write", daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def position(self) -> int:
        """Bytes of the stream so far (the offset the next byte lands at)."""
        return self._base + self._fill

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` (copied before this returns, so the caller may drop it)."""
        view = memoryview(data).cast("B")
        while len(view):
            buf = self._current()
            n = min(len(view), self.chunk - self._fill)
            buf[self._fill:self._fill + n] = view[:n]
            self._fill += n
            view = view[n:]
            if self._fill == self.chunk:
                self._hand_off()

    def zeros(self, n: int) -> None:
        """Append ``n`` zero bytes."""
        while n > 0:
            buf = self._current()
            k = min(n, self.chunk - self._fill)
            buf[self._fill:self._fill + k] = bytes(k)
            self._fill += k
            n -= k
            if self._fill == self.chunk:
                self._hand_off()

    def finish(self, head: Callable[[int], bytes] | None = None) -> int:
        """Write what is left and wait for every chunk; then ``head(length)`` (at most one
        page, computed now that every chunk has been observed) over the start of the file.
        Returns the stream's length."""
        total = self.position
        if self._fill:
            self._hand_off()
        self._drain()
        if head is not None:
            data = head(total)
            assert len(data) <= ALIGN
            self._first[:len(data)] = data
            _pwrite(self.fd, memoryview(self._first)[:min(ALIGN, _up(total))], 0, self)
        os.ftruncate(self.fd, total)
        return total

    def __enter__(self) -> BulkWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._seen.put(_STOP)
        for t in self._threads:
            t.join()
        if self.direct:
            _set_direct(self.fd, False)
        if kind is None and self._error is not None:
            raise self._error

    # -------------------------------------------------------------- the pipeline
    def _current(self) -> mmap.mmap:
        self._raise()
        if self._buf is None:
            self._buf = self._free.get()
        return self._buf

    def _hand_off(self) -> None:
        """Send the current buffer down the pipeline: observed, then written."""
        assert self._buf is not None
        if self._base == 0:
            self._first[:min(ALIGN, self._fill)] = self._buf[:min(ALIGN, self._fill)]
        self._seen.put((self._buf, self._base, self._fill))
        self._base += self._fill
        self._buf, self._fill = None, 0

    def _drain(self) -> None:
        """Wait until every handed-off buffer is written (all buffers are free again)."""
        buffers = [self._free.get() for _ in range(self._buffers)]
        for b in buffers:
            self._free.put(b)
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self, inbox: queue.Queue[tuple[mmap.mmap, int, int] | None],
             step: Callable[[mmap.mmap, int, int], None]) -> None:
        while True:
            item = inbox.get()
            if item is _STOP:
                if inbox is self._seen:
                    self._out.put(_STOP)
                return
            buf, offset, n = item
            try:
                if self._error is None:
                    step(buf, offset, n)
            except BaseException as e:  # raised again in the caller
                self._error = e
            if inbox is self._seen and self._error is None:
                self._out.put(item)
            elif inbox is self._out or self._error is not None:
                self._free.put(buf)

    def _look(self, buf: mmap.mmap, offset: int, n: int) -> None:
        if self._observe is not None:
            self._observe(offset, memoryview(buf)[:n])

    def _put(self, buf: mmap.mmap, offset: int, n: int) -> None:
        _pwrite(self.fd, memoryview(buf)[:_up(n)], offset, self)


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _set_direct(fd: int, on: bool) -> bool:
    """Switch ``O_DIRECT`` on the descriptor; whether it is now as asked."""
    if not _O_DIRECT:
        return False
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | _O_DIRECT if on else flags & ~_O_DIRECT)
    except OSError:
        return False
    return True


def _pwrite(fd: int, view: memoryview, offset: int, writer: BulkWriter) -> None:
    """All of ``view`` at ``offset``; a file system that refuses direct writes gets plain
    ones (and the writer stays plain from then on)."""
    while len(view):
        try:
            n = os.pwrite(fd, view, offset)
        except OSError as e:
            if e.errno != errno.EINVAL or not writer.direct:
                raise
            writer.direct = False
            with contextlib.suppress(OSError):
                _set_direct(fd, False)
            continue
        view, offset = view[n:], offset + n
