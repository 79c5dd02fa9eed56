"""The bad-input catalogue (cases.py) through the CLI, each case a real forked process.

Every case asserts: the exit code; one error line ``ge-rewrite: error: <place>: <reason>``
matching the case's regex (``rules`` reports: ``file:line:col: message`` then the source line
and a caret); no ``Traceback`` anywhere; nothing on stdout; and the case's folder exactly as
it was before (no output, no temporary file, inputs untouched).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cases import CASES, Case

DRIVER = Path(__file__).resolve().parent / "catalogue_driver.py"
PREFIX = "ge-rewrite: error: "


@dataclass(frozen=True)
class Ran:
    case: Case
    folder: Path
    before: dict[str, tuple[int, int, int]]
    code: int
    stdout: str
    stderr: str


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``folder`` with its mode, size and modification time."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            st = path.lstat()
            size = 0 if stat.S_ISDIR(st.st_mode) else st.st_size
            out[str(path.relative_to(folder))] = (st.st_mode, size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A scratch folder that ``TemporaryDirectory`` removes even after ``chmod 0`` cases."""
    with tempfile.TemporaryDirectory(prefix="gerules-catalogue-") as folder:
        yield Path(folder)


@pytest.fixture(scope="module")
def ran(base: Path) -> dict[str, Ran]:
    jobs, staged = [], []
    for k, case in enumerate(CASES):
        folder, logs = base / f"case{k}", base / f"logs{k}"
        folder.mkdir()
        logs.mkdir()
        case.setup(folder)
        staged.append((case, folder, snapshot(folder), logs))
        closed = "closed-stdout" in case.tags
        jobs.append({"argv": list(case.argv), "cwd": str(folder),
                     "no_override": case.permissions,
                     "stdout": None if closed else str(logs / "stdout"),
                     "stderr": str(logs / "stderr")})
    spec = base / "jobs.json"
    spec.write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, str(DRIVER), str(spec)], capture_output=True,
                          text=True, timeout=300, check=True)
    codes = json.loads(done.stdout.splitlines()[-1])
    return {case.id: Ran(case, folder, before, code, _read(logs / "stdout"),
                         _read(logs / "stderr"))
            for (case, folder, before, logs), code in zip(staged, codes, strict=True)}


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def check(r: Ran) -> None:
    if r.code == 98 and r.case.permissions:
        pytest.skip("cannot drop root's permission override (capset failed): the permission "
                    "case cannot be tested here")
    assert r.code == r.case.code, f"exit {r.code}, expected {r.case.code}\n{r.stderr}"
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert r.stdout == "", r.stdout
    assert snapshot(r.folder) == r.before, "the command left files behind or changed inputs"
    if "closed-stdout" in r.case.tags:
        assert r.stderr == "", r.stderr
        return
    lines = r.stderr.splitlines()
    assert lines, "no error message"
    if r.case.rules_format:
        assert re.search(r.case.message, lines[0]), lines[0]
        assert len(lines) == 1 or "^" in lines[2], r.stderr  # then the source line and caret
    else:
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith(PREFIX), lines[0]
        assert re.search(r.case.message, lines[0][len(PREFIX):]), lines[0]


def test_the_catalogue_is_large_and_covers_every_kind_of_input() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    for kind in "MRCX":
        assert sum(c.id.startswith(kind) for c in CASES) >= 8, kind


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_case(case_id: str, ran: dict[str, Ran]) -> None:
    check(ran[case_id])
