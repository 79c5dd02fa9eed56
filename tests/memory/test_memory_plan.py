"""The planner on hand-made graphs: in-place, views, orders, figures, static shapes."""

from __future__ import annotations

import dataclasses

import pytest
from memgraphs import chain, diamond, make, registry, two_branches, views

from gerules.errors import ModelError
from gerules.ir.graph import Graph, Node, Value
from gerules.ir.infer import infer_graph
from gerules.memory import PlanError, analyze, plan_memory, verify_plan
from gerules.memory.schedule import memory_aware_order


def plan(graph: Graph, **kw: object):  # noqa: ANN201 - test helper
    return plan_memory(graph, registry=registry(), **kw)  # type: ignore[arg-type]


def test_chain_runs_in_place_in_one_block() -> None:
    g = chain(n=5, size=256)
    p = plan(g)
    assert set(p.offsets.values()) == {0}
    assert p.arena_bytes == 256 * 4
    assert p.figures is not None and p.figures.inplace == 4
    assert p.figures.no_reuse == 5 * 1024
    assert p.figures.file_order_bound == 2 * 1024  # without in-place, input and output coexist
    assert p.figures.lower_bound == p.figures.arena == 1024


def test_in_place_is_refused_when_the_input_is_read_later() -> None:
    p = plan(diamond(size=64))
    assert p.offsets["b"] != p.offsets["a"]  # Neg(a) may not overwrite a: Add reads it later
    assert p.offsets["c"] in (p.offsets["a"], p.offsets["b"])  # Add may overwrite b (or a)
    assert p.figures is not None and p.figures.inplace == 1


def test_commutative_op_may_overwrite_its_second_input() -> None:
    nodes = [Node("Abs", ("x",), ("a",)), Node("Neg", ("x",), ("b",)),
             Node("Add", ("x", "a"), ("c",)), Node("Mul", ("c", "b"), ("y",))]
    g = make(nodes, {"x": (32,)}, ["y"])
    p = plan(g, memory_aware=False)
    assert p.offsets["c"] == p.offsets["a"]  # input 0 is the graph input; input 1 dies here


def test_graph_inputs_and_outputs_are_never_overwritten() -> None:
    nodes = [Node("Abs", ("x",), ("a",)), Node("Neg", ("a",), ("b",))]
    g = make(nodes, {"x": (16,)}, ["a", "b"])
    p = plan(g)
    assert "x" not in p.offsets  # caller-owned, outside the arena
    assert p.offsets["a"] != p.offsets["b"]  # a is an output: it lives to the end


def test_a_view_shares_its_input_block_and_extends_its_life() -> None:
    p = plan(views(size=128))
    assert p.offsets["v"] == p.offsets["a"]
    assert p.offsets["w"] != p.offsets["a"]  # Neg(v) may not overwrite: a is read by Add
    assert p.figures is not None and p.figures.views == 1


def test_switches_turn_aliases_off() -> None:
    p = plan(chain(n=3, size=64), inplace=False)
    assert p.figures is not None and p.figures.inplace == 0
    assert len(set(p.offsets.values())) == 2  # ping-pong between two blocks
    q = plan(views(), views=False)
    assert q.offsets["v"] != q.offsets["a"]


def test_memory_aware_order_beats_an_interleaved_file_order() -> None:
    g = two_branches(size=1024)
    file_only = plan(g, memory_aware=False)
    best = plan(g)
    assert best.figures is not None and file_only.figures is not None
    assert best.figures.order == "memory_aware"
    assert best.arena_bytes < file_only.arena_bytes
    assert best.arena_bytes < best.figures.file_order_bound


def test_memory_aware_order_is_topological_and_finishes_a_branch_first() -> None:
    g = two_branches()
    sizes = {t.name: t.size for t in analyze(g, range(len(g.nodes))).tensors}
    order = memory_aware_order(g, sizes)
    assert sorted(order) == list(range(len(g.nodes)))
    seen = set(g.input_names)
    for k in order:
        assert set(g.nodes[k].present_inputs()) <= seen
        seen.update(g.nodes[k].outputs)
    names = [g.nodes[k].name for k in order]
    assert names.index("p2") < names.index("q0")  # branch p completes before q starts


def test_every_offset_is_64_aligned_and_inside_the_arena() -> None:
    g = make([Node("Abs", ("x",), ("a",)), Node("Add", ("a", "x"), ("b",)),
              Node("Mul", ("b", "a"), ("y",))], {"x": (3, 5)}, ["y"])
    p = plan(g)
    for name, off in p.offsets.items():
        assert off % 64 == 0
        assert off + 60 <= p.arena_bytes, name


def test_symbolic_shapes_cannot_be_planned() -> None:
    g = Graph((Node("Abs", ("x",), ("y",)),), (Value.of("x", "float32", ("N", 4)),),
              (Value.of("y", "float32", None),))
    g = infer_graph(g, registry())
    with pytest.raises(ModelError, match=r"tensor 'y'.*static shapes"):
        plan(g)


def test_missing_types_are_reported_by_name() -> None:
    g = Graph((Node("Abs", ("x",), ("y",)),), (Value.of("x", "float32", (4,)),),
              (Value.of("y", "float32", None),))
    with pytest.raises(ModelError, match=r"tensor 'y'.*shape of every tensor"):
        plan(g)


def test_given_order_and_assignment_are_checked() -> None:
    g = diamond()
    with pytest.raises(PlanError, match="before 'a' is produced"):
        plan(g, order=(1, 0, 2))
    with pytest.raises(PlanError, match="stream id 3"):
        plan(g, streams=2, assignment=(0, 3, 1))


# -- the verifier rejects hand-corrupted plans ------------------------------------------------


def corrupt(p, **changes):  # noqa: ANN001, ANN201 - test helper
    return dataclasses.replace(p, **changes)


def test_verifier_accepts_the_planner_result() -> None:
    for g in (chain(), diamond(), two_branches(), views()):
        verify_plan(g, plan(g), registry())


def test_verifier_rejects_two_live_tensors_on_one_block() -> None:
    g = diamond()
    p = plan(g)
    bad = corrupt(p, offsets={**p.offsets, "b": p.offsets["a"]})
    with pytest.raises(PlanError, match="'a'.*'b'.*overlap|'b'.*'a'.*overlap"):
        verify_plan(g, bad, registry())


def test_verifier_rejects_a_partial_overlap() -> None:
    g = diamond(size=64)  # 256-byte tensors
    p = plan(g)
    a = p.offsets["a"]
    bad = corrupt(p, offsets={**p.offsets, "b": a + 128 if a == 0 else a - 128},
                  arena_bytes=p.arena_bytes + 256)
    with pytest.raises(PlanError, match="overlap"):
        verify_plan(g, bad, registry())


def test_verifier_rejects_misaligned_outside_and_missing_blocks() -> None:
    g = chain(n=3)
    p = plan(g)
    with pytest.raises(PlanError, match="multiple of 64"):
        verify_plan(g, corrupt(p, offsets={**p.offsets, "t1": 32}), registry())
    with pytest.raises(PlanError, match="outside the arena"):
        verify_plan(g, corrupt(p, arena_bytes=p.arena_bytes - 64), registry())
    missing = {k: v for k, v in p.offsets.items() if k != "t2"}
    with pytest.raises(PlanError, match="tensor 't2'.*no block"):
        verify_plan(g, corrupt(p, offsets=missing), registry())
    with pytest.raises(PlanError, match="tensor 'x'.*no node produces"):
        verify_plan(g, corrupt(p, offsets={**p.offsets, "x": 0}), registry())


def test_verifier_rejects_bad_orders_and_streams() -> None:
    g = diamond()
    p = plan(g)
    with pytest.raises(PlanError, match="not a permutation"):
        verify_plan(g, corrupt(p, order=(0, 1, 1)), registry())
    with pytest.raises(PlanError, match="before 'b' is produced"):
        verify_plan(g, corrupt(p, order=(0, 2, 1)), registry())
    with pytest.raises(PlanError, match="stream id 1"):
        verify_plan(g, corrupt(p, streams=(0, 1, 0)), registry())


def test_verifier_rejects_an_in_place_write_over_a_view_still_read() -> None:
    g = views()
    p = plan(g)
    bad = corrupt(p, offsets={**p.offsets, "w": p.offsets["a"]})
    with pytest.raises(PlanError, match="overlap"):
        verify_plan(g, bad, registry())


def test_a_sequential_plan_is_unsafe_for_concurrent_branches() -> None:
    nodes = [Node("Abs", ("z",), ("p0",)), Node("Add", ("p0", "x"), ("p1",)),
             Node("Neg", ("z",), ("q0",)), Node("Add", ("q0", "x"), ("q1",)),
             Node("Add", ("p1", "q1"), ("y",))]
    g = make(nodes, {"x": (4, 16), "z": (16,)}, ["y"])
    seq = plan(g, memory_aware=False)
    assert _cross_branch_sharing(seq)  # fine in one stream: the p temporaries are dead by then
    assignment = (0, 0, 1, 1, 0)  # branch q on its own stream: it may run before p finishes
    with pytest.raises(PlanError, match="overlap while both may be alive"):
        verify_plan(g, corrupt(seq, streams=assignment, stream_count=2), registry())
    safe = plan(g, streams=2, order=seq.order, assignment=assignment)
    assert not _cross_branch_sharing(safe)
    verify_plan(g, safe, registry())


def _cross_branch_sharing(p) -> bool:  # noqa: ANN001
    size = {"p0": 64, "q0": 64, "p1": 256, "q1": 256}
    return any(p.offsets[a] < p.offsets[b] + size[b] and p.offsets[b] < p.offsets[a] + size[a]
               for a in ("p0", "p1") for b in ("q0", "q1"))
