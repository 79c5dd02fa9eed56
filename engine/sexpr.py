"""A small s-expression syntax for patterns and terms (tests, benchmarks, quick experiments).

Grammar: ``(Op child... :attr value ...)``; a bare symbol or number in child position is a leaf
op of that name; ``?x`` is a class variable, ``_`` a wildcard. Attribute values are integers,
floats, ``"strings"``, bare symbols (strings), ``[v ...]`` tuples, or ``?p`` attribute variables.
``:as n`` binds the node as ``n``; ``:copy n`` (appliers) copies ``n``'s attributes.

Invariants:
- ``parse_pattern`` and ``add_term`` accept exactly this grammar and raise ``PatternError`` with
  the offending position otherwise; nothing here is used by the engine's core.
- ``add_term`` adds a variable-free term bottom-up and returns its class id.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .enode import ENode, make_attrs
from .errors import PatternError
from .pattern import WILDCARD, AttrVar, PatternNode, POp, Var

if TYPE_CHECKING:
    from .egraph import EGraph

_TOKEN = re.compile(r'\s*(?:(\(|\)|\[|\])|("(?:[^"\\]|\\.)*")|([^\s()\[\]"]+))')
Sexp = str | list["Sexp"]


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None or found.end() == pos:
            if text[pos:].strip():
                raise PatternError(f"bad character at {pos} in {text!r}")
            break
        out.append(next(g for g in found.groups() if g is not None))
        pos = found.end()
    return out


def _read(tokens: list[str], pos: int, text: str) -> tuple[Sexp, int]:
    if pos >= len(tokens):
        raise PatternError(f"unexpected end of {text!r}")
    tok = tokens[pos]
    if tok in "([":
        close, items, pos = ")" if tok == "(" else "]", [], pos + 1
        while pos < len(tokens) and tokens[pos] != close:
            item, pos = _read(tokens, pos, text)
            items.append(item)
        if pos >= len(tokens):
            raise PatternError(f"missing '{close}' in {text!r}")
        return ([tok, *items] if tok == "[" else items), pos + 1
    if tok in ")]":
        raise PatternError(f"unexpected '{tok}' in {text!r}")
    return tok, pos + 1


def read(text: str) -> Sexp:
    tokens = _tokens(text)
    sexp, pos = _read(tokens, 0, text)
    if pos != len(tokens):
        raise PatternError(f"trailing input after the expression in {text!r}")
    return sexp


def _atom(tok: str) -> Any:
    if tok.startswith('"'):
        return bytes(tok[1:-1], "utf-8").decode("unicode_escape")
    for kind in (int, float):
        try:
            return kind(tok)
        except ValueError:
            pass
    return tok


def _value(sexp: Sexp) -> Any:
    if isinstance(sexp, list):
        if not sexp or sexp[0] != "[":
            raise PatternError(f"attribute value must be an atom or [..], got {sexp!r}")
        return tuple(_value(item) for item in sexp[1:])
    return AttrVar(sexp[1:]) if sexp.startswith("?") else _atom(sexp)


def _node(sexp: Sexp) -> PatternNode:
    if isinstance(sexp, str):
        if sexp == "_":
            return WILDCARD
        return Var(sexp[1:]) if sexp.startswith("?") else POp(sexp)
    if not sexp or not isinstance(sexp[0], str) or sexp[0] == "[":
        raise PatternError(f"expected (Op ...), got {sexp!r}")
    op, children, attrs = sexp[0], [], []
    extra: dict[str, str | None] = {"as": None, "copy": None}
    rest = iter(sexp[1:])
    for item in rest:
        if isinstance(item, str) and item.startswith(":") and len(item) > 1:
            value = next(rest, None)
            if value is None:
                raise PatternError(f"{op}: attribute {item} has no value")
            if item[1:] in extra:
                extra[item[1:]] = str(value)
            else:
                attrs.append((item[1:], _value(value)))
        else:
            children.append(_node(item))
    return POp(op, tuple(children), make_attrs(attrs), extra["as"], extra["copy"])


def parse_pattern(text: str) -> PatternNode:
    """``"(Add ?x (Mul ?y 0))"`` -> pattern AST."""
    return _node(read(text))


def add_term(egraph: EGraph, text: str) -> int:
    """Add a variable-free term, e.g. ``"(MatMul (MatMul a b) c)"``; returns its class id."""
    return _add(egraph, parse_pattern(text))


def _add(egraph: EGraph, node: PatternNode) -> int:
    if not isinstance(node, POp) or node.binder or node.copy:
        raise PatternError(f"a term has no variables, wildcards or binders: {node!r}")
    if any(isinstance(v, AttrVar) for _, v in node.attrs):
        raise PatternError(f"{node.op}: a term has no attribute variables")
    children = tuple(_add(egraph, child) for child in node.children)
    return egraph.add(ENode(node.op, node.attrs, children))
