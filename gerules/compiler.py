"""``compile_model``: the whole conversion, from a loaded graph to a ``.om`` and its report.

Steps: fix input shapes (``input_shape``; every symbolic dim bound, except the batch dim when
compiling for several batch sizes) -> select outputs (``out_nodes``) -> optimize
(``gerules.opt.optimize``) -> precision (``gerules.precision``: Casts per ``precision_mode``)
-> check precision (``check_precision``: the error against the float32 graph, measured as
asked) -> plan memory (``gerules.build.plan_variants``, one variant per batch size) -> the
record of figures (``gerules.figures``) -> write the ``.om`` (``gerules.build.write``).

Invariants:
- The ``.om`` holds the optimized graph, the options, the exact command line and the report;
  nothing is written unless every step succeeded (the writer renames a finished temp file).
- A dim given in ``input_shape`` replaces the model's dim (atc's ``--input_shape``); ``-1``
  keeps a dim symbolic (named ``batch`` when the model gives it no name), which only makes sense
  with ``dynamic_batch_size``. Symbolic dims left over are bound to 1 with a warning.
- ``out_nodes`` (atc's ``node:index``) makes those node outputs the graph's outputs, in the
  given order; nodes nothing needs any more are dropped. Unknown nodes or indices are a
  ``UsageError`` naming them.
- ``input_format`` is validated and recorded. ``NHWC`` on a model whose inputs are NCHW (every
  framework but TensorFlow, whose converted models take NHWC already) changes the compiled
  model's input layout for real: every 4-D float input is fed channel-last (its type held in
  format NHWC, its logical dims still the model's) and a ``ge.TransData`` to NCHW feeds what
  read it; the layout rules then merge that transfer into the first op's (NHWC -> NC1HWC0
  at once) or move the elementwise work before it, whichever the cost model prices lower.
- ``CompileResult.report`` is plain JSON data: source, its framework (``onnx``, ``pytorch``,
  ``caffe``, ``tensorflow``, ``mindspore``), options, optimize, precision, the record every
  view reads (``figures``: nodes, estimates, op counts, memory per variant and precision of
  the source, optimized and final graphs) and the time of every phase (``phases_s``, with the
  caller's ``phases``, e.g. loading, first). The ``.om`` stores it with the ``write`` phase
  still running, so its ``phases_s`` ends at ``plan memory``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import figures, gears, shapes
from .build import BuildResult, memory_figures, plan_variants, write
from .cost import DEFAULT_SOC, GraphEstimate, NpuCostModel, SocProfile, profile_for
from .cost.layout import layout_figures
from .errors import UsageError
from .ir.attrs import Attrs
from .ir.formats import NC1HWC0_C04, ND, NHWC
from .ir.graph import Dim, Graph, Node, TensorType, Value
from .ir.registry import Registry, default_registry, suggest
from .ir.verify import verify
from .om.contents import Pipeline, Variant
from .opt import implmode
from .opt.optimize import OptimizeOptions, OptimizeReport, optimize
from .precision import (
    CHECKS,
    DEFAULT_CHECK,
    DEFAULT_MODE,
    KeepDtype,
    PrecisionOptions,
    PrecisionReport,
    apply_precision,
    check_precision,
)
from .precision.policy import MixChanges

log = logging.getLogger(__name__)

BATCH = "batch"
INPUT_FORMATS = ("NCHW", "NHWC", "ND")
BUFFER_OPTIMIZE = ("l1_optimize", "l2_optimize", "off_optimize")
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
    check_precision: str = DEFAULT_CHECK  # off | quick | full (precision.measure)
    aicore_num: int | None = None  # atc's --aicore_num: the SoC profile scaled to that many
    op_select_implmode: str = implmode.DEFAULT_MODE  # exact or fast forms (opt.implmode)
    optypelist_for_implmode: tuple[str, ...] = ()  # op types the implmode applies to
    reuse_memory: bool = True  # False: atc's --disable_reuse_memory=1 (debugging)
    buffer_optimize: str = ""  # atc's --buffer_optimize: recorded, no effect here
    enable_small_channel: bool = False  # atc's flag: the first conv may take C0 = 4
    layout: bool = True  # NPU data formats (NC1HWC0, FRACTAL_Z, FRACTAL_NZ) and TransData
    dynamic_image_size: tuple[tuple[int, ...], ...] = ()  # (height, width) per gear
    dynamic_dims: tuple[tuple[int, ...], ...] = ()  # a size per -1 of input_shape, per gear
    # atc's --input_shape_range: per input, dims that are ints or (low, high) ranges
    input_shape_range: Mapping[str, tuple[int | tuple[int, int], ...]] = field(
        default_factory=dict)
    fix_batch_dims: bool = False  # rewrite Reshape targets that hard-code the exported batch
    # pipeline parallelism (gerules.partition): 0 = one device; partition_by depth|memory|cost;
    # device_memory (bytes) bounds every stage; micro_batches for the schedule's estimate
    partitions: int = 0
    partition_by: str = "cost"
    device_memory: int | None = None
    micro_batches: int = 8

    @property
    def pipelined(self) -> bool:
        """A pipeline is asked for: several stages, or stages that must fit a device."""
        return self.partitions > 1 or (self.partition_by == "memory"
                                       and self.device_memory is not None)

    def optimize_options(self) -> OptimizeOptions:
        return OptimizeOptions(opt_level=self.opt_level, soc_version=self.soc_version,
                               target=self.target, disabled=self.disabled,
                               enabled=self.enabled, aicore_num=self.aicore_num,
                               rules=tuple(map(str, self.rules)),
                               layout=self.layout and self.target == "npu",
                               small_channel=self.enable_small_channel)

    def gear_mode(self) -> str:
        """Which of atc's dynamic shape flags is given ("" for none; two is a UsageError)."""
        given = [m for m in gears.MODES if getattr(self, m)]
        if len(given) > 1:
            raise UsageError(f"--{given[0]} and --{given[1]} cannot be combined (atc allows "
                             "one dynamic shape mode at a time)")
        return given[0] if given else ""

    def profile(self) -> SocProfile:
        """The cost model's profile (``--soc_version``, scaled by ``--aicore_num``)."""
        return profile_for(self.soc_version, self.aicore_num)

    def notes(self) -> list[str]:
        """What the report and summary say about accepted flags that change nothing, and
        about how the SoC profile was made."""
        out = [f"--soc_version={self.soc_version}: {self.profile().note}"] \
            if self.profile().note else []
        if self.buffer_optimize:
            out.append(f"--buffer_optimize={self.buffer_optimize}: no effect here (the cost "
                       "model has no on-chip L1/L2 buffer to plan; the arena is planned the "
                       "same way)")
        if not self.reuse_memory:
            out.append("--disable_reuse_memory=1: every tensor has its own block (debugging)")
        return out

    def precision_options(self) -> PrecisionOptions:
        return PrecisionOptions(self.precision_mode, self.modify_mixlist, self.keep_dtype)

    def check(self) -> None:
        """Raise ``UsageError`` for a bad value before any work is done."""
        self.optimize_options().check()
        self.precision_options().check()
        if self.check_precision not in CHECKS:
            raise UsageError(f"--check_precision: unknown value '{self.check_precision}'"
                             f"{suggest(self.check_precision, CHECKS)}; choose one of "
                             f"{', '.join(CHECKS)}")
        implmode.check(self.op_select_implmode, self.optypelist_for_implmode)
        if self.buffer_optimize and self.buffer_optimize not in BUFFER_OPTIMIZE:
            raise UsageError(f"--buffer_optimize: unknown value '{self.buffer_optimize}'"
                             f"{suggest(self.buffer_optimize, BUFFER_OPTIMIZE)}; choose one of "
                             f"{', '.join(BUFFER_OPTIMIZE)}")
        self.profile()  # an unknown SoC or a core count out of range
        self.gear_mode()
        self._check_partitions()
        if self.input_format and self.input_format not in INPUT_FORMATS:
            raise UsageError(f"--input_format: unknown format '{self.input_format}'"
                             f"{suggest(self.input_format, INPUT_FORMATS)}; choose one of "
                             f"{', '.join(INPUT_FORMATS)}")

    def _check_partitions(self) -> None:
        from .partition import MAX_STAGES, METHODS

        if self.partition_by not in METHODS:
            raise UsageError(f"--partition_by: unknown method '{self.partition_by}'"
                             f"{suggest(self.partition_by, METHODS)}; choose one of "
                             f"{', '.join(METHODS)}")
        if not 0 <= self.partitions <= MAX_STAGES:
            raise UsageError(f"--partitions must be between 1 and {MAX_STAGES}, got "
                             f"{self.partitions}")
        if self.device_memory is not None and self.device_memory <= 0:
            raise UsageError("--device_memory must be positive")
        if not 1 <= self.micro_batches <= 4096:
            raise UsageError(f"--micro_batches must be between 1 and 4096, got "
                             f"{self.micro_batches}")
        if self.partition_by == "memory" and self.partitions > 1 and not self.device_memory:
            raise UsageError("--partition_by memory needs --device_memory (e.g. 8G)")
        if self.pipelined and self.gear_mode():
            raise UsageError(f"--partitions cannot be combined with --{self.gear_mode()}: a "
                             "pipeline is compiled for one input shape")

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
                "check_precision": self.check_precision, "aicore_num": self.aicore_num,
                "op_select_implmode": self.op_select_implmode,
                "optypelist_for_implmode": list(self.optypelist_for_implmode),
                "reuse_memory": self.reuse_memory, "buffer_optimize": self.buffer_optimize or None,
                "enable_small_channel": self.enable_small_channel,
                "dynamic_image_size": [list(g) for g in self.dynamic_image_size],
                "dynamic_dims": [list(g) for g in self.dynamic_dims],
                "input_shape_range": {k: [list(d) if isinstance(d, tuple) else d for d in v]
                                      for k, v in self.input_shape_range.items()},
                "fix_batch_dims": self.fix_batch_dims,
                **({"partitions": self.partitions, "partition_by": self.partition_by,
                    "device_memory": self.device_memory, "micro_batches": self.micro_batches}
                   if self.pipelined else {}),
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
    source: Graph | None = None  # the model with its input shapes fixed, before optimizing
    estimate: GraphEstimate | None = None  # the graph written's, node by node


def fix_input_shapes(graph: Graph, given: Mapping[str, Sequence[int]], *, keep_batch: bool,
                     symbols_at: Mapping[gears.Position, str] | None = None,
                     keep: Collection[str] | None = None) -> tuple[Graph, list[str]]:
    """Apply ``input_shape``; returns the graph and the symbolic dims left (the batch dims,
    or ``keep`` when given). ``symbols_at`` names the symbol of a ``-1`` (input, dim index)."""
    names = set(graph.input_names)
    for name in given:
        if name not in names:
            raise UsageError(f"--input_shape: no model input is called '{name}' (inputs: "
                             f"{', '.join(sorted(names))})")
    inputs = []
    for v in graph.inputs:
        dims = _dims_for(v, given.get(v.name), symbols_at or {})
        inputs.append(Value(v.name, TensorType(v.dtype, dims)))
    symbols = sorted({d for v in inputs for d in v.shape or () if isinstance(d, str)})
    kept = [s for s in symbols if (s in keep if keep is not None
                                   else keep_batch and _is_batch(s, inputs))]
    for s in symbols:
        if s not in kept:
            log.warning("symbolic dim '%s' set to 1 (fix it with --input_shape)",
                        s if len(s) <= 80 else f"{s[:80]}...")
    bound = {s: 1 for s in symbols if s not in kept}
    inputs = [_bind(v, bound) for v in inputs]
    outputs = tuple(Value(v.name, TensorType(v.dtype, None)) for v in graph.outputs)
    fixed = graph.replace(inputs=tuple(inputs), outputs=outputs, value_info={})
    return fixed, kept


def _dims_for(v: Value, given: Sequence[int] | None,
              names: Mapping[gears.Position, str]) -> tuple[Dim, ...] | None:
    if given is None:
        return v.shape
    if v.shape is not None and len(v.shape) != len(given):
        raise UsageError(f"--input_shape {v.name}: {len(given)} dims given, the input has rank "
                         f"{len(v.shape)} ({v.type})")
    out: list[Dim] = []
    for k, d in enumerate(given):
        if d == -1:
            old = v.shape[k] if v.shape is not None else None
            out.append(names.get((v.name, k)) or (old if isinstance(old, str) else BATCH))
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


def check_input_format(graph: Graph, fmt: str, framework: str = "onnx") -> None:
    """atc's ``--input_format``: checked against the inputs (NCHW and NHWC describe 4-D
    ones)."""
    if fmt in ("NCHW", "NHWC") and not any(v.type.rank == 4 for v in graph.inputs):
        raise UsageError(f"--input_format={fmt} needs a 4-D input; the inputs are "
                         + ", ".join(f"{v.name} {v.type}" for v in graph.inputs)
                         + " (use ND)")


def input_layout(graph: Graph, fmt: str, framework: str, target: str) -> Graph:
    """``--input_format=NHWC`` for a model whose inputs are NCHW: each 4-D float input held in
    format NHWC (fed as [N, H, W, C]) and read through a TransData to NCHW (see the module
    docstring). TensorFlow models are NHWC as converted: nothing changes for them."""
    if fmt != "NHWC" or framework == "tensorflow":
        return graph
    if target != "npu":
        raise UsageError("--input_format=NHWC changes the input layout with a TransData, an "
                         "NPU op: it needs --target npu")
    outputs = set(graph.output_names)
    nodes: list[Node] = []
    renamed: dict[str, str] = {}
    inputs = []
    for v in graph.inputs:
        t = v.type
        if t.rank != 4 or t.format != ND or not t.dtype.startswith(("float", "bfloat")) or (
                v.name in graph.initializers):
            inputs.append(v)
            continue
        if v.name in outputs:
            raise UsageError(f"--input_format=NHWC: input '{v.name}' is also an output")
        renamed[v.name] = f"{v.name}/nchw"
        inputs.append(Value(v.name, t.with_format(NHWC)))
        nodes.append(Node("TransData", (v.name,), (renamed[v.name],),
                          Attrs({"src_format": NHWC, "dst_format": "NCHW"}),
                          name=f"TransData/{v.name}", domain="ge"))
    body = [n.with_(inputs=tuple(renamed.get(i, i) for i in n.inputs)) for n in graph.nodes]
    opset = {**graph.opset, "ge": graph.opset.get("ge", 1)}
    return graph.replace(inputs=tuple(inputs), nodes=tuple(nodes + body), opset=opset,
                         value_info=graph.held_weights())


class _Phases:
    """Times each phase and tells ``progress`` when one starts; ``prior`` are phases the
    caller timed before (loading the model)."""

    def __init__(self, progress: Progress | None, prior: Mapping[str, float] | None) -> None:
        self.times: dict[str, float] = dict(prior or {})
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
            log.debug("phase %s: %.3f s", name, self.times[name])

    def to_json(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.times.items()}


def compile_model(graph: Graph, options: CompileOptions, output: str | Path, *,
                  command_line: str = "", source: str = "", framework: str = "onnx",
                  registry: Registry | None = None, progress: Progress | None = None,
                  phases: Mapping[str, float] | None = None) -> CompileResult:
    """Optimize ``graph`` and write ``output`` (a ``.om``); returns what was done.

    ``phases`` are times the caller already spent on this conversion (``{"load": s}``); they
    count in the record's ``phases_s`` and in ``CompileResult.seconds``.
    """
    start = time.perf_counter() - sum((phases or {}).values())
    registry = registry or default_registry()
    options.check()
    phase = _Phases(progress, phases)
    with phase("shapes"):
        graph, plan, fixed_dims = _prepare(graph, options, registry, framework)
        graph = verify(input_layout(graph, options.input_format, framework, options.target),
                       registry)
    profile = options.profile()
    model = NpuCostModel(profile, registry, small_channel=options.enable_small_channel,
                         layout=options.optimize_options().layout)
    with phase("optimize"):
        optimized, opt_report = optimize(graph, options.optimize_options(), registry,
                                         deferred=True)
        optimized, impl = implmode.select(optimized, options.op_select_implmode,
                                          options.optypelist_for_implmode)
        if impl:
            opt_report.estimate_after = model.graph(optimized)
    with phase("precision"):
        final, prec = apply_precision(optimized, options.precision_options(),
                                      source_names=[n.label for n in graph.nodes],
                                      fusions=opt_report.fusions, soc=profile,
                                      registry=registry)
    dims = list(plan.dims)
    final_estimate = opt_report.estimate_after if final is optimized else model.graph(final)
    with phase("check precision"):
        checked = _check(optimized, final, dims, options.check_precision, final_estimate,
                         registry)
    with phase("plan memory"):
        base, variants = plan_variants(final, dims, streams=options.streams,
                                       memory_aware=options.memory_aware,
                                       reuse=options.reuse_memory, ranges=plan.ranges,
                                       registry=registry)
    pipeline = None
    if options.pipelined:
        with phase("partition"):
            pipeline = _partition(variants[0], options, profile, registry)
    estimates = {"source": opt_report.estimate_before, "optimized": opt_report.estimate_after,
                 "final": final_estimate}
    ops = {"source": opt_report.ops_before, "final": final.op_counts()}
    layout = layout_figures(final, final_estimate) if options.target == "npu" else None
    record = figures.record(estimates, ops, memory_figures(variants),
                            {"mode": options.precision_mode, **checked},
                            pipeline.info if pipeline else None, layout)
    report = {"source": source, "framework": framework, "options": options.to_json(),
              "optimize": opt_report.to_json(), "precision": prec.to_json(),
              "figures": record, "phases_s": phase.to_json(),
              "implmode": {"mode": options.op_select_implmode,
                           "op_types": list(options.optypelist_for_implmode),
                           "changed": [c.to_json() for c in impl]},
              "notes": options.notes() + _layout_notes(options, final),
              "soc_profile": profile.to_json(),
              "shapes": {**plan.to_json(), "fix_batch_dims": fixed_dims}}
    with phase("write"):
        build = write(base, variants, output, options=options.to_json(), report=report,
                      command_line=command_line, registry=registry, pipeline=pipeline)
    report["phases_s"] = phase.to_json()
    return CompileResult(build.path, final, opt_report, build, time.perf_counter() - start,
                         report, prec, dict(phase.times), optimized, graph, final_estimate)


def _layout_notes(options: CompileOptions, final: Graph) -> list[str]:
    """What the layout flags did: which convolutions read the small-channel form."""
    if not options.enable_small_channel:
        return []
    small = [n.label for n in final.nodes if n.qualified_op == "ge.FusedConv"
             and (t := final.type_of(n.inputs[0])) is not None and t.format == NC1HWC0_C04]
    if small:
        return [f"--enable_small_channel=1: {', '.join(small[:3])} read(s) C0 = 4 blocks "
                "(NC1HWC0_C04 input, FRACTAL_Z_C04 weight)"]
    if not options.optimize_options().layout:
        return ["--enable_small_channel=1: no effect without the NPU layout (--target npu)"]
    return ["--enable_small_channel=1: no convolution of at most 4 input channels takes the "
            "C0 = 4 form (or the cost model found it no cheaper)"]


def _partition(variant: Variant, options: CompileOptions, profile: SocProfile,
               registry: Registry) -> Pipeline:
    """The compiled graph cut into stages along its plan's order, each stage planned, and the
    figures (partition, stage arenas, the pipeline schedule's estimate)."""
    from .partition import check_limit, create_pipeline, make_partition
    from .partition.stages import arenas, plan_stages

    stages = options.partitions if options.partitions > 0 else None
    part = make_partition(variant.graph, options.partition_by, stages,
                          limit=options.device_memory, soc=profile, order=variant.plan.order,
                          registry=registry)
    planned = plan_stages(part, streams=options.streams, reuse=options.reuse_memory,
                          registry=registry)
    if options.device_memory is not None:
        check_limit(part, options.device_memory, arenas(planned))
    schedule = create_pipeline(part, options.micro_batches)
    info = part.to_json()
    for row, st in zip(info["stages"], planned, strict=True):
        row["arena_bytes"] = st.variant.plan.arena_bytes
    info["schedule"] = schedule.to_json()
    info["stage_of"] = [part.stage_of()[k] for k in range(len(variant.graph.nodes))]
    return Pipeline(planned, info)


def _check(reference: Graph, final: Graph, gears: Sequence[Mapping[str, int]], level: str,
           estimate: GraphEstimate, registry: Registry) -> dict[str, Any]:
    """The record's precision entry: unchanged, or checked at ``level``."""
    if final is reference:
        return {"check": level, "status": "unchanged", "outputs": [],
                "note": "nothing changed dtype"}
    flops = sum(est.flops for _, est in estimate.nodes)
    return check_precision(reference, final, gears, level, flops=flops, registry=registry)


def _prepare(graph: Graph, options: CompileOptions, registry: Registry, framework: str = "onnx"
             ) -> tuple[Graph, gears.Gears, list[str]]:
    """Input shapes fixed, the gears worked out and checked by shape inference (each gear's
    dims bound) before any other work; and the Reshapes ``fix_batch_dims`` rewrote."""
    plan, names, exported, given = _gears(graph, options)
    graph, _ = fix_input_shapes(graph, given, keep_batch=False, symbols_at=names,
                                keep=set(plan.symbols))
    if options.input_format:
        check_input_format(graph, options.input_format, framework)
    graph = verify(graph, registry)
    if options.out_nodes:
        graph = verify(select_outputs(graph, options.out_nodes), registry)
    fixed: list[str] = []
    if options.fix_batch_dims:
        graph, fixed = shapes.fix_batch_dims(graph, plan.dims, exported, registry)
        for label in fixed:
            log.info("--fix_batch_dims: node '%s': target's first entry now copies the batch",
                     label)
    shapes.check_gears(graph, plan.dims, exported, registry)
    return graph, plan, fixed


def _gears(graph: Graph, options: CompileOptions
           ) -> tuple[gears.Gears, dict[gears.Position, str], dict[str, int],
                      dict[str, tuple[int, ...]]]:
    """The gears, the symbol of every varying dim, the size each had in the model as
    exported (where it was static) and the shapes to fix."""
    mode = options.gear_mode()
    given = {k: tuple(v) for k, v in options.input_shape.items()}
    bounds: dict[gears.Position, tuple[int, int]] = {}
    for name, spec in options.input_shape_range.items():
        given[name] = tuple(-1 if isinstance(d, tuple) else int(d) for d in spec)
        bounds.update({(name, k): d for k, d in enumerate(spec) if isinstance(d, tuple)})
    if not mode:
        return gears.Gears(), {}, {}, given
    where = list(bounds) if bounds else gears.positions(given)
    if not where and mode == "dynamic_batch_size":  # the model's own symbolic batch dims
        where = [(v.name, 0) for v in graph.inputs if v.name not in given and v.shape
                 and isinstance(v.shape[0], str)]
    if not where:
        example = {"dynamic_image_size": "x:1,3,-1,-1", "dynamic_dims": "x:-1,-1"}
        what = "a dynamic batch dim" if mode == "dynamic_batch_size" else "the dims that vary"
        raise UsageError(f"--{mode} needs {what} as -1 in --input_shape (e.g. "
                         f"'{example.get(mode, 'x:-1,3,224,224')}')")
    # per gear, one size per position (--dynamic_*); with ranges, one row: the (lo, hi) each
    columns = [] if bounds else _columns(mode, options, len(where))
    ranges = [tuple(bounds[p] for p in where)] if bounds else []
    owner = gears.shared_symbols(where, ranges or columns)
    declared = {v.name: v.shape for v in graph.inputs}
    names: dict[gears.Position, str] = {}
    exported: dict[str, int] = {}
    for i, (name, k) in enumerate(where):
        oname, ok = where[owner[i]]
        shape = declared.get(oname)
        old = shape[ok] if shape is not None and ok < len(shape) else None
        names[(name, k)] = (old if isinstance(old, str) else
                            BATCH if ok == 0 else f"{oname}_d{ok}")
        mine = declared.get(name)
        if mine is not None and k < len(mine) and isinstance(mine[k], int):
            exported.setdefault(names[(name, k)], int(mine[k]))
    symbols = tuple(dict.fromkeys(names[p] for p in where))
    if bounds:
        per = {names[p]: r for p, r in bounds.items()}
        spans = gears.buckets(per)
        dims = tuple({s: hi for s, (_, hi) in b.items()} for b in spans)
        return gears.Gears(mode, symbols, dims, tuple(spans)), names, exported, given
    dims = tuple({names[p]: g[i] for i, p in enumerate(where)} for g in columns)
    return gears.Gears(mode, symbols, dims), names, exported, given


def _columns(mode: str, options: CompileOptions, count: int) -> list[tuple[int, ...]]:
    if mode == "dynamic_batch_size":
        return [(b,) * count for b in options.dynamic_batch_size]
    values = list(options.dynamic_image_size if mode == "dynamic_image_size"
                  else options.dynamic_dims)
    width = 2 if mode == "dynamic_image_size" else count
    if count != width:
        raise UsageError(f"--{mode} needs exactly two -1 dims (height and width) in "
                         f"--input_shape, there are {count}")
    for g in values:
        if len(g) != width:
            raise UsageError(f"--{mode}: gear {list(g)} has {len(g)} sizes; --input_shape has "
                             f"{width} -1 dims")
    return values
