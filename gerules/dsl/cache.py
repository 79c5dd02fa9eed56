"""The private per-user cache, as JSON, never a pickle: Lark's tables and the shipped rules.

Two things are kept between processes in ``$XDG_CACHE_HOME/gerules`` (default
``~/.cache/gerules``), a folder created with mode 0700 and used only when it and the file
belong to this user and nobody else may write them:

- ``lark-<key>.json``: the grammar's LALR tables (``Lark.memo_serialize``: plain dicts,
  lists, tuples and scalars), given back to ``Lark.load`` as a dict. Lark's own
  ``cache=True`` pickles them into a predictable file in the shared temp folder and unpickles
  whatever it finds there, so a planted file would run code in every process that parses
  rules.
- ``ast-<key>.json``: a shipped rule file already parsed, as its syntax tree (every node a
  ``{"ClassName": [fields...]}`` object naming a class of ``dsl.ast``, spans without their
  file). A process that finds every shipped file here never imports Lark or parses: the
  library's text is read and checked as always, only the parse is skipped.

Invariants:
- Nothing is unpickled or executed: the files are JSON; decoding builds only the dataclasses
  of ``dsl.ast`` (looked up by name in that module; anything else is a bad file), tuples and
  scalars. Tests parse every rule file both ways and compare the results.
- A file's name is a SHA-256 over everything its content depends on: for the tables the
  grammar text, the parser options and Lark's version; for a syntax tree the file's text
  and display path, the grammar, the source of the modules that build the tree
  (``dsl/ast.py``, ``dsl/transform.py``), gerules' version and this format's version. A
  changed file, grammar or transformer never meets a stale entry.
- Any problem (no home folder, a folder owned by someone else or writable by others, a bad
  or foreign file, a full disk) only means doing the work in memory; the result is the same
  either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import stat
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import GeError
from ..fileio import atomic_write, open_input, read_fd
from . import ast

if TYPE_CHECKING:
    import lark

log = logging.getLogger(__name__)

FORMAT = 3
MAX_BYTES = 16 << 20
_ITEMS = "\u0000items"


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
        log.debug("no cache: %s", e)
        return None
    if not _private(info) or not stat.S_ISDIR(info.st_mode):
        log.debug("no cache: %s is not a private folder of this user", folder)
        return None
    return folder


def _private(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _read(path: Path) -> bytes | None:
    """The bytes of a cache file that is ours alone, else ``None``."""
    if not path.exists():
        return None
    try:
        fd = open_input(path, kind=GeError)
        try:
            if not _private(os.fstat(fd)):
                log.debug("cache file %s is not private; ignored", path)
                return None
            return read_fd(fd, MAX_BYTES, where=str(path), kind=GeError)
        finally:
            os.close(fd)
    except GeError as e:
        log.debug("cache file %s unreadable (%s)", path, e)
        return None


def _write(path: Path, text: str) -> None:
    try:
        atomic_write(path, text.encode(), standalone=True)
    except GeError as e:
        log.debug("cache file %s not written (%s)", path, e)


# ----------------------------------------------------------------------------- Lark's tables

def load_parser(grammar: str, **options: Any) -> lark.Lark:
    """``lark.Lark(grammar, **options)``, with the tables from the private cache when there."""
    import lark

    folder = cache_folder()
    key = _digest(str(FORMAT), lark.__version__, grammar,
                  json.dumps(sorted(options.items()), default=str))
    path = folder / f"lark-{key}.json" if folder else None
    if path is not None:
        cached = _load_tables(path)
        if cached is not None:
            return cached
    parser = lark.Lark(grammar, **options)
    if path is not None:
        _keep_tables(path, parser)
    return parser


def _load_tables(path: Path) -> lark.Lark | None:
    import lark

    data = _read(path)
    if data is None:
        return None
    try:
        tables = json.loads(data, object_hook=_decode_tables)
        return lark.Lark.load({"data": tables["data"], "memo": tables["memo"]})
    except Exception as e:  # a bad cache is never fatal: the tables are rebuilt
        log.debug("grammar cache %s unusable (%s); rebuilding", path, e)
        return None


def _keep_tables(path: Path, parser: lark.Lark) -> None:
    import lark

    try:
        data, memo = parser.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
        _write(path, json.dumps(_encode_tables({"data": data, "memo": memo}),
                                separators=(",", ":")))
    except (TypeError, ValueError) as e:
        log.debug("grammar cache not written (%s)", e)


def _encode_tables(value: Any) -> Any:
    """JSON for Lark's tables, keeping int keys (``TypeError`` for anything unexpected)."""
    if isinstance(value, dict):
        if all(isinstance(k, str) and k != _ITEMS for k in value):
            return {k: _encode_tables(v) for k, v in value.items()}
        return {_ITEMS: [[_encode_tables(k), _encode_tables(v)] for k, v in value.items()]}
    if isinstance(value, list | tuple):
        return [_encode_tables(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"cannot keep {type(value).__name__} in the grammar cache")


def _decode_tables(obj: dict[str, Any]) -> Any:
    if _ITEMS in obj and len(obj) == 1:
        return {_hashable(k): v for k, v in obj[_ITEMS]}
    return obj


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


# ----------------------------------------------------------------------------- syntax trees

_CLASSES: dict[str, type] = {c.__name__: c for c in vars(ast).values()
                             if isinstance(c, type) and dataclasses.is_dataclass(c)
                             and c.__module__ == ast.__name__}


@cache
def _code_key() -> str | None:
    """What a syntax tree depends on besides its file: the grammar and the code that builds
    trees (``None`` when that code cannot be read, e.g. from a zip: then nothing is cached)."""
    from .. import __version__

    try:
        here = Path(__file__).parent
        grammar = files("gerules.grammar").joinpath("ger.lark").read_bytes()
        code = [(here / name).read_bytes() for name in ("ast.py", "transform.py")]
    except OSError:
        return None
    return _digest(str(FORMAT), __version__, grammar, *code)


def _tree_path(text: str, display: str) -> Path | None:
    code, folder = _code_key(), cache_folder()
    if code is None or folder is None:
        return None
    return folder / f"ast-{_digest(code, display, text)}.json"


def parsed(text: str, display: str) -> ast.RuleFile | None:
    """The syntax tree of ``text`` (a shipped file shown as ``display``) kept by an earlier
    process, or ``None``."""
    path = _tree_path(text, display)
    data = _read(path) if path is not None else None
    if data is None:
        return None
    try:
        items = json.loads(data, object_hook=lambda obj: _node(obj, display))
        if not isinstance(items, list):
            raise TypeError("not a list of items")
        return ast.RuleFile(display, text, _tuple(items))
    except Exception as e:  # a bad entry is never fatal: the file is parsed
        log.debug("rule cache %s unusable (%s); parsing", path, e)
        return None


def keep(tree: ast.RuleFile) -> None:
    """Keep ``tree`` for later processes (``parsed``)."""
    path = _tree_path(tree.source, tree.path)
    if path is None:
        return
    try:
        text = json.dumps([_encode_node(i, tree.path) for i in tree.items],
                          separators=(",", ":"))
    except (TypeError, ValueError) as e:
        log.debug("rule cache not written (%s)", e)
        return
    _write(path, text)


def _encode_node(value: Any, file: str) -> Any:
    if isinstance(value, ast.Span):
        if value.file != file:
            raise ValueError(f"a span of another file: {value.file}")
        return {"Span": [value.line, value.col, value.end_line, value.end_col]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _CLASSES.get(name) is not type(value):
            raise TypeError(f"{name} is not a syntax tree node")
        return {name: [_encode_node(getattr(value, f.name), file)
                       for f in dataclasses.fields(value)]}
    if isinstance(value, tuple):
        return [_encode_node(v, file) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"cannot keep {type(value).__name__} in the rule cache")


def _node(obj: dict[str, Any], file: str) -> Any:
    ((name, fields),) = obj.items()
    cls = _CLASSES[name]
    if cls is ast.Span:
        return ast.Span(file, *fields)
    return cls(*_tuple(fields))


def _tuple(items: list[Any]) -> tuple[Any, ...]:
    return tuple(_tuple(v) if isinstance(v, list) else v for v in items)
