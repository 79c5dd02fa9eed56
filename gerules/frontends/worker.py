"""The worker side of ``isolate.run_isolated``: limits, sandbox, then the requested function.

Started as ``python -I -B -c <boot> <package root>`` with the job (JSON) on stdin:
``{"entry", "request", "output", "record", "limits", "read", "write"}``. In this order, before
any code named by the job is imported:
1. resource limits on itself (hard limits equal to soft ones, so nothing can raise them
   again; the CPU hard limit a few seconds above the soft one, so SIGXCPU comes first);
2. ``umask 077``;
3. the Landlock sandbox (``landlock.restrict``) when ``limits["sandbox"]``; where the kernel
   has none the worker goes on and reports why in its record;
4. import ``entry`` and call it as ``function(request, Path(output))``.

The answer is one JSON object written to ``record``: ``{"ok": true, "sandbox": ...}``, or
``{"ok": false, "error": {"message", "exit_code", "file", "node", "op", "tensor"}}`` (a
``GeError``'s fields; any other exception as its type and first line), or ``{"ok": false,
"limit": "memory" | "file" | "files" | "processes"}``. The exit status is 0 or 1; tracebacks
go only to the worker's log, which the parent shows at debug level.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import resource
import sys
import traceback
from pathlib import Path
from typing import Any

MAX_JOB_BYTES = 16 << 20


def _set_limits(limits: dict[str, Any]) -> None:
    def cap(which: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        _, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(which, (soft, hard))

    cap(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    cap(resource.RLIMIT_CPU, int(limits["cpu_seconds"]), int(limits["cpu_seconds"]) + 5)
    cap(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    cap(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    cap(resource.RLIMIT_NPROC, int(limits["processes"]))
    cap(resource.RLIMIT_CORE, 0)


def _sandbox(job: dict[str, Any]) -> str:
    if not job["limits"].get("sandbox", True):
        return "off (asked for)"
    from . import landlock

    read = [*job["read"], f"/proc/{os.getpid()}"]
    try:
        abi = landlock.restrict(read, job["write"])
    except landlock.Unavailable as e:
        return f"none: {e}"
    return f"landlock ABI {abi}"


def _entry(name: str) -> Any:
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _error(e: BaseException) -> dict[str, Any]:
    from ..errors import GeError

    if isinstance(e, MemoryError):
        return {"ok": False, "limit": "memory"}
    if isinstance(e, OSError) and e.errno in _LIMIT_ERRNOS:
        return {"ok": False, "limit": _LIMIT_ERRNOS[e.errno]}
    if isinstance(e, GeError):
        return {"ok": False, "error": {"message": e.message, "exit_code": e.exit_code,
                                       "file": e.file, "node": e.node, "op": e.op,
                                       "tensor": e.tensor}}
    text = str(e).strip().splitlines()
    message = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
    return {"ok": False, "error": {"message": message, "exit_code": 1}}


_LIMIT_ERRNOS = {errno.EFBIG: "file", errno.EMFILE: "files", errno.EAGAIN: "processes"}


def main() -> int:
    job = json.loads(sys.stdin.buffer.read(MAX_JOB_BYTES))
    _set_limits(job["limits"])
    os.umask(0o077)
    answer: dict[str, Any]
    sandbox = "not set up"
    try:
        sandbox = _sandbox(job)
        _entry(job["entry"])(job["request"], Path(job["output"]))
        answer = {"ok": True}
    except BaseException as e:  # everything is reported; the parent decides what it means
        traceback.print_exc()
        answer = _error(e)
    answer["sandbox"] = sandbox
    with open(job["record"], "w", encoding="utf-8") as f:
        json.dump(answer, f)
    return 0 if answer["ok"] else 1
