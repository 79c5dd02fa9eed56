"""A .om file gives back what was written: graph, attributes, weights, plans, metadata."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from memgraphs import chain, make, registry
from om_files import W, build, probe_graph, sections_of

from gerules.build import plan_variant
from gerules.errors import ModelError, UsageError
from gerules.ir.graph import Node
from gerules.om import MAGIC, VERSION, Kind, read_om


def test_graph_attributes_and_weights_round_trip(tmp_path: Path) -> None:
    g = probe_graph()
    result = build(g, tmp_path / "m.om", options={"soc_version": "Ascend310", "opt": 2},
                   report={"fused": ["a"]})
    with read_om(result.path, registry=registry()) as om:
        back = om.contents.graph
        assert back.nodes == g.nodes  # Attrs compare tensors by dtype, shape and bytes
        probe = back.nodes[0].attrs
        assert probe["f"] == math.inf and probe["floats"] == (0.5, -math.inf)
        assert probe["s"] == "hello ☃" and probe["strings"] == ("a", "b/c")
        assert probe["t"].dtype == np.int64
        assert back.input_names == g.input_names and back.output_names == g.output_names
        for name in ("w1", "w2"):
            arr = back.initializers[name]
            assert np.array_equal(arr, W) and arr.dtype == W.dtype
            assert not arr.flags.writeable
            assert arr.ctypes.data % 64 == 0
        assert om.contents.soc_version == "Ascend310"
        assert om.contents.compile_options == {"soc_version": "Ascend310", "opt": 2}
        assert om.contents.command_line.startswith("ge-rewrite compile")
        assert om.report()["fused"] == ["a"]
        assert om.report()["memory"]["default"]["arena"] == result.figures.arena
        (variant,) = om.contents.variants
        assert variant.plan == result.variants[0].plan
        del back, probe, arr, variant


def test_identical_weights_are_stored_once(tmp_path: Path) -> None:
    g = probe_graph()
    path = build(g, tmp_path / "m.om").path
    doc = json.loads(_section(path.read_bytes(), Kind.MODEL_DEF))
    inits = {i["name"]: i["weight"] for i in doc["graph"]["initializers"]}
    assert inits["w1"] == inits["w2"]
    assert len(doc["weights"]) == 2  # W, and the probe's attribute tensor
    assert all(w["offset"] % 64 == 0 for w in doc["weights"])


def test_header_layout(tmp_path: Path) -> None:
    data = build(chain(), tmp_path / "m.om").path.read_bytes()
    assert data[:8] == MAGIC
    assert (int.from_bytes(data[8:10], "little"), int.from_bytes(data[10:12], "little")) == VERSION
    sections, start = sections_of(data)
    assert [Kind(s.kind).name for s in sections] == ["MODEL_DEF", "WEIGHTS", "REPORT"]
    assert all(s.offset % 64 == 0 and s.offset >= start for s in sections)


def test_non_finite_floats_are_strict_json(tmp_path: Path) -> None:
    path = build(probe_graph(), tmp_path / "m.om").path
    text = _section(path.read_bytes(), Kind.MODEL_DEF).decode()
    assert "Infinity" not in text and "NaN" not in text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))


def test_names_that_look_like_paths_are_refused_at_write(tmp_path: Path) -> None:
    g = make([Node("Abs", ("x",), ("../escape",))], {"x": (4,)}, ["../escape"])
    with pytest.raises(ModelError, match=r"'\.\.' path component"):
        build(g, tmp_path / "m.om")
    assert list(tmp_path.iterdir()) == []  # no partial or temporary file


def test_a_dim_name_that_looks_like_a_path_is_refused_at_its_input() -> None:
    """A variant is named by its dims (``N=8``): a symbolic dim ``../up`` is refused at the
    input that declares it, before planning (a fuzzed model's refusal had no place)."""
    g = make([Node("Abs", ("x",), ("y",))], {"x": ("../up", 4)}, ["y"])  # type: ignore[dict-item]
    with pytest.raises(ModelError, match=r"tensor 'x'.*symbolic dim '\.\./up' cannot name a "
                       r"\.om variant: .*'\.\.' path component"):
        plan_variant(g, {"../up": 2})


def test_output_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        build(chain(), tmp_path / "no" / "m.om")


def test_zero_size_weights_and_tensors(tmp_path: Path) -> None:
    g = make([Node("Add", ("x", "e"), ("y",))], {"x": (0, 3)}, ["y"],
             {"e": np.zeros((0, 3), np.float32)})
    path = build(g, tmp_path / "m.om").path
    with read_om(path, registry=registry()) as om:
        assert om.contents.graph.initializers["e"].shape == (0, 3)


def _section(data: bytes, kind: Kind) -> bytes:
    sections, _ = sections_of(data)
    s = next(s for s in sections if s.kind == kind)
    return data[s.offset:s.end]


def test_a_long_dim_name_is_cut_in_the_warning_and_refused_by_its_input(
        caplog: pytest.LogCaptureFixture) -> None:
    """A 5,000-character dim name: the warning that fixes it to 1 quotes 80 characters, and
    a variant it would name is refused at the input (a .om name has at most 4,096)."""
    from gerules.compiler import fix_input_shapes

    name = "a" * 5000
    g = make([Node("Abs", ("x",), ("y",))], {"x": (name, 4)}, ["y"])  # type: ignore[dict-item]
    fix_input_shapes(g, {}, keep_batch=False)
    assert f"symbolic dim '{'a' * 80}...' set to 1" in caplog.text and name not in caplog.text
    with pytest.raises(ModelError, match=r"tensor 'x'.*5000 characters \(at most 4096\)"):
        plan_variant(g, {name: 2})
