"""Message classes from a ``.proto`` file kept in the package, built at import without protoc.

The frontends read public protobuf formats (Caffe's ``caffe.proto``, MindSpore's
``mind_ir.proto``) whose definitions we keep as text subsets. ``message_classes(text)``
parses that text into a ``FileDescriptorProto``, adds it to a private descriptor pool and
returns the generated message classes by name, so:

- the ``.proto`` in the repository is the only definition (no generated ``_pb2.py`` to keep in
  step with it, no protoc at install time, no protobuf-version-specific generated code);
- a private pool never clashes with another ``caffe.proto`` a user may have imported.

Supported proto2 subset (enough for those files): ``syntax``, ``package``, nested ``message``
and ``enum`` definitions, ``optional`` / ``repeated`` / ``required`` scalar, enum and message
fields, the options ``default`` and ``packed``, ``//`` and ``/* */`` comments. Anything else
is a ``ValueError`` naming the line: the files are ours, so this is a programming error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64,
    "uint64": _F.TYPE_UINT64, "int32": _F.TYPE_INT32, "fixed64": _F.TYPE_FIXED64,
    "fixed32": _F.TYPE_FIXED32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES, "uint32": _F.TYPE_UINT32, "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64, "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64,
}
LABELS = {"optional": _F.LABEL_OPTIONAL, "repeated": _F.LABEL_REPEATED,
          "required": _F.LABEL_REQUIRED}
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|(?P<tok>"[^"\n]*"|'[^'\n]*'|"""
                    rf"""{_NUMBER}|[\w.]+|[{{}}\[\]=;,])""", re.S)


@dataclass(frozen=True)
class _Tok:
    text: str
    line: int


def _tokens(text: str) -> Iterator[_Tok]:
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"line {line}: unexpected character {text[pos]!r}")
        if m.group("tok"):
            yield _Tok(m.group("tok"), line)
        line += m.group(0).count("\n")
        pos = m.end()


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = list(_tokens(text))
        self.k = 0

    def peek(self) -> str:
        return self.toks[self.k].text if self.k < len(self.toks) else ""

    def take(self, expected: str | None = None) -> str:
        if self.k >= len(self.toks):
            raise ValueError(f"unexpected end of file (expected {expected or 'more'})")
        tok = self.toks[self.k]
        if expected is not None and tok.text != expected:
            raise ValueError(f"line {tok.line}: expected '{expected}', got '{tok.text}'")
        self.k += 1
        return tok.text

    def file(self) -> descriptor_pb2.FileDescriptorProto:
        fdp = descriptor_pb2.FileDescriptorProto(name="gerules_frontend.proto")
        while self.peek():
            word = self.take()
            if word == "syntax":
                self.take("=")
                fdp.syntax = self.take().strip("\"'")
                self.take(";")
            elif word == "package":
                fdp.package = self.take()
                self.take(";")
            elif word == "message":
                self.message(fdp.message_type.add())
            elif word == "enum":
                self.enum(fdp.enum_type.add())
            else:
                raise ValueError(f"line {self.toks[self.k - 1].line}: unexpected '{word}'")
        return fdp

    def message(self, msg: descriptor_pb2.DescriptorProto) -> None:
        msg.name = self.take()
        self.take("{")
        while self.peek() != "}":
            word = self.take()
            if word == "message":
                self.message(msg.nested_type.add())
            elif word == "enum":
                self.enum(msg.enum_type.add())
            elif word in LABELS:
                self.field(msg.field.add(), word)
            elif word == ";":
                continue
            else:
                raise ValueError(f"line {self.toks[self.k - 1].line}: unexpected '{word}' "
                                 f"in message {msg.name}")
        self.take("}")

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        enum.name = self.take()
        self.take("{")
        while self.peek() != "}":
            value = enum.value.add(name=self.take())
            self.take("=")
            value.number = int(self.take())
            self.take(";")
        self.take("}")

    def field(self, f: descriptor_pb2.FieldDescriptorProto, label: str) -> None:
        f.label = LABELS[label]
        kind = self.take()
        f.name = self.take()
        self.take("=")
        f.number = int(self.take())
        if kind in SCALARS:
            f.type = SCALARS[kind]
        else:  # a message or enum: the pool resolves the name by proto's scoping rules
            f.type_name = kind
        if self.peek() == "[":
            self.take("[")
            while True:
                key = self.take()
                self.take("=")
                self.option(f, key, self.take())
                if self.take() == "]":
                    break
        self.take(";")

    @staticmethod
    def option(f: descriptor_pb2.FieldDescriptorProto, key: str, value: str) -> None:
        if key == "packed":
            f.options.packed = value == "true"
        elif key == "default":
            f.default_value = value.strip("\"'") if value[:1] in "\"'" else value
        else:
            raise ValueError(f"field {f.name}: unsupported option '{key}'")


def file_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of a ``.proto`` text (the subset in the module docstring)."""
    return _Parser(text).file()


def message_classes(text: str) -> dict[str, type]:
    """Every message class of the ``.proto`` text, by its name without the package."""
    fdp = file_descriptor(text)
    pool = descriptor_pool.DescriptorPool()
    try:
        pool.AddSerializedFile(fdp.SerializeToString())
    except TypeError as e:  # e.g. "couldn't resolve name 'X'"
        raise ValueError(str(e)) from None
    prefix = f"{fdp.package}." if fdp.package else ""
    out: dict[str, type] = {}

    def add(names: Any, outer: str) -> None:
        for m in names:
            full = f"{outer}{m.name}"
            out[full[len(prefix):]] = message_factory.GetMessageClass(
                pool.FindMessageTypeByName(full))
            add(m.nested_type, f"{full}.")

    add(fdp.message_type, prefix)
    return out
