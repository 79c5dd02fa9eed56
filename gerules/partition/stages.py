"""Each stage of a partition as a graph of its own, planned by the memory planner.

Invariants:
- ``stage_graph(graph, stage)`` holds the stage's nodes in execution order, its ``inputs``
  (typed as in ``graph``) as graph inputs, its ``outputs`` as graph outputs, and only the
  initializers its nodes read; it passes ``ir.verify`` like any graph.
- ``plan_stages`` plans every stage graph with ``memory.plan_memory`` (the planner's own sizes,
  orders, streams and checks), one arena per stage.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.graph import Graph, Value
from ..ir.registry import Registry, default_registry
from ..ir.verify import verify
from ..memory.plan import plan_memory
from ..om.contents import Stage, Variant
from .partitioners import Partition, StageInfo


def stage_graph(graph: Graph, stage: StageInfo) -> Graph:
    nodes = tuple(graph.nodes[k] for k in stage.nodes)
    used = {n for node in nodes for n in node.present_inputs()}
    inits = {k: v for k, v in graph.initializers.items() if k in used}

    def typed(name: str) -> Value:
        t = graph.type_of(name)
        assert t is not None, f"no type for {name}"
        return Value(name, t)

    made = {o for node in nodes for o in node.outputs}
    info = {o: graph.value_info[o] for o in made | set(inits) if o in graph.value_info}
    return Graph(nodes, tuple(typed(n) for n in stage.inputs),
                 tuple(typed(n) for n in stage.outputs), inits, info,
                 name=f"{graph.name}.stage{stage.index}", opset=graph.opset,
                 metadata=graph.metadata)


def plan_stages(partition: Partition, *, streams: int = 1, reuse: bool = True,
                registry: Registry | None = None) -> tuple[Stage, ...]:
    """Every stage with its graph and a verified memory plan in the partition's order."""
    registry = registry or default_registry()
    out = []
    for st in partition.stages:
        g = verify(stage_graph(partition.graph, st), registry)
        plan = plan_memory(g, streams=streams, reuse=reuse, registry=registry)
        out.append(Stage(f"stage{st.index}", st.nodes, Variant("default", {}, g, plan)))
    return tuple(out)


def arenas(stages: Sequence[Stage]) -> dict[int, int]:
    return {k: s.variant.plan.arena_bytes for k, s in enumerate(stages)}
