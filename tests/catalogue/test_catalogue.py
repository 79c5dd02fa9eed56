"""The bad-input catalogue (cases.py, hostile.py) through the CLI, each case a real process.

Every case asserts: the exit code; one error line ``ge-rewrite: error: <place>: <reason>``
matching the case's regex (``rules`` reports: ``file:line:col: message`` then the source line
and a caret); no ``Traceback`` anywhere; nothing on stdout; none of the case's ``absent`` texts
anywhere (a secret a hostile file tried to have echoed, a raw escape sequence); and the
case's folder exactly as it was before (no output, no temporary file, inputs untouched, no
file a hostile archive would have written, no symlink or FIFO replaced). Each child runs with
a 6 GiB address-space limit and a watchdog, so a case that would allocate without bound or
hang fails alone and quickly.
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
from cases import CASES as BASIC
from cases import Case
from hostile import CASES as HOSTILE

DRIVER = Path(__file__).resolve().parent / "catalogue_driver.py"
PREFIX = "ge-rewrite: error: "
CASES: list[Case] = BASIC + HOSTILE
MEMORY = 6 << 30


def unmet(need: str | None) -> str | None:
    """Why a case cannot run here, or None."""
    if need in ("torch", "landlock"):
        try:
            import torch  # noqa: F401
        except ImportError:
            return "needs the torch extra (pip install -e '.[torch]'; the README's test " \
                   "command installs it)"
    if need == "landlock":
        from gerules.frontends import landlock

        try:
            landlock.abi_version()
        except landlock.Unavailable as e:
            return f"needs Landlock to show the sandbox at work ({e})"
    return None


@dataclass(frozen=True)
class Ran:
    case: Case
    folder: Path
    before: dict[str, tuple[int, int, int]]
    code: int
    stdout: str
    stderr: str
    skipped: str | None = None


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
    jobs, staged, skipped = [], [], {}
    for k, case in enumerate(CASES):
        folder, logs = base / f"case{k}", base / f"logs{k}"
        folder.mkdir()
        logs.mkdir()
        why = unmet(case.needs)
        if why is None:
            try:
                case.setup(folder)
            except PermissionError as e:
                why = f"this system does not allow the setup ({e})"  # mknod without CAP_MKNOD
        if why is not None:
            skipped[case.id] = Ran(case, folder, {}, 0, "", "", why)
            continue
        staged.append((case, folder, snapshot(folder), logs))
        stdout = (None if "closed-stdout" in case.tags else
                  "/dev/full" if "full-stdout" in case.tags else str(logs / "stdout"))
        jobs.append({"argv": list(case.argv), "cwd": str(folder),
                     "no_override": case.permissions, "stdout": stdout,
                     "stderr": str(logs / "stderr"), "memory": MEMORY,
                     "timeout": case.timeout,
                     "env": {k: v.replace("{folder}", str(folder)) for k, v in case.env}})
    spec = base / "jobs.json"
    spec.write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, str(DRIVER), str(spec)], capture_output=True,
                          text=True, timeout=1800, check=True)
    codes = json.loads(done.stdout.splitlines()[-1])
    out = {case.id: Ran(case, folder, before, code, _read(logs / "stdout"),
                        _read(logs / "stderr"))
           for (case, folder, before, logs), code in zip(staged, codes, strict=True)}
    return {**out, **skipped}


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def check(r: Ran) -> None:
    if r.skipped is not None:
        pytest.skip(r.skipped)
    if r.code == 98 and r.case.permissions:
        pytest.skip("cannot drop root's permission override (capset failed): the permission "
                    "case cannot be tested here")
    assert r.code == r.case.code, f"exit {r.code}, expected {r.case.code}\n{r.stderr}"
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert r.stdout == "", r.stdout
    for text in r.case.absent:
        assert text not in r.stderr + r.stdout, f"{text!r} was shown"
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
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)
    for kind in "MRCXADEFHI":
        assert sum(c.id.startswith(kind) for c in CASES) >= 5, kind


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_case(case_id: str, ran: dict[str, Ran]) -> None:
    check(ran[case_id])
