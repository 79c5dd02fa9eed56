"""The package list in pyproject.toml covers every package folder."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"engine": "gerules.engine", "grammar": "gerules.grammar", "rules": "gerules.rules"}


def _packages_on_disk() -> set[str]:
    found = set()
    for init in ROOT.glob("gerules/**/__init__.py"):
        found.add(".".join(init.parent.relative_to(ROOT).parts))
    for folder, name in MAPPED.items():
        for init in (ROOT / folder).glob("**/__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    return found


def test_every_package_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert _packages_on_disk() <= listed, sorted(_packages_on_disk() - listed)


def test_no_top_level_engine_package(tmp_path: Path) -> None:
    """Installed, the engine is ``gerules.engine``; a bare ``import engine`` finds nothing."""
    code = ("import importlib.util as u; "
            "print(u.find_spec('engine') is None, u.find_spec('gerules.engine') is not None)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", "True"]


def test_test_module_names_are_unique() -> None:
    """pytest imports test files by basename (no __init__.py in tests/): two files with one
    name in different folders stop the whole collection."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
