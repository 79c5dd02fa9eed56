"""Reading ONNX external data without ever leaving the model's folder.

An initializer may keep its bytes in another file: ``external_data`` holds ``location``
(relative to the model's folder), ``offset`` and ``length``. Path handling here follows the
fixes for CVE-2022-25882, CVE-2024-27318 and CVE-2026-27489/34445/34446/34447 (string
filtering alone failed three times upstream).

Invariants:
- Only the keys ``location``, ``offset``, ``length`` and ``checksum`` are accepted, each once;
  ``offset`` and ``length`` are decimal integers ``>= 0``.
- ``location`` is relative, has no NUL, and after lexical normalisation does not start with
  ``..``. The file is reached by ``openat`` one component at a time from the folder's real
  path with ``O_NOFOLLOW``, after an ``lstat`` of each component, so no symlink (in the file
  or in any parent) is followed and the path cannot be swapped for one outside the folder.
- The opened file is checked through its descriptor (``fstat``): a regular file with exactly
  one link (a hardlink could alias a file outside the folder), and ``offset + length`` within
  its size. The bytes are read through the same descriptor.
- Every refusal is a ``ModelError`` naming the tensor.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import ModelError
from .proto import StringStringEntryProto, TensorProto

ALLOWED_KEYS = frozenset({"location", "offset", "length", "checksum"})
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True, slots=True)
class ExternalRef:
    """Where an initializer's bytes live: ``length`` bytes at ``offset`` of ``location``."""

    location: str
    offset: int
    length: int | None  # None: up to the end of the file


def parse_ref(entries: Iterable[StringStringEntryProto], tensor: str) -> ExternalRef:
    """Validate the ``external_data`` key/value list of one tensor."""
    seen: dict[str, str] = {}
    for entry in entries:
        key, value = entry.key, entry.value
        if not isinstance(key, str) or not isinstance(value, str):
            raise ModelError("external data entry is not valid UTF-8", tensor=tensor)
        if key not in ALLOWED_KEYS:
            raise ModelError(f"unknown external data key '{key}' (allowed: "
                             f"{', '.join(sorted(ALLOWED_KEYS))})", tensor=tensor)
        if key in seen:
            raise ModelError(f"external data key '{key}' appears twice", tensor=tensor)
        seen[key] = value
    if not seen.get("location"):
        raise ModelError("external data has no location", tensor=tensor)
    offset = _count(seen.get("offset", "0"), "offset", tensor)
    length = _count(seen["length"], "length", tensor) if "length" in seen else None
    return ExternalRef(seen["location"], offset, length)


def _count(text: str, key: str, tensor: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise ModelError(f"external data {key} '{text}' is not an integer >= 0", tensor=tensor)
    return int(text)


def location_parts(location: str, tensor: str) -> list[str]:
    """The path components of a relative location that stays inside the folder."""
    if "\0" in location:
        raise ModelError("external data location contains a NUL byte", tensor=tensor)
    path = location.replace("\\", "/")
    if path.startswith("/") or _DRIVE.match(path):
        raise ModelError(f"external data location '{location}' is an absolute path",
                         tensor=tensor)
    norm = posixpath.normpath(path)
    if norm == ".." or norm.startswith("../") or norm in ("", "."):
        raise ModelError(f"external data location '{location}' leaves the model's folder",
                         tensor=tensor)
    return norm.split("/")


def read_external(t: TensorProto, nbytes: int, base_dir: str, tensor: str) -> bytearray:
    """The ``nbytes`` bytes of ``t``'s external data, read from inside ``base_dir``."""
    ref = parse_ref(t.external_data, tensor)
    if ref.length is not None and ref.length != nbytes:
        raise ModelError(f"external data length is {ref.length} bytes but its shape and type "
                         f"need {nbytes}", tensor=tensor)
    fd = open_inside(base_dir, ref.location, tensor)
    try:
        size = _check_file(fd, ref.location, tensor)
        if ref.offset + nbytes > size:
            raise ModelError(f"external data offset {ref.offset} + length {nbytes} is past "
                             f"the end of '{ref.location}' ({size} bytes)", tensor=tensor)
        return _pread_all(fd, nbytes, ref.offset, ref.location, tensor)
    finally:
        os.close(fd)


def open_inside(base_dir: str, location: str, tensor: str) -> int:
    """A read-only descriptor for ``location`` under ``base_dir``, following no symlink."""
    parts = location_parts(location, tensor)
    try:
        dir_fd = os.open(os.path.realpath(base_dir), os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError as e:
        raise ModelError(f"cannot open the model's folder '{base_dir}': {e.strerror}",
                         tensor=tensor) from None
    try:
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            flags = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC
            flags |= _O_NONBLOCK if last else _O_DIRECTORY
            fd = _open_component(dir_fd, part, flags, location, tensor)
            os.close(dir_fd)
            dir_fd = fd
        return dir_fd
    except BaseException:
        os.close(dir_fd)
        raise


def _open_component(dir_fd: int, part: str, flags: int, location: str, tensor: str) -> int:
    try:
        info = os.stat(part, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise ModelError(f"external data location '{location}': '{part}' is a symlink "
                             "(refused)", tensor=tensor)
        return os.open(part, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise ModelError(f"external data file '{location}' does not exist",
                             tensor=tensor) from None
        if e.errno == errno.ELOOP:
            raise ModelError(f"external data location '{location}': '{part}' is a symlink "
                             "(refused)", tensor=tensor) from None
        raise ModelError(f"cannot open external data '{location}': {e.strerror}",
                         tensor=tensor) from None


def _check_file(fd: int, location: str, tensor: str) -> int:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise ModelError(f"external data '{location}' is not a regular file", tensor=tensor)
    if info.st_nlink != 1:
        raise ModelError(f"external data '{location}' has {info.st_nlink} hard links "
                         "(refused: a hardlink may alias a file outside the folder)",
                         tensor=tensor)
    return info.st_size


def _pread_all(fd: int, nbytes: int, offset: int, location: str, tensor: str) -> bytearray:
    buf = bytearray(nbytes)
    view = memoryview(buf)
    done = 0
    while done < nbytes:
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise ModelError(f"external data '{location}' ended early (read {done} of "
                             f"{nbytes} bytes)", tensor=tensor)
        done += got
    return buf
