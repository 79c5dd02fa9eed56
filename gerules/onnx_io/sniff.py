"""Recognise files that are not ONNX models before protobuf gets to misread them.

Protobuf accepts surprising input: an empty file parses as an empty ``ModelProto`` and random
bytes sometimes parse as a model with only unknown fields. So a file is first matched against
magic numbers of formats people mistake for a model (images, archives, pickles, arrays), and
text is recognised when protobuf cannot make a model of it.

Invariants:
- ``known_format`` looks only at magic numbers that cannot begin a ``ModelProto`` a real
  exporter writes (those start with field 1, ``ir_version``, byte ``0x08``); it names the
  format or returns ``None``.
- ``text_kind`` names text (JSON, ONNX's textual syntax, other text) or returns ``None``.
"""

from __future__ import annotations

import struct

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (a Keras model?)"),
    (b"\x7fELF", "an ELF executable"),
    (b"%PDF-", "a PDF document"),
)
_PICKLE_PROTOCOLS = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
_TORCH_HINT = "a PyTorch checkpoint? export the model with torch.onnx.export"


def known_format(data: bytes, size: int | None = None) -> str | None:
    """The name of a non-ONNX format ``data`` starts like, or ``None``. ``data`` may be the
    head of a file of ``size`` bytes (at least its first 64 KiB)."""
    size = len(data) if size is None else size
    for magic, name in _MAGIC:
        if data.startswith(magic):
            if name == "a zip archive" and b"data.pkl" in data[:65536]:
                return f"{name} ({_TORCH_HINT})"
            return name
    if data[:2] in _PICKLE_PROTOCOLS:
        return f"a Python pickle, never loaded since unpickling runs code ({_TORCH_HINT})"
    if len(data) >= 8 and data[4:8] == b"TFL3":
        return "a TensorFlow Lite model"
    if _is_safetensors(data, size):
        return "a safetensors file (weights only, no graph)"
    return None


def _is_safetensors(data: bytes, size: int) -> bool:
    if len(data) < 10:
        return False
    (header_len,) = struct.unpack("<Q", data[:8])
    return 2 <= header_len <= size - 8 and data[8:10] == b'{"'


def text_kind(data: bytes) -> str | None:
    """``"JSON text"``, ``"ONNX text syntax"``, ``"a text file"`` or ``None`` (binary)."""
    head = data[:4096]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # a multi-byte character cut at the window's end is fine
            return None
        text = head[: e.start].decode("utf-8")
    if not text or any(not (c.isprintable() or c in "\t\r\n") for c in text):
        return None
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        return "JSON text"
    if stripped.startswith("<") and "ir_version" in stripped:
        return "ONNX text syntax (convert it with onnx.parser.parse_model)"
    return "a text file"
