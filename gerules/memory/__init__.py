"""Memory planning: lifetimes, in-place and view aliases, offsets, streams and a verifier.

Public API: ``plan_memory(graph, streams=1, memory_aware=True) -> MemoryPlan`` and
``verify_plan(graph, plan)``; ``MemoryFigures`` carries the report's figures.
"""

from __future__ import annotations

from .liveness import ALIGNMENT, VIEW_OPS, align, analyze
from .plan import MemoryFigures, MemoryPlan, plan_memory, weights_bytes
from .streams import MAX_STREAMS, assign_streams
from .verify import PlanError, verify_plan

__all__ = [
    "ALIGNMENT", "MAX_STREAMS", "VIEW_OPS", "MemoryFigures", "MemoryPlan", "PlanError", "align",
    "analyze", "assign_streams", "plan_memory", "verify_plan", "weights_bytes",
]
