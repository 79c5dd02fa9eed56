"""Partitioners: exact cut points, stage figures that add up, memory limits, refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from partition_models import MODELS

from gerules.errors import ResourceLimit, UsageError
from gerules.partition import (
    create_pipeline,
    make_partition,
    parse_bytes,
    partition_by_cost,
    partition_by_depth,
    partition_by_memory,
)
from gerules.partition import cuts as cutlib
from gerules.partition.partitioners import _Figures
from gerules.partition.stages import stage_graph


@pytest.fixture(scope="module", params=sorted(MODELS))
def scheduled(request: pytest.FixtureRequest, compiled):  # type: ignore[no-untyped-def]
    _, result = compiled(request.param)
    v = result.build.variants[0]
    return v.graph, v.plan.order


def _brute_force(cost: np.ndarray, k: int) -> float:
    m = cost.shape[0] - 1
    best = np.inf
    for inner in itertools.combinations(range(1, m), k - 1):
        points = (0, *inner, m)
        best = min(best, max(cost[a, b] for a, b in itertools.pairwise(points)))
    return float(best)


@pytest.mark.parametrize("k", [2, 3])
def test_cost_cuts_are_the_exact_optimum(scheduled, k: int) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    from gerules.cost import profile_for
    from gerules.ir.registry import default_registry

    fig = _Figures(graph, order, profile_for("Ascend910"), default_registry())
    time = fig.matrices()["time"]
    points, worst = cutlib.best_cuts(time, k)  # type: ignore[misc]
    assert worst == pytest.approx(_brute_force(time, k))
    assert max(time[a, b] for a, b in itertools.pairwise(points)) == pytest.approx(worst)
    part = partition_by_cost(graph, k, order=order)
    assert max(s.us for s in part.stages) == pytest.approx(worst)


def test_the_matrices_agree_with_the_stage_figures(scheduled) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    from gerules.cost import profile_for
    from gerules.ir.registry import default_registry

    fig = _Figures(graph, order, profile_for("Ascend910"), default_registry())
    mats = fig.matrices()
    rng = np.random.default_rng(0)
    for _ in range(12):
        a, b = sorted(rng.choice(np.arange(len(order) + 1), size=2, replace=False))
        part = partition_by_depth(graph, 1, order=order)  # figures of one stage ...
        points = [0, a, b, len(order)] if 0 < a and b < len(order) else None
        if points is None:
            continue
        from gerules.partition.partitioners import _finish

        stages = _finish(fig, points, "test", None).stages
        mid = stages[1]
        assert mats["time"][a, b] == pytest.approx(mid.us)
        assert mats["memory"][a, b] == mid.weights_bytes + mid.activation_bytes
        assert part.num_stages == 1


def test_every_node_is_in_one_stage_and_reads_what_earlier_stages_make(scheduled) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    for part in (partition_by_cost(graph, 3, order=order), partition_by_depth(graph, 3,
                                                                               order=order)):
        nodes = [k for s in part.stages for k in s.nodes]
        assert nodes == list(order)
        made = set(graph.input_names)
        for s in part.stages:
            sg = stage_graph(graph, s)
            assert set(sg.input_names) <= made
            made |= set(sg.output_names)
            mine = {o for k in s.nodes for o in graph.nodes[k].outputs}
            assert all(o in mine for o in sg.output_names)
        assert set(graph.output_names) <= made


def test_depth_gives_equal_numbers_of_layers(scheduled) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    from gerules.partition.partitioners import _is_layer

    part = partition_by_depth(graph, 3, order=order)
    layers = [sum(_is_layer(graph, k) for k in s.nodes) for s in part.stages]
    assert max(layers) - min(layers) <= 1


def test_memory_stages_fit_and_are_the_fewest(scheduled) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    one = partition_by_depth(graph, 1, order=order).stages[0].memory_bytes
    limit = int(one * 0.6)
    part = partition_by_memory(graph, limit, order=order)
    assert part.num_stages >= 2
    assert all(s.memory_bytes <= limit for s in part.stages)
    with pytest.raises(ResourceLimit, match="stage"):
        partition_by_memory(graph, limit, part.num_stages - 1, order=order)


def test_an_op_larger_than_the_device_is_named(scheduled) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    with pytest.raises(ResourceLimit) as e:
        partition_by_memory(graph, 1024, order=order)
    assert e.value.node is not None and "alone needs" in str(e.value)


def test_refusals_are_usage_errors(scheduled) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    few = graph.replace(nodes=graph.nodes[:2])
    with pytest.raises(UsageError, match="cannot cut 2 node"):
        partition_by_cost(few, 3, order=[0, 1])
    with pytest.raises(UsageError, match="between 1 and 64"):
        partition_by_cost(graph, 65)
    with pytest.raises(UsageError, match="unknown method 'dept' .did you mean depth"):
        make_partition(graph, "dept", 2)
    with pytest.raises(UsageError, match="needs --device_memory"):
        make_partition(graph, "memory", 2)
    with pytest.raises(UsageError, match="expected a size"):
        parse_bytes("lots")
    assert parse_bytes("8G") == 8 << 30 and parse_bytes("1.5MiB") == 3 << 19


def test_the_gpipe_schedule_fills_and_drains(scheduled) -> None:  # type: ignore[no-untyped-def]
    graph, order = scheduled
    part = partition_by_cost(graph, 3, order=order)
    sch = create_pipeline(part, 6)
    assert sch.num_stages == 3 and len([e for e in sch.events if e.kind == "compute"]) == 18
    for s in range(3):
        mine = sorted((e for e in sch.events if e.stage == s), key=lambda e: e.start_us)
        assert all(x.end_us <= y.start_us + 1e-9 for x, y in itertools.pairwise(mine))
        assert [e.micro_batch for e in mine if e.kind == "compute"] == list(range(6))
    done = {(e.stage, e.micro_batch): e.end_us for e in sch.events if e.kind == "compute"}
    for e in sch.events:
        if e.stage:
            assert e.start_us >= done[(e.stage - 1, e.micro_batch)] - 1e-9
    slowest = max(s.us for s in part.stages)
    assert sch.makespan_us == pytest.approx(sum(s.us for s in part.stages) + 5 * slowest)
    assert 0 < sch.bubble < 1 and sch.speedup > 1


def test_equal_stages_have_gpipes_bubble() -> None:
    from gerules.partition import Link, Partition, StageInfo

    stages = tuple(StageInfo(s, (s,), (), (), 10.0, 0, 0.0, 0, 0) for s in range(4))
    part = Partition(None, (0, 1, 2, 3), stages, "test", "x", Link(1.0, 0.0))  # type: ignore[arg-type]
    sch = create_pipeline(part, 8)
    assert sch.bubble == pytest.approx(3 / (8 + 3))
    assert sch.speedup == pytest.approx(32 / 11)


def test_needs_counts_each_value_once_per_segment() -> None:
    rng = np.random.default_rng(3)
    m = 9
    uses = []
    for _ in range(30):
        p = int(rng.integers(-1, m - 1))
        readers = tuple(int(r) for r in rng.integers(p + 1, m + 1, size=3) if r < m)
        uses.append(cutlib.Use(int(rng.integers(1, 100)), p, readers))
    got = cutlib.needs(uses, m)
    for a in range(m):
        for b in range(a + 1, m + 1):
            want = sum(u.nbytes for u in uses if u.producer < a
                       and any(a <= r < b for r in u.readers))
            assert got[a, b] == want


def test_fewest_segments_is_the_smallest_count_that_cuts() -> None:
    rng = np.random.default_rng(5)
    m = 8
    for _ in range(20):
        cost = np.where(rng.random((m + 1, m + 1)) < 0.45, 1.0, np.inf)
        want = next((k for k in range(1, m + 1) if np.isfinite(_brute_force(cost, k))), None)
        assert cutlib.fewest_segments(cost, m) == want


def test_an_op_alone_is_measured_as_a_one_node_stage(scheduled) -> None:  # type: ignore[no-untyped-def]
    """The single-op refusal and the segment matrices count the same bytes, so an op that
    passes the refusal always fits as a stage of its own."""
    graph, order = scheduled
    from gerules.cost import profile_for
    from gerules.ir.registry import default_registry
    from gerules.partition.partitioners import _node_bytes

    fig = _Figures(graph, order, profile_for("Ascend910"), default_registry())
    memory = fig.matrices()["memory"]
    for pos, k in enumerate(order):
        assert memory[pos, pos + 1] == _node_bytes(fig, graph.nodes[k])
