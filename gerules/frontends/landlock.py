"""Landlock (Linux >= 5.13): an unprivileged process takes away its own file system rights.

``restrict(read=..., write=...)`` makes the calling process (and every process it starts) able
to read only beneath the ``read`` paths, and to create, write, rename or remove files only
beneath the ``write`` paths; with ABI 4 also no TCP bind or connect, with ABI 6 no signals to
processes outside the sandbox and no abstract unix sockets outside it. It cannot be undone.
No root, no namespaces, no setuid helper: the kernel's own unprivileged sandbox, reached with
three system calls through ``ctypes``.

Invariants:
- ``restrict`` returns the ABI version applied, or raises ``Unavailable`` *before* changing
  anything (no Landlock in the kernel, an unknown architecture, a seccomp filter refusing
  the calls); it never applies half a policy.
- Paths that do not exist are skipped; a path that names a file (not a folder) gets only the
  rights that apply to files.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import stat
from collections.abc import Iterable

# System call numbers (the same on every architecture that has Landlock, from 5.13 on).
_SYSCALLS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}
_ARCHES = ("x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "loongarch64")
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# File system rights (uapi/linux/landlock.h), by the ABI version that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_ABI_FS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
_NET_TCP = 0b11  # bind, connect (ABI 4)
_SCOPES = 0b11  # abstract unix sockets, signals (ABI 6)

READ = EXECUTE | READ_FILE | READ_DIR


class Unavailable(Exception):
    """Landlock cannot be used here; nothing was changed."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; ``Unavailable`` when there is none."""
    if platform.system() != "Linux" or platform.machine().lower() not in _ARCHES:
        raise Unavailable(f"Landlock needs Linux on a known architecture, not "
                          f"{platform.system()} {platform.machine()}")
    libc = _libc()
    version = libc.syscall(_SYSCALLS["create_ruleset"], None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if version < 1:
        raise Unavailable(f"Landlock is not enabled in this kernel "
                          f"({os.strerror(ctypes.get_errno())})")
    return int(version)


def _fs_rights(abi: int) -> int:
    return max((mask for v, mask in _ABI_FS.items() if v <= abi), default=_ABI_FS[1])


def restrict(read: Iterable[str], write: Iterable[str]) -> int:
    """Allow reads beneath ``read`` and everything beneath ``write``; nothing else, forever."""
    abi = abi_version()
    libc = _libc()
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16
    ruleset = libc.syscall(_SYSCALLS["create_ruleset"], ctypes.byref(attr),
                           ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise Unavailable(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path in read:
            _allow(libc, ruleset, path, READ & handled)
        for path in write:
            _allow(libc, ruleset, path, handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise Unavailable(f"prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if libc.syscall(_SYSCALLS["restrict_self"], ruleset, ctypes.c_uint32(0)) != 0:
            raise Unavailable(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist grants nothing
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_ONLY
        rule = _PathBeneath(rights, fd)
        if libc.syscall(_SYSCALLS["add_rule"], ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise Unavailable(f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
