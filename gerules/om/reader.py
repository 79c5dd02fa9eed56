"""Open a ``.om`` file: check the container, map it, decode and verify MODEL_DEF.

Invariants:
- Checks run cheapest first and before any allocation that depends on the file's contents:
  size, magic, version, header size and section count, header checksum, declared file size,
  every section's offset and length (Python integers against the real size), zero padding
  between sections (so every byte of the file is covered by a check), then the SHA-256 of every
  section read through the memory map without copies (WEIGHTS on a second thread while
  MODEL_DEF is decoded; a checksum failure is reported in preference to a decoding error), then
  MODEL_DEF (at most ``MAX_JSON_BYTES``; JSON nesting errors are caught), the graph, the
  weights and the plans.
  So a bad file never makes the reader allocate more than a small multiple of its own size.
- REPORT is opaque: its checksum is verified, its JSON is parsed only by ``OmFile.report()``.
- An ``OmFile`` owns the memory map; weights are read-only views into it. ``close()`` releases
  the map once nothing refers to those views.
- Every failure is an ``OmError`` naming the file and the section (and the field, node or
  tensor when there is one).
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..budgets import DEFAULT, Budgets
from ..errors import OmError
from ..fileio import open_input, parse_json
from ..ir.registry import Registry, default_registry
from .contents import OmContents
from .decode import Doc, decode
from .format import HEADER, MAX_JSON_BYTES, Header, Kind, Section, parse_header, parse_sections

log = logging.getLogger(__name__)

GAP_CHUNK = 1 << 20


class OmFile:
    """A checked, memory-mapped ``.om`` file and its decoded contents."""

    def __init__(self, path: str | os.PathLike[str], *, verify_weights: bool = True,
                 registry: Registry | None = None, budgets: Budgets = DEFAULT) -> None:
        self.path = str(path)
        self._map: mmap.mmap | None = None
        fd = open_input(self.path, what="a .om file", kind=OmError)
        try:
            head, size = _read_head(fd, self.path)
            self.header: Header = parse_header(head[:HEADER.size], size, self.path)
            self.sections: tuple[Section, ...] = tuple(
                parse_sections(self.header, head, size, self.path))
            for s in self.sections:
                if s.kind == Kind.WEIGHTS:
                    budgets.check("model_bytes", s.length, "section WEIGHTS", file=self.path)
            self._map = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        try:
            self._check_gaps(size)
            self._check_digests([s for s in self.sections if s.kind != Kind.WEIGHTS])
            weights = [s for s in self.sections if s.kind == Kind.WEIGHTS and verify_weights]
            with ThreadPoolExecutor(1, thread_name_prefix="gerules-sha") as pool:
                hashed = pool.submit(self._check_digests, weights)  # hashlib drops the GIL
                try:
                    self.contents: OmContents = self._decode(registry, budgets)
                finally:
                    hashed.result()  # a checksum failure outranks a decoding error
        except BaseException:
            self.close()
            raise

    def _decode(self, registry: Registry | None, budgets: Budgets) -> OmContents:
        doc = self._json(Kind.MODEL_DEF)
        graph = doc.get("graph") if isinstance(doc, dict) else None
        nodes = graph.get("nodes") if isinstance(graph, dict) else None
        if isinstance(nodes, list):
            budgets.check("nodes", len(nodes), "the graph", file=self.path)
        return decode(doc, self._map, self.section(Kind.WEIGHTS), self.path,
                      registry or default_registry())

    def section(self, kind: Kind) -> Section:
        for s in self.sections:
            if s.kind == kind:
                return s
        raise OmError(f"section {kind.name} is missing", file=self.path)

    def report(self) -> dict[str, Any]:
        """The REPORT section's JSON (``{}`` when the file has none)."""
        if not any(s.kind == Kind.REPORT for s in self.sections):
            return {}
        doc = self._json(Kind.REPORT)
        return Doc(self.path, "REPORT").obj(doc, "top level")

    def raw_model_def(self) -> dict[str, Any]:
        """MODEL_DEF as parsed JSON, for ``ge-rewrite inspect``."""
        return Doc(self.path).obj(self._json(Kind.MODEL_DEF), "top level")

    def close(self) -> None:
        """Drop the decoded contents and unmap the file (the contents are gone afterwards)."""
        self.__dict__.pop("contents", None)
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # weights still referenced: the GC unmaps it later
                log.debug("%s: weights still in use; the map is released when they are", self.path)
            self._map = None

    def __enter__(self) -> OmFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _view(self, s: Section) -> memoryview:
        assert self._map is not None, "the file is closed"
        return memoryview(self._map)[s.offset:s.end]

    def _check_gaps(self, size: int) -> None:
        """Bytes outside the header and the sections (alignment padding) must be zero."""
        spans = sorted((s.offset, s.end) for s in self.sections)
        start = self.header.header_size
        for lo, hi in [*spans, (size, size)]:
            for at in range(start, lo, GAP_CHUNK):
                n = min(GAP_CHUNK, lo - at)
                with self._view(Section(0, at, n, b"")) as view:
                    if view != bytes(n):
                        raise OmError(f"padding between byte {start} and {lo} is not zero (the "
                                      "file is corrupt)", file=self.path)
            start = max(start, hi)

    def _check_digests(self, sections: list[Section]) -> None:
        for s in sections:
            with self._view(s) as view:
                ok = hashlib.sha256(view).digest() == s.digest
            if not ok:
                raise OmError(f"section {s.name}: checksum mismatch (the file is corrupt)",
                              file=self.path)

    def _json(self, kind: Kind) -> Any:
        s = self.section(kind)
        if s.length > MAX_JSON_BYTES:
            raise OmError(f"section {s.name}: {s.length} bytes of JSON (at most "
                          f"{MAX_JSON_BYTES})", file=self.path)
        with self._view(s) as view:
            raw = bytes(view)
        return parse_json(raw, where=f"section {s.name}", kind=OmError, file=self.path)


def _read_head(fd: int, path: str) -> tuple[bytes, int]:
    """The header and section table (at most their declared, bounded size) and the file size."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, HEADER.size, 0)
    if len(head) == HEADER.size:
        parse_header(head, size, path)  # bounds the table before reading it
        table = int.from_bytes(head[16:20], "little") - HEADER.size
        head += os.pread(fd, table, HEADER.size)
    return head + bytes(max(0, HEADER.size - len(head))), size


def read_om(path: str | os.PathLike[str] | Path, **kwargs: Any) -> OmFile:
    """Open and check a ``.om`` file (see ``OmFile``)."""
    return OmFile(path, **kwargs)
