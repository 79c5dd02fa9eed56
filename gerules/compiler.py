"""``compile_model``: the whole conversion, from a loaded graph to a ``.om`` and its report.

Steps: fix input shapes (``input_shape``; every symbolic dim bound, except the batch dim when
compiling for several batch sizes) -> optimize (``gerules.opt.optimize``) -> plan memory and
write the ``.om`` (``gerules.build.build_om``), one variant per batch size.

Invariants:
- The ``.om`` holds the optimized graph, the options, the exact command line and the report;
  nothing is written unless every step succeeded (the writer renames a finished temp file).
- A dim given in ``input_shape`` replaces the model's dim (atc's ``--input_shape``); ``-1``
  keeps a dim symbolic (named ``batch`` when the model gives it no name), which only makes sense
  with ``dynamic_batch_size``. Symbolic dims left over are bound to 1 with a warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .build import BuildResult, build_om
from .cost import DEFAULT_SOC
from .errors import UsageError
from .ir.graph import Dim, Graph, TensorType, Value
from .ir.registry import Registry, default_registry
from .ir.verify import verify
from .opt.optimize import OptimizeOptions, OptimizeReport, optimize

log = logging.getLogger(__name__)

BATCH = "batch"


@dataclass(frozen=True)
class CompileOptions:
    """Everything a conversion can be asked to do (atc's flags, in our own names)."""

    opt_level: str = "O2"
    soc_version: str = DEFAULT_SOC
    target: str = "npu"
    input_shape: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dynamic_batch_size: tuple[int, ...] = ()
    disabled: frozenset[str] = frozenset()
    enabled: frozenset[str] = frozenset()
    streams: int = 1
    memory_aware: bool = True

    def optimize_options(self) -> OptimizeOptions:
        return OptimizeOptions(opt_level=self.opt_level, soc_version=self.soc_version,
                               target=self.target, disabled=self.disabled,
                               enabled=self.enabled)

    def to_json(self) -> dict[str, Any]:
        return {"opt_level": self.opt_level, "soc_version": self.soc_version,
                "target": self.target,
                "input_shape": {k: list(v) for k, v in self.input_shape.items()},
                "dynamic_batch_size": list(self.dynamic_batch_size),
                "fusion_switch_off": sorted(self.disabled),
                "fusion_switch_on": sorted(self.enabled), "streams": self.streams,
                "memory_aware": self.memory_aware}


@dataclass(frozen=True)
class CompileResult:
    path: Path
    graph: Graph
    optimize: OptimizeReport
    build: BuildResult
    seconds: float
    report: dict[str, Any]


def fix_input_shapes(graph: Graph, given: Mapping[str, Sequence[int]], *, keep_batch: bool
                     ) -> tuple[Graph, list[str]]:
    """Apply ``input_shape``; returns the graph and the symbolic dims left (the batch dims)."""
    names = set(graph.input_names)
    for name in given:
        if name not in names:
            raise UsageError(f"--input_shape: no model input is called '{name}' (inputs: "
                             f"{', '.join(sorted(names))})")
    inputs = []
    for v in graph.inputs:
        dims = _dims_for(v, given.get(v.name))
        inputs.append(Value(v.name, TensorType(v.dtype, dims)))
    symbols = sorted({d for v in inputs for d in v.shape or () if isinstance(d, str)})
    keep = [s for s in symbols if keep_batch and _is_batch(s, inputs)]
    for s in symbols:
        if s not in keep:
            log.warning("symbolic dim '%s' set to 1 (fix it with --input_shape)", s)
    bound = {s: 1 for s in symbols if s not in keep}
    inputs = [_bind(v, bound) for v in inputs]
    outputs = tuple(Value(v.name, TensorType(v.dtype, None)) for v in graph.outputs)
    fixed = graph.replace(inputs=tuple(inputs), outputs=outputs, value_info={})
    return fixed, keep


def _dims_for(v: Value, given: Sequence[int] | None) -> tuple[Dim, ...] | None:
    if given is None:
        return v.shape
    if v.shape is not None and len(v.shape) != len(given):
        raise UsageError(f"--input_shape {v.name}: {len(given)} dims given, the input has rank "
                         f"{len(v.shape)} ({v.type})")
    out: list[Dim] = []
    for k, d in enumerate(given):
        if d == -1:
            old = v.shape[k] if v.shape is not None else None
            out.append(old if isinstance(old, str) else BATCH)
        elif d < 0:
            raise UsageError(f"--input_shape {v.name}: dim {d} is negative (-1 means dynamic)")
        else:
            out.append(int(d))
    return tuple(out)


def _is_batch(symbol: str, inputs: Sequence[Value]) -> bool:
    """A batch dim is a symbolic dim that is the first dim of every input that has it."""
    return all(v.shape and v.shape[0] == symbol for v in inputs
               if v.shape and symbol in v.shape)


def _bind(v: Value, dims: Mapping[str, int]) -> Value:
    if v.shape is None:
        return v
    return Value(v.name, TensorType(v.dtype, tuple(dims.get(d, d) if isinstance(d, str) else d
                                                   for d in v.shape)))


def compile_model(graph: Graph, options: CompileOptions, output: str | Path, *,
                  command_line: str = "", source: str = "",
                  registry: Registry | None = None) -> CompileResult:
    """Optimize ``graph`` and write ``output`` (a ``.om``); returns what was done."""
    start = time.perf_counter()
    registry = registry or default_registry()
    dynamic = bool(options.dynamic_batch_size)
    graph, batch_dims = fix_input_shapes(graph, options.input_shape, keep_batch=dynamic)
    if dynamic and not batch_dims:
        raise UsageError("--dynamic_batch_size needs a dynamic batch dim: give it as -1 in "
                         "--input_shape (e.g. 'x:-1,3,224,224')")
    graph = verify(graph, registry)
    optimized, opt_report = optimize(graph, options.optimize_options(), registry)
    dims = [{d: b for d in batch_dims} for b in options.dynamic_batch_size] or [{}]
    report = {"source": source, "options": options.to_json(),
              "optimize": opt_report.to_json()}
    build = build_om(optimized, output, options=options.to_json(), report=report,
                     command_line=command_line, streams=options.streams,
                     memory_aware=options.memory_aware, dims=dims, registry=registry)
    report["memory"] = {v.name: v.plan.figures.to_json() for v in build.variants
                        if v.plan.figures}
    return CompileResult(build.path, optimized, opt_report, build,
                         time.perf_counter() - start, report)
