"""The binary layout of a ``.om`` file: a fixed header, a section table, then the sections.

All integers are little-endian. Layout (see docs/OM_FORMAT.md for the full description):

    0   8  magic  b"\\x89GEROM\\r\\n"
    8   2  format version major      10  2  format version minor
    12  4  flags (0)                 16  4  header size = 64 + 64 * section count
    20  4  section count             24  8  file size in bytes
    32 32  SHA-256 of the header bytes [0, header size) with this field zeroed
    64 ... section table: per section 64 bytes
           kind u32, flags u32, offset u64, length u64, 8 reserved bytes, SHA-256 (32 bytes)

Invariants:
- Sections start at multiples of 64, after the header, never overlap and end inside the file.
- A reader accepts every minor version of its major version (newer minors may add section
  kinds, which it skips) and refuses a newer major version, naming both versions.
- ``parse_header`` and ``parse_sections`` only read; they check every count, offset and length
  with Python integers (no overflow) against the file size before anything is allocated.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from enum import IntEnum

from ..errors import OmError

MAGIC = b"\x89GEROM\r\n"
HUAWEI_MAGIC = b"IMOD"  # 0x444F4D49 little-endian: a CANN atc .om file
VERSION = (1, 0)  # what an ordinary model is written as
PIPELINE_MINOR = 1  # 1.1: MODEL_DEF may hold "pipeline" (the stages of a pipelined model)
# 1.2: tensors may be held in NPU data formats (a type's "format" and "physical" shape; a
# weight's blob is its physical array). A 1.0 / 1.1 file has none: every tensor plain.
FORMATS_MINOR = 2
ALIGN = 64
HEADER = struct.Struct("<8sHHIIIQ32s")
ENTRY = struct.Struct("<IIQQ8x32s")
MAX_SECTIONS = 64
MAX_JSON_BYTES = 256 << 20
assert HEADER.size == 64 and ENTRY.size == 64


class Kind(IntEnum):
    MODEL_DEF = 1
    WEIGHTS = 2
    REPORT = 3


@dataclass(frozen=True, slots=True)
class Header:
    major: int
    minor: int
    flags: int
    header_size: int
    count: int
    file_size: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class Section:
    kind: int
    offset: int
    length: int
    digest: bytes
    flags: int = 0

    @property
    def name(self) -> str:
        try:
            return Kind(self.kind).name
        except ValueError:
            return f"kind {self.kind}"

    @property
    def end(self) -> int:
        return self.offset + self.length


def pad(n: int, align: int = ALIGN) -> int:
    """Bytes of padding that bring ``n`` to a multiple of ``align``."""
    return -n % align


def header_size(count: int) -> int:
    return HEADER.size + ENTRY.size * count


def pack_header(sections: list[Section], file_size: int, minor: int = VERSION[1]) -> bytes:
    """The header and section table, with its own checksum filled in."""
    table = b"".join(ENTRY.pack(s.kind, s.flags, s.offset, s.length, s.digest)
                     for s in sections)
    size = header_size(len(sections))
    fixed = HEADER.pack(MAGIC, VERSION[0], minor, 0, size, len(sections), file_size, bytes(32))
    digest = hashlib.sha256(fixed + table).digest()
    return fixed[:32] + digest + table


def parse_header(head: bytes, file_size: int, where: str) -> Header:
    """Check the fixed 64 bytes; the table is read afterwards, knowing its size is sane."""
    if file_size == 0:
        raise OmError("empty file (0 bytes)", file=where)
    if file_size < HEADER.size:
        raise OmError(f"too small for a .om file ({file_size} bytes; the header alone is "
                      f"{HEADER.size})", file=where)
    magic, major, minor, flags, size, count, declared, digest = HEADER.unpack(head)
    if magic != MAGIC:
        raise OmError(_wrong_magic(magic), file=where)
    if major > VERSION[0]:
        raise OmError(f"format version {major}.{minor} is newer than this gerules reads "
                      f"({VERSION[0]}.{VERSION[1]}); upgrade gerules", file=where)
    if major < 1:
        raise OmError(f"format version {major}.{minor} is not supported", file=where)
    if count > MAX_SECTIONS or size != header_size(count):
        raise OmError(f"header: {count} sections and header size {size} are inconsistent "
                      f"(at most {MAX_SECTIONS} sections)", file=where)
    if size > file_size:
        raise OmError(f"header: truncated (the header needs {size} bytes, the file has "
                      f"{file_size})", file=where)
    return Header(major, minor, flags, size, count, declared, digest)


def _wrong_magic(magic: bytes) -> str:
    if magic.startswith(HUAWEI_MAGIC):
        return "a CANN atc .om file, not a gerules one (magic IMOD)"
    return f"not a gerules .om file (magic {magic[:8]!r})"


def parse_sections(header: Header, head: bytes, file_size: int, where: str) -> list[Section]:
    """Check the header checksum, the declared file size and every section's bounds."""
    zeroed = head[:32] + bytes(32) + head[64:header.header_size]
    if hashlib.sha256(zeroed).digest() != header.digest:
        raise OmError("header: checksum mismatch (the header or section table is corrupt)",
                      file=where)
    if header.file_size != file_size:
        how = "truncated" if file_size < header.file_size else "has trailing bytes"
        raise OmError(f"{how}: the header says {header.file_size} bytes, the file has "
                      f"{file_size}", file=where)
    sections = [Section(k, off, n, d, f) for k, f, off, n, d in
                (ENTRY.unpack_from(head, HEADER.size + ENTRY.size * i)
                 for i in range(header.count))]
    _check_layout(sections, header.header_size, file_size, where)
    return sections


def _check_layout(sections: list[Section], start: int, file_size: int, where: str) -> None:
    seen: set[int] = set()
    for s in sections:
        if s.kind in seen:
            raise OmError(f"section {s.name} appears twice", file=where)
        seen.add(s.kind)
        if s.offset < start or s.offset % ALIGN or s.end > file_size:
            raise OmError(f"section {s.name}: offset {s.offset} and length {s.length} do not "
                          f"fit a {file_size}-byte file (sections start after the header at a "
                          f"multiple of {ALIGN})", file=where)
    spans = sorted((s.offset, s.end, s.name) for s in sections)
    for (_, end, a), (lo, _, b) in zip(spans, spans[1:], strict=False):
        if lo < end:
            raise OmError(f"sections {a} and {b} overlap", file=where)
    for kind in (Kind.MODEL_DEF, Kind.WEIGHTS):
        if kind not in seen:
            raise OmError(f"section {kind.name} is missing", file=where)
