"""Graph partitioning for pipeline-parallel execution (see ``partitioners`` and ``schedule``).

``partition_by_depth(graph, k)``, ``partition_by_memory(graph, limit)`` and
``partition_by_cost(graph, k)`` cut a scheduled graph into stages; ``create_pipeline`` plays
micro-batches through them (GPipe); ``stages.stage_graphs`` makes each stage a graph of its
own for the memory planner and the ``.om``.
"""

from __future__ import annotations

from .partitioners import (
    MAX_STAGES,
    METHODS,
    Link,
    Partition,
    StageInfo,
    check_limit,
    make_partition,
    parse_bytes,
    partition_by_cost,
    partition_by_depth,
    partition_by_memory,
)
from .schedule import Event, PipelineSchedule, create_pipeline

__all__ = [
    "MAX_STAGES", "METHODS", "Event", "Link", "Partition", "PipelineSchedule", "StageInfo",
    "check_limit", "create_pipeline", "make_partition", "parse_bytes", "partition_by_cost",
    "partition_by_depth", "partition_by_memory",
]
