"""Safe file output: write to a temporary file beside the target, then rename.

Invariants:
- A target path is either untouched or holds the complete new content; a failure or Ctrl-C
  part-way leaves no temporary file behind.
- ``check_output_path`` refuses, with a ``UsageError`` naming the path, a missing folder, a
  folder as target, and a target that is the same file as one of the inputs.
- A file that cannot be written (read-only folder, disk full) is a ``GeError`` naming the
  target, never a bare ``OSError``; a new file gets the usual mode (``0666 & ~umask``), not
  the ``0600`` of ``mkstemp``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import GeError, UsageError


def check_output_path(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()
                      ) -> Path:
    out = Path(path)
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{out}: output folder '{folder}' does not exist")
    if out.is_dir():
        raise UsageError(f"{out}: output is a folder")
    if out.exists():
        for src in inputs:
            with contextlib.suppress(OSError):
                if Path(src).exists() and os.path.samefile(src, out):
                    raise UsageError(f"{out}: output would overwrite the input")
    return out


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open a temp file beside ``path`` for binary writing; rename onto ``path`` on success."""
    target = Path(path)
    # A Ctrl-C between creating the temp file and the ``try`` below would leave it behind,
    # so SIGINT is held until we are inside it (then delivered, and the file removed).
    held = _hold_sigint()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                   dir=str(target.parent) if str(target.parent) else ".")
    except OSError as e:
        _release(held)
        raise _cannot_write(target, e) from None
    try:
        _release(held)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _cannot_write(target, e) from None
        raise


def _hold_sigint() -> set[signal.Signals] | None:
    """Block SIGINT at the OS level (main thread, POSIX); returns the mask to restore."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
            signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _release(held: set[signal.Signals] | None) -> None:
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _cannot_write(target: Path, e: OSError) -> GeError:
    return GeError(f"cannot write: {e.strerror or e}", file=str(target))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], data: bytes | Callable[[BinaryIO], None]) -> Path:
    """Write ``data`` (bytes, or a function that writes to the file) atomically to ``path``."""
    with atomic_open(path) as f:
        if callable(data):
            data(f)
        else:
            f.write(data)
    return Path(path)
