"""Precision modes: which ops compute in float16, Casts between them, and what it costs.

Public API:
- ``PrecisionOptions(mode, mixlist_changes, keep)`` and ``apply_precision(graph, options, ...)
  -> (graph, PrecisionReport)``: the optimized graph converted per the mode (see
  ``policy``), with redundant Cast pairs cancelled by the shipped ``simplify`` rules
  (``drop_noop_cast``, ``drop_cast_round_trip``);
- ``estimate_fp16(graph, soc)``: what ``force_fp16`` would give according to the cost model
  (reported under ``must_keep_origin_dtype``, which changes nothing);
- ``measure_error``: measured output error against the float32 graph on random inputs;
  ``check_precision``: what a conversion measures (``--check_precision=off|quick|full``).

Invariants:
- ``must_keep_origin_dtype`` returns the graph object unchanged.
- Graph inputs and outputs keep their names and dtypes in every mode.
- ``--keep_dtype`` names refer to nodes of the source model; a name that no node had is a
  ``UsageError`` naming the file and line; a pinned node that a fusion replaced pins the fused
  node. ``--modify_mixlist`` is only accepted with ``allow_mix_precision`` (as in atc).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cost import DEFAULT_SOC, NpuCostModel, SocProfile
from ..cost.model import LABEL
from ..errors import UsageError
from ..ir.graph import Graph, Node
from ..ir.infer import schema_for
from ..ir.registry import Registry, default_registry, suggest
from ..memory.plan import weights_bytes
from .casts import Conversion, Decide, convert, estimated_weights_bytes
from .measure import CHECKS, DEFAULT_CHECK, OutputError, check_precision, measure_error
from .policy import (
    DEFAULT_MODE,
    FORCE_FP16,
    FORCE_FP32,
    KEEP,
    MIX,
    MODES,
    KeepDtype,
    MixChanges,
    MixList,
    check_mode,
    members,
    parse_keep_dtype,
    parse_mixlist,
    read_keep_dtype,
    read_mixlist,
)

log = logging.getLogger(__name__)

__all__ = [
    "CHECKS", "DEFAULT_CHECK", "DEFAULT_MODE", "MODES", "KeepDtype", "MixList", "OutputError",
    "PrecisionOptions", "PrecisionReport", "apply_precision", "check_precision", "estimate_fp16",
    "measure_error", "members",
    "parse_keep_dtype", "parse_mixlist", "read_keep_dtype", "read_mixlist",
]


@dataclass(frozen=True, slots=True)
class PrecisionOptions:
    mode: str = DEFAULT_MODE
    mixlist_changes: MixChanges | None = None  # atc --modify_mixlist, parsed
    keep: KeepDtype = field(default_factory=KeepDtype)

    def check(self) -> None:
        check_mode(self.mode)
        if self.mixlist_changes is not None and self.mode != MIX:
            raise UsageError(f"--modify_mixlist only applies with --precision_mode={MIX} "
                             f"(the mode is {self.mode})")

    def mixlist(self) -> MixList:
        return MixList().apply(self.mixlist_changes or {})

    def to_json(self) -> dict[str, Any]:
        return {"precision_mode": self.mode,
                "modify_mixlist": {k: {e: list(o) for e, o in v.items()}
                                   for k, v in (self.mixlist_changes or {}).items()},
                "keep_dtype": sorted(self.keep.names)
                + sorted(f"OpType::{t}" for t in self.keep.op_types)}


@dataclass
class PrecisionReport:
    mode: str
    conversion: Conversion | None = None
    casts_after_rules: int = 0  # Cast nodes left after the simplify rules ran
    casts_before_rules: int = 0
    black: list[str] = field(default_factory=list)
    estimate: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "default_mode": DEFAULT_MODE,
                               "estimate": self.estimate}
        c = self.conversion
        if c is not None:
            out.update({
                "source_dtype": c.source, "target_dtype": c.target,
                "nodes_converted": c.converted, "kept": [k.to_json() for k in c.kept],
                "casts_inserted": c.casts, "casts_retargeted": c.retargeted,
                "casts_before_rules": self.casts_before_rules,
                "casts_after_rules": self.casts_after_rules,
                "weights_converted": c.weights,
                "weight_bytes": {"before": c.weight_bytes[0], "after": c.weight_bytes[1]},
                "weight_saturated": c.overflow})
        if self.mode == MIX:
            out["black_list"] = self.black
        return out


def _decider(options: PrecisionOptions, keep: KeepDtype, registry: Registry) -> Decide:
    mode, mix = options.mode, options.mixlist()

    def decide(node: Node, graph: Graph) -> tuple[str, str]:
        if keep.pins(node):
            return "S", "--keep_dtype"
        if mode in (FORCE_FP16, FORCE_FP32):
            return "T", ""
        category = mix.category(node, graph)
        if category == "gray":
            return "follow", "follows its input"
        if mode == MIX:
            if category == "black":
                black = sorted(members(node, graph) & mix.black)
                return "S", f"black list ({', '.join(black)})"
            return "T", ""
        unit = schema_for(node, graph, registry).unit
        return ("T", "") if unit == "cube" else ("S", f"{unit} unit keeps float32")

    return decide


def pinned(keep: KeepDtype, source_names: Iterable[str], fusions: Sequence[Any]) -> KeepDtype:
    """``keep`` checked against the source node names and extended to fused nodes."""
    known = set(source_names)
    for name in sorted(keep.names - known):
        line = keep.lines.get(name)
        where = f"{keep.where}:{line}" if line else keep.where
        raise UsageError(f"{where}: no node of the model is called '{name}'"
                         f"{suggest(name, known)}")
    extra = {f.node for f in fusions if any(n in keep.names for n, _ in f.replaced)}
    return KeepDtype(keep.names | extra, keep.op_types, keep.where, keep.lines)


def apply_precision(graph: Graph, options: PrecisionOptions, *, source_names: Iterable[str] = (),
                    fusions: Sequence[Any] = (), soc: str | SocProfile | None = None,
                    registry: Registry | None = None) -> tuple[Graph, PrecisionReport]:
    """``graph`` (shape-inferred) in the precision ``options.mode`` asks for."""
    options.check()
    registry = registry or default_registry()
    report = PrecisionReport(options.mode, black=sorted(options.mixlist().black))
    start = time.perf_counter()
    if options.mode == KEEP:
        report.estimate = estimate_fp16(graph, soc or DEFAULT_SOC, registry)
        report.seconds = time.perf_counter() - start
        return graph, report
    keep = pinned(options.keep, source_names, fusions) if options.keep else options.keep
    source, target = (("float16", "float32") if options.mode == FORCE_FP32
                      else ("float32", "float16"))
    result, report.conversion = convert(graph, source, target,
                                        _decider(options, keep, registry), registry)
    report.casts_before_rules = _casts(result)
    if _has_cast_pairs(result):
        result = _cancel_casts(result, soc, registry)
    report.casts_after_rules = _casts(result)
    report.estimate = _estimate(graph, result, soc or DEFAULT_SOC, registry)
    report.seconds = time.perf_counter() - start
    return result, report


def _casts(graph: Graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "Cast" and not n.domain)


def _has_cast_pairs(graph: Graph) -> bool:
    producers = graph.producers()
    for n in graph.nodes:
        if n.op != "Cast" or n.domain:
            continue
        src = producers.get(n.inputs[0])
        t = graph.type_of(n.inputs[0])
        if (src is not None and src.op == "Cast") or (t is not None and
                                                      n.attrs.get("to") == _code(t.dtype)):
            return True
    return False


def _code(dtype: str) -> int:
    from ..ir.dtypes import ONNX_CODES

    return ONNX_CODES.get(dtype, -1)


def _cancel_casts(graph: Graph, soc: str | SocProfile | None, registry: Registry) -> Graph:
    """The shipped ``simplify`` rules alone (no folding): they drop no-op and round-trip Casts."""
    from ..opt.optimize import OptimizeOptions, optimize

    name = soc.name if isinstance(soc, SocProfile) else soc
    opts = OptimizeOptions(opt_level="O1", soc_version=name or DEFAULT_SOC, target="npu",
                           disabled=frozenset({"ALL"}), enabled=frozenset({"simplify"}))
    result, _ = optimize(graph, opts, registry)
    return result


def _estimate(before: Graph, after: Graph, soc: str | SocProfile, registry: Registry
              ) -> dict[str, Any]:
    model = NpuCostModel(soc, registry)
    now, then = model.graph(before).total_us, model.graph(after).total_us
    return {"estimated_us_before": round(now, 3), "estimated_us_after": round(then, 3),
            "estimated_saving_us": round(now - then, 3), "weights_bytes_before":
            weights_bytes(before), "weights_bytes_after": weights_bytes(after), "label": LABEL}


def estimate_fp16(graph: Graph, soc: str | SocProfile, registry: Registry | None = None
                  ) -> dict[str, Any]:
    """Estimated latency and weight bytes now and under ``force_fp16`` (cost model only).

    The float16 graph is built from types alone (``convert(estimate=True)``): no weight is
    copied or converted, its bytes follow from its dtype and shape.
    """
    registry = registry or default_registry()
    model = NpuCostModel(soc, registry)
    fp16, conv = convert(graph, "float32", "float16",
                         _decider(PrecisionOptions(FORCE_FP16), KeepDtype(), registry), registry,
                         estimate=True)
    now, then = model.graph(graph).total_us, model.graph(fp16).total_us
    return {"mode": FORCE_FP16, "estimated_us": round(now, 3),
            "estimated_us_fp16": round(then, 3), "estimated_saving_us": round(now - then, 3),
            "weights_bytes": weights_bytes(graph),
            "weights_bytes_fp16": estimated_weights_bytes(fp16, conv),
            "nodes_converted": conv.converted, "label": LABEL}


def verify_same_interface(before: Graph, after: Graph) -> None:
    """Graph inputs and outputs kept their names and dtypes (a precision pass invariant)."""
    for a, b in ((before.inputs, after.inputs), (before.outputs, after.outputs)):
        if [(v.name, v.dtype) for v in a] != [(v.name, v.dtype) for v in b]:
            raise RuntimeError("precision: graph inputs or outputs changed")

