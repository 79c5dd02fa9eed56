"""The runner: stop reasons, limits, backoff, schedules, reports and provenance."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gerules.engine import (
    BackoffScheduler,
    EGraph,
    EngineError,
    Guard,
    Limits,
    Repeat,
    Rewrite,
    Ruleset,
    Runner,
    Saturate,
    Seq,
    SimpleScheduler,
    StopReason,
    add_term,
    extract,
    rewrite,
)

GROW = rewrite("grow", "(F ?x)", "(F (G ?x))")
COMM = rewrite("comm", "(Add ?x ?y)", "(Add ?y ?x)")
ASSOC = rewrite("assoc", "(Add (Add ?x ?y) ?z)", "(Add ?x (Add ?y ?z))")


def sum_of(n: int) -> str:
    text = "t0"
    for i in range(1, n):
        text = f"(Add {text} t{i})"
    return text


def leaves(term: tuple[object, ...]) -> Counter[str]:
    op, _, *kids = term
    if not kids:
        return Counter([str(op)])
    total: Counter[str] = Counter()
    for kid in kids:
        assert isinstance(kid, tuple)
        total += leaves(kid)
    return total


def test_never_saturating_rule_stops_at_the_iteration_limit() -> None:
    eg = EGraph()
    add_term(eg, "(F x)")
    report = Runner(eg).run([GROW])
    assert report.stop_reason is StopReason.ITERATION_LIMIT
    assert len(report.iterations) == 30
    assert eg.node_count == 2 + 2 * 30 == report.nodes


def test_time_limit_stops_with_its_reason() -> None:
    eg = EGraph()
    add_term(eg, "(F x)")
    report = Runner(eg, limits=Limits(iterations=10**9, nodes=10**9, seconds=0.05)).run([GROW])
    assert report.stop_reason is StopReason.TIME_LIMIT
    assert eg.is_clean


def test_assoc_comm_explosion_hits_the_node_limit_and_still_extracts() -> None:
    eg = EGraph()
    root = add_term(eg, sum_of(10))
    report = Runner(eg, scheduler=SimpleScheduler()).run([COMM, ASSOC])
    assert report.stop_reason is StopReason.NODE_LIMIT
    assert report.nodes > 10_000 and eg.is_clean
    eg.check_invariants()
    best = extract(eg, root)
    assert best.cost == 19  # 10 leaves + 9 Adds, whatever the bracketing
    assert leaves(best.term(eg.find(root))) == Counter(f"t{i}" for i in range(10))


def test_add_zero_self_loop_saturates_and_extracts_the_original() -> None:
    eg = EGraph()
    root = add_term(eg, "(Mul x y)")
    report = Runner(eg).run([rewrite("add_zero", "?x", "(Add ?x 0)"), COMM])
    assert report.stop_reason is StopReason.SATURATED
    assert any(n.op == "Add" and eg.find(root) in n.children for n in eg.nodes(root))
    best = extract(eg, root)
    assert best.to_sexpr(eg.find(root)) in ("(Mul x y)", "(Mul y x)")


def test_backoff_bans_and_doubles() -> None:
    sched = BackoffScheduler(match_limit=10, ban_length=2)
    assert sched.allow(0, "r") and sched.accept(0, "r", 10)
    assert not sched.accept(1, "r", 11)
    assert not sched.allow(2, "r") and sched.allow(3, "r")
    assert sched.accept(3, "r", 20)  # the limit doubled
    assert not sched.accept(3, "r", 21)
    assert sched.rules["r"].banned_until == 3 + 4  # the ban doubled
    assert not sched.can_stop(4)  # still banned: the runner must not stop ...
    assert sched.allow(5, "r")  # ... and the ban is shortened to end now


def test_backoff_in_a_run_reports_bans_and_still_saturates() -> None:
    eg = EGraph()
    add_term(eg, sum_of(5))
    report = Runner(eg, scheduler=BackoffScheduler(match_limit=20, ban_length=1)).run(
        [COMM, ASSOC])
    assert report.stop_reason is StopReason.SATURATED
    assert report.rules["assoc"].bans >= 1
    assert any("assoc" in it.banned for it in report.iterations)
    assert eg.node_count == 185  # the full AC closure of a 5-term sum


def test_schedules_seq_repeat_saturate() -> None:
    eg = EGraph()
    add_term(eg, "(F x)")
    grow = Ruleset("grow", [GROW])
    report = Runner(eg).run(Repeat(3, grow))
    assert report.stop_reason is StopReason.SCHEDULE_DONE and len(report.iterations) == 3
    report = Runner(eg).run(Saturate(grow, max_iters=2))
    assert report.stop_reason is StopReason.SCHEDULE_DONE and len(report.iterations) == 2

    eg = EGraph()
    add_term(eg, "(Add a (Mul b 1))")
    simplify = Ruleset("simplify", [rewrite("mul_one", "(Mul ?x 1)", "?x")])
    comm = Ruleset("comm", [COMM])
    report = Runner(eg).run(Seq(Saturate(simplify), Repeat(2, comm)))
    names = [it.ruleset for it in report.iterations]
    assert names[:2] == ["simplify", "simplify"] and set(names[2:]) == {"comm"}
    assert report.stop_reason is StopReason.SATURATED


def test_two_rules_with_one_name_are_refused() -> None:
    with pytest.raises(EngineError, match="named 'comm'"):
        Runner(EGraph()).run([COMM, rewrite("comm", "(Mul ?x ?y)", "(Mul ?y ?x)")])


def test_report_counts_guard_failures_by_reason() -> None:
    eg = EGraph()
    add_term(eg, "(Add (Div a b) (Div c c))")
    rule = rewrite("div_self", "(Div ?x ?y)", "1", conditions=[
        Guard("x == y", lambda eg, root, s: s["x"] == s["y"])])
    report = Runner(eg).run([rule])
    stats = report.rules["div_self"]
    assert stats.applied == 1 and stats.matches >= 2  # Div(c, c) may be re-matched, no-op
    assert report.rejected() == {"div_self": Counter({"x == y": 1})}
    assert "matched but not applied (1x): x == y" in report.summary()
    json.dumps(report.to_dict())


def test_provenance_records_rule_root_bindings_and_added_nodes() -> None:
    eg = EGraph()
    relu = add_term(eg, "(Relu (Conv x w b :group 1))")
    fuse = rewrite("fuse_conv_relu", "(Relu (Conv ?x ?w ?b :as conv))",
                   "(ge.FusedConv ?x ?w ?b :copy conv :activation Relu)")
    report = Runner(eg).run([fuse])
    (app,) = report.applications
    assert app.rule == "fuse_conv_relu" and app.root == relu and app.iteration == 0
    assert dict(app.nodes)["conv"].op == "Conv"
    assert dict(app.classes)["x"] == add_term(eg, "x")
    assert [eg.id_node(i).op for i in app.added] == ["ge.FusedConv"]
    assert eg.id_node(app.added[0]).get("group") == 1
    assert eg.explain(relu, app.added[0]).rules() == ["fuse_conv_relu"]


def test_provenance_can_be_switched_off() -> None:
    eg = EGraph()
    add_term(eg, "(Add a b)")
    assert Runner(eg, provenance=False).run([COMM]).applications == []


def _partition(eg: EGraph, ids: list[int]) -> list[int]:
    return [min(j for j in range(len(ids)) if eg.find(ids[j]) == eg.find(i)) for i in ids]


RULES = [
    ("comm", "(Add ?x ?y)", "(Add ?y ?x)"),
    ("assoc", "(Add (Add ?x ?y) ?z)", "(Add ?x (Add ?y ?z))"),
    ("mul_one", "(Mul ?x 1)", "?x"),
    ("distribute", "(Mul ?x (Add ?y ?z))", "(Add (Mul ?x ?y) (Mul ?x ?z))"),
    ("sub_self", "(Sub ?x ?x)", "0"),
    ("add_zero", "(Add ?x 0)", "?x"),
]
TERMS = st.recursive(st.sampled_from(["a", "b", "0", "1"]), lambda kids: st.tuples(
    st.sampled_from(["Add", "Mul", "Sub"]), kids, kids).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    max_leaves=5)


@given(st.lists(TERMS, min_size=1, max_size=3), st.sets(st.sampled_from(range(len(RULES)))))
def test_incremental_search_reaches_the_same_saturated_graph(terms: list[str],
                                                             chosen: set[int]) -> None:
    def saturate(incremental: bool) -> tuple[list[int], int, StopReason]:
        eg = EGraph()
        ids = [add_term(eg, t) for t in terms]
        rules = [Rewrite(name, *(rewrite(name, lhs, rhs).pattern.ast, rewrite(name, lhs, rhs)
                                 .applier), incremental=incremental)
                 for i, (name, lhs, rhs) in enumerate(RULES) if i in chosen]
        report = Runner(eg, scheduler=SimpleScheduler(),
                        limits=Limits(iterations=12, nodes=1_500)).run(rules)
        eg.check_invariants()
        return _partition(eg, ids), eg.node_count, report.stop_reason

    fast, slow = saturate(True), saturate(False)
    if slow[2] is StopReason.SATURATED:
        assert fast == slow


def test_incremental_search_revisits_parents_of_changed_classes() -> None:
    """A node added under an unchanged root must still be matched by deeper patterns."""
    eg = EGraph()
    root = add_term(eg, "(Add (Add a b) c)")
    deep = rewrite("deep", "(Add (Mul ?x ?y) ?z)", "(Found ?x ?y ?z)")
    make_mul = rewrite("make_mul", "(Add a b)", "(Mul a b)")
    Runner(eg).run([deep, make_mul])
    assert any(n.op == "Found" for n in eg.nodes(root))
