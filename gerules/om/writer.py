"""Write a ``.om`` file: header, MODEL_DEF (JSON), WEIGHTS (raw, 64-byte aligned), REPORT.

Invariants:
- The file appears complete or not at all: it is written through ``fileio.atomic_open`` (a
  temporary file beside the target, renamed at the end).
- Sections are laid out in the order MODEL_DEF, WEIGHTS, REPORT, each at a multiple of 64;
  every weight blob starts at a multiple of 64 inside WEIGHTS, so with the page-aligned memory
  map every weight array is 64-byte aligned in memory. Sizes are 64-bit: no 2 GiB limit.
- No pickle and no eval anywhere: MODEL_DEF and REPORT are strict JSON (``allow_nan=False``).
- The writer checks what it writes: names, dtypes and JSON-ability raise ``ModelError``.
- An ordinary model is format 1.0; a pipelined one (``contents.pipeline``) is 1.1, whose
  only addition is MODEL_DEF's ``pipeline`` field (a 1.0 reader ignores it and runs the whole
  model on one device), with WEIGHTS laid out stage by stage.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

from ..errors import ModelError
from ..fileio import atomic_open
from ..ir.graph import byte_view
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
        return _write(f, parts, _minor(contents))


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


def _write(f: BinaryIO, parts: list[tuple[Kind, bytes | Blobs]], minor: int) -> int:
    start = header_size(len(parts))
    f.write(bytes(start + pad(start)))
    sections = []
    for kind, body in parts:
        offset = f.tell()
        digest, length = _write_body(f, body)
        sections.append(Section(int(kind), offset, length, digest))
        f.write(bytes(pad(f.tell())))
    total = f.tell()
    f.seek(0)
    f.write(pack_header(sections, total, minor))
    f.seek(total)
    return total


def _write_body(f: BinaryIO, body: bytes | Blobs) -> tuple[bytes, int]:
    """Write one section's bytes; returns their SHA-256 and length.

    Each byte is hashed once, on a worker thread, while this thread writes it: both release
    the GIL, so hashing the weights costs no extra wall time on a machine with two cores.
    """
    h = hashlib.sha256()
    if isinstance(body, bytes):
        h.update(body)
        f.write(body)
        return h.digest(), len(body)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gerules-om-hash") as worker:
        hashed = [worker.submit(h.update, b"")]  # one worker: updates run in order
        for arr in body.arrays:
            for chunk in (byte_view(arr), bytes(pad(arr.nbytes, ALIGN))):
                hashed.append(worker.submit(h.update, chunk))
                f.write(chunk)
        for done in hashed:
            done.result()
    return h.digest(), body.size
