"""The public surface: ``__all__``, lazy imports, docs and typing markers."""

from __future__ import annotations

import inspect
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from api_graphs import tiny_cnn

import gerules
import gerules as ge

ROOT = Path(__file__).resolve().parents[2]


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert sorted(gerules.__all__) == sorted(["__version__", *gerules._EXPORTS])
    assert len(set(gerules.__all__)) == len(gerules.__all__)
    assert set(gerules.__all__) <= set(dir(gerules))


@pytest.mark.parametrize("name", sorted(gerules._EXPORTS))
def test_every_public_name_resolves_and_is_documented(name: str) -> None:
    value = getattr(gerules, name)
    module = __import__(gerules._EXPORTS[name], fromlist=[name])
    assert value is getattr(module, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert inspect.getdoc(value), f"{name} has no docstring"
    assert f"`{name}" in (ROOT / "docs" / "API.md").read_text(), f"docs/API.md lacks {name}"


def test_public_methods_are_documented() -> None:
    for cls in (ge.GraphBuilder, ge.Session):
        for name, member in vars(cls).items():
            if not name.startswith("_") and callable(member):
                assert inspect.getdoc(member), f"{cls.__name__}.{name} has no docstring"


def test_unknown_names_and_submodules() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = gerules.nope  # type: ignore[attr-defined]
    from gerules import errors

    assert errors.GeError is ge.GeError


def test_importing_gerules_loads_no_heavy_module() -> None:
    code = ("import sys, gerules; heavy = {'numpy', 'onnx', 'gerules.opt', 'gerules.ir'}; "
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == "[]"


def test_version_and_py_typed_ship_with_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert gerules.__version__ == config["project"]["version"]
    assert (ROOT / "gerules" / "py.typed").is_file()
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["gerules"]
    assert "gerules.api" in config["tool"]["setuptools"]["packages"]


def test_a_fusion_switch_file_feeds_compile_options(tmp_path: Path) -> None:
    path = tmp_path / "switches.cfg"
    path.write_text("fuse_conv_activation[Act=Relu]:off\nfuse_conv_bn_relu:off\n")
    switches = ge.read_switch_file(path)
    assert switches.off == {"fuse_conv_activation[Act=Relu]", "fuse_conv_bn_relu"}
    _, on = ge.optimize(tiny_cnn())
    _, off = ge.optimize(tiny_cnn(), ge.CompileOptions(disabled=switches.off))
    assert "fuse_conv_activation" in {f.rule for f in on.fusions}
    assert "fuse_conv_activation" not in {f.rule for f in off.fusions}
