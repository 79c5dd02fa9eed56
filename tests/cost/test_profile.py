"""SoC profiles load, validate, and rank the SoCs the way their public figures do."""

from __future__ import annotations

import pytest

from gerules.cost import NpuCostModel, load_profile, shipped_profiles
from gerules.errors import UsageError
from gerules.ir.graph import TensorType


def test_every_shipped_profile_loads() -> None:
    names = shipped_profiles()
    assert {"Ascend310", "Ascend310P3", "Ascend910", "Ascend910B"} <= set(names)
    for name in names:
        p = load_profile(name)
        assert p.name == name
        assert p.peak_flops("cube", "float16") > p.peak_flops("cube", "float32")


def test_unknown_soc_suggests_the_closest() -> None:
    with pytest.raises(UsageError, match="did you mean Ascend910"):
        load_profile("Ascend91O")


@pytest.mark.parametrize("text, field", [
    ("name: x", "peak_tflops"),
    ("peak_tflops: {cube: {float16: 1}, vector: {float16: 1}, scalar: {any: 1}}\n"
     "launch_us: {cube: 1, vector: 1, scalar: 1}\nhbm_gbps: -3", "hbm_gbps"),
    ("peak_tflops: {cube: {}, vector: {float16: 1}, scalar: {any: 1}}\n"
     "launch_us: {cube: 1, vector: 1, scalar: 1}\nhbm_gbps: 1", "peak_tflops.cube"),
])
def test_bad_profile_names_the_field(tmp_path, text: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=field):
        load_profile(str(path))


def test_bigger_soc_estimates_faster() -> None:
    from gerules.ir.registry import default_registry

    schema = default_registry().get("Add")
    t = TensorType("float32", (1, 256, 56, 56))
    times = {name: NpuCostModel(name).estimate(schema, [t, t], [t], schema.call({})).us
             for name in ("Ascend310", "Ascend310P3", "Ascend910")}
    assert times["Ascend310"] > times["Ascend310P3"] > times["Ascend910"]


def test_symbolic_dims_count_as_one() -> None:
    from gerules.ir.registry import default_registry

    schema = default_registry().get("Relu")
    model = NpuCostModel("Ascend910")
    sym = model.estimate(schema, [TensorType("float32", ("N", 8))],
                         [TensorType("float32", ("N", 8))], schema.call({}))
    one = model.estimate(schema, [TensorType("float32", (1, 8))],
                         [TensorType("float32", (1, 8))], schema.call({}))
    assert sym == one
