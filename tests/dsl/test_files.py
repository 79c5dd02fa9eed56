"""Golden files: every good file loads, every bad file fails with its stored message."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gerules.dsl import RuleError, compile_library, contract_of, load_rules, parse_library
from gerules.dsl.source import MAX_BYTES, MAX_NESTING

from .conftest import BAD, GOOD, expected_message

GOOD_FILES = sorted(GOOD.glob("*.ger"))
BAD_FILES = sorted(BAD.glob("*.ger"))


@pytest.mark.parametrize("path", GOOD_FILES, ids=lambda p: p.name)
def test_good_file_loads_and_compiles(path: Path) -> None:
    lib = load_rules([path])
    assert all(r.ruleset for r in lib.rules)
    compiled = compile_library(lib)
    assert [r.name for r in compiled.rules] == [r.name for r in lib.rules]
    assert all(rw.name.startswith(r.name) for r in compiled.rules for rw in r.rewrites)


def test_good_folder_is_one_library() -> None:
    lib = load_rules([GOOD])
    names = [r.name for r in lib.rules]
    assert len(names) == len(set(names)) > 40
    assert set(lib.schedules) == {"O1", "O2", "O3"}
    assert lib.commutative == {"Add", "Mul"}
    # pipeline.ger includes every other file once: each file is parsed once
    assert len(lib.sources) == len(GOOD_FILES)


def test_includes_come_before_their_includer() -> None:
    lib = parse_library([GOOD / "pipeline.ger"])
    order = [Path(f.path).name for f in lib.files]
    assert order[-1] == "pipeline.ger" and order[0] == "ops.ger"
    assert order.index("simplify.ger") < order.index("pipeline.ger")


def test_contracts_from_decorators() -> None:
    lib = load_rules([GOOD / "gelu.ger"])
    tags = {r.name: r.contract.tags for r in lib.rules}
    assert all(contract_of(r.source) == r.contract for r in lib.rules)
    assert tags["fuse_gelu_erf"] == "@exact"
    assert tags["tanh_gelu_as_erf_gelu"] == "@approx(rtol=0, atol=0.001)"


@pytest.mark.parametrize("path", BAD_FILES, ids=lambda p: p.name)
def test_bad_file_fails_with_its_message(path: Path, in_bad: Path) -> None:
    with pytest.raises(RuleError) as info:
        load_rules([path.name])
    message = str(info.value)
    assert "\n" not in message
    assert message == expected_message(path, message)


def test_every_bad_file_has_a_message() -> None:
    assert {p.stem for p in BAD.glob("*.err")} == {p.stem for p in BAD_FILES}


def test_render_shows_line_and_caret(in_bad: Path) -> None:
    with pytest.raises(RuleError) as info:
        load_rules(["unknown_op.ger"])
    assert info.value.render().splitlines() == [
        "unknown_op.ger:4:5: unknown op Rleu (did you mean Relu?)",
        "        Rleu(Relu(x)) => Relu(x)",
        "        ^~~~",
    ]


def test_non_utf8_points_at_the_byte(in_bad: Path) -> None:
    with pytest.raises(RuleError) as info:
        load_rules(["non_utf8.ger"])
    assert (info.value.span.line, info.value.span.col) == (3, 6)


def test_big_file_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "big.ger"
    line = "rule r: Identity(x) => x  # padding padding padding padding padding\n"
    path.write_text("ruleset s\n" + line * (2 * MAX_BYTES // len(line)))
    with pytest.raises(RuleError, match=r"big\.ger:1:1: has 2097130 bytes; a rule file may have "
                       r"at most 1 MiB$"):
        load_rules([path])


@pytest.mark.parametrize("opening", ["(", "Relu("])
def test_deep_nesting_is_refused_quickly(tmp_path: Path, opening: str) -> None:
    depth = 10_000
    path = tmp_path / "deep.ger"
    path.write_text(f"ruleset s\nrule r: {opening * depth}x{')' * depth} => x\n")
    start = time.perf_counter()
    with pytest.raises(RuleError) as info:
        load_rules([path])
    assert time.perf_counter() - start < 1.0
    assert f"nest deeper than {MAX_NESTING} levels" in str(info.value)
    assert info.value.span.line == 2


def test_long_operator_chain_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chain.ger"
    path.write_text("ruleset s\nrule r: Relu(x) => x where " + " + ".join(["1"] * 5000) + "\n")
    with pytest.raises(RuleError, match="expression nests deeper than"):
        load_rules([path])


def test_several_errors_are_all_reported(tmp_path: Path) -> None:
    path = tmp_path / "two.ger"
    path.write_text("ruleset s\nrule a: Rleu(x) => x\nrule b: Relu(x) => y\n")
    with pytest.raises(RuleError) as info:
        load_rules([path])
    assert str(info.value).endswith("(and 1 more error)")
    assert [e.span.line for e in info.value.errors] == [2, 3]  # type: ignore[attr-defined]


def test_missing_path_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="no such file"):
        load_rules([tmp_path / "nope.ger"])


def test_an_include_swapped_for_a_symlink_after_its_check_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the folder check alone leaves open: 'b.ger' is a plain file inside the rules'
    folder when the loader checks it, and a symlink to a secret outside when it is opened."""
    from gerules.dsl import loader

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.ger").write_text('include "b.ger"\nruleset r\n')
    (rules / "b.ger").write_text("ruleset inner\n")
    checked = loader._Loader.confine

    def confine_then_swap(self, inc, target, display):  # type: ignore[no-untyped-def]
        checked(self, inc, target, display)
        target.unlink()
        target.symlink_to(secret)

    monkeypatch.setattr(loader._Loader, "confine", confine_then_swap)
    with pytest.raises(RuleError) as info:
        load_rules([rules / "a.ger"])
    message = str(info.value)
    assert "b.ger': the file opened lies outside its allowed folders" in message
    assert "TOP-SECRET" not in message
