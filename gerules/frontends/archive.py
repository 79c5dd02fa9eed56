"""PyTorch archives checked before anything loads them: one strict pass, no torch, no code.

``check_archive(data, where=..., budgets=..., trust=...)`` reads the zip's central directory
once and refuses, naming the archive and the entry:
- zip tricks: duplicate entry names (Python's zipfile reads the last copy, torch's reader the
  first), a local header whose name differs from the directory's, entries that overlap or
  lie outside the file, data before the first entry, encrypted entries, compression other
  than stored or deflated, names that are absolute, hold ``..``, a backslash or a NUL, or
  are not all under one top folder;
- decompression bombs: an entry, or all of them together, expanding past
  ``budgets.archive_bytes`` (the sizes are the directory's; readers stop at them);
- what loads only by running code, unless ``trust`` (``--trust_archive``): TorchScript
  (``code/`` + ``constants.pkl``: its methods run at load time) and any pickle that is not
  weights only (``pickles``);
- what torch would load through a legacy or unchecked path, always: a ``torch.export``
  archive without ``archive_format`` = ``pt2`` (torch then falls back to its legacy reader,
  which unpickles with ``weights_only=False``), the legacy weights file, AOTInductor shared
  libraries, custom or opaque pickled objects, entries the format does not have, and model
  JSON whose symbolic expressions or guard code are anything but plain shape arithmetic
  (torch passes them to ``sympy.sympify`` and ``exec``).

Returns the kind: ``"export"`` (``torch.export.save``), ``"torchscript"``
(``torch.jit.save``) or ``"module"`` (a ``torch.save`` pickle of a module, trusted only).
Every refusal is a ``ModelError`` (a budget: ``ResourceLimit``) that says what to do.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from ..budgets import DEFAULT, Budgets
from ..errors import ModelError
from ..fileio import parse_json
from .pickles import NotWeights, check_weights_only

TRUST_HINT = ("--trust_archive runs the conversion in a separate, limited process; use it only "
              "for archives from people you trust (docs/SECURITY.md)")
_LOCAL = struct.Struct("<4s5H3I2H")  # signature ... name length, extra length
_LOCAL_SIG = b"PK\x03\x04"
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_PICKLE_PROTOCOLS = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")

# torch.export archive entries, below the archive's top folder.
_EXPORT_FIXED = frozenset({"archive_format", "archive_version", "byteorder", ".data/version",
                           ".data/serialization_id"})
_EXPORT_PATTERNS = (
    re.compile(r"models/\w+\.json"),
    re.compile(r"data/(weights|constants)/\w+_(weights|constants)_config\.json"),
    re.compile(r"data/weights/weight_\d+"),
    re.compile(r"data/constants/tensor_\d+"),
    re.compile(r"data/sample_inputs/\w+\.pt"),
    re.compile(r"extra/[\w./-]+"),
)
_PAYLOAD_NAME = re.compile(r"(weight|tensor)_\d+")

# What sympy and the guard functions may see: numbers, operators, size symbols and the
# shape functions torch's deserializer defines; nothing that names a Python object.
_EXPR_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([A-Za-z_]\w*)|(\*\*|//|<=|>=|==|!=|"
                         r"[-+*/%(),<>]))")
_EXPR_NAMES = frozenset({
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt",
    "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
    "IntTrueDiv", "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal", "Max", "Min",
    "Abs", "Eq", "Ne", "Ge", "Gt", "Le", "Lt", "And", "Or", "Not", "True", "False", "oo",
})
_SYMBOL = re.compile(r"[a-z]\d+")
_GUARD = re.compile(r"(?:L\['\w+'\](?:\.size\(\)\[\d+\]|\[\d+\])*|\d+|==|!=|<=|>=|[<>+\-*()%/ ]"
                    r"|and|or|not)+")
MAX_EXPR = 1000


def check_archive(data: bytes, *, where: str, budgets: Budgets = DEFAULT,
                  trust: bool = False) -> str:
    """The kind of a PyTorch archive that may be loaded (see the module docstring).

    The zip structure and the budget are always checked; with ``trust`` the contents are not
    (they are loaded in the isolated worker, where running their code is what was asked)."""
    if trust and data[:2] in _PICKLE_PROTOCOLS:
        return "module"  # a legacy torch.save file: a bare pickle, no zip to check
    zf = _open(data, where)
    entries = _entries(zf, data, where, budgets)
    kind = _kind(entries)
    if kind == "unknown":
        raise ModelError("not a TorchScript or torch.export archive (a zip written by "
                         "torch.jit.save or torch.export.save)", file=where)
    if kind == "pickle":
        return _check_pickle(zf, entries, where, trust)
    if trust:
        return kind
    if kind == "torchscript":
        raise ModelError("a TorchScript archive runs its own code when it is loaded (its "
                         "methods can read and write any file); it is refused without "
                         f"--trust_archive: {TRUST_HINT}", file=where)
    _check_export(zf, entries, where)
    return kind


def _open(data: bytes, where: str) -> zipfile.ZipFile:
    if not data.startswith(_LOCAL_SIG):
        if data[:2] in _PICKLE_PROTOCOLS:
            raise ModelError("a legacy torch.save file (a bare pickle, not a zip); loading it "
                             "would run the code it names. Save the model with "
                             f"torch.export.save instead, or {TRUST_HINT}", file=where)
        raise ModelError("not a zip archive (torch.jit.save and torch.export.save write "
                         "zips)", file=where)
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise ModelError(f"a broken zip archive ({e})", file=where) from None


def _entries(zf: zipfile.ZipFile, data: bytes, where: str, budgets: Budgets
             ) -> dict[str, zipfile.ZipInfo]:
    """Inner name (below the top folder) -> entry, after the structural checks."""
    infos = zf.infolist()
    if not infos:
        raise ModelError("an empty zip archive", file=where)
    tops, out, spans, total = set(), {}, [], 0
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name).parts
        if (not name or name.startswith("/") or "\\" in name or "\0" in name
                or ".." in parts or len(parts) < 2):
            raise ModelError(f"entry {name!r} has a name no archive of torch's has", file=where)
        tops.add(parts[0])
        inner = "/".join(parts[1:])
        if inner in out:
            raise ModelError(f"entry {name!r} appears twice (readers disagree on which copy "
                             "counts)", file=where)
        if info.flag_bits & 0x1 or info.compress_type not in _METHODS:
            raise ModelError(f"entry {name!r} is encrypted or compressed with method "
                             f"{info.compress_type}", file=where)
        budgets.check("archive_bytes", info.file_size, f"entry {name!r}", file=where)
        total += info.file_size
        spans.append(_local_span(info, data, where))
        out[inner] = info
    if len(tops) != 1:
        raise ModelError(f"entries under {len(tops)} top folders (torch writes one)",
                         file=where)
    budgets.check("archive_bytes", total, "the archive's entries together", file=where)
    _no_overlap(spans, zf, where)
    return out


def _local_span(info: zipfile.ZipInfo, data: bytes, where: str) -> tuple[int, int]:
    """Where the entry's local header and data lie; its name must be the directory's."""
    start = info.header_offset
    head = data[start:start + _LOCAL.size]
    if len(head) < _LOCAL.size or head[:4] != _LOCAL_SIG:
        raise ModelError(f"entry {info.filename!r}: no local header where the directory "
                         "says", file=where)
    name_len, extra_len = _LOCAL.unpack(head)[-2:]
    name = data[start + _LOCAL.size:start + _LOCAL.size + name_len]
    if name != info.filename.encode("utf-8") and name != info.filename.encode("cp437",
                                                                              "replace"):
        raise ModelError(f"entry {info.filename!r}: the local header names {name[:80]!r} "
                         "(two names for one entry)", file=where)
    end = start + _LOCAL.size + name_len + extra_len + info.compress_size
    if end > len(data):
        raise ModelError(f"entry {info.filename!r} runs past the end of the file", file=where)
    return start, end


def _no_overlap(spans: list[tuple[int, int]], zf: zipfile.ZipFile, where: str) -> None:
    spans.sort()
    if spans[0][0] != 0:
        raise ModelError(f"{spans[0][0]} bytes before the first entry", file=where)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise ModelError("entries overlap (one byte range read as two files)",
                             file=where)
    if spans[-1][1] > zf.start_dir:
        raise ModelError("an entry runs into the zip directory", file=where)


def _kind(entries: Mapping[str, zipfile.ZipInfo]) -> str:
    if any(n == "archive_format" or n.startswith(("models/", "data/weights/"))
           for n in entries):
        return "export"
    if "constants.pkl" in entries and any(n.startswith("code/") for n in entries):
        return "torchscript"
    if "data.pkl" in entries:
        return "pickle"
    if "serialized_exported_program.json" in entries or "version" in entries:
        return "export"  # the pre-2.7 export layout: refused by _check_export
    return "unknown"


def _read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    try:
        return zf.read(info)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise ModelError(f"entry {info.filename!r} cannot be read ({e})", file=where) from None


def _check_export(zf: zipfile.ZipFile, entries: Mapping[str, zipfile.ZipInfo], where: str
                  ) -> None:
    fmt = entries.get("archive_format")
    if fmt is None or _read(zf, fmt, where) != b"pt2":
        raise ModelError("an old torch.export archive layout, which torch loads with "
                         "unrestricted unpickling; re-save it with torch.export.save from "
                         "torch 2.7 or newer", file=where)
    for inner, info in entries.items():
        if inner.startswith("data/aotinductor/"):
            raise ModelError(f"entry {info.filename!r} is compiled code (AOTInductor), which "
                             "would be loaded as a shared library", file=where)
        if inner not in _EXPORT_FIXED and not any(p.fullmatch(inner) for p in _EXPORT_PATTERNS):
            raise ModelError(f"entry {info.filename!r} is not part of a torch.export archive "
                             "(a legacy or altered layout)", file=where)
    for inner, info in entries.items():
        if inner.endswith("_config.json"):
            _check_config(zf, entries, inner, where)
        elif inner.startswith("models/"):
            _check_program(parse_json(_read(zf, info, where), where=info.filename,
                                      file=where), info.filename, where)
        elif inner.startswith("data/sample_inputs/"):
            _weights_only(_read(zf, info, where), info.filename, where)


def _check_config(zf: zipfile.ZipFile, entries: Mapping[str, zipfile.ZipInfo], inner: str,
                  where: str) -> None:
    info = entries[inner]
    config = parse_json(_read(zf, info, where), where=info.filename, file=where)
    payloads = config.get("config") if isinstance(config, dict) else None
    if not isinstance(payloads, dict):
        raise ModelError(f"{info.filename}: no 'config' object", file=where)
    folder = str(PurePosixPath(inner).parent)
    for key, meta in payloads.items():
        path = meta.get("path_name") if isinstance(meta, dict) else None
        if not isinstance(path, str) or not _PAYLOAD_NAME.fullmatch(path):
            raise ModelError(f"{info.filename}: '{str(key)[:80]}' is stored as {path!r}, a "
                             "pickled Python object (custom or opaque objects run code when "
                             "loaded)", file=where)
        payload = entries.get(f"{folder}/{path}")
        if payload is None:
            raise ModelError(f"{info.filename}: '{path}' is missing", file=where)
        if meta.get("use_pickle"):
            _weights_only(_read(zf, payload, where), payload.filename, where)


def _weights_only(data: bytes, name: str, where: str) -> None:
    """A payload torch reads with ``torch.load``: a ``torch.save`` zip or a bare pickle."""
    if data.startswith(_LOCAL_SIG):
        _check_nested_pickle(data, name, where)
        return
    try:
        check_weights_only(data)
    except NotWeights as e:
        raise ModelError(f"{name} is a pickle that could run code when loaded: {e}; it is "
                         f"refused without --trust_archive: {TRUST_HINT}", file=where) from None


def _check_nested_pickle(data: bytes, name: str, where: str) -> None:
    """A ``torch.save`` zip inside the archive (sample inputs): checked like the archive
    itself (no duplicate entries...), and its pickles weights only."""
    inner = _open(data, f"{where}: {name}")
    for inner_name, info in _entries(inner, data, f"{where}: {name}", DEFAULT).items():
        if inner_name.endswith(".pkl"):
            pickle = _read(inner, info, where)
            if pickle.startswith(_LOCAL_SIG):  # a zip in a zip in a zip: not torch's
                raise ModelError(f"{name}: {info.filename} nests another archive", file=where)
            _weights_only(pickle, f"{name}: {info.filename}", where)


def _check_pickle(zf: zipfile.ZipFile, entries: Mapping[str, zipfile.ZipInfo], where: str,
                  trust: bool) -> str:
    try:
        check_weights_only(_read(zf, entries["data.pkl"], where))
    except NotWeights as e:
        if trust:
            return "module"
        raise ModelError(f"a torch.save pickle that would run code when loaded ({e}). Save "
                         "the model with torch.export.save(torch.export.export(model, (x,))) "
                         f"instead, or {TRUST_HINT}", file=where) from None
    raise ModelError("a torch.save file of weights only (a state dict): it holds no model "
                     "graph; save the module with torch.export.save", file=where)


def _check_program(doc: Any, name: str, where: str) -> None:
    """Model JSON: symbolic expressions and guard code must be plain shape arithmetic."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "expr_str":
                    _check_expr(item, name, where)
                elif key == "guards_code":
                    _check_guards(item, name, where)
                else:
                    stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)


def _check_expr(text: object, name: str, where: str) -> None:
    if not _is_arithmetic(text):
        raise ModelError(f"{name}: the symbolic expression {str(text)[:80]!r} is not shape "
                         "arithmetic (torch would evaluate it as Python)", file=where)


def _is_arithmetic(text: object) -> bool:
    """Numbers, operators, size symbols (``s0``) and the shape functions only."""
    if not isinstance(text, str) or len(text) > MAX_EXPR:
        return False
    text, pos = text.strip(), 0
    while pos < len(text):
        m = _EXPR_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            return False
        word = m.group(2)
        if word is not None and word not in _EXPR_NAMES and not _SYMBOL.fullmatch(word):
            return False
        pos = m.end()
    return True


def _check_guards(guards: object, name: str, where: str) -> None:
    items = guards if isinstance(guards, list) else [guards]
    for text in items:
        if not isinstance(text, str) or len(text) > MAX_EXPR or not _GUARD.fullmatch(text):
            raise ModelError(f"{name}: the guard {str(text)[:80]!r} is not a plain shape "
                             "check (torch would execute it as Python)", file=where)
