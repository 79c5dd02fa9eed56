"""Worker entries that misbehave on purpose, for the tests of ``gerules.frontends.isolate``.

``probe(request, output)`` does what ``request["probe"]`` names; the tests check that the
parent sees each misbehaviour as the documented error (and that the worker's limits and
sandbox hold). It lives in the package because the worker runs ``python -I``: only installed
modules can be entries.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ModelError, ResourceLimit


def _echo(request: Mapping[str, Any], output: Path) -> None:
    chunks = [Path(p).read_bytes() for p in request["inputs"] if Path(p).is_file()]
    output.write_bytes(b"|".join([str(request.get("text", "")).encode(), *chunks]))


def _environment(request: Mapping[str, Any], output: Path) -> None:
    import json

    output.write_text(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(),
                                  "path": sys.path, "umask": os.umask(0o077),
                                  "folder_mode": os.stat("..").st_mode & 0o777}))


def _model_error(request: Mapping[str, Any], output: Path) -> None:
    raise ModelError("bad weights\n\x1b[31mred", node="n1", op="Conv")


def _resource_limit(request: Mapping[str, Any], output: Path) -> None:
    raise ResourceLimit("too many nodes")


def _crash(request: Mapping[str, Any], output: Path) -> None:
    raise RuntimeError("something broke\nsecond line")


def _allocate(request: Mapping[str, Any], output: Path) -> None:
    blocks = [bytearray(1 << 28) for _ in range(int(request.get("blocks", 64)))]
    output.write_bytes(bytes(len(blocks)))


def _write_file(request: Mapping[str, Any], output: Path) -> None:
    """Write ``request["path"]`` (outside the private folder: the sandbox should refuse)."""
    Path(request["path"]).write_text("written by the worker")
    output.write_bytes(b"wrote")


def _read_file(request: Mapping[str, Any], output: Path) -> None:
    output.write_bytes(Path(request["path"]).read_bytes())


def _big_output(request: Mapping[str, Any], output: Path) -> None:
    with open(output, "wb") as f:
        f.truncate(int(request["bytes"]))


def _block(request: Mapping[str, Any], output: Path) -> None:
    """Wait forever (for the wall-clock timeout), with a child that would outlive us."""
    child = subprocess.Popen([sys.executable, "-c", "import select; select.select([], [], [])"])
    Path(request.get("pid_file", "child.pid")).write_text(str(child.pid))
    select.select([], [], [])


def _spin(request: Mapping[str, Any], output: Path) -> None:
    while True:
        pass


PROBES: dict[str, Callable[[Mapping[str, Any], Path], None]] = {
    "echo": _echo, "environment": _environment, "model_error": _model_error,
    "resource_limit": _resource_limit, "crash": _crash, "allocate": _allocate,
    "write_file": _write_file, "read_file": _read_file, "big_output": _big_output,
    "block": _block, "spin": _spin,
}


def probe(request: Mapping[str, Any], output: Path) -> None:
    PROBES[request["probe"]](request, output)
