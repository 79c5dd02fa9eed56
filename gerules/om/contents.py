"""What a ``.om`` file holds once decoded: the graph, its compiled variants and metadata.

Invariants:
- ``graph`` is the model as declared (graph inputs and outputs may keep symbolic dims); its
  initializers are read-only arrays (views into the file's memory map when loaded).
- Every ``Variant`` shares the graph's nodes and weights and fixes every shape: its ``graph``
  has static input and output types and a ``value_info`` entry for every node output (the tensor
  table), and its ``plan`` is a verified ``MemoryPlan`` for that graph. Dynamic batch stores one
  variant per batch size; a static model has one variant named ``"default"``. A range bucket
  (``ranges``) is planned at its highest sizes and runs every size inside its ranges: every
  tensor is then no larger than planned, so the plan's offsets stay valid.
- A pipelined model (``pipeline``) also has exactly one variant: the whole model on one
  device, so any reader runs it as an ordinary model. Its stages cover every node once, each
  reads only graph inputs, weights and earlier stages' outputs, and the model's outputs are
  graph inputs or some stage's outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..ir.graph import Graph
from ..memory.plan import MemoryPlan


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    dims: Mapping[str, int]  # symbolic dim -> size (empty for a static model)
    graph: Graph
    plan: MemoryPlan
    # A range bucket (atc's --input_shape_range): symbol -> (low, high) sizes this plan runs;
    # ``dims`` are the highs, at which the plan was made. Empty for an exact gear.
    ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", MappingProxyType(dict(self.dims)))
        object.__setattr__(self, "ranges", MappingProxyType(dict(self.ranges)))

    def takes(self, sizes: Mapping[str, int]) -> bool:
        """A range bucket runs ``sizes`` (symbol -> size) when each is inside its range."""
        return bool(self.ranges) and all(
            lo <= sizes.get(s, -1) <= hi for s, (lo, hi) in self.ranges.items())


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of a pipelined model: its nodes (indices into the model graph's nodes) as a
    graph of their own (inputs: graph inputs and other stages' outputs; outputs: what later
    stages and the model's outputs need) with its own memory plan."""

    name: str
    nodes: tuple[int, ...]
    variant: Variant


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The stages of a model cut for pipeline-parallel execution, in pipeline order, and the
    partition's figures (informational JSON: method, link, estimates, schedule)."""

    stages: tuple[Stage, ...]
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OmContents:
    graph: Graph
    variants: tuple[Variant, ...]
    soc_version: str = ""
    compile_options: Mapping[str, Any] = field(default_factory=dict)
    command_line: str = ""
    producer: str = ""
    pipeline: Pipeline | None = None  # a pipelined model's stages (format 1.1)
