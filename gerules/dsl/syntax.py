"""Lark's syntax errors -> ``RuleError`` in words a rule author reads.

Invariants:
- Every ``lark.exceptions.UnexpectedInput`` becomes one ``RuleError`` at the offending
  token (or at the end of the last token for an unexpected end of file).
- Terminal names never reach the user: each is described ("an op name", "'=>'", "end of
  file"); operator terminals are summarised as "an operator"; the list is ordered by what is
  most likely meant and capped at ``MAX_WORDS`` entries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from .ast import Span
from .errors import RuleError

MAX_WORDS = 8

_REGEX_WORDS = {
    "NAME": "a name",
    "OPNAME": "an op name",
    "QUALIFIED_OPNAME": "an op name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "$END": "end of file",
}
_OPERATORS = {"CMP_OP", "ADD_OP", "MUL_OP", "POW", "AND", "OR", "IN", "NOT"}
# Lower rank is listed first.
_RANK = {"ARROW": 0, "BIARROW": 1, "_WHERE": 2, "_LET": 3, "OPNAME": 4, "NAME": 5,
         "_RPAR": 6, "_RSQB": 6, "_RBRACE": 6, "_COMMA": 7, "_COLON": 7, "$END": 20}
_WORD_AT = re.compile(r"\w+|\S")
_KEYWORD = re.compile(r"([a-z]+)\\b")
# Terminals that can start an expression; when most are expected, say "an expression".
_EXPR_START = {"NAME", "OPNAME", "QUALIFIED_OPNAME", "INT", "FLOAT", "STRING", "TRUE", "FALSE",
               "NONE", "_LPAR", "_LSQB", "ADD_OP", "NOT"}


def describe_terminals(lark: Lark, names: Iterable[str], operators_ok: bool = True) -> list[str]:
    """Readable words for terminal names, best guesses first, without duplicates."""
    patterns = {t.name: t.pattern for t in lark.terminals}
    names = set(names)
    words: list[str] = []
    if {"NAME", "OPNAME", "INT"} <= names:
        words.append("an expression")
        names -= _EXPR_START
    ordered = sorted(names, key=lambda n: (_RANK.get(n, 10), n))
    for name in ordered:
        if name in _OPERATORS:
            word = "an operator" if operators_ok else _literal(patterns.get(name), name)
        elif name in _REGEX_WORDS:
            word = _REGEX_WORDS[name]
        else:
            word = _literal(patterns.get(name), name)
        if word not in words:
            words.append(word)
    return words


def _literal(pattern: object, name: str) -> str:
    if isinstance(pattern, PatternStr):
        return f"'{pattern.value}'"
    keyword = _KEYWORD.fullmatch(getattr(pattern, "value", ""))
    if keyword:
        return f"'{keyword.group(1)}'"
    return name.lower().strip("_")


def join_words(words: list[str]) -> str:
    if len(words) > MAX_WORDS:
        words = [*words[: MAX_WORDS - 1], "..."]
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _operators_only(expected: set[str]) -> bool:
    return expected <= _OPERATORS


def syntax_error(lark: Lark, err: UnexpectedInput, file: str, text: str) -> RuleError:
    """The ``RuleError`` for a Lark syntax error in ``text`` (a file named ``file``)."""
    if isinstance(err, UnexpectedToken):
        return _unexpected_token(lark, err, file)
    if isinstance(err, UnexpectedCharacters):
        return _unexpected_chars(lark, err, file, text)
    line, col = getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1
    return RuleError("syntax error", Span(file, line, col, line, col + 1))


def _unexpected_token(lark: Lark, err: UnexpectedToken, file: str) -> RuleError:
    tok = err.token
    expected = _accepted(err)
    words = describe_terminals(lark, expected, operators_ok=not _operators_only(expected))
    if tok.type == "$END":
        line, col = tok.end_line or tok.line or 1, tok.end_column or tok.column or 1
        span = Span(file, line, col, line, col + 1)
        return RuleError(f"unexpected end of file; expected {join_words(words)}", span)
    span = Span(file, tok.line or 1, tok.column or 1, tok.end_line or tok.line or 1,
                tok.end_column or (tok.column or 1) + 1)
    message = f"unexpected {_token_words(tok.type, str(tok))}; expected {join_words(words)}"
    return RuleError(message + _hint(expected, tok.type), span)


def _accepted(err: UnexpectedToken) -> set[str]:
    """The terminals the parser really accepts here (LALR's table over-approximates)."""
    parser = getattr(err, "interactive_parser", None)
    if parser is not None:
        try:
            return set(parser.accepts())
        except Exception:  # noqa: BLE001 - fall back to the table's view
            pass
    return set(err.expected)


def _unexpected_chars(lark: Lark, err: UnexpectedCharacters, file: str, text: str) -> RuleError:
    pos = err.pos_in_stream or 0
    m = _WORD_AT.match(text, pos)
    found = m.group() if m else text[pos: pos + 1]
    line, col = err.line or 1, err.column or 1
    span = Span(file, line, col, line, col + max(len(found), 1))
    expected = set(err.allowed or ())
    if found.startswith('"'):
        return RuleError("unterminated string (a string ends on the line it starts)", span)
    if not expected:
        return RuleError(f"unexpected {_show(found)}", span)
    words = describe_terminals(lark, expected, operators_ok=not _operators_only(expected))
    message = f"unexpected {_show(found)}; expected {join_words(words)}"
    return RuleError(message + _hint(expected, ""), span)


def _show(found: str) -> str:
    if found.isprintable():
        return f"'{found}'"
    return f"character U+{ord(found[0]):04X}"


def _token_words(kind: str, value: str) -> str:
    if kind in ("OPNAME", "QUALIFIED_OPNAME"):
        return f"op name '{value}'"
    if kind == "NAME":
        return f"name '{value}'"
    if kind in ("INT", "FLOAT"):
        return f"number {value}"
    if kind == "STRING":
        return f"string {value}"
    return f"'{value}'"


def _hint(expected: set[str], found_kind: str) -> str:
    if expected == {"_LPAR"}:
        return " (an op name needs its arguments; variables start with a lowercase letter)"
    if found_kind == "NAME" and "ARROW" in expected:
        return " (is '=>' missing?)"
    return ""
