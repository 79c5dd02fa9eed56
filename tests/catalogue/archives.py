"""Hostile PyTorch archives for the catalogue, each built in the case's folder.

Every one that would run code points it at ``marker`` in the case's folder: if anything loads
it, the file appears and the catalogue's "folder unchanged" check fails. Building them needs
torch (imported here only when a setup runs). The TorchScript module is defined in this file
because ``torch.jit.script`` reads its source.
"""

from __future__ import annotations

import functools
import io
import json
import pathlib
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKER = "pwned"


def _torch() -> Any:
    import torch

    return torch


class Touch:
    """Unpickling this creates a file: proof that something unpickled it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (pathlib.Path.touch, (self.path,))


def evil_pickle(marker: Path) -> bytes:
    buffer = io.BytesIO()
    _torch().save(Touch(marker), buffer)
    return buffer.getvalue()


@functools.cache
def _net() -> Any:
    torch = _torch()
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()


@functools.cache
def pt2_bytes() -> bytes:
    """A good torch.export archive of a Conv+ReLU on ``x: [1, 3, 8, 8]``."""
    torch = _torch()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(_net(), (torch.zeros(1, 3, 8, 8),)), buffer)
    return buffer.getvalue()


def _entries(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _zip(path: Path, entries: list[tuple[str, bytes]]) -> None:
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as z:
        warnings.simplefilter("ignore")  # duplicate names are the point of one case
        for name, data in entries:
            z.writestr(name, data)


def edited_pt2(edit: Callable[[list[tuple[str, bytes]], Path], list[tuple[str, bytes]]]
               ) -> Callable[[Path], None]:
    """A setup writing ``model.pt2``: the good archive with ``edit(entries, marker)`` applied."""

    def run(folder: Path) -> None:
        _zip(folder / "model.pt2", edit(_entries(pt2_bytes()), folder / MARKER))

    return run


def good_pt2(folder: Path) -> None:
    (folder / "model.pt2").write_bytes(pt2_bytes())


def _top(entries: list[tuple[str, bytes]]) -> str:
    return entries[0][0].split("/")[0]


def _weights_config(entries: list[tuple[str, bytes]]) -> tuple[int, dict[str, Any]]:
    k = next(i for i, (n, _) in enumerate(entries) if n.endswith("model_weights_config.json"))
    return k, json.loads(entries[k][1])


def pickled_weight(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    """weight_0 marked ``use_pickle`` and replaced by a pickle that touches the marker."""
    k, config = _weights_config(entries)
    next(iter(config["config"].values()))["use_pickle"] = True
    entries[k] = (entries[k][0], json.dumps(config).encode())
    return [(n, evil_pickle(marker) if n.endswith("/weight_0") else d) for n, d in entries]


def duplicate_weight(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    """weight_0 twice: torch reads the first (evil), Python's zipfile the last (harmless)."""
    k, config = _weights_config(entries)
    next(iter(config["config"].values()))["use_pickle"] = True
    entries[k] = (entries[k][0], json.dumps(config).encode())
    buffer = io.BytesIO()
    _torch().save(_torch().ones(4, 3, 3, 3), buffer)
    out = []
    for name, data in entries:
        if name.endswith("/weight_0"):
            out += [(name, evil_pickle(marker)), (name, buffer.getvalue())]
        else:
            out.append((name, data))
    return out


def sympify_code(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    """No pickle at all: a symbolic size whose expression sympy would evaluate as Python."""
    k = next(i for i, (n, _) in enumerate(entries) if n.endswith("models/model.json"))
    model = json.loads(entries[k][1])
    values = model["graph_module"]["graph"]["tensor_values"]
    code = f"__import__('pathlib').Path('{marker}').touch() or s0"
    next(iter(values.values()))["sizes"][0] = {"as_expr": {"expr_str": code,
                                                           "hint": {"as_int": 1}}}
    entries[k] = (entries[k][0], json.dumps(model).encode())
    return entries


def legacy_fallback(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    """archive_format present (old checks pass) but no model: torch.export.load falls back
    to its legacy reader, which unpickles the top-level files with weights_only=False."""
    from torch._export.serde.schema import SCHEMA_VERSION

    model = next(d for n, d in entries if n.endswith("models/model.json"))
    evil = evil_pickle(marker)
    top = _top(entries)
    return [(f"{top}/archive_format", b"pt2"), (f"{top}/archive_version", b"0"),
            ("version", ".".join(map(str, SCHEMA_VERSION)).encode()),
            ("serialized_exported_program.json", model),
            ("serialized_state_dict.pt", evil), ("serialized_constants.pt", evil),
            ("serialized_example_inputs.pt", evil)]


def opaque_constant(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    config = {"config": {"c": {"path_name": "opaque_obj_0", "use_pickle": True}}}
    out = [(n, json.dumps(config).encode() if n.endswith("model_constants_config.json") else d)
           for n, d in entries]
    return [*out, (f"{_top(entries)}/data/constants/opaque_obj_0", evil_pickle(marker))]


def aot_library(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    return [*entries, (f"{_top(entries)}/data/aotinductor/model/model.so", b"\x7fELF")]


def unknown_entry(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    return [*entries, (f"{_top(entries)}/code/__torch__/evil.py", b"import os")]


def outside_folder(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    return [*entries, ("../escape.txt", b"x")]


def torchscript_writer(folder: Path) -> None:
    """A TorchScript archive whose ``__setstate__`` writes the marker when it is loaded."""
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = torch.jit.script(_define_writer()(str(folder / MARKER)))
        torch.jit.save(module, str(folder / "model.pt"))


def module_pickle(folder: Path) -> None:
    _torch().save(_net(), folder / "model.pt")


def state_dict(folder: Path) -> None:
    _torch().save(_net().state_dict(), folder / "model.pt")


def bare_pickle(folder: Path) -> None:
    """A legacy (pre-1.6) torch.save file: a bare pickle, no zip."""
    _torch().save(Touch(folder / MARKER), folder / "model.pt", _use_new_zipfile_serialization=False)


def deflate_bomb(folder: Path, size_mib: int = 3814) -> None:
    """A .pt2 whose weight_0 is ~4 MB deflated and 4.0 GB inflated (sizes in the directory)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(bytes(1 << 20)) + comp.flush(zlib.Z_FULL_FLUSH)
    bomb = block * size_mib + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    entries = [(n, d, 0) for n, d in _entries(pt2_bytes())]
    entries = [(n, (bomb, size_mib << 20), 8) if n.endswith("/weight_0") else (n, d, 0)
               for n, d, _ in entries]
    (folder / "model.pt2").write_bytes(_raw_zip(entries))


def _raw_zip(entries: list[tuple[str, Any, int]]) -> bytes:
    """A zip written by hand: (name, bytes or (deflated bytes, size), method) per entry."""
    out, central = bytearray(), bytearray()
    for name, data, method in entries:
        raw, size = data if method == 8 else (data, len(data))
        crc = zlib.crc32(data) if method == 0 else 0  # a bomb is refused before any CRC
        offset = len(out)
        fname = name.encode()
        out += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(raw),
                           size, len(fname), 0) + fname + raw
        central += struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc,
                               len(raw), size, len(fname), 0, 0, 0, 0, 0, offset) + fname
    start = len(out)
    out += central + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(entries), len(entries),
                                 len(central), start, 0)
    return bytes(out)


def _define_writer() -> type:
    torch = _torch()

    class _Writer(torch.nn.Module):
        def __init__(self, path: str) -> None:
            super().__init__()
            self.w = torch.ones(2)
            self.path = path

        @torch.jit.export
        def __getstate__(self) -> tuple[torch.Tensor, str, bool]:
            return (self.w, self.path, self.training)

        @torch.jit.export
        def __setstate__(self, state: tuple[torch.Tensor, str, bool]) -> None:
            self.w = state[0]
            self.path = state[1]
            self.training = state[2]
            torch.save(self.w, self.path)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.w

    return _Writer
