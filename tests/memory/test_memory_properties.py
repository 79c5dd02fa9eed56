"""Properties: random lifetimes never give overlapping plans; random DAGs on random streams
give plans whose shared blocks are ordered by happens-before (checked by a naive oracle)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from memgraphs import random_graphs, registry

from gerules.ir.graph import Graph
from gerules.memory import MemoryPlan, analyze, plan_memory, verify_plan
from gerules.memory.liveness import alias_sources
from gerules.memory.offsets import arena_size, first_fit, greedy_by_size
from gerules.memory.plan import peak
from gerules.memory.schedule import memory_aware_order
from gerules.memory.timeline import StreamOrder, Timeline


@st.composite
def lifetimes(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    n = draw(st.integers(1, 40))
    firsts = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    spans = draw(st.lists(st.integers(0, 10), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(0, 40).map(lambda k: 64 * k), min_size=n, max_size=n))
    return sizes, firsts, [f + s for f, s in zip(firsts, spans, strict=True)]


@given(lifetimes())
def test_offsets_never_overlap_live_blocks_and_respect_the_bound(case: tuple) -> None:
    sizes, firsts, lasts = case
    tl = Timeline(firsts, [[f, la] for f, la in zip(firsts, lasts, strict=True)])

    def clash(i: int, js: np.ndarray) -> np.ndarray:
        return ~tl.ordered(i, js)

    bound = peak(sizes, firsts, lasts, max(lasts) + 1)
    for offsets in (greedy_by_size(sizes, clash), first_fit(sizes, firsts, clash)):
        assert all(o % 64 == 0 for o in offsets)
        for i in range(len(sizes)):
            for j in range(i):
                together = firsts[i] <= lasts[j] and firsts[j] <= lasts[i]
                apart = (offsets[i] + sizes[i] <= offsets[j]
                         or offsets[j] + sizes[j] <= offsets[i])
                assert apart or not together or 0 in (sizes[i], sizes[j])
        assert arena_size(sizes, offsets) >= bound
        assert arena_size(sizes, offsets) <= sum(sizes)


@given(random_graphs())
def test_random_graphs_get_verified_plans_within_their_bounds(g: Graph) -> None:
    p = plan_memory(g, registry=registry())
    verify_plan(g, p, registry())
    f = p.figures
    assert f is not None
    assert f.lower_bound <= f.arena == p.arena_bytes <= f.no_reuse
    _oracle(g, p)


@given(random_graphs(max_nodes=10), st.integers(2, 3), st.data())
def test_random_streams_get_plans_safe_under_happens_before(g: Graph, count: int,
                                                            data: st.DataObject) -> None:
    assignment = tuple(data.draw(st.lists(st.integers(0, count - 1), min_size=len(g.nodes),
                                          max_size=len(g.nodes))))
    p = plan_memory(g, streams=count, assignment=assignment, registry=registry())
    assert p.streams == assignment
    verify_plan(g, p, registry())
    _oracle(g, p)


@given(random_graphs())
def test_one_stream_happens_before_is_the_linear_order(g: Graph) -> None:
    live = analyze(g, range(len(g.nodes)))
    firsts = [t.first for t in live.tensors]
    acc = [t.accesses for t in live.tensors]
    linear = Timeline(firsts, acc)
    dag = Timeline(firsts, acc, StreamOrder(g, live.order, (0,) * len(g.nodes)))
    js = np.arange(len(firsts))
    for i in range(len(firsts)):
        assert (linear.ordered(i, js) == dag.ordered(i, js)).all()
        for pos in range(live.end + 1):
            for inclusive in (False, True):
                assert linear.done_by(i, pos, inclusive=inclusive) == dag.done_by(
                    i, pos, inclusive=inclusive)


def _oracle(g: Graph, p: MemoryPlan) -> None:
    """Naive check: overlapping blocks are ordered by reachability, or linked aliases."""
    pos = {k: i for i, k in enumerate(p.order)}
    nodes = [g.nodes[k] for k in p.order]
    producer = {o: pos[k] for k in p.order for o in g.nodes[k].outputs}
    edges: dict[int, set[int]] = {i: set() for i in range(len(nodes) + 1)}
    for i, n in enumerate(nodes):
        edges[i] |= {producer[x] for x in n.present_inputs() if x in producer}
        same = [j for j in range(i) if p.streams[j] == p.streams[i]]
        edges[i] |= set(same[-1:])
    edges[len(nodes)] = set(range(len(nodes)))
    reach = {i: _ancestors(i, edges) for i in edges}
    acc = {t.name: t.accesses for t in analyze(g, p.order).tensors}
    nbytes = {t.name: t.nbytes for t in analyze(g, p.order).tensors}
    linked = _alias_links(g, p, nbytes)
    names = sorted(acc)
    for a in names:
        for b in names:
            if a >= b or 0 in (nbytes[a], nbytes[b]):
                continue
            oa, ob = p.offsets[a], p.offsets[b]
            if oa + nbytes[a] <= ob or ob + nbytes[b] <= oa:
                continue
            ordered = (all(x in reach[producer[b]] for x in acc[a])
                       or all(x in reach[producer[a]] for x in acc[b]))
            assert ordered or frozenset((a, b)) in linked, (a, b, p)


def _ancestors(i: int, edges: dict[int, set[int]]) -> set[int]:
    seen: set[int] = set()
    todo = list(edges[i])
    while todo:
        j = todo.pop()
        if j not in seen:
            seen.add(j)
            todo.extend(edges[j])
    return seen


def _alias_links(g: Graph, p: MemoryPlan, nbytes: dict[str, int]) -> set[frozenset[str]]:
    """Pairs joined by a chain of view/in-place edges at one offset and size."""
    parent: dict[str, str] = {}
    for k in p.order:
        n = g.nodes[k]
        for slot, _ in alias_sources(n, g, registry()):
            src = n.inputs[slot] if slot < len(n.inputs) else ""
            if (src in p.offsets and p.offsets[src] == p.offsets[n.outputs[0]]
                    and nbytes[src] == nbytes[n.outputs[0]]):
                parent[n.outputs[0]] = src
                break

    def root(x: str) -> str:
        while x in parent:
            x = parent[x]
        return x

    return {frozenset((a, b)) for a in p.offsets for b in p.offsets
            if a != b and root(a) == root(b)}


@given(random_graphs(max_nodes=16))
def test_the_cached_scheduler_picks_what_full_recomputation_picks(g: Graph) -> None:
    sizes = {t.name: t.size for t in analyze(g, range(len(g.nodes))).tensors}
    assert memory_aware_order(g, sizes) == _naive_order(g, sizes)


def _naive_order(g: Graph, sizes: dict[str, int]) -> tuple[int, ...]:
    """The scheduler's rule, every key recomputed from scratch at every step."""
    produced = {o for n in g.nodes for o in n.outputs}
    done: list[int] = []
    while len(done) < len(g.nodes):
        made = {o for k in done for o in g.nodes[k].outputs}
        ready = [k for k in range(len(g.nodes)) if k not in done
                 and all(i in made for i in g.nodes[k].present_inputs() if i in produced)]

        def key(c: int, made: set[str] = made) -> tuple[int, int, int]:
            later = [k for k in range(len(g.nodes)) if k not in done and k != c]
            freed = sum(sizes[i] for i in set(g.nodes[c].present_inputs())
                        if i in produced and i not in g.output_names
                        and not any(i in g.nodes[k].inputs for k in later))
            outs = set(g.nodes[c].outputs)
            completes = sum(1 for r in later if outs & set(g.nodes[r].inputs) and all(
                i in made or i in outs for i in g.nodes[r].present_inputs() if i in produced))
            return sum(sizes[o] for o in outs) - freed, -completes, c

        done.append(min(ready, key=key))
    return tuple(done)
