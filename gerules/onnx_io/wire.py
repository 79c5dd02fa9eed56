"""The protobuf wire format, decoded into plain message objects by a table of fields.

Only what ONNX files use: varints (int32, int64, uint64, enums), fixed32 floats, fixed64
doubles, strings, bytes and embedded messages, repeated fields packed or not. A message type
is a ``Message`` subclass with a ``FIELDS`` table; decoding follows protobuf's rules:

- the last value of a singular field wins, a singular message field seen twice is merged,
  members of a ``oneof`` clear each other, unknown fields and fields with an unexpected wire
  type are skipped (as unknown fields are);
- every length and varint is checked against the end of its enclosing message before it is
  used, so truncated or corrupt input raises ``WireError`` and never reads past the buffer;
  groups (wire types 3 and 4) and the undefined wire types 6 and 7 are corrupt input;
- messages nest at most ``MAX_DEPTH`` levels (protobuf's own limit), past which
  ``WireError(too_deep=True)``;
- strings that are valid UTF-8 become ``str``, others stay ``bytes`` (as protobuf's Python
  API hands them back, so callers refuse them by name); a ``view`` bytes field is a
  ``memoryview`` slice of the input, not a copy (ONNX's ``raw_data``: the weights).

``Message.HasField(name)`` and ``WhichOneof(group)`` answer as protobuf's Python API does.
"""

from __future__ import annotations

import mmap
import struct
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

MAX_DEPTH = 100
_INT64 = 1 << 63
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
Buffer = bytes | mmap.mmap  # the input: a file's bytes, or the file mapped (``fileio.map_input``)


class WireError(ValueError):
    """Corrupt or truncated protobuf bytes."""

    def __init__(self, message: str, *, too_deep: bool = False) -> None:
        super().__init__(message)
        self.too_deep = too_deep


@dataclass(frozen=True, slots=True)
class Field:
    """One entry of a message's field table."""

    name: str
    kind: str  # int, uint, float, double, string, bytes, view, message
    repeated: bool = False
    message: Callable[[], type[Message]] | None = None  # the type of a message field
    oneof: str = ""


class Message:
    """A decoded message: one attribute per field (defaults when absent; an absent singular
    message reads as an empty one, made on first access, as in protobuf's Python API)."""

    FIELDS: ClassVar[dict[int, Field]] = {}
    _BY_NAME: ClassVar[dict[str, Field]] = {}

    def __init__(self) -> None:
        self._present: set[str] = set()
        for f in self.FIELDS.values():
            if f.kind != "message" or f.repeated:
                setattr(self, f.name, _default(f))

    def __init_subclass__(cls) -> None:
        cls._BY_NAME = {f.name: f for f in cls.FIELDS.values()}

    def __getattr__(self, name: str) -> Any:  # only called for attributes not yet set
        f = self._BY_NAME.get(name)
        if f is None or f.message is None:
            raise AttributeError(name)
        empty = f.message()()
        setattr(self, name, empty)
        return empty

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's spelling)
        if name not in self._BY_NAME:
            raise ValueError(f"{type(self).__name__} has no field {name!r}")
        return name in self._present

    def WhichOneof(self, group: str) -> str | None:  # noqa: N802
        for f in self.FIELDS.values():
            if f.oneof == group and f.name in self._present:
                return f.name
        return None


def _default(f: Field) -> Any:
    if f.repeated:
        return array("f") if f.kind == "float" else array("d") if f.kind == "double" else []
    if f.kind == "message":
        assert f.message is not None
        return f.message()()
    return {"string": "", "bytes": b"", "view": b"", "float": 0.0, "double": 0.0}.get(f.kind, 0)


def decode(cls: type[Message], data: Buffer) -> Message:
    """The message of type ``cls`` that ``data`` holds."""
    view = memoryview(data)
    return _decode(cls(), data, view, 0, len(data), 1)


def _decode(msg: Message, data: Buffer, view: memoryview, pos: int, end: int,
            depth: int) -> Message:
    if depth > MAX_DEPTH:
        raise WireError(f"messages nest deeper than {MAX_DEPTH} levels", too_deep=True)
    fields = msg.FIELDS
    value: int | tuple[int, int]  # a varint, a fixed value's offset or a (start, stop) span
    while pos < end:
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire == VARINT:
            value, pos = _varint(data, pos, end)
        elif wire == LEN:
            n, pos = _varint(data, pos, end)
            if n > end - pos:
                raise WireError(f"a length of {n} bytes runs past the end of its message")
            value, pos = (pos, pos + n), pos + n
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if size > end - pos:
                raise WireError("a fixed-size value runs past the end of its message")
            value, pos = pos, pos + size
        else:
            raise WireError(f"wire type {wire} (groups and types 6, 7 are not ONNX)")
        field = fields.get(number)
        if field is not None:
            _store(msg, field, wire, value, data, view, depth)
    return msg


def _varint(data: Buffer, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError("a varint runs past the end of its message")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> 64:
                raise WireError("a varint is longer than 64 bits")
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("a varint is longer than 10 bytes")


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= _INT64 else v


def _store(msg: Message, f: Field, wire: int, value: Any, data: Buffer, view: memoryview,
           depth: int) -> None:
    got = _value(f, wire, value, data, view, depth, getattr(msg, f.name))
    if got is _SKIP:
        return
    if f.oneof:
        for other in msg.FIELDS.values():
            if other.oneof == f.oneof and other is not f and other.name in msg._present:
                msg._present.discard(other.name)
                setattr(msg, other.name, _default(other))
    if f.repeated:
        current = getattr(msg, f.name)
        if isinstance(got, _Many):
            current.extend(got.values)
        else:
            current.append(got)
    else:
        setattr(msg, f.name, got)
    msg._present.add(f.name)


class _Many:
    """The values of one packed run of a repeated scalar field."""

    __slots__ = ("values",)

    def __init__(self, values: Any) -> None:
        self.values = values


_SKIP = object()


def _value(f: Field, wire: int, value: Any, data: Buffer, view: memoryview, depth: int,
           current: Any) -> Any:
    kind = f.kind
    if kind in ("int", "uint"):
        if wire == VARINT:
            return _signed(value) if kind == "int" else value
        if wire == LEN and f.repeated:
            return _Many(_packed_varints(data, *value, signed=kind == "int"))
        return _SKIP
    if kind in ("float", "double"):
        fixed, size, unpack = ((FIXED32, 4, _FLOAT) if kind == "float"
                               else (FIXED64, 8, _DOUBLE))
        if wire == fixed:
            return unpack.unpack_from(data, value)[0]
        if wire == LEN and f.repeated:
            start, stop = value
            if (stop - start) % size:
                raise WireError(f"a packed run of {kind}s is not a multiple of {size} bytes")
            run = array("f" if kind == "float" else "d", data[start:stop])
            if sys.byteorder == "big":
                run.byteswap()
            return _Many(run)
        return _SKIP
    if wire != LEN:
        return _SKIP
    start, stop = value
    if kind == "message":
        assert f.message is not None
        target = current if not f.repeated else f.message()()
        return _decode(target, data, view, start, stop, depth + 1)
    if kind == "view":
        return view[start:stop]
    raw = data[start:stop]
    if kind == "string":
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    return raw


def _packed_varints(data: Buffer, start: int, stop: int, *, signed: bool) -> list[int]:
    out = []
    pos = start
    while pos < stop:
        v, pos = _varint(data, pos, stop)
        out.append(_signed(v) if signed else v)
    return out
