"""The TextMate grammar: valid JSON, compilable patterns, in step with the Lark grammar."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GRAMMAR = json.loads((ROOT / "editors" / "ger.tmLanguage.json").read_text())


def patterns(node: Any) -> list[tuple[str, str]]:
    """Every (regex, scope) in the grammar; begin/end patterns count by their begin."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key in ("match", "begin", "end"):
            if key in node:
                found.append((node[key], node.get("name", "")))
        for value in node.values():
            found += patterns(value)
    elif isinstance(node, list):
        for value in node:
            found += patterns(value)
    return found


def scope_of(word: str) -> str:
    """The scope of the first top-level pattern (in order) that matches ``word`` at its start."""
    repo = GRAMMAR["repository"]
    for include in GRAMMAR["patterns"]:
        entry = repo[include["include"][1:]]
        subs = [entry] if "match" in entry or "begin" in entry else entry["patterns"]
        for sub in subs:
            regex = sub.get("match") or sub.get("begin")
            m = re.match(regex, word)
            if m and m.group(0):
                captures = sub.get("captures", {})
                names = [captures[k]["name"] for k in sorted(captures) if m.group(int(k))]
                return sub.get("name") or " ".join(names)
    return ""


def test_every_pattern_compiles() -> None:
    assert GRAMMAR["scopeName"] == "source.ger"
    for regex, _ in patterns(GRAMMAR["repository"]):
        re.compile(regex)


def test_keywords_follow_the_lark_grammar() -> None:
    lark = (ROOT / "grammar" / "ger.lark").read_text()
    keywords = re.findall(r"^_?[A-Z]+\.2: /([a-z]+)\\b/$", lark, flags=re.M)
    assert len(keywords) >= 15
    for word in keywords:
        assert "keyword" in scope_of(word) or "constant.language" in scope_of(word) or (
            "support.function" in scope_of(word)), word


def test_tokens_get_the_expected_scopes() -> None:
    assert scope_of("# a comment") == "comment.line.number-sign.ger"
    assert "entity.name.function.rule.ger" in scope_of("rule fold_conv_bn:")
    assert "entity.name.type.op.ger" in scope_of("ge.FusedConv")
    assert "entity.name.namespace.domain.ger" in scope_of("ge.FusedConv")
    assert "entity.name.function.decorator.ger" in scope_of("@approx")
    assert scope_of("sqrt(") == "support.function.builtin.ger"
    assert scope_of('"Relu"') == "string.quoted.double.ger"
    assert scope_of("1e-5") == "constant.numeric.ger"
    assert scope_of("=>") == "keyword.operator.arrow.ger"
    assert "variable.other.property.ger" in scope_of("bn.epsilon")


def test_the_syntax_of_rule_authoring_gets_scopes() -> None:
    """Op definitions, op classes, extensions, the new decorators and their operators."""
    assert "entity.name.type.op.definition.ger" in scope_of("op ge.RMSNorm(x, w)")
    assert "entity.name.type.class.ger" in scope_of("opclass unary_math = Relu | Tanh")
    assert "entity.name.namespace.ger" in scope_of("extend ruleset fuse")
    assert scope_of("extend ruleset fuse").startswith("keyword.other.declaration.ger")
    for decorator in ("@replace", "@example"):
        assert "entity.name.function.decorator.ger" in scope_of(decorator)
    assert scope_of("+= mine") == "keyword.operator.assignment.extend.ger"
    assert scope_of("| Tanh") == "keyword.operator.union.ger"
    assert scope_of("?, w") == "keyword.operator.optional.ger"
    assert "keyword" in scope_of("for F in unary_math")
