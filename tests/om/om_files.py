"""Helpers for the .om tests: a model with every attribute kind, and re-packing files."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from memgraphs import make, registry

from gerules.build import BuildResult, build_om
from gerules.ir.attrs import Attrs
from gerules.ir.graph import Graph, Node
from gerules.om.format import (
    HEADER,
    Kind,
    Section,
    header_size,
    pack_header,
    pad,
    parse_header,
    parse_sections,
)

W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10


def probe_graph() -> Graph:
    """Probe (every attribute kind), shared weights, a float16-free float32 chain."""
    attrs = Attrs(i=-3, f=math.inf, s="hello ☃", ints=(1, -2, 3), floats=(0.5, -math.inf),
                  strings=("a", "b/c"), t=np.array([[1, 2], [3, 4]], dtype=np.int64))
    nodes = [Node("Probe", ("x",), ("p",), attrs, name="probe", domain="test"),
             Node("Add", ("p", "w1"), ("a",), name="add"),
             Node("Mul", ("a", "w2"), ("m",), name="mul"),
             Node("Abs", ("m",), ("y",), name="abs")]
    g = make(nodes, {"x": (3, 4)}, ["y"], {"w1": W, "w2": W.copy()})
    return g.replace(opset={"": 17, "test": 1})


def build(graph: Graph, path: Path, **kw: Any) -> BuildResult:
    kw.setdefault("command_line", "ge-rewrite compile model.onnx --output m")
    return build_om(graph, path, registry=registry(), **kw)


def sections_of(data: bytes) -> tuple[list[Section], int]:
    header = parse_header(data[:HEADER.size], len(data), "x")
    return parse_sections(header, data[:header.header_size], len(data), "x"), header.header_size


def repack(data: bytes, replace: dict[Kind, bytes] | None = None, *, drop: tuple[Kind, ...] = (),
           extra: tuple[tuple[int, bytes], ...] = (),
           edit_table: Callable[[list[Section]], list[Section]] | None = None) -> bytes:
    """The file rebuilt with sections replaced, dropped or added, checksums and offsets made
    consistent; ``edit_table`` may then tamper with the entries (same count; the header
    checksum is recomputed)."""
    sections, _ = sections_of(data)
    bodies = [(s.kind, (replace or {}).get(Kind(s.kind), data[s.offset:s.end]))
              for s in sections if s.kind not in drop]
    bodies += list(extra)
    start = header_size(len(bodies))
    out = bytearray(start + pad(start))
    table = []
    for kind, body in bodies:
        table.append(Section(kind, len(out), len(body), hashlib.sha256(body).digest()))
        out += body + bytes(pad(len(body)))
    if edit_table:
        table = edit_table(table)
        assert len(table) == len(bodies)
    out[:start] = pack_header(table, len(out))
    return bytes(out)


def model_def(data: bytes) -> dict[str, Any]:
    sections, _ = sections_of(data)
    s = next(s for s in sections if s.kind == Kind.MODEL_DEF)
    return json.loads(data[s.offset:s.end])  # type: ignore[no-any-return]


def with_model_def(data: bytes, doc: Any) -> bytes:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return repack(data, {Kind.MODEL_DEF: raw})
