"""Lark's LALR tables kept between processes as JSON in a private per-user folder: no pickle.

Lark's own ``cache=True`` pickles the tables into a predictable file in the shared temp folder
and unpickles whatever it finds there, so a planted file runs code in every process that
parses rules. Here the tables (``Lark.memo_serialize``: plain dicts, lists, tuples and
scalars) are written as JSON into ``$XDG_CACHE_HOME/gerules`` (default ``~/.cache/gerules``),
a folder created with mode 0700, and read back only when the folder and the file belong to
this user and nobody else may write them.

Invariants:
- Nothing is unpickled or executed: the file is JSON (dicts with non-string keys tagged and
  restored; tuples come back as lists, which Lark only unpacks and iterates), given to
  ``Lark.load`` as a dict. A test parses every rule file with both and compares the trees.
- The file name is the SHA-256 of the grammar text, the parser options, Lark's version and
  this format's version: a changed grammar never meets stale tables.
- Any problem (no home folder, a folder owned by someone else or writable by others, a bad
  or foreign file, a full disk) only means building the tables in memory (about 0.1 s); the
  parser is the same either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import lark

from ..errors import GeError
from ..fileio import atomic_write, open_input, read_fd

log = logging.getLogger(__name__)

FORMAT = 2
MAX_BYTES = 16 << 20
_ITEMS = "\u0000items"


def load_parser(grammar: str, **options: Any) -> lark.Lark:
    """``lark.Lark(grammar, **options)``, with the tables from the private cache when there."""
    folder = cache_folder()
    path = folder / f"lark-{_key(grammar, options)}.json" if folder else None
    if path is not None:
        cached = _read(path)
        if cached is not None:
            return cached
    parser = lark.Lark(grammar, **options)
    if path is not None:
        _write(path, parser)
    return parser


def cache_folder() -> Path | None:
    """The private cache folder (created 0700), or ``None`` when it is not safely ours."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    folder = Path(base) / "gerules"
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        info = os.lstat(folder)
    except OSError as e:
        log.debug("no grammar cache: %s", e)
        return None
    if not _private(info) or not stat.S_ISDIR(info.st_mode):
        log.debug("no grammar cache: %s is not a private folder of this user", folder)
        return None
    return folder


def _private(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _key(grammar: str, options: dict[str, Any]) -> str:
    text = json.dumps([FORMAT, lark.__version__, grammar, sorted(options.items())],
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _read(path: Path) -> lark.Lark | None:
    if not path.exists():
        return None
    try:
        fd = open_input(path, kind=GeError)
        try:
            if not _private(os.fstat(fd)):
                log.debug("grammar cache %s is not private; ignored", path)
                return None
            data = read_fd(fd, MAX_BYTES, where=str(path), kind=GeError)
        finally:
            os.close(fd)
        tables = json.loads(data, object_hook=_decode)
        return lark.Lark.load({"data": tables["data"], "memo": tables["memo"]})
    except Exception as e:  # a bad cache is never fatal: the tables are rebuilt
        log.debug("grammar cache %s unusable (%s); rebuilding", path, e)
        return None


def _write(path: Path, parser: lark.Lark) -> None:
    try:
        data, memo = parser.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
        text = json.dumps(_encode({"data": data, "memo": memo}), separators=(",", ":"))
        atomic_write(path, text.encode(), standalone=True)
    except (GeError, TypeError, ValueError) as e:
        log.debug("grammar cache not written (%s)", e)


def _encode(value: Any) -> Any:
    """JSON for Lark's tables, keeping int keys (``TypeError`` for anything unexpected)."""
    if isinstance(value, dict):
        if all(isinstance(k, str) and k != _ITEMS for k in value):
            return {k: _encode(v) for k, v in value.items()}
        return {_ITEMS: [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"cannot keep {type(value).__name__} in the grammar cache")


def _decode(obj: dict[str, Any]) -> Any:
    if _ITEMS in obj and len(obj) == 1:
        return {_hashable(k): v for k, v in obj[_ITEMS]}
    return obj


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
