"""Run a loader that may execute model code in a separate, limited process.

``run_isolated("package.module:function", request, limits=..., inputs=[...])`` starts a fresh
``python -I -m gerules.frontends.isolate`` (isolated mode: no user site, no ``PYTHON*``
variables, no current folder on ``sys.path``) in a private temporary folder, which calls
``function(request, output_path)`` there and returns the bytes the function wrote to
``output_path``.

Invariants:
- The child runs with rlimits (address space, CPU seconds, size of files it writes, no core
  dumps) and a wall-clock timeout, in its own session; on a timeout the whole process group
  is killed. Its environment is minimal: ``PATH``, a ``HOME``/``TMPDIR`` inside the private
  folder, ``LANG``; its standard input is empty.
- ``request`` is JSON data (the child gets exactly it back); ``inputs`` are the files or
  folders the function reads, checked to exist here first (their paths go in ``request``).
- A ``GeError`` raised in the child comes back as the same type with its message and place
  (file, node, op, tensor); anything else that ends the child (another exception, a signal, a
  limit) is a ``ModelError`` or ``ResourceLimit`` with the last line of the child's stderr.
  Nothing is left behind: the private folder is removed whatever happens.
- The output is read with the frontends' capped reader (``limits.output_bytes``).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import errors
from ..errors import GeError, ModelError, ResourceLimit, UsageError
from .files import read_capped

GiB = 1 << 30
RESULT = "result.json"


@dataclass(frozen=True)
class IsolationLimits:
    """What the child may use. ``memory_bytes`` caps its address space (``RLIMIT_AS``)."""

    seconds: float = 600.0  # wall clock
    cpu_seconds: int = 1200
    memory_bytes: int = 16 * GiB
    file_bytes: int = 2 * GiB  # any file the child writes
    output_bytes: int = 2 * GiB - 1


def run_isolated(entry: str, request: Mapping[str, Any], *, limits: IsolationLimits,
                 inputs: Sequence[Path] = ()) -> bytes:
    """The output of ``entry(request, output_path)`` run in a limited child process."""
    module, _, func = entry.partition(":")
    if not module or not func:
        raise UsageError(f"run_isolated: entry must be 'package.module:function', got {entry!r}")
    for path in inputs:
        if not Path(path).exists():
            raise ModelError("no such file or folder", file=str(path))
    with tempfile.TemporaryDirectory(prefix="gerules-isolated-") as folder:
        work = Path(folder)
        output = work / "output"
        (work / "request.json").write_text(json.dumps(
            {"entry": entry, "request": dict(request), "output": str(output)}))
        stderr = _run_child(work, limits)
        result = _result(work, stderr)
        if "error" in result:
            raise _error(result["error"])
        if not output.is_file():
            raise ModelError(f"the isolated loader {entry} wrote no output")
        return read_capped(output, limits.output_bytes, what="loader output")


def _run_child(work: Path, limits: IsolationLimits) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work),
           "TMPDIR": str(work), "LANG": "C.UTF-8", "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "-I", "-m", "gerules.frontends.isolate", str(work)]
    proc = subprocess.Popen(command, cwd=work, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=lambda: _limit(limits))
    try:
        _, err = proc.communicate(timeout=limits.seconds)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise ResourceLimit(f"the isolated loader took longer than {limits.seconds:g} s "
                            "(killed)") from None
    except BaseException:  # Ctrl-C: take the child down with us
        _kill(proc)
        raise
    _kill(proc)  # grandchildren left in the session
    text = err.decode("utf-8", "replace")
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        kind = ResourceLimit if name in ("SIGXCPU", "SIGXFSZ", "SIGKILL") else ModelError
        raise kind(f"the isolated loader was ended by {name} (a resource limit, or a crash "
                   f"of the loader){_last(text)}")
    return text


def _limit(limits: IsolationLimits) -> None:
    """In the child, before exec: rlimits (never raising; a limit it cannot set stays)."""
    for kind, value in ((resource.RLIMIT_AS, limits.memory_bytes),
                        (resource.RLIMIT_CPU, limits.cpu_seconds),
                        (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0)):
        with contextlib.suppress(ValueError, OSError):
            _, hard = resource.getrlimit(kind)
            resource.setrlimit(kind, (value if hard == resource.RLIM_INFINITY
                                      else min(value, hard), hard))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _last(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return f": {lines[-1][:300]}" if lines else ""


def _result(work: Path, stderr: str) -> dict[str, Any]:
    try:
        data = json.loads((work / RESULT).read_text("utf-8"))
    except (OSError, ValueError):
        raise ModelError(f"the isolated loader ended without a result{_last(stderr)}"
                         ) from None
    if not isinstance(data, dict):
        raise ModelError("the isolated loader wrote a malformed result")
    return data


def _error(data: Mapping[str, Any]) -> GeError:
    kind = getattr(errors, str(data.get("type")), None)
    if not (isinstance(kind, type) and issubclass(kind, GeError)):
        kind = ModelError
    place = {k: data.get(k) for k in ("file", "node", "op", "tensor")}
    return kind(str(data.get("message", "failed")), **place)


# ----------------------------------------------------------------------------- the child


def _child(work: Path) -> int:
    spec = json.loads((work / "request.json").read_text("utf-8"))
    module, _, func = spec["entry"].partition(":")
    try:
        target = getattr(importlib.import_module(module), func)
        target(spec["request"], Path(spec["output"]))
        result: dict[str, Any] = {"ok": True}
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        result = {"error": _describe(e)}
    (work / RESULT).write_text(json.dumps(result))
    return 0


def _describe(e: BaseException) -> dict[str, Any]:
    if isinstance(e, GeError):
        return {"type": type(e).__name__, "message": e.message, "file": e.file,
                "node": e.node, "op": e.op, "tensor": e.tensor}
    if isinstance(e, MemoryError):
        return {"type": "ResourceLimit", "message": "the isolated loader ran out of its "
                "memory limit"}
    if isinstance(e, OSError) and e.errno == errno.EFBIG:
        return {"type": "ResourceLimit", "message": "the isolated loader wrote a file past "
                "its size limit"}
    traceback.print_exc()  # the loader's own bug: its traceback on the child's stderr
    detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return {"type": "ModelError", "message": f"{type(e).__name__}: {detail}"}


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1])))
