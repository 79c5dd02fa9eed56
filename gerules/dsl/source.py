"""Reading rule source text safely: size cap, UTF-8 check, bracket nesting cap.

Invariants:
- Files are read with ``fileio.read_input``: regular files only (a FIFO or device is refused
  before it is opened), at most ``MAX_BYTES`` of them (counted while reading).
- Text handed to the parser is valid UTF-8 (a leading BOM is dropped); an invalid byte is
  reported at its own ``line:col`` (columns count characters, as the parser's do).
- Text handed to the parser nests brackets at most ``MAX_NESTING`` deep, so no later stage
  can recurse deeply; the check is one regex pass that stops at the first violation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..errors import GeError
from ..fileio import read_input
from .ast import Span
from .errors import RuleError

MAX_BYTES = 1 << 20
MAX_NESTING = 100

_BRACKETS = re.compile(r'#[^\n]*|"(?:[^"\\\n]|\\.)*"|[()\[\]{}]')
_OPENING = "([{"


def point(file: str, text: str, pos: int, width: int = 1) -> Span:
    """The span of ``width`` characters at character offset ``pos`` of ``text``."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return Span(file, line, col, line, col + width)


def read_source(path: Path, display: str, opened_at: Span | None = None,
                roots: Sequence[Path] | None = None) -> str:
    """The checked text of the file at ``path`` (errors name it ``display``); with ``roots``
    (an include), the file opened must lie under one of them."""
    where = opened_at or Span(display, 1, 1, 1, 1)
    try:
        data = read_input(path, limit=MAX_BYTES, what="a rule file", kind=GeError, roots=roots)
    except GeError as e:
        reason = e.message if opened_at is None else f"cannot open '{display}': {e.message}"
        raise RuleError(reason, where) from None
    return check_text(decode(data, display), display)


def decode(data: bytes, display: str) -> str:
    """``data`` as text; a byte that is not UTF-8 is an error at its line and column."""
    if len(data) > MAX_BYTES:
        raise RuleError(f"text is {len(data) / 1e6:.1f} MB; a rule file may hold at most "
                        f"{MAX_BYTES // (1 << 20)} MB", Span(display, 1, 1, 1, 1))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start].decode("utf-8", errors="replace")
        span = point(display, before + "?", len(before))
        raise RuleError(f"file is not UTF-8: byte 0x{data[e.start]:02x} cannot start or "
                        "continue a character", span) from None
    return text[1:] if text.startswith("\ufeff") else text


def check_text(text: str, display: str) -> str:
    """``text`` unchanged when its brackets nest at most ``MAX_NESTING`` deep."""
    if len(text) > MAX_BYTES:
        raise RuleError(f"text has {len(text)} characters; a rule file may hold at most "
                        f"{MAX_BYTES} bytes", Span(display, 1, 1, 1, 1))
    depth = 0
    for m in _BRACKETS.finditer(text):
        ch = m.group()
        if ch in _OPENING:
            depth += 1
            if depth > MAX_NESTING:
                raise RuleError(f"brackets nest deeper than {MAX_NESTING} levels",
                                point(display, text, m.start()))
        elif len(ch) == 1 and ch in ")]}":
            depth = max(depth - 1, 0)
    return text
