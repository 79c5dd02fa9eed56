"""The engine type-checks under ``mypy --strict`` (pyproject's ``gerules.engine.*`` override).

mypy cannot follow the editable install's import hook, so the check runs in a scratch folder
where ``gerules/engine`` is a symlink to ``engine/``: there the module names are the installed
ones and the pyproject override applies. By hand::

    mkdir -p /tmp/m/gerules && touch /tmp/m/gerules/__init__.py
    ln -s "$PWD/engine" /tmp/m/gerules/engine
    (cd /tmp/m && mypy --config-file "$OLDPWD/pyproject.toml" -p gerules.engine)
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent))


def _scratch() -> Path:
    """A per-checkout scratch folder (stable, so mypy's cache makes reruns fast)."""
    tag = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    scratch = Path(tempfile.gettempdir()) / f"gerules-engine-mypy-{tag}"
    (scratch / "gerules").mkdir(parents=True, exist_ok=True)
    (scratch / "gerules" / "__init__.py").write_text("")
    link = scratch / "gerules" / "engine"
    if not link.is_symlink():
        link.symlink_to(ROOT / "engine", target_is_directory=True)
    return scratch


@pytest.mark.skipif(MYPY is None, reason="mypy is not installed next to this Python (dev extra)")
def test_engine_is_mypy_strict_clean() -> None:
    scratch = _scratch()
    done = subprocess.run(
        [str(MYPY), "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(scratch / ".mypy_cache"), "-p", "gerules.engine"],
        cwd=scratch, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout


def test_engine_imports_nothing_from_gerules() -> None:
    for path in (ROOT / "engine").glob("*.py"):
        text = path.read_text()
        assert "from gerules" not in text and "import gerules" not in text, path.name
        assert "from .." not in text, path.name
