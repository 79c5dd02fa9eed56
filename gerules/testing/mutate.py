"""Mutators for fuzzing loaders: raw bytes, protobuf messages, ``.om`` files and rule text.

Every mutator is a pure function of its input and a ``graphgen.Chooser``, so it runs under
hypothesis (``strategies.DrawChooser``: cases shrink and replay) or from a NumPy seed
(``graphgen.RngChooser``: long fuzz runs without hypothesis).

- ``mutate_bytes``: bit flips, interesting bytes, deletions, insertions, duplications,
  truncation, splices with another file of the corpus.
- ``mutate_message``: structure-aware protobuf mutation (an ``onnx.ModelProto``): one scalar
  field set to an edge value (0, -1, 2**31, 2**63 - 1, a name from elsewhere in the model,
  ``../`` paths...), a repeated element dropped or duplicated, a sub-message cleared.
- ``mutate_json`` and ``mutate_om``: the same on a ``.om`` file's MODEL_DEF, re-packed with
  correct checksums so the mutation reaches the decoder instead of the checksum check.
- ``mutate_text``: token-level edits of rule files.

Invariant: mutators never raise on any input they accept (an unparsable ``.om`` is mutated as
bytes instead).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..errors import GeError
from ..om.format import HEADER, Kind, Section, header_size, pack_header, pad, parse_header
from ..om.format import parse_sections as _parse_sections
from .graphgen import Chooser, choice

INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x08, 0x10, 0x20, 0x40)
INTERESTING_INTS = (0, 1, -1, 2, 7, 64, 65, 255, 2**16, 2**31 - 1, 2**31, -(2**31),
                    2**32, 2**40, 2**62, 2**63 - 1, -(2**63))
INTERESTING_STRINGS = ("", "x", "../../etc/passwd", "/etc/passwd", "a/../../b", "\x00",
                       "Conv", "ge", "com.microsoft", "\u2603", "N", "-1", "y" * 5000)


# ----------------------------------------------------------------------------- bytes


def mutate_bytes(data: bytes, c: Chooser, corpus: Sequence[bytes] = (), max_steps: int = 4
                 ) -> bytes:
    """``data`` after 1..``max_steps`` random byte-level edits."""
    out = bytearray(data)
    for _ in range(c.integer(1, max_steps)):
        out = _byte_step(out, c, corpus)
    return bytes(out)


def _byte_step(out: bytearray, c: Chooser, corpus: Sequence[bytes]) -> bytearray:
    kind = c.integer(0, 6)
    n = len(out)
    if n == 0:
        return bytearray([c.integer(0, 255)])
    at = c.integer(0, n - 1)
    if kind == 0:  # flip one bit
        out[at] ^= 1 << c.integer(0, 7)
    elif kind == 1:  # an interesting byte
        out[at] = choice(c, INTERESTING_BYTES)
    elif kind == 2:  # delete a run
        del out[at:at + c.integer(1, 16)]
    elif kind == 3:  # insert random bytes
        out[at:at] = bytes(c.integer(0, 255) for _ in range(c.integer(1, 8)))
    elif kind == 4:  # duplicate a run
        run = out[at:at + c.integer(1, 64)]
        out[at:at] = run
    elif kind == 5:  # truncate
        del out[at:]
    else:
        out = bytearray(splice(bytes(out), choice(c, corpus) if corpus else bytes(out), c))
    return out


def splice(a: bytes, b: bytes, c: Chooser) -> bytes:
    """A prefix of ``a`` followed by a suffix of ``b``."""
    return a[:c.integer(0, len(a))] + b[c.integer(0, len(b)):]


# ----------------------------------------------------------------------------- protobuf


def _leaves(msg: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, Any, int | None]]:
    """Every ``(message, field, index)`` set in ``msg``, depth first (index for repeated)."""
    found: list[tuple[Any, Any, int | None]] = []
    for field, value in msg.ListFields():
        repeated = _is_repeated(field)
        items = list(enumerate(value)) if repeated else [(None, value)]
        for index, item in items:
            found.append((msg, field, index))
            if field.type == field.TYPE_MESSAGE:
                found.extend(_leaves(item, (*path, field.name)))
    return found


def _is_repeated(field: Any) -> bool:
    label = getattr(field, "label", None)
    if label is not None:
        return bool(label == field.LABEL_REPEATED)
    return bool(field.is_repeated)  # pragma: no cover - newer protobuf


def _strings(msg: Any) -> list[str]:
    out = []
    for owner, field, index in _leaves(msg):
        if field.type == field.TYPE_STRING:
            value = getattr(owner, field.name)
            out.append(value[index] if index is not None else value)
    return out


def mutate_message(msg: Any, c: Chooser, max_steps: int = 3) -> Any:
    """A mutated deep copy of a protobuf message (see the module docstring)."""
    out = copy.deepcopy(msg)
    names = _strings(out) or ["x"]
    for _ in range(c.integer(1, max_steps)):
        leaves = _leaves(out)
        if not leaves:
            break
        owner, field, index = choice(c, leaves)
        _mutate_field(owner, field, index, c, names)
    return out


def _mutate_field(owner: Any, field: Any, index: int | None, c: Chooser, names: list[str]
                  ) -> None:
    value = getattr(owner, field.name)
    if index is not None and c.integer(0, 2) == 0:  # drop or duplicate a repeated element
        if c.integer(0, 1) == 0:
            del value[index]
        elif field.type == field.TYPE_MESSAGE:
            value.add().CopyFrom(value[index])
        else:
            value.append(value[index])
        return
    new = _new_scalar(field, value[index] if index is not None else value, c, names)
    if new is None:  # a message: clear it or leave it to deeper leaves
        target = value[index] if index is not None else value
        if c.integer(0, 1) == 0:
            target.Clear()
        return
    try:
        if index is not None:
            value[index] = new
        else:
            setattr(owner, field.name, new)
    except (ValueError, TypeError, OverflowError):  # out of the field's range: skip
        pass


def _new_scalar(field: Any, old: Any, c: Chooser, names: list[str]) -> Any:
    t = field.type
    if t == field.TYPE_MESSAGE:
        return None
    if t == field.TYPE_STRING:
        return choice(c, [*INTERESTING_STRINGS, *names])
    if t == field.TYPE_BYTES:
        return mutate_bytes(bytes(old), c)
    if t in (field.TYPE_FLOAT, field.TYPE_DOUBLE):
        return choice(c, [0.0, -0.0, 1e-45, 3.4e38, float("inf"), float("nan"), -1.0])
    if t == field.TYPE_BOOL:
        return not old
    if t == field.TYPE_ENUM:
        return c.integer(0, 30)
    return choice(c, [*INTERESTING_INTS, old + 1, old - 1])


# ----------------------------------------------------------------------------- JSON and .om


def mutate_json(doc: Any, c: Chooser, max_steps: int = 3) -> Any:
    """A mutated deep copy of a JSON document (numbers, strings, lists, objects)."""
    out = copy.deepcopy(doc)
    names = [v for _, v in _json_leaves(out) if isinstance(v, str)] or ["x"]
    for _ in range(c.integer(1, max_steps)):
        leaves = _json_leaves(out)
        if not leaves:
            break
        (parent, key), value = choice(c, [(k, v) for k, v in leaves])
        _json_edit(parent, key, value, c, names)
    return out


def _json_leaves(doc: Any) -> list[tuple[tuple[Any, Any], Any]]:
    found: list[tuple[tuple[Any, Any], Any]] = []
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else (
            enumerate(node) if isinstance(node, list) else ())
        for key, value in items:
            found.append(((node, key), value))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return found


def _json_edit(parent: Any, key: Any, value: Any, c: Chooser, names: list[str]) -> None:
    kind = c.integer(0, 3)
    if kind == 0:  # remove
        del parent[key]
    elif kind == 1 and isinstance(parent, list):  # duplicate an element
        parent.insert(key, copy.deepcopy(value))
    elif kind == 2:  # a value of another type
        parent[key] = choice(c, [None, True, [], {}, "x", 1.5, -1, [0] * 3, {"a": 1}])
    else:
        parent[key] = _json_scalar(value, c, names)


def _json_scalar(value: Any, c: Chooser, names: list[str]) -> Any:
    if isinstance(value, bool) or value is None:
        return choice(c, [True, False, None, 0])
    if isinstance(value, int):
        return choice(c, [*INTERESTING_INTS, value + 1, value - 1, value * 2])
    if isinstance(value, float):
        return choice(c, [0.0, -1.0, 1e308, 1e-320, value * 2])
    if isinstance(value, str):
        return choice(c, [*INTERESTING_STRINGS, *names])
    if isinstance(value, list) and value:
        return value[: c.integer(0, len(value) - 1)]
    return value


def om_sections(data: bytes) -> list[tuple[int, bytes]]:
    """``(kind, body)`` of each section of a valid ``.om`` file (raises ``GeError``)."""
    header = parse_header(data[:HEADER.size], len(data), "om")
    sections = _parse_sections(header, data[:header.header_size], len(data), "om")
    return [(s.kind, data[s.offset:s.end]) for s in sections]


def pack_om(bodies: Sequence[tuple[int, bytes]]) -> bytes:
    """A ``.om`` container around these section bodies, with correct offsets and checksums."""
    start = header_size(len(bodies))
    out = bytearray(start + pad(start))
    table = []
    for kind, body in bodies:
        table.append(Section(kind, len(out), len(body), hashlib.sha256(body).digest()))
        out += body + bytes(pad(len(body)))
    out[:start] = pack_header(table, len(out))
    return bytes(out)


def mutate_om(data: bytes, c: Chooser) -> bytes:
    """Mutate a section and re-pack the file: mostly MODEL_DEF (as JSON, sometimes as raw
    bytes), else any section's bytes."""
    try:
        bodies = om_sections(data)
    except GeError:
        return mutate_bytes(data, c)
    model_def = [i for i, (kind, _) in enumerate(bodies) if kind == Kind.MODEL_DEF]
    k = model_def[0] if model_def and c.integer(0, 3) else c.integer(0, len(bodies) - 1)
    kind, body = bodies[k]
    if kind == Kind.MODEL_DEF and c.integer(0, 3) != 0:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if doc is not None:
            body = json.dumps(mutate_json(doc, c)).encode()
        else:
            body = mutate_bytes(body, c)
    else:
        body = mutate_bytes(body, c)
    bodies[k] = (kind, body)
    return pack_om(bodies)


# ----------------------------------------------------------------------------- text


def mutate_text(text: str, c: Chooser, tokens: Sequence[str], max_steps: int = 4) -> str:
    """Delete, insert, replace with a token, or duplicate spans of ``text``."""
    for _ in range(c.integer(1, max_steps)):
        i = c.integer(0, len(text))
        j = c.integer(i, min(len(text), i + 24))
        kind = c.integer(0, 3)
        if kind == 0:
            text = text[:i] + text[j:]
        elif kind == 1:
            text = text[:i] + choice(c, tokens) + text[i:]
        elif kind == 2:
            text = text[:i] + choice(c, tokens) + text[j:]
        else:
            text = text[:j] + text[i:j] + text[j:]
    return text
