"""Reading a frontend's input files through the project's safe reader (``gerules.fileio``).

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
from typing import Any

from ..errors import ModelError, ResourceLimit
from ..fileio import open_input, read_fd

PROTOBUF_LIMIT = 2**31 - 1  # protobuf cannot parse a message of 2 GiB or more


def read_capped(path: str | os.PathLike[str], cap: int = PROTOBUF_LIMIT, *,
                what: str = "model file") -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them (see the invariants)."""
    where = os.fspath(path)
    fd = open_input(path, what=f"a {what}", label=where)
    try:
        return read_fd(fd, cap, where=where, what=f"a {what}", kind=ResourceLimit)
    finally:
        os.close(fd)


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
