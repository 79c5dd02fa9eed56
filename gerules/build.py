"""``build_om``: plan the memory of a graph and write it as a ``.om`` offline model.

Invariants:
- The graph is verified and shape-inferred first; every tensor must have a static shape once
  the variant's symbolic dims are bound (``dims``), else ``ModelError`` names the tensor.
- One variant per entry of ``dims`` (``({},)`` for a static model): the graph's symbolic input
  dims are bound, shapes re-inferred, and the memory planned for that variant alone.
- The written file is read back through the full loader checks before ``build_om`` returns
  only when ``check=True``; the plan itself is always verified by the planner.
- ``build_om``'s ``REPORT`` holds the caller's report plus ``"memory"``: the figures of every
  variant. ``plan_variants`` + ``write`` are the same two halves for callers that put the
  figures into their own report first (``compile_model``).
- ``reuse=False`` (atc's ``--disable_reuse_memory``) gives every tensor its own block.
- A variant with a tensor over the tensor budget (a ``ConstantOfShape`` memory bomb) is
  refused with ``ResourceLimit`` naming the tensor before anything is planned or written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .budgets import DEFAULT, Budgets
from .cost.profile import DEFAULT_SOC
from .errors import ModelError
from .fileio import check_output_path
from .ir.dims import bind_dims
from .ir.graph import Graph
from .ir.registry import Registry, default_registry
from .ir.verify import verify
from .memory.plan import MemoryFigures, plan_memory
from .om.contents import OmContents, Pipeline, Variant
from .om.names import name_problem
from .om.reader import OmFile
from .om.writer import write_om

log = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class BuildResult:
    path: Path
    variants: tuple[Variant, ...]
    seconds: float
    size: int = 0  # bytes of the .om
    pipeline: Pipeline | None = None

    @property
    def figures(self) -> MemoryFigures:
        """The first variant's memory figures."""
        figures = self.variants[0].plan.figures
        assert figures is not None
        return figures


def build_om(graph: Graph, output: str | Path, *, options: Mapping[str, Any] | None = None,
             report: Mapping[str, Any] | None = None, command_line: str = "",
             streams: int = 1, memory_aware: bool = True,
             dims: Sequence[Mapping[str, int]] = ({},), check: bool = False,
             registry: Registry | None = None) -> BuildResult:
    """Plan ``graph`` (one variant per ``dims`` entry) and write ``output`` atomically."""
    start = time.perf_counter()
    path = check_output_path(output)
    base, variants = plan_variants(graph, dims, streams=streams, memory_aware=memory_aware,
                                   registry=registry)
    report = {**dict(report or {}), "memory": memory_figures(variants)}
    return write(base, variants, path, options=options, report=report,
                 command_line=command_line, check=check, registry=registry, start=start)


def plan_variants(graph: Graph, dims: Sequence[Mapping[str, int]], *, streams: int = 1,
                  memory_aware: bool = True, reuse: bool = True,
                  ranges: Sequence[Mapping[str, tuple[int, int]]] = (),
                  registry: Registry | None = None) -> tuple[Graph, tuple[Variant, ...]]:
    """The verified graph and one planned variant per ``dims`` entry (a range bucket when
    ``ranges`` has an entry for it: planned at ``dims``, its highs)."""
    registry = registry or default_registry()
    base = verify(graph, registry)
    variants = []
    for k, d in enumerate(dims):
        v = plan_variant(base, d, streams=streams, memory_aware=memory_aware, reuse=reuse,
                         registry=registry)
        if k < len(ranges):
            name = ",".join(f"{s}={lo}-{hi}" for s, (lo, hi) in sorted(ranges[k].items()))
            v = replace(v, name=name, ranges=ranges[k])
        variants.append(v)
    return base, tuple(variants)


def memory_figures(variants: Sequence[Variant]) -> dict[str, dict[str, Any]]:
    """Variant name -> its memory figures (JSON)."""
    return {v.name: v.plan.figures.to_json() for v in variants if v.plan.figures}


def write(base: Graph, variants: tuple[Variant, ...], output: str | Path, *,
          options: Mapping[str, Any] | None = None, report: Mapping[str, Any] | None = None,
          command_line: str = "", check: bool = False, registry: Registry | None = None,
          start: float | None = None, pipeline: Pipeline | None = None) -> BuildResult:
    """Write planned variants (and a pipeline's stages) as the ``.om`` ``output``
    (atomically); ``report`` as given."""
    start = time.perf_counter() if start is None else start
    path = check_output_path(output)
    options = dict(options or {})
    contents = OmContents(base, variants, str(options.get("soc_version", DEFAULT_SOC)),
                          options, command_line, producer=f"gerules {_version()}",
                          pipeline=pipeline)
    size = write_om(path, contents, dict(report or {}))
    if check:
        OmFile(path, registry=registry or default_registry()).close()
    seconds = time.perf_counter() - start
    log.info("wrote %s (%d variant(s)) in %.2f s", path, len(variants), seconds)
    return BuildResult(path, variants, seconds, size, pipeline)


def plan_variant(graph: Graph, dims: Mapping[str, int], *, streams: int = 1,
                 memory_aware: bool = True, reuse: bool = True,
                 registry: Registry | None = None) -> Variant:
    """One compiled variant: ``dims`` bound, shapes inferred, memory planned and verified."""
    registry = registry or default_registry()
    _check_dim_names(graph, dims)
    bound = verify(bind_dims(graph, dims), registry) if dims else graph
    for v in bound.inputs:
        if not v.type.is_static:
            raise ModelError(f"graph input has shape {v.type}; a .om needs static shapes (fix "
                             "them with --input_shape, or compile one variant per batch size)",
                             tensor=v.name)
    check_budget(bound)
    plan = plan_memory(bound, streams=streams, memory_aware=memory_aware, reuse=reuse,
                       registry=registry)
    name = ",".join(f"{k}={n}" for k, n in sorted(dims.items())) or "default"
    return Variant(name, dims, bound, plan)


def _check_dim_names(graph: Graph, dims: Mapping[str, int]) -> None:
    """A variant is named by its symbolic dims (``N=8``), and a ``.om``'s names are data,
    never paths (``om.names``): a dim name that cannot be one is refused here, at the graph
    input that declares it, before any planning."""
    for symbol in dims:
        problem = name_problem(symbol) or name_problem(f"{symbol}=0")
        if problem:
            owner = next((v.name for v in graph.inputs
                          if v.type.shape is not None and symbol in v.type.shape), None)
            raise ModelError(f"symbolic dim {symbol[:80]!r} cannot name a .om variant: "
                             f"{problem}", tensor=owner)


def check_budget(graph: Graph, budgets: Budgets = DEFAULT) -> None:
    """Refuse a graph with a tensor over the tensor budget (``ResourceLimit``, exit 3)."""
    producers = graph.producers()
    for v in (*graph.inputs, *graph.value_info.values()):
        n = v.type.nbytes()
        if n is not None and n > budgets.tensor_bytes:
            node = producers.get(v.name)
            budgets.check("tensor_bytes", n, str(v.type), node=node.label if node else None,
                          op=node.qualified_op if node else None, tensor=v.name)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gerules")
    except PackageNotFoundError:
        return "dev"
