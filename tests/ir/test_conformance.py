"""ONNX backend node conformance over every case the installed onnx generates.

Each case is counted once as passed, failed, excluded or unsupported
(``gerules.testing.conformance``). A registered op must pass all of its cases; the share of
all cases that pass may only go up (``MIN_PASS_RATE``); no case may go uncounted. The table
per op and the unsupported ops print with ``-s``; ``bench/conformance.py`` writes them as JSON.
"""

from __future__ import annotations

import pytest

from gerules.ir.registry import default_registry
from gerules.testing.conformance import (
    EXCLUDED,
    missing_ops,
    node_cases,
    outcomes,
    summary,
)

# The pass rate over all node cases never drops below this (raise it as ops are added).
MIN_PASS_RATE = 0.95

ONNX_OPS = sorted(op for domain, op in default_registry().ops("") if domain == "")


@pytest.mark.parametrize("op", ONNX_OPS)
def test_node_cases_pass(op: str) -> None:
    out = outcomes().get(op)
    if out is None:
        return  # onnx ships no node test for this op
    assert not out.failed, f"{op}: {len(out.failed)} failing case(s):\n" + "\n".join(
        f"  {name}: {msg}" for name, msg in out.failed)
    assert not out.stale, f"{op}: excluded but passing, remove from EXCLUDED: {out.stale}"


def test_expanded_cases_of_unregistered_ops_pass() -> None:
    """Function bodies of ops we do not register (e.g. MeanVarianceNormalization) also run."""
    registered = set(ONNX_OPS)
    for op, out in outcomes().items():
        if op not in registered:
            assert not out.failed, f"{op}: {out.failed}"
            assert not out.stale, f"{op}: excluded but passing: {out.stale}"


def test_exclusions_name_real_runnable_cases() -> None:
    cases = {c.name: c for c in node_cases()}
    assert set(EXCLUDED) <= set(cases), f"unknown case names: {sorted(set(EXCLUDED) - set(cases))}"
    for name in EXCLUDED:
        assert not missing_ops(cases[name].model), f"{name} uses unregistered ops; drop it"


def test_every_case_is_counted_once() -> None:
    table = outcomes()
    names = [n for out in table.values() for n in (
        *out.passed, *out.stale, *(c for c, _ in out.failed), *(c for c, _ in out.excluded),
        *(c for c, _ in out.unsupported))]
    assert sorted(names) == sorted(c.name for c in node_cases())


def test_conformance_summary() -> None:
    """Prints the per-op table (``-s``) and holds the pass rate over all cases."""
    table = outcomes()
    lines = [f"  {op:28s} {len(o.passed):4d} passed {len(o.failed):3d} failed "
             f"{len(o.excluded):3d} excluded {len(o.unsupported):3d} unsupported"
             for op, o in sorted(table.items())]
    s = summary(table)
    print("\nONNX node conformance per op:\n" + "\n".join(lines))
    print("unsupported ops: " + ", ".join(f"{op} ({n})" for op, n in s.missing.items()))
    print(f"conformance summary: {s.counts['passed']} passed, {s.counts['failed']} failed, "
          f"{s.counts['excluded']} excluded, {s.counts['unsupported']} unsupported, of "
          f"{s.total} node cases ({s.pass_rate:.1%} pass)")
    assert s.pass_rate >= MIN_PASS_RATE, f"{s.pass_rate:.1%} < {MIN_PASS_RATE:.0%}"
