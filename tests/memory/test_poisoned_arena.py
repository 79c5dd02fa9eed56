"""Plans that pass the plan verifier never let two live tensors share bytes (views and in-place
aliases included), checked by running in an arena poisoned between steps
(``gerules.runtime.poison``; compiled motif graphs run poisoned in
``tests/verify/test_motif_properties.py``); and the two plan bugs the plain runtime hides (an
overwrite that is not a declared alias, a tensor freed one step early) give wrong numbers
there."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from memgraphs import random_graphs, registry

from gerules.build import build_om
from gerules.ir.attrs import Attrs
from gerules.ir.graph import Graph, Node, Value
from gerules.ir.infer import infer_graph
from gerules.memory import MemoryPlan, plan_memory, verify_plan
from gerules.memory.liveness import Liveness
from gerules.memory.verify import PlanError
from gerules.runtime.arena import Arena, Program, run_sequential
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.runtime.poison import run_poisoned
from gerules.testing import random_feeds

CHECKED = settings(max_examples=max(8, settings().max_examples // 3),
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])


def _poisoned(graph: Graph, plan: MemoryPlan, feeds: dict[str, np.ndarray],
              poison: bool = True) -> dict[str, np.ndarray]:
    program = Program(graph, plan, registry())
    arena = Arena(program)
    env = {**graph.initializers, **feeds, **arena.views}
    with np.errstate(all="ignore"):
        (run_poisoned if poison else _plain)(program, arena, env)
    return {n: np.array(env[n]) for n in graph.output_names}


def _plain(program: Program, arena: Arena, env: dict[str, np.ndarray]) -> None:
    run_sequential(program, env, arena.views)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.allclose(a[k], b[k], rtol=1e-5, atol=1e-6, equal_nan=False) for k in b)


@CHECKED
@given(random_graphs())
def test_verified_plans_survive_a_poisoned_arena(graph: Graph) -> None:
    for inplace in (True, False):
        plan = plan_memory(graph, inplace=inplace, registry=registry())
        verify_plan(graph, plan, registry())
        feeds = random_feeds(graph, 0)
        assert _same(_poisoned(graph, plan, feeds), run_graph(graph, feeds, registry()))


def _matmul_chain() -> Graph:
    """x -> MatMul(w) -> a -> MatMul(w) -> b -> Relu -> c."""
    w = (np.eye(4) * 2).astype(np.float32)
    nodes = (Node("MatMul", ("x", "w"), ("a",), Attrs(), name="m1"),
             Node("MatMul", ("a", "w"), ("b",), Attrs(), name="m2"),
             Node("Relu", ("b",), ("c",), Attrs(), name="relu"))
    graph = Graph(nodes, (Value.of("x", "float32", (2, 4)),), (Value.of("c", "float32", (2, 4)),),
                  {"w": w}, opset={"": 17})
    return infer_graph(graph)


X = {"x": np.arange(8, dtype=np.float32).reshape(2, 4)}


def test_an_overwrite_that_is_no_alias_is_refused_and_gives_wrong_numbers() -> None:
    """``b = MatMul(a)`` written over ``a`` at ``a``'s last read: same block, lifetimes
    touching at one step, no alias edge (MatMul is not in place). Only the alias-family check
    refuses it; the plain runtime hides it (kernels compute fresh arrays), the poisoned run
    does not."""
    graph = _matmul_chain()
    want = run_graph(graph, X)
    bad = MemoryPlan(order=(0, 1, 2), streams=(0, 0, 0), offsets={"a": 0, "b": 0, "c": 64},
                     arena_bytes=128)
    with pytest.raises(PlanError, match="overlap"):
        verify_plan(graph, bad)
    assert _same(_poisoned(graph, bad, X, poison=False), want)
    assert not _same(_poisoned(graph, bad, X), want)
    inplace = MemoryPlan(order=(0, 1, 2), streams=(0, 0, 0),
                         offsets={"a": 0, "b": 64, "c": 64}, arena_bytes=128)
    verify_plan(graph, inplace)  # Relu over b: a declared in-place alias, fine
    assert _same(_poisoned(graph, inplace, X), want)


def _freed_one_step_early(analyze: Callable[..., Liveness]) -> Callable[..., Liveness]:
    """liveness.analyze with each tensor's last read dropped (the bug of a planner mutant)."""

    def early(*args: object, **kw: object) -> Liveness:
        live = analyze(*args, **kw)
        cut = tuple(dataclasses.replace(t, accesses=t.accesses[:-1])
                    if len(t.accesses) > 1 and t.accesses[-1] < len(live.order) else t
                    for t in live.tensors)
        return dataclasses.replace(live, tensors=cut)

    return early


def test_a_tensor_freed_one_step_early_is_caught_end_to_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With lifetimes one step short, planner and verifier agree on a wrong plan; the
    compiled .om still runs right in the plain runtime, and wrong in the poisoned run."""
    from gerules.memory import plan as plan_module
    from gerules.memory import verify as verify_module
    from gerules.runtime import poison as poison_module

    graph = _matmul_chain()
    for module in (plan_module, verify_module, poison_module):
        monkeypatch.setattr(module, "analyze", _freed_one_step_early(module.analyze))
    path = build_om(graph, tmp_path / "m.om").path
    want = run_graph(graph, X)
    with Model.load(path) as model:
        assert _same(model.run(X), want)
        assert not _same(model.run(X, poison=True), want)
