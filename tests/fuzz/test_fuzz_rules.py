"""Random and mutated rule text through parse -> check (with soundness) -> compile, and raw
bytes through the file loader: only ``RuleError`` (a ``GeError``), never another exception,
a hang or unbounded memory. Seeds: the shipped ``rules/`` and the golden rule files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_seeds import FUZZ, check, rule_sources, rule_tokens
from hypothesis import given
from hypothesis import strategies as st

from gerules.testing import fuzz
from gerules.testing.mutate import mutate_bytes, mutate_text
from gerules.testing.sandbox import Sandbox
from gerules.testing.strategies import DrawChooser

SOURCES = rule_sources()
TOKENS = rule_tokens()


@pytest.fixture(scope="module")
def rules() -> Iterator[Sandbox]:
    with Sandbox(fuzz.rules_target, timeout=30, memory=2 << 30) as box:
        yield box


@pytest.fixture(scope="module")
def files() -> Iterator[Sandbox]:
    with Sandbox(fuzz.ger_bytes_target, timeout=30, memory=2 << 30) as box:
        yield box


def test_the_seeds_compile(rules: Sandbox) -> None:
    """Each seed compiles alone, except files that name rulesets or op classes of other
    files (a seed's text is checked without its includes)."""
    assert len(SOURCES) >= 10
    for text in SOURCES:
        outcome = rules.run(text)
        assert outcome.kind == "ok" or "unknown ruleset" in outcome.message or (
            "unknown opclass" in outcome.message), outcome.describe()


@FUZZ
@given(st.data())
def test_mutated_rule_files(rules: Sandbox, data: st.DataObject) -> None:
    text = mutate_text(data.draw(st.sampled_from(SOURCES)), DrawChooser(data.draw), TOKENS)
    check(rules.run(text), text, "rules")


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=80).map(" ".join))
def test_token_soup(rules: Sandbox, text: str) -> None:
    check(rules.run(text), text, "rules")


@FUZZ
@given(st.text(max_size=400))
def test_random_text(rules: Sandbox, text: str) -> None:
    check(rules.run(text), text, "rules")


@FUZZ
@given(st.data())
def test_raw_bytes_through_the_file_loader(files: Sandbox, data: st.DataObject) -> None:
    """Non-UTF-8, BOMs, NULs, truncated multi-byte characters."""
    seed = data.draw(st.sampled_from(SOURCES)).encode("utf-8")
    case = mutate_bytes(b"\xef\xbb\xbf" + seed if data.draw(st.booleans()) else seed,
                        DrawChooser(data.draw))
    check(files.run(case), case, "ger_bytes")
