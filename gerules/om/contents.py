"""What a ``.om`` file holds once decoded: the graph, its compiled variants and metadata.

Invariants:
- ``graph`` is the model as declared (graph inputs and outputs may keep symbolic dims); its
  initializers are read-only arrays (views into the file's memory map when loaded).
- Every ``Variant`` shares the graph's nodes and weights and fixes every shape: its ``graph``
  has static input and output types and a ``value_info`` entry for every node output (the tensor
  table), and its ``plan`` is a verified ``MemoryPlan`` for that graph. Dynamic batch stores one
  variant per batch size; a static model has one variant named ``"default"``.
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", MappingProxyType(dict(self.dims)))


@dataclass(frozen=True, slots=True)
class OmContents:
    graph: Graph
    variants: tuple[Variant, ...]
    soc_version: str = ""
    compile_options: Mapping[str, Any] = field(default_factory=dict)
    command_line: str = ""
    producer: str = ""
