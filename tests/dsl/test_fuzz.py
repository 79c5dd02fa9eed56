"""Random text and mutated rule files only ever raise ``RuleError`` (never a crash)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gerules.dsl import RuleError, check_library, parse_text
from gerules.dsl.loader import RuleLibrary
from gerules.dsl.source import decode

from .conftest import GOOD

SOURCES = [p.read_text() for p in sorted(GOOD.glob("*.ger")) if "include" not in p.read_text()]
SOURCES += [p.read_text().replace('include "ops.ger"', "") for p in sorted(GOOD.glob("*.ger"))]
TOKENS = ["rule", "ruleset", "where", "let", "=>", "<=>", "(", ")", "[", "]", "{", "}", ",",
          "as", "..", ".", ":", "@exact", "@approx(rtol=1e-3)", "Conv", "ge.FusedConv", "x",
          "_", "none", "1", "0.5", '"s"', "+", "**", "==", "not", "in", "schedule", "#",
          "\n", " ", "saturate(", "repeat(", "shape(x)", "sqrt(", "1e999", "-"]


def parse_and_check(text: str) -> None:
    """Parse and check ``text``; any failure must be a ``RuleError``."""
    try:
        rule_file = parse_text(text, "fuzz.ger")
        check_library(RuleLibrary((rule_file,)))
    except RuleError as e:
        assert "\n" not in str(e)
        e.render()


@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    parse_and_check(text)


@given(st.lists(st.sampled_from(TOKENS), max_size=60))
def test_random_token_soup(tokens: list[str]) -> None:
    parse_and_check(" ".join(tokens))


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 20)))
        kind = draw(st.sampled_from(["delete", "insert", "token", "duplicate"]))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + draw(st.text(max_size=5)) + text[i:]
        elif kind == "token":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[j:]
        else:
            text = text[:j] + text[i:j] + text[j:]
    return text


@given(mutated())
def test_mutated_good_files(text: str) -> None:
    parse_and_check(text)


@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    try:
        parse_and_check(decode(data, "fuzz.ger"))
    except RuleError:
        pass
