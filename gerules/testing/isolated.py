"""Entry points for the tests of ``gerules.frontends.isolate`` (each runs in the child)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ModelError


def echo(request: Mapping[str, Any], output: Path) -> None:
    """Writes the request back, and where it ran (its folder and environment)."""
    import json
    import os
    import sys

    output.write_text(json.dumps({"request": dict(request), "cwd": os.getcwd(),
                                  "env": dict(os.environ), "isolated": sys.flags.isolated}))


def refuse(request: Mapping[str, Any], output: Path) -> None:
    raise ModelError("refused", node=str(request["node"]), op="Frob")


def crash(request: Mapping[str, Any], output: Path) -> None:
    raise KeyError("a bug")


def hang(request: Mapping[str, Any], output: Path) -> None:
    threading.Event().wait()  # forever: only the timeout ends it


def allocate(request: Mapping[str, Any], output: Path) -> None:
    output.write_bytes(bytearray(int(request["bytes"])))
