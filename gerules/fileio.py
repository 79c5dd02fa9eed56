"""The one safe reader and the one safe writer: every input and output file goes through here.

Reading (models, external data folders aside, ``.om``, ``.npy``, rule files and includes, flag
files, SoC profiles, archives):
- ``open_input`` refuses anything but a regular file *before* opening it (``stat``: a FIFO, a
  device, a socket or a folder is never opened, so nothing blocks and no device is touched),
  then opens with ``O_NONBLOCK | O_NOCTTY`` and checks again through the descriptor (``fstat``:
  the same file, still regular). A symlink the user named is followed to its target.
- ``read_input`` reads at most ``limit`` bytes *while reading* (a size from ``stat`` is only a
  hint: ``/proc`` files say 0 and a file can grow), so no input makes us allocate more than its
  cap; an input over its cap is refused with the cap in the message.
- ``map_input`` is the same check with the file mapped read-only instead of read (large
  models: their weights then stay in the page cache, not in this process's memory). The
  mapping covers the size ``fstat`` gave the open descriptor, at most ``limit``: a file that
  grows later is not seen, a file that is not mappable is read instead. A mapped file that
  another process *truncates* while we read it ends this process with SIGBUS, as with any
  memory map (docs/SECURITY.md).
- Every refusal is a ``GeError`` of the caller's ``kind`` naming the path as the caller shows
  it: ``no such file``, ``is a folder``, ``is a named pipe (FIFO)``, ``permission denied``...
- ``inside(path, roots)`` is the one confinement check (includes, archives' members): the path
  with every symlink resolved must lie under one of the roots (also resolved). ``open_input``
  with ``roots`` checks again the file it actually opened (its path read back from the
  descriptor), so a symlink swapped in between the check and the open is refused too.

Writing:
- A target is either untouched or holds the complete new content: ``atomic_open`` writes a
  temporary file beside it and renames it at the end; a failure, Ctrl-C, SIGTERM or SIGHUP
  part-way leaves no temporary file behind: ``signals_held`` holds those signals (and
  SIGALRM) while a temporary file is created, renamed or removed, so none lands between
  "created" and "cleaned up"; ``released`` lets them through inside a held block (while the
  content is written).
- A target that exists and is not a regular file (a symlink, a FIFO, a device, a folder) is
  never replaced: ``check_output_path`` refuses it early (``UsageError``) and ``atomic_open``
  checks again right before the rename (``GeError``).
- Inside ``all_or_none()`` (the CLI wraps every command in it) renames are deferred to the end
  of the block, where they run together with signals held: the outputs of a command appear
  all or none.
- ``check_output_path`` refuses, with a ``UsageError`` naming the path, a missing folder, a
  folder as target, a target that is the same file as one of the inputs, and a name the file
  system cannot hold.
- A file that cannot be written (read-only folder, disk full) is a ``GeError`` naming the
  target, never a bare ``OSError``; a new file gets the usual mode (``0666 & ~umask``), not
  the ``0600`` of ``mkstemp``.
- ``write_hook`` (tests only): called with the target when a temporary file has been created
  and before anything is written to it, so tests can deliver a signal at that exact moment.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import mmap
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .errors import GeError, ModelError, UsageError

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
CHUNK = 1 << 20

# Signals that end a command (the CLI turns them into exceptions): held in critical windows.
HELD_SIGNALS = frozenset(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM")
                         if hasattr(signal, n))

# ----------------------------------------------------------------------------- reading


def _kind_name(mode: int) -> str | None:
    """What a non-regular file is, in words; ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refusal(kind_name: str, what: str) -> str:
    if kind_name == "not a regular file":
        return f"not a regular file, not {what}"
    return f"is {kind_name}, not {what}"


def os_reason(e: OSError) -> str:
    """A short reason for an ``OSError`` (no path: callers name the place)."""
    reasons = {errno.ENOENT: "no such file", errno.EACCES: "permission denied",
               errno.EPERM: "permission denied", errno.ENAMETOOLONG: "file name too long",
               errno.ELOOP: "too many levels of symlinks", errno.ENOTDIR:
               "a part of the path is not a folder"}
    return reasons.get(e.errno or 0, (e.strerror or str(e)).lower())


def open_input(path: str | os.PathLike[str], *, what: str = "a file",
               kind: type[GeError] = ModelError, label: str | None = None,
               roots: Sequence[str | os.PathLike[str]] | None = None) -> int:
    """A read-only descriptor of the regular file at ``path`` (see the module docstring).

    With ``roots``, the file *opened* must lie under one of them: its path is read back from
    the descriptor, so a symlink swapped in after the caller's own ``inside`` check (and before
    the open) is still refused."""
    where = label if label is not None else os.fspath(path)
    try:
        before = os.stat(path)
        name = _kind_name(before.st_mode)
        if name is not None:
            raise kind(_refusal(name, what), file=where)
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC)
    except OSError as e:
        raise kind(os_reason(e), file=where) from None
    except ValueError:  # an embedded NUL byte
        raise kind("the file name contains a NUL byte", file=where) from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (
            before.st_dev, before.st_ino):
        os.close(fd)
        raise kind("the file changed while it was opened", file=where)
    if roots is not None and not inside(_opened_path(fd, path), roots):
        os.close(fd)
        raise kind("the file opened lies outside its allowed folders (was it replaced by a "
                   "symlink while it was opened?)", file=where)
    return fd


def _opened_path(fd: int, path: str | os.PathLike[str]) -> str:
    """The path of the file behind ``fd`` as the kernel knows it (``/proc/self/fd``); where
    there is no such folder, ``path`` resolved now (then a swap remains possible)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _size_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def read_fd(fd: int, limit: int, *, where: str, what: str = "a file",
            kind: type[GeError] = ModelError, hint: str = "") -> bytes:
    """At most ``limit`` bytes from ``fd`` (from its current position); more is refused."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise kind(f"has {size} bytes; {what} may have at most {_size_text(limit)}{hint}",
                   file=where)
    chunks: list[bytes] = []
    total = 0
    try:
        while True:
            chunk = os.read(fd, min(CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise kind(f"is larger than {_size_text(limit)}, the most {what} may have"
                           f"{hint}", file=where)
    except OSError as e:
        raise kind(f"cannot read: {os_reason(e)}", file=where) from None
    return b"".join(chunks)


def read_input(path: str | os.PathLike[str], *, limit: int, what: str = "a file",
               kind: type[GeError] = ModelError, label: str | None = None,
               hint: str = "", roots: Sequence[str | os.PathLike[str]] | None = None) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them (``roots``: see
    ``open_input``)."""
    where = label if label is not None else os.fspath(path)
    fd = open_input(path, what=what, kind=kind, label=where, roots=roots)
    try:
        return read_fd(fd, limit, where=where, what=what, kind=kind, hint=hint)
    finally:
        os.close(fd)


def map_input(path: str | os.PathLike[str], *, limit: int, what: str = "a file",
              kind: type[GeError] = ModelError, label: str | None = None,
              hint: str = "") -> mmap.mmap | bytes:
    """The regular file at ``path`` mapped read-only, at most ``limit`` bytes (``b""`` when
    it is empty; its bytes, through ``read_fd``, when it cannot be mapped)."""
    where = label if label is not None else os.fspath(path)
    fd = open_input(path, what=what, kind=kind, label=where)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise kind(f"has {size} bytes; {what} may have at most {_size_text(limit)}{hint}",
                       file=where)
        if size == 0:
            return read_fd(fd, limit, where=where, what=what, kind=kind, hint=hint)
        try:
            return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # a file system without mmap: read it
            return read_fd(fd, limit, where=where, what=what, kind=kind, hint=hint)
    finally:
        os.close(fd)


def read_input_text(path: str | os.PathLike[str], *, limit: int, what: str = "a file",
                    kind: type[GeError] = ModelError, label: str | None = None) -> str:
    """``read_input`` decoded as UTF-8 (a leading BOM dropped); bad bytes name their line."""
    where = label if label is not None else os.fspath(path)
    data = read_input(path, limit=limit, what=what, kind=kind, label=where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise kind(f"line {line}: not UTF-8 (byte 0x{data[e.start]:02x})", file=where) from None
    return text[1:] if text.startswith("\ufeff") else text


MAX_DEPTH = 100  # nesting of untrusted JSON and YAML documents


def parse_json(text: str | bytes, *, where: str, kind: type[GeError] = ModelError,
               file: str | None = None) -> Any:
    """JSON from an untrusted file: bad syntax at its ``line:col``, and no nesting or number
    that makes the parser recurse or compute without bound (``RecursionError``, 5,000-digit
    integers) escapes as anything but ``kind`` naming ``where`` (and ``file``)."""
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:  # ``where`` is a file, or a place inside ``file``
        at = f"{where}:{e.lineno}:{e.colno}" if file is None else f"{where} at {e.lineno}:{e.colno}"
        raise kind(f"{at}: not valid JSON: {e.msg}", file=file) from None
    except RecursionError:
        raise kind(f"{where}: not valid JSON: nested too deeply", file=file) from None
    except (ValueError, UnicodeDecodeError) as e:  # Python's limit on digits in an integer
        raise kind(f"{where}: not valid JSON: {_value_error(e)}", file=file) from None
    _check_depth(data, where, kind, "JSON", file)
    return data


def parse_yaml(text: str, *, where: str, kind: type[GeError] = ModelError) -> Any:
    """YAML from an untrusted file with the safe loader, refusing anchors and aliases (a
    600-byte alias bomb expands to gigabytes), nesting over ``MAX_DEPTH`` and huge numbers."""
    import yaml

    try:
        data = yaml.load(text, Loader=_no_alias_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise kind(f"{where}{at}: not valid YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise kind(f"{where}: not valid YAML: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise kind(f"{where}: not valid YAML: nested too deeply") from None
    except ValueError as e:  # Python's limit on digits in an integer
        raise kind(f"{where}: not valid YAML: {_value_error(e)}") from None
    _check_depth(data, where, kind, "YAML", None)
    return data


def _value_error(e: ValueError) -> str:
    if "digits" in str(e):
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return str(e).splitlines()[0][:120]


def _check_depth(data: Any, where: str, kind: type[GeError], fmt: str, file: str | None
                 ) -> None:
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise kind(f"{where}: {fmt} nested deeper than {MAX_DEPTH} levels", file=file)
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


@functools.cache
def _no_alias_loader() -> type:
    """Built on first use: importing yaml costs start-up time."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
        """``yaml.SafeLoader`` that refuses anchors and aliases and deep nesting."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, "aliases (*name) are not allowed", event.start_mark)
            event = self.peek_event()
            if getattr(event, "anchor", None) is not None:
                raise yaml.composer.ComposerError(
                    None, None, "anchors (&name) are not allowed", event.start_mark)
            self._depth = getattr(self, "_depth", 0) + 1
            try:
                if self._depth > MAX_DEPTH:
                    raise yaml.composer.ComposerError(
                        None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return NoAliasLoader


def inside(path: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether ``path``, every symlink resolved, lies under one of ``roots`` (also resolved)."""
    real = Path(os.path.realpath(path))
    return any(real == r or r in real.parents
               for r in (Path(os.path.realpath(root)) for root in roots))


# ----------------------------------------------------------------------------- writing


def check_output_path(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()
                      ) -> Path:
    out = Path(path)
    folder = out.parent if str(out.parent) else Path(".")
    try:
        if not folder.is_dir():
            raise UsageError(f"{out}: output folder '{folder}' does not exist")
        if out.is_dir():
            raise UsageError(f"{out}: output is a folder")
        _check_replaceable(out, UsageError)
        if out.exists():
            for src in inputs:
                with contextlib.suppress(OSError):
                    if Path(src).exists() and os.path.samefile(src, out):
                        raise UsageError(f"{out}: output would overwrite the input")
    except OSError as e:  # a name too long for the file system, a loop of symlinks...
        raise UsageError(f"{_short(out)}: cannot write there: {os_reason(e)}") from None
    return out


def _short(path: Path, limit: int = 200) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def _check_replaceable(target: Path, kind: type[GeError]) -> None:
    """An existing ``target`` must be a regular file (never a link, FIFO, device or folder)."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise kind(f"{_short(target)}: output is a symlink; it is not replaced (write to the "
                   "file it points to, or remove the link)")
    name = _kind_name(mode)
    if name is not None:
        raise kind(f"{_short(target)}: output exists and is {name}; only a regular file is "
                   "replaced")


@dataclass
class _Pending:
    """Renames deferred to the end of an ``all_or_none`` block: (temporary, target), and the
    folders the block created (removed again, when still empty, if the block fails)."""

    renames: list[tuple[str, Path]] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)


_PENDING: contextvars.ContextVar[_Pending | None] = contextvars.ContextVar(
    "gerules_fileio_pending", default=None)

write_hook: Callable[[Path], None] | None = None


@contextlib.contextmanager
def all_or_none() -> Iterator[None]:
    """Defer every ``atomic_open`` rename in the block to its end: all outputs or none."""
    if _PENDING.get() is not None:  # nested: the outer block commits
        yield
        return
    pending = _Pending()
    token = _PENDING.set(pending)
    done = False
    try:
        yield
        _commit(pending.renames)
        done = True
    finally:
        _PENDING.reset(token)
        with signals_held():
            for tmp, _ in pending.renames:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            for folder in reversed(pending.folders if not done else []):
                with contextlib.suppress(OSError):
                    folder.rmdir()


def output_folder(path: str | os.PathLike[str], *, flag: str) -> Path:
    """The folder ``path`` for outputs, created when missing (and removed again, if still
    empty, when the ``all_or_none`` block around it fails); ``UsageError`` naming ``flag``."""
    folder = Path(path)
    try:
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise UsageError(f"{flag} {_short(folder)}: exists and is not a folder")
        if folder.is_dir():
            return folder
        with signals_held():
            folder.mkdir(parents=True)
            pending = _PENDING.get()
            if pending is not None:
                pending.folders.append(folder)
    except OSError as e:
        raise UsageError(f"{flag} {_short(folder)}: cannot create it: {os_reason(e)}") from None
    return folder


def _commit(renames: Sequence[tuple[str, Path]]) -> None:
    with signals_held():
        for _, target in renames:
            _check_replaceable(target, GeError)
        for tmp, target in renames:
            try:
                os.replace(tmp, target)
            except OSError as e:
                raise _cannot_write(target, e) from None


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], *, standalone: bool = False
                ) -> Iterator[BinaryIO]:
    """Open a temp file beside ``path`` for binary writing; rename onto ``path`` on success.

    ``standalone``: renamed at once even inside ``all_or_none`` (a cache, not an output).
    """
    target = Path(path)
    pending = None if standalone else _PENDING.get()
    # A signal between creating the temp file and the ``try`` below would leave it behind,
    # so the ending signals are held until we are inside it (then delivered, file removed).
    with signals_held():
        fd, tmp = _temp_beside(target)
        deferred = False
        try:
            try:
                with os.fdopen(fd, "wb") as f, released():
                    if write_hook is not None:
                        write_hook(target)
                    os.fchmod(f.fileno(), 0o666 & ~_umask())
                    yield f
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                raise _cannot_write(target, e) from None
            if pending is None:
                _commit([(tmp, target)])
            else:
                pending.renames.append((tmp, target))
                deferred = True
        finally:
            if not deferred:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _temp_beside(target: Path) -> tuple[int, str]:
    folder = str(target.parent) if str(target.parent) else "."
    try:
        return tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise _cannot_write(target, e) from None


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


# Signal holding works on Python's handlers, not on the thread's signal mask: a signal sent to
# the process may be taken by any thread (BLAS, hashing) and Python then runs the handler in
# the main thread anyway. While held, the ending signals only set a note; when the hold ends
# the original handlers are back and each noted signal is delivered to its handler.
_hold_depth = 0
_saved: dict[int, object] = {}
_deferred: list[int] = []


def _defer(signum: int, frame: object) -> None:
    _deferred.append(signum)


def _swap() -> None:
    for s in HELD_SIGNALS:
        _saved[s] = signal.signal(s, _defer)


def _restore() -> None:
    for s, handler in list(_saved.items()):
        signal.signal(s, handler)  # type: ignore[arg-type]
    _saved.clear()


def _redeliver() -> None:
    """Deliver the signals noted while held to their own handlers (restored by now)."""
    while _deferred:
        signum = _deferred.pop(0)
        while signum in _deferred:
            _deferred.remove(signum)
        handler = signal.getsignal(signum)
        if callable(handler):
            handler(signum, None)
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM, SIGHUP and SIGALRM (main thread): delivered when the block ends."""
    global _hold_depth
    if not _main_thread():
        yield
        return
    try:
        if _hold_depth == 0:
            _swap()
        _hold_depth += 1
    except BaseException:
        _restore()
        raise
    try:
        yield
    finally:
        _hold_depth -= 1
        if _hold_depth == 0:
            _restore()
            _redeliver()


@contextlib.contextmanager
def released() -> Iterator[None]:
    """Inside ``signals_held``: let the ending signals through for the duration of the block."""
    global _hold_depth
    if not _main_thread() or _hold_depth == 0:
        yield
        return
    depth, _hold_depth = _hold_depth, 0
    _restore()
    try:
        _redeliver()
        yield
    finally:
        _swap()
        _hold_depth = depth


def _cannot_write(target: Path, e: OSError) -> GeError:
    return GeError(f"cannot write: {os_reason(e)}", file=_short(target))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], data: bytes | Callable[[BinaryIO], None], *,
                 standalone: bool = False) -> Path:
    """Write ``data`` (bytes, or a function that writes to the file) atomically to ``path``."""
    with atomic_open(path, standalone=standalone) as f:
        if callable(data):
            data(f)
        else:
            f.write(data)
    return Path(path)
