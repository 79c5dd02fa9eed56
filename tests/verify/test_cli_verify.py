"""``ge-rewrite rules verify``: per-rule lines, counterexamples, the count, exit codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gerules.cli.main import main

WRONG = str(Path(__file__).parent / "fixtures" / "wrong.ger")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(["rules", "verify", *argv])
    except SystemExit as e:  # argparse's own usage errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_wrong_rules_fail_with_counterexamples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run([WRONG, "--examples", "3"], capsys)
    assert code == 1 and err == ""
    assert out.splitlines()[-1] == "rules verified: 3 / 7"
    assert re.search(r"wrong\.ger:\d+: rule swap_matmul \(@exact\): counterexample\n"
                     r"    counterexample: ", out)
    assert re.search(r"rule never_fires \(@exact\): no instance\n    no instance found", out)
    assert re.search(r"rule relu_twice \(@exact\): verified on 3 instance\(s\)", out)


def test_one_rule_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([WRONG, "--rule", "relu_twice", "--examples", "2"], capsys)
    assert code == 0 and out.splitlines()[-1] == "rules verified: 1 / 1"


def test_several_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([WRONG, "--rule", "relu_twice", "--examples", "2", "--seed", "0",
                         "--seed", "5"], capsys)
    assert code == 0 and "verified on 4 instance(s)" in out


def test_a_counterexample_comes_with_a_regression_test(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The shrunk counterexample, then a pytest module between scissors lines, unindented:
    saved as it is, it runs and fails while the rule is wrong."""
    code, out, _ = _run([WRONG, "--rule", "swap_matmul", "--examples", "2"], capsys)
    assert code == 1 and "shrunk in" in out
    head, rest = out.split("----8<----\n", 1)
    assert head.rstrip().endswith("regression test (save as test_swap_matmul.py, run pytest "
                                  "on it):")
    module = rest.split("---->8----\n", 1)[0]
    namespace: dict[str, object] = {}
    exec(module, namespace)  # noqa: S102 - the CLI's own output
    with pytest.raises(AssertionError, match="counterexample"):
        namespace["test_swap_matmul_counterexample"]()  # type: ignore[operator]


@pytest.mark.parametrize("argv, message", [
    ([WRONG, "--rule", "relu_twise"], r"--rule relu_twise: no such rule \(did you mean "
                                      r"relu_twice\?\)"),
    ([WRONG, "--examples", "0"], r"--examples: .*must be > 0"),
    (["nope.ger"], r"nope\.ger: no such file or folder"),
])
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
                      ) -> None:
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and re.search(message, err), err


def test_a_rule_file_error_is_reported_like_check(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.ger"
    bad.write_text("ruleset r\nrule a: Cojv(x) => x\n")
    code, out, err = _run([str(bad)], capsys)
    assert code == 1 and out == "" and "unknown op Cojv (did you mean Conv?)" in err


def test_a_rule_check_rejects_is_never_verified(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``rules verify`` runs every check ``rules check`` runs, shape soundness included."""
    bad = tmp_path / "unsound.ger"
    bad.write_text("ruleset r\nrule a: Transpose(x) {perm = [1, 0]} => x\n")
    code, out, err = _run([str(bad)], capsys)
    assert code == 1 and out == "" and "rule is shape-unsound" in err
