"""Write a ``.om`` file: header, MODEL_DEF (JSON), WEIGHTS (raw, 64-byte aligned), REPORT.

Invariants:
- The file appears complete or not at all: it is written through ``fileio.atomic_open`` (a
  temporary file beside the target, synced, renamed at the end).
- Sections are laid out in the order MODEL_DEF, WEIGHTS, REPORT, each at a multiple of 64;
  every weight blob starts at a multiple of 64 inside WEIGHTS, so with the page-aligned memory
  map every weight array is 64-byte aligned in memory. Sizes are 64-bit: no 2 GiB limit.
- No pickle and no eval anywhere: MODEL_DEF and REPORT are strict JSON (``allow_nan=False``).
- The writer checks what it writes: names, dtypes and JSON-ability raise ``ModelError``.
- An ordinary model is format 1.0; a pipelined one (``contents.pipeline``) is 1.1, whose
  only addition is MODEL_DEF's ``pipeline`` field (a 1.0 reader ignores it and runs the whole
  model on one device), with WEIGHTS laid out stage by stage.
- The bytes go out through ``bulkwrite.BulkWriter``: one pass over the weights, each copied
  into the writer's buffers and dropped (a deferred weight is computed then; the model
  file's pages under a source weight are released), so writing holds a few chunks and one
  weight, never the whole model. Each section is hashed (SHA-256) once, from those buffers,
  on a worker thread while the next chunk is filled.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from ..bulkwrite import CHUNK as STEP
from ..bulkwrite import BulkWriter
from ..errors import ModelError
from ..fileio import atomic_open
from ..ir.weights import byte_array, materialize, release
from .contents import OmContents
from .encode import Blobs, collect_blobs, encode, uses_formats
from .format import (
    ALIGN,
    FORMATS_MINOR,
    PIPELINE_MINOR,
    VERSION,
    Kind,
    Section,
    header_size,
    pack_header,
    pad,
)


def write_om(path: str | os.PathLike[str], contents: OmContents,
             report: Mapping[str, Any] | None = None) -> int:
    """Write ``contents`` (and an opaque JSON ``report``) to ``path`` atomically; its size.

    (Inside ``fileio.all_or_none`` the file reaches ``path`` only when the block ends.)"""
    groups = [st.nodes for st in contents.pipeline.stages] if contents.pipeline else []
    blobs = collect_blobs(contents.graph, groups)
    model_def = _json(encode(contents, blobs), "MODEL_DEF")
    parts: list[tuple[Kind, bytes | Blobs]] = [(Kind.MODEL_DEF, model_def),
                                               (Kind.WEIGHTS, blobs)]
    if report is not None:
        parts.append((Kind.REPORT, _json(dict(report), "REPORT")))
    with atomic_open(path) as f:
        return _write(f.fileno(), parts, _minor(contents))


def _minor(contents: OmContents) -> int:
    """The oldest minor version that holds what ``contents`` uses (readers of an older one
    would misread it)."""
    if uses_formats(contents):
        return FORMATS_MINOR
    return PIPELINE_MINOR if contents.pipeline else VERSION[1]


def _json(doc: Any, what: str) -> bytes:
    try:
        return json.dumps(doc, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise ModelError(f"{what} cannot be written as JSON: {e}") from None


def _write(fd: int, parts: list[tuple[Kind, bytes | Blobs]], minor: int) -> int:
    hashes = _Hashes()
    with BulkWriter(fd, observe=hashes) as out:
        start = header_size(len(parts))
        out.zeros(start + pad(start))  # the header is written last, over these zeros
        sections = []
        for kind, body in parts:
            offset = out.position
            hashes.open(offset)
            _write_body(out, body)
            length = out.position - offset
            hashes.close(out.position)
            sections.append((kind, offset, length))
            out.zeros(pad(out.position))

        def head(total: int) -> bytes:  # every chunk has been hashed by now
            return pack_header([Section(int(k), o, n, d) for (k, o, n), d
                                in zip(sections, hashes.digests(), strict=True)], total, minor)

        return out.finish(head)


def _write_body(out: BulkWriter, body: bytes | Blobs) -> None:
    """One section's bytes: JSON as it is; WEIGHTS blob by blob, each padded to 64."""
    if isinstance(body, bytes):
        out.write(body)
        return
    for weight in body.arrays:
        flat = byte_array(materialize(weight))
        for k in range(0, flat.size, STEP):  # a weight larger than a step leaves as it goes
            part = flat[k:k + STEP]
            out.write(part.data)
            release(part)
        out.zeros(pad(flat.size, ALIGN))


class _Hashes:
    """SHA-256 of each section, fed with the file's chunks in order (``BulkWriter``'s
    observer thread): a chunk updates every section it overlaps."""

    def __init__(self) -> None:
        self.spans: list[list[Any]] = []  # [start, end or None while open, hasher]

    def open(self, start: int) -> None:
        self.spans.append([start, None, hashlib.sha256()])

    def close(self, end: int) -> None:
        self.spans[-1][1] = end

    def __call__(self, offset: int, chunk: memoryview) -> None:
        stop = offset + len(chunk)
        for start, end, h in list(self.spans):
            lo, hi = max(start, offset), min(stop, stop if end is None else end)
            if lo < hi:
                h.update(chunk[lo - offset:hi - offset])

    def digests(self) -> list[bytes]:
        return [h.digest() for _, _, h in self.spans]
