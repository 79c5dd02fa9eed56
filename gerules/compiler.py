"""``compile_model``: the whole conversion, from a loaded graph to a ``.om`` and its report.

Steps: fix input shapes (``input_shape``; every symbolic dim bound, except the batch dim when
compiling for several batch sizes) -> select outputs (``out_nodes``) -> optimize
(``gerules.opt.optimize``) -> precision (``gerules.precision``: Casts per ``precision_mode``,
measured error against the float32 graph) -> plan memory and write the ``.om``
(``gerules.build.build_om``), one variant per batch size.

Invariants:
- The ``.om`` holds the optimized graph, the options, the exact command line and the report;
  nothing is written unless every step succeeded (the writer renames a finished temp file).
- A dim given in ``input_shape`` replaces the model's dim (atc's ``--input_shape``); ``-1``
  keeps a dim symbolic (named ``batch`` when the model gives it no name), which only makes sense
  with ``dynamic_batch_size``. Symbolic dims left over are bound to 1 with a warning.
- ``out_nodes`` (atc's ``node:index``) makes those node outputs the graph's outputs, in the
  given order; nodes nothing needs any more are dropped. Unknown nodes or indices are a
  ``UsageError`` naming them.
- ``input_format`` is validated and recorded; it never changes the graph (ONNX is NCHW).
- ``CompileResult.report`` is plain JSON data: source, options, optimize, precision, the final
  graph's op counts and estimate (``final``: after precision, Casts included), memory figures
  per variant and the time of every phase (``phases_s``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .build import BuildResult, build_om
from .cost import DEFAULT_SOC, NpuCostModel
from .errors import UsageError
from .ir.graph import Dim, Graph, TensorType, Value
from .ir.registry import Registry, default_registry, suggest
from .ir.verify import verify
from .opt.optimize import OptimizeOptions, OptimizeReport, optimize
from .precision import (
    DEFAULT_MODE,
    KeepDtype,
    PrecisionOptions,
    PrecisionReport,
    apply_precision,
    measure_error,
)
from .precision.policy import MixChanges

log = logging.getLogger(__name__)

BATCH = "batch"
INPUT_FORMATS = ("NCHW", "NHWC", "ND")
Progress = Callable[[str], None]  # called with the name of each phase as it starts


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
    input_format: str = ""  # "" = not given; else one of INPUT_FORMATS
    out_nodes: tuple[tuple[str, int], ...] = ()  # (node name, output index)
    precision_mode: str = DEFAULT_MODE
    modify_mixlist: MixChanges | None = None  # atc's mixed-precision list changes, parsed
    keep_dtype: KeepDtype = field(default_factory=KeepDtype)
    measure_error: bool = True  # run both graphs on random inputs when precision changes
    rules: tuple[str, ...] = ()  # the user's rule files and folders, added to the shipped

    def optimize_options(self) -> OptimizeOptions:
        return OptimizeOptions(opt_level=self.opt_level, soc_version=self.soc_version,
                               target=self.target, disabled=self.disabled,
                               enabled=self.enabled, rules=tuple(map(str, self.rules)))

    def precision_options(self) -> PrecisionOptions:
        return PrecisionOptions(self.precision_mode, self.modify_mixlist, self.keep_dtype)

    def check(self) -> None:
        """Raise ``UsageError`` for a bad value before any work is done."""
        self.optimize_options().check()
        self.precision_options().check()
        if self.input_format and self.input_format not in INPUT_FORMATS:
            raise UsageError(f"--input_format: unknown format '{self.input_format}'"
                             f"{suggest(self.input_format, INPUT_FORMATS)}; choose one of "
                             f"{', '.join(INPUT_FORMATS)}")

    def to_json(self) -> dict[str, Any]:
        return {"opt_level": self.opt_level, "soc_version": self.soc_version,
                "target": self.target,
                "input_shape": {k: list(v) for k, v in self.input_shape.items()},
                "dynamic_batch_size": list(self.dynamic_batch_size),
                "fusion_switch_off": sorted(self.disabled),
                "fusion_switch_on": sorted(self.enabled), "streams": self.streams,
                "memory_aware": self.memory_aware, "input_format": self.input_format or None,
                "out_nodes": [f"{n}:{k}" for n, k in self.out_nodes],
                "rules": [str(r) for r in self.rules],
                **self.precision_options().to_json()}


@dataclass(frozen=True)
class CompileResult:
    path: Path
    graph: Graph
    optimize: OptimizeReport
    build: BuildResult
    seconds: float
    report: dict[str, Any]
    precision: PrecisionReport | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    reference: Graph | None = None  # the optimized graph before precision changes


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


def select_outputs(graph: Graph, out_nodes: Sequence[tuple[str, int]]) -> Graph:
    """``graph`` whose outputs are the given node outputs; unneeded nodes dropped."""
    if not out_nodes:
        return graph
    nodes = {n.label: n for n in graph.nodes}
    outputs = []
    for name, index in out_nodes:
        node = nodes.get(name)
        if node is None:
            raise UsageError(f"--out_nodes: no node is called '{name}'{suggest(name, nodes)}")
        if not 0 <= index < len(node.outputs) or not node.outputs[index]:
            raise UsageError(f"--out_nodes {name}:{index}: node '{name}' ({node.qualified_op}) "
                             f"has {len(node.outputs)} output(s)")
        t = graph.type_of(node.outputs[index])
        outputs.append(Value(node.outputs[index], TensorType(t.dtype if t else "float32",
                                                             None)))
    if len({v.name for v in outputs}) != len(outputs):
        raise UsageError("--out_nodes: the same output is named twice")
    return prune(graph.replace(outputs=tuple(outputs), value_info={}))


def prune(graph: Graph) -> Graph:
    """``graph`` without the nodes no graph output depends on."""
    needed = set(graph.output_names)
    keep = []
    for node in reversed(graph.nodes):
        if needed & set(node.outputs):
            keep.append(node)
            needed.update(node.present_inputs())
    inits = {k: v for k, v in graph.initializers.items() if k in needed}
    return graph.replace(nodes=tuple(reversed(keep)), initializers=inits)


def check_input_format(graph: Graph, fmt: str) -> None:
    """atc's ``--input_format``: checked against the inputs, recorded, never acted on."""
    if fmt in ("NCHW", "NHWC") and not any(v.type.rank == 4 for v in graph.inputs):
        raise UsageError(f"--input_format={fmt} needs a 4-D input; the inputs are "
                         + ", ".join(f"{v.name} {v.type}" for v in graph.inputs)
                         + " (use ND)")
    if fmt == "NHWC":
        log.warning("--input_format=NHWC: ONNX models are NCHW; no layout change is made "
                    "(the format is only recorded)")


class _Phases:
    """Times each phase and tells ``progress`` when one starts."""

    def __init__(self, progress: Progress | None) -> None:
        self.times: dict[str, float] = {}
        self.progress = progress

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.progress is not None:
            self.progress(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - start


def compile_model(graph: Graph, options: CompileOptions, output: str | Path, *,
                  command_line: str = "", source: str = "",
                  registry: Registry | None = None,
                  progress: Progress | None = None) -> CompileResult:
    """Optimize ``graph`` and write ``output`` (a ``.om``); returns what was done."""
    start = time.perf_counter()
    registry = registry or default_registry()
    options.check()
    phase = _Phases(progress)
    dynamic = bool(options.dynamic_batch_size)
    with phase("shapes"):
        graph, batch_dims = _prepare(graph, options, dynamic, registry)
    with phase("optimize"):
        optimized, opt_report = optimize(graph, options.optimize_options(), registry)
    with phase("precision"):
        final, prec = apply_precision(optimized, options.precision_options(),
                                      source_names=[n.label for n in graph.nodes],
                                      fusions=opt_report.fusions,
                                      soc=options.soc_version, registry=registry)
    dims = [{d: b for d in batch_dims} for b in options.dynamic_batch_size] or [{}]
    if final is not optimized and options.measure_error:
        with phase("measure precision error"):
            prec.errors = measure_error(optimized, final, dims=dims[0], registry=registry)
    report = {"source": source, "options": options.to_json(),
              "optimize": opt_report.to_json(), "precision": prec.to_json(),
              "final": _final(final, opt_report if final is optimized else None,
                              options.soc_version, registry),
              "phases_s": {k: round(v, 4) for k, v in phase.times.items()}}
    with phase("plan memory and write"):
        build = build_om(final, output, options=options.to_json(), report=report,
                         command_line=command_line, streams=options.streams,
                         memory_aware=options.memory_aware, dims=dims, registry=registry)
    report["memory"] = {v.name: v.plan.figures.to_json() for v in build.variants
                        if v.plan.figures}
    report["phases_s"] = {k: round(v, 4) for k, v in phase.times.items()}
    return CompileResult(build.path, final, opt_report, build, time.perf_counter() - start,
                         report, prec, dict(phase.times), optimized)


def _final(graph: Graph, unchanged: OptimizeReport | None, soc: str, registry: Registry
           ) -> dict[str, Any]:
    """Op counts and estimate of the graph written (after precision: Casts included)."""
    estimate = (unchanged.estimate_after if unchanged is not None
                else NpuCostModel(soc, registry).graph(graph))
    return {"nodes": len(graph.nodes), "ops": graph.op_counts(), "estimate": estimate.to_json()}


def _prepare(graph: Graph, options: CompileOptions, dynamic: bool, registry: Registry
             ) -> tuple[Graph, list[str]]:
    graph, batch_dims = fix_input_shapes(graph, options.input_shape, keep_batch=dynamic)
    if dynamic and not batch_dims:
        raise UsageError("--dynamic_batch_size needs a dynamic batch dim: give it as -1 in "
                         "--input_shape (e.g. 'x:-1,3,224,224')")
    if options.input_format:
        check_input_format(graph, options.input_format)
    graph = verify(graph, registry)
    if options.out_nodes:
        graph = verify(select_outputs(graph, options.out_nodes), registry)
    return graph, batch_dims
