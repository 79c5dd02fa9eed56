"""Reading a frontend's input files: one function, so every frontend reads the same safe way.

Invariants:
- ``read_message`` parses a binary protobuf file read that way; a parse failure is one
  ``ModelError`` naming the file.
- ``read_capped(path, cap)`` refuses folders, devices, FIFOs and missing files, and a file
  larger than ``cap`` bytes, before and while reading (a file that grows is cut at the cap
  and refused); every refusal is a ``ModelError`` naming the path (``ResourceLimit`` for the
  size, exit 3).
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ..errors import ModelError, ResourceLimit

PROTOBUF_LIMIT = 2**31 - 1  # protobuf cannot parse a message of 2 GiB or more


def read_capped(path: str | os.PathLike[str], cap: int = PROTOBUF_LIMIT, *,
                what: str = "model file") -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them (see the invariants)."""
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise ModelError(f"is a folder, not a {what}", file=where) from None
    except FileNotFoundError:
        raise ModelError("no such file", file=where) from None
    except OSError as e:
        raise ModelError(f"cannot read: {e.strerror or e}", file=where) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ModelError(f"is a folder, not a {what}", file=where)
        raise ModelError(f"not a regular file (a {what} must be one)", file=where)
    with os.fdopen(fd, "rb") as f:
        if info.st_size > cap:
            raise ResourceLimit(f"the {what} has {info.st_size} bytes; the limit is {cap}",
                                file=where)
        data = f.read(cap + 1)
    if len(data) > cap:
        raise ResourceLimit(f"the {what} grew past the limit of {cap} bytes while reading",
                            file=where)
    return data


def read_message(path: str | os.PathLike[str], message: Any, what: str) -> Any:
    """``message`` (an empty protobuf message) filled from the binary file ``path``.

    The file is read with ``read_capped`` (protobuf's 2 GiB limit); anything protobuf raises
    while parsing is one ``ModelError``: "not a <what>: corrupt or truncated protobuf".
    """
    data = read_capped(path, PROTOBUF_LIMIT, what=what)
    try:
        message.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - DecodeError, RecursionError, ValueError, ...
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"not a {what}: corrupt or truncated protobuf ({detail})",
                         file=str(path)) from None
    return message
