"""Bad .om files: each gives one clear OmError naming the file and the section or field, and
loading never allocates more than the file's size (measured with tracemalloc)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memgraphs import registry, two_branches
from om_files import build, model_def, probe_graph, repack, sections_of, with_model_def

from gerules.errors import OmError
from gerules.om import Kind, read_om
from gerules.om.format import HEADER, Section

SLACK = 1 << 20  # interpreter noise: exceptions, small dicts, the JSON of a tiny model


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("om") / "good.om"
    return build(probe_graph(), path, report={"note": "x"}).path.read_bytes()


def load_bad(tmp_path: Path, data: bytes, match: str) -> OmError:
    """Load ``data``; it must fail with one OmError line matching ``match``. The load is
    traced the second time: the first may import modules or build the registry, which a
    test run first in its worker would count against the file."""
    path = tmp_path / "bad.om"
    path.write_bytes(data)
    reg = registry()
    with pytest.raises(OmError):
        read_om(path, registry=reg).close()
    tracemalloc.start()
    try:
        with pytest.raises(OmError) as info:
            read_om(path, registry=reg).close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path)), message
    assert _search(match, message), message
    assert peak <= len(data) + SLACK, f"allocated {peak} bytes for a {len(data)}-byte file"
    return info.value


def _search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text) is not None


def test_the_good_file_loads(tmp_path: Path, good: bytes) -> None:
    path = tmp_path / "ok.om"
    path.write_bytes(good)
    read_om(path, registry=registry()).close()


def test_empty_file(tmp_path: Path) -> None:
    load_bad(tmp_path, b"", "empty file")


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(OmError, match="no such file"):
        read_om(tmp_path / "none.om")
    with pytest.raises(OmError, match="is a folder"):
        read_om(tmp_path)


def test_wrong_magic(tmp_path: Path, good: bytes) -> None:
    load_bad(tmp_path, b"PK\x03\x04" + good[4:], "not a gerules .om file")
    load_bad(tmp_path, b"IMOD" + good[4:], "CANN atc .om file")


def test_newer_major_version_names_both_versions(tmp_path: Path, good: bytes) -> None:
    data = bytearray(good)
    data[8:10] = (2).to_bytes(2, "little")
    load_bad(tmp_path, bytes(data), r"format version 2\.0 is newer .* reads \(1\.0\)")


def test_newer_minor_version_with_an_unknown_section_still_loads(tmp_path: Path,
                                                                  good: bytes) -> None:
    data = repack(good, extra=((99, b"from the future"),))
    path = tmp_path / "minor.om"
    path.write_bytes(data)
    read_om(path, registry=registry()).close()


def test_truncated_at_every_section_boundary(tmp_path: Path, good: bytes) -> None:
    sections, start = sections_of(good)
    cuts = {1, HEADER.size - 1, HEADER.size, start - 1, start}
    for s in sections:
        cuts |= {s.offset, s.offset + 1, s.end - 1, s.end}
    for cut in sorted(c for c in cuts if 0 < c < len(good)):
        load_bad(tmp_path, good[:cut], "too small|truncated")


def test_trailing_bytes(tmp_path: Path, good: bytes) -> None:
    load_bad(tmp_path, good + b"\0" * 64, "trailing bytes")


@pytest.mark.parametrize("where", ["fixed", "table", "MODEL_DEF", "WEIGHTS", "REPORT",
                                   "padding"])
def test_bit_flips_in_each_part(tmp_path: Path, good: bytes, where: str) -> None:
    sections, start = sections_of(good)
    by_name = {Kind(s.kind).name: s for s in sections}
    if where == "fixed":
        spots = [13, 24, 33, 63]  # flags, file size, header checksum
    elif where == "table":
        spots = [HEADER.size + 1, HEADER.size + 9, start - 1]
    elif where == "padding":
        spots = [by_name["MODEL_DEF"].end] if by_name["MODEL_DEF"].end % 64 else [start]
    else:
        s = by_name[where]
        spots = [s.offset, s.offset + s.length // 2, s.end - 1]
    expect = {"fixed": "header", "table": "header", "padding": "padding"}.get(
        where, f"section {where}: checksum mismatch")
    for spot in spots:
        for bit in (0, 7):
            data = bytearray(good)
            data[spot] ^= 1 << bit
            load_bad(tmp_path, bytes(data), expect)


def _table_edit(kind: Kind, **changes: int) -> Callable[[list[Section]], list[Section]]:
    def edit(table: list[Section]) -> list[Section]:
        return [Section(s.kind, changes.get("offset", s.offset), changes.get("length", s.length),
                        s.digest) if s.kind == kind else s for s in table]
    return edit


@pytest.mark.parametrize("kind", [Kind.MODEL_DEF, Kind.WEIGHTS, Kind.REPORT])
def test_huge_lengths_and_offsets_past_the_end(tmp_path: Path, good: bytes, kind: Kind) -> None:
    for changes in ({"length": 1 << 63}, {"length": (1 << 64) - 1}, {"offset": 1 << 62},
                    {"offset": len(good) + 64}, {"offset": 0}, {"offset": 65}):
        data = repack(good, edit_table=_table_edit(kind, **changes))
        load_bad(tmp_path, data, f"section {kind.name}: offset .* do not fit|overlap")


def test_overlapping_sections(tmp_path: Path, good: bytes) -> None:
    sections, _ = sections_of(good)
    first = sections[0]
    data = repack(good, edit_table=_table_edit(Kind.WEIGHTS, offset=first.offset))
    load_bad(tmp_path, data, "overlap")


def test_missing_and_duplicate_sections(tmp_path: Path, good: bytes) -> None:
    load_bad(tmp_path, repack(good, drop=(Kind.WEIGHTS,)), "section WEIGHTS is missing")
    load_bad(tmp_path, repack(good, extra=((Kind.REPORT, b"{}"),)), "REPORT appears twice")


def test_too_many_sections(tmp_path: Path, good: bytes) -> None:
    data = bytearray(good)
    data[20:24] = (1 << 31).to_bytes(4, "little")
    load_bad(tmp_path, bytes(data), "sections and header size")


# -- MODEL_DEF content with valid checksums: crafted, not corrupted ---------------------------


def mutate(good: bytes, fn: Callable[[dict[str, Any]], Any]) -> bytes:
    doc = model_def(good)
    fn(doc)
    return with_model_def(good, doc)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            doc = doc[int(key)] if isinstance(doc, list) else doc[key]  # type: ignore[assignment]
        if isinstance(doc, list):
            doc[int(last)] = value
        else:
            doc[last] = value
    return apply


CRAFTED = [
    ("graph.nodes.1.name", "../x", r"nodes\[1\]\.name: .*'\.\.' path component"),
    ("graph.nodes.1.outputs", ["../../etc/passwd"], r"'\.\.' path component"),
    ("graph.inputs.0.name", "a\x00b", "control character"),
    ("graph.nodes.2.name", "n" * 5000, "5000 characters"),
    ("graph.nodes.3.op", "NoSuchOp", "unknown op NoSuchOp"),
    ("graph.inputs.0.dtype", "complex64", "unknown dtype 'complex64'"),
    ("graph.inputs.0.shape", [-1, 4], r"-1 is outside 0\.\."),
    ("variants.0.tensors.0.shape", [1 << 40, 1 << 40, 1 << 40], r"needs \d+ bytes"),
    ("weights.0.nbytes", 1 << 63, "does not match"),
    ("weights.0.shape", [1 << 40, 1 << 20], r"needs \d+ bytes|does not match"),
    ("weights.0.offset", 1 << 63, "not 64-aligned inside"),
    ("weights.0.offset", 32, "not 64-aligned inside"),
    ("graph.initializers.0.weight", 99, r"99 is outside 0\.\.1"),
    ("graph.nodes.0.attrs.i", {"type": "pickle", "value": "cos\nsystem"},
     "unknown attribute type 'pickle'"),
    ("graph.nodes.0.attrs.f", {"type": "float", "value": "1e999x"}, "expected a number"),
    ("variants.0.arena_bytes", 1 << 62, r"outside 0\.\."),
    ("variants.0.order", [0, 0, 1, 2], "not a permutation"),
    ("variants.0.stream_count", 0, r"0 is outside 1\.\."),
    ("variants.0.tensors", [], "has no entry"),
    ("variants", [], "no compiled variant"),
    ("graph", [], "expected an object, got a list"),
]


@pytest.mark.parametrize(("path", "value", "match"), CRAFTED,
                         ids=[f"{p}={str(v)[:20]}" for p, v, _ in CRAFTED])
def test_crafted_model_defs(tmp_path: Path, good: bytes, path: str, value: Any,
                            match: str) -> None:
    err = load_bad(tmp_path, mutate(good, _set(path, value)), match)
    assert "section MODEL_DEF" in str(err)


def test_a_corrupted_plan_in_the_file_is_rejected(tmp_path: Path) -> None:
    data = build(two_branches(size=64), tmp_path / "m.om").path.read_bytes()
    doc = model_def(data)
    table = doc["variants"][0]["tensors"]
    offsets = {t["offset"] for t in table}
    for t in table:  # pile every tensor onto one block
        t["offset"] = min(offsets)
    load_bad(tmp_path, with_model_def(data, doc), "memory plan: .*overlap")


@pytest.mark.parametrize(("raw", "match"), [
    (b"[" * 100_000, "nested too deeply"),
    (b"\xff\xfe{}", "not valid JSON"),
    (b'{"a": NaN', "not valid JSON"),
    (b"[]", "expected an object"),
    (json.dumps({"graph": {}}).encode(), "field 'weights' is missing"),
])
def test_bad_json(tmp_path: Path, good: bytes, raw: bytes, match: str) -> None:
    load_bad(tmp_path, with_model_def(good, raw), match)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_any_single_bit_flip_anywhere_is_detected(tmp_path: Path, good: bytes, where: float,
                                                  bit: int) -> None:
    data = bytearray(good)
    data[int(where * len(data))] ^= 1 << bit
    load_bad(tmp_path, bytes(data), ".")
