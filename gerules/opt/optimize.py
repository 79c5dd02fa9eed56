"""``optimize``: a graph in, a cheaper equivalent graph for the NPU out, with a report.

Pipeline: verify + infer shapes -> lower into an e-graph -> run the opt level's schedule from
the rule library (``rules/pipeline.ger``) within the level's limits -> extract the cheapest graph
under the NPU cost model (greedy DAG-aware; ILP at O3) -> raise it back to a Graph -> verify.

Invariants:
- O0 returns the verified input graph unchanged; O1..O3 never return a graph that fails
  ``verify`` (raising instead) and never change graph input or output names, dtypes or order.
- An ``EngineError`` (an unsound rule, an impossible extraction) comes out placed: a
  ``RuleError`` at the rule it names, else a ``ModelError``; never a bare engine exception.
- Limits are reported, never silent: the report records the limits in force and the stop
  reason; a run cut short still extracts the best graph found so far (with a warning).
- ``--target onnx`` forbids every non-ai.onnx op with a kernel of its own at extraction
  (infinite cost), so the result runs in onnxruntime (composite ops are written as ONNX
  functions); ``--target npu`` allows the ``ge`` fused ops.
- Rules and rulesets named in ``disabled`` never run; disabling ``fold`` also turns off the
  constant-folding analysis. Unknown names are reported as warnings listing the valid names.
- The rule library is the shipped one with the user's rule files added (``rules``, after
  ``GERULES_RULES_PATH``); a user rule is run, switched and reported exactly like a shipped
  one (per rule, whatever number of rewrites it compiled to); a ``@replace`` rule and an
  unscheduled ruleset are noted in the report's warnings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..cost import DEFAULT_SOC, GraphEstimate, NpuCostModel, profile_for
from ..dsl import CompiledRules, raise_errors
from ..dsl.library import Built, load_library, user_paths
from ..engine import Extraction, Limits, Repeat, Report, Ruleset, Runner, Saturate, Seq, extract
from ..engine.errors import EngineError
from ..engine.schedule import Step
from ..errors import GeError, ModelError, UsageError
from ..ir.composite import with_functions
from ..ir.graph import Graph
from ..ir.registry import Registry, default_registry, suggest
from ..ir.verify import verify
from ..terms.lower import Lowered, lower
from ..terms.raise_graph import raise_graph
from ..terms.terms import TermContext
from .costs import ExtractionCost, any_op, onnx_only
from .provenance import Fusion, applied, composed, fusions, kept

log = logging.getLogger(__name__)

LEVELS = ("O0", "O1", "O2", "O3")
LAYOUT_RULESETS = frozenset({"layout", "layout_motion"})  # rules/layout.ger
LAYOUT_SCHEDULE = "LAYOUT"  # rules/pipeline.ger: run on the graph a level's schedule gave
TARGETS = ("npu", "onnx")


@dataclass(frozen=True, slots=True)
class Level:
    limits: Limits
    extraction: str = "greedy"
    ilp_seconds: float = 10.0


LEVEL_SETTINGS: Mapping[str, Level] = {
    "O1": Level(Limits(iterations=60, nodes=100_000, seconds=30.0)),
    "O2": Level(Limits(iterations=120, nodes=200_000, seconds=60.0)),
    "O3": Level(Limits(iterations=200, nodes=500_000, seconds=180.0), "ilp", 20.0),
}


@dataclass(frozen=True, slots=True)
class OptimizeOptions:
    opt_level: str = "O2"
    soc_version: str = DEFAULT_SOC
    target: str = "npu"
    disabled: frozenset[str] = frozenset()  # rule or ruleset names (fusion switch); "ALL"
    enabled: frozenset[str] = frozenset()  # names kept on although "ALL" is off
    aicore_num: int | None = None  # atc's --aicore_num: the profile scaled to that many cores
    rules: tuple[str, ...] = ()  # the user's rule files and folders, added to the shipped
    limits: Limits | None = None  # None: the level's
    extraction: str | None = None  # None: the level's ("greedy", "ilp", "tree")
    # data layout (rules/layout.ger's LAYOUT_RULESETS: TransData around cube ops, moved and
    # cancelled): on for a .om, off for an ONNX file (no format can be written there)
    layout: bool = False
    small_channel: bool = False  # atc's --enable_small_channel: the C0=4 first conv allowed

    def check(self) -> None:
        if self.opt_level not in LEVELS:
            hint = suggest(self.opt_level, LEVELS)
            raise UsageError(f"unknown opt level '{self.opt_level}'{hint}; choose one of "
                             f"{', '.join(LEVELS)}")
        if self.target not in TARGETS:
            raise UsageError(f"unknown target '{self.target}'; choose one of "
                             f"{', '.join(TARGETS)}")


@dataclass
class OptimizeReport:
    """What an optimization did (plain data; ``to_json`` for files)."""

    level: str
    target: str
    soc: str
    nodes_before: int
    nodes_after: int
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    estimate_before: GraphEstimate
    estimate_after: GraphEstimate
    phases: dict[str, float] = field(default_factory=dict)
    # Per rule, in places (distinct e-classes at the end of the run): matches (a pattern
    # literal that differs is no match), applied (changed the e-graph there), kept (the
    # extracted graph shows its work there); rejected (guard reason -> count), bans, ruleset.
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    fusions: list[Fusion] = field(default_factory=list)
    stop_reason: str = "not run"
    iterations: int = 0
    egraph_nodes: int = 0
    egraph_classes: int = 0
    limits: dict[str, float] = field(default_factory=dict)
    extraction: dict[str, Any] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    layout_saturation: dict[str, Any] = field(default_factory=dict)  # the layout e-graph's

    def rejected(self) -> dict[str, dict[str, int]]:
        """Rule -> guard reason -> count: matched but not applied."""
        return {r: s["rejected"] for r, s in self.rules.items() if s.get("rejected")}

    def to_json(self) -> dict[str, Any]:
        return {
            "opt_level": self.level, "target": self.target, "soc_version": self.soc,
            "nodes": {"before": self.nodes_before, "after": self.nodes_after},
            "ops": {"before": self.ops_before, "after": self.ops_after},
            "estimate": {"before": self.estimate_before.to_json(),
                         "after": self.estimate_after.to_json()},
            "phases_s": {k: round(v, 4) for k, v in self.phases.items()},
            "rules": self.rules, "fusions": [f.to_json() for f in self.fusions],
            "saturation": {"stop_reason": self.stop_reason, "iterations": self.iterations,
                           "egraph_nodes": self.egraph_nodes,
                           "egraph_classes": self.egraph_classes, "limits": self.limits,
                           **({"layout": self.layout_saturation}
                              if self.layout_saturation else {})},
            "extraction": self.extraction, "disabled": self.disabled,
            "warnings": self.warnings,
        }


@lru_cache(maxsize=1)
def _shipped(registry: Registry) -> CompiledRules:
    return _compiled(load_library((), registry))


def _compiled(built: Built) -> CompiledRules:
    raise_errors(built.errors)
    assert built.compiled is not None
    return built.compiled


@lru_cache(maxsize=4)
def _with_user(user: tuple[str, ...], stamp: tuple[tuple[str, int, int], ...],
               registry: Registry) -> CompiledRules:
    return _compiled(load_library(user, registry))


def _stamp(user: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    """Name, size and modification time of every .ger file under the user's paths."""
    found = []
    for top in map(Path, user):
        for path in sorted(top.rglob("*.ger")) if top.is_dir() else [top]:
            st = path.stat()
            found.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(found)


def rule_library(paths: Iterable[str] = (), registry: Registry | None = None
                 ) -> CompiledRules:
    """The compiled rule library: the shipped one with the user's rule files
    (``GERULES_RULES_PATH`` and ``paths``) added, cached until one of those files changes.
    Raises ``RuleError`` for a mistake in them, ``UsageError`` for a missing path."""
    registry = registry or default_registry()
    user = user_paths(paths)
    if not user:
        return _shipped(registry)
    return _with_user(user, _stamp(user), registry)


def optimize(graph: Graph, options: OptimizeOptions | None = None,
             registry: Registry | None = None, *, deferred: bool = False
             ) -> tuple[Graph, OptimizeReport]:
    """Optimize ``graph``; returns the new graph and what was done.

    ``deferred``: folded weights over ``ir.weights.DEFER_BYTES`` stay ``Deferred`` in the
    result (the compiler computes each while writing the ``.om``); by default they are
    computed before returning."""
    options = options or OptimizeOptions()
    options.check()
    registry = registry or default_registry()
    phases: dict[str, float] = {}
    clock = time.perf_counter()
    graph = verify(graph, registry)
    layout = options.layout and options.target == "npu"
    model = NpuCostModel(profile_for(options.soc_version, options.aicore_num), registry,
                         small_channel=options.small_channel, layout=layout)
    before = model.graph(graph)
    phases["verify"] = time.perf_counter() - clock
    report = OptimizeReport(options.opt_level, options.target, model.profile.name,
                            len(graph.nodes), len(graph.nodes), graph.op_counts(),
                            graph.op_counts(), before, before, phases)
    if options.opt_level == "O0":
        return graph, report
    try:
        result = _saturate_and_extract(graph, options, registry, model, report)
    except EngineError as e:
        raise _placed(e, options) from None
    clock = time.perf_counter()
    result = verify(result, registry)
    phases["verify_result"] = time.perf_counter() - clock
    for name, seconds in phases.items():
        log.debug("optimize phase %s: %.3f s", name, seconds)
    log.debug("optimize: %d -> %d nodes, stop reason %s after %d iterations, %d e-nodes",
              len(graph.nodes), len(result.nodes), report.stop_reason, report.iterations,
              report.egraph_nodes)
    report.nodes_after, report.ops_after = len(result.nodes), result.op_counts()
    report.estimate_after = model.graph(result)
    return (result if deferred else result.materialized()), report


def _saturate_and_extract(graph: Graph, options: OptimizeOptions, registry: Registry,
                          model: NpuCostModel, report: OptimizeReport) -> Graph:
    """The level's schedule, extracted under the cost model without the layout charges;
    then, for the NPU layout, the ``LAYOUT`` schedule on the graph that gave (GE's order:
    fusion, then formats), extracted under the full model, so transfers are placed on the
    graph that runs, never on the alternatives the first e-graph keeps beside it."""
    clock = time.perf_counter()
    library = rule_library(options.rules, registry)
    report.warnings += library.notes
    disabled = _expand_all(library, options.disabled, options.enabled)
    schedule, known = _schedule(library, options.opt_level, disabled | LAYOUT_RULESETS)
    unknown = sorted((options.disabled | options.enabled) - known - {"ALL"})
    if unknown:
        report.warnings.append(f"unknown rule or ruleset names switched off: "
                               f"{', '.join(unknown)} (valid: rulesets "
                               f"{', '.join(sorted(library.rulesets))} and rule names; see "
                               "'ge-rewrite rules list')")
    report.disabled = sorted(options.disabled & (known | {"ALL"}))
    report.phases["rules"] = time.perf_counter() - clock
    plain = NpuCostModel(model.profile, model.registry, small_channel=model.small_channel,
                         layout=False)
    result = _phase(graph, library, schedule, plain, options, disabled, report)
    steps = _filter(library.schedules.get(LAYOUT_SCHEDULE, Seq()), disabled, library)
    if not model.layout or not _patterns(steps):  # off, or every layout rule switched off
        return result
    first = (report.rules, report.fusions, dict(report.phases))
    report.rules, report.fusions = {}, []
    final = _phase(result, library, steps, model, options, disabled, report, "layout ")
    report.phases = {**first[2], **{k: v for k, v in report.phases.items() if k not in first[2]}}
    report.rules = {**first[0], **{k: v for k, v in report.rules.items() if k not in first[0]}}
    report.fusions = composed(first[1], report.fusions, final)
    return final


def _phase(graph: Graph, library: CompiledRules, schedule: Step, model: NpuCostModel,
           options: OptimizeOptions, disabled: frozenset[str], report: OptimizeReport,
           prefix: str = "") -> Graph:
    """One e-graph: lower ``graph``, run ``schedule``, extract under ``model``, raise; the
    report gets its rule statistics, fusions, saturation figures (``prefix``ed phase
    times)."""
    phases = report.phases
    clock = time.perf_counter()
    fold = "fold" not in disabled
    ctx = TermContext(with_functions(library.registry, graph), graph.opset,
                      {v.name: v.type for v in graph.inputs}, fold=fold)
    low = lower(graph, ctx)
    phases[prefix + "lower"] = time.perf_counter() - clock
    level = LEVEL_SETTINGS[options.opt_level]
    limits = options.limits or level.limits
    run = _run(low, schedule, limits)
    phases[prefix + "saturate"] = run.seconds
    _record_run(report, run, limits, low.egraph.find, prefix)
    clock = time.perf_counter()
    ext = _extract(low, model, options, level)
    phases[prefix + "extract"] = time.perf_counter() - clock
    clock = time.perf_counter()
    result = raise_graph(graph, low, ext)
    source = source_rules(library)
    report.fusions = fusions(graph, low, ext, result, run.applications, source)
    counts = kept(low, ext, run.applications, _patterns(schedule))
    places = applied(low, run.applications)
    for name, stats in report.rules.items():
        stats["applied"] = places.get(name, 0)
        stats["kept"] = counts.get(name, 0)
        stats["ruleset"] = library.rule(name).ruleset if library.has(name) else ""
        log.debug("rule %s: %d matched, %d applied, %d kept, %d rejected (%.3f s search, "
                  "%.3f s apply)", name, stats["matches"], stats["applied"], stats["kept"],
                  sum(stats["rejected"].values()), run.rules[name].search_seconds,
                  run.rules[name].apply_seconds)
    report.rules = per_rule(report.rules, source)
    phases[prefix + "raise"] = time.perf_counter() - clock
    return result


def _placed(e: EngineError, options: OptimizeOptions) -> GeError:
    """An engine error as the project's error: at the rule it names, else about the model."""
    from ..dsl.errors import RuleError

    name = getattr(e, "rule", None)
    if name:
        try:
            rule = rule_library(options.rules).rule(name)
        except KeyError:
            rule = None
        if rule is not None:
            return RuleError(f"{e} (found while optimizing the model)", rule.span)
    return ModelError(f"the optimizer failed: {e}")


def _run(low: Lowered, schedule: Step, limits: Limits) -> Report:
    return Runner(low.egraph, limits=limits).run(schedule)


def _record_run(report: OptimizeReport, run: Report, limits: Limits,
                find: Callable[[int], int], prefix: str = "") -> None:
    if prefix:  # the layout e-graph: its own saturation figures
        report.layout_saturation = {"stop_reason": run.stop_reason.value,
                                    "iterations": len(run.iterations),
                                    "egraph_nodes": run.nodes, "egraph_classes": run.classes}
    else:
        report.stop_reason = run.stop_reason.value
        report.iterations = len(run.iterations)
        report.egraph_nodes, report.egraph_classes = run.nodes, run.classes
    report.limits = {"iterations": limits.iterations, "nodes": limits.nodes,
                     "seconds": limits.seconds}
    report.rules = {name: {"matches": len({find(r) for r in s.roots}), "applied": s.applied,
                           "kept": 0, "rejected": dict(s.rejected), "bans": s.bans}
                    for name, s in run.rules.items() if s.roots or s.applied}
    _log_rulesets(run)
    if run.stop_reason.value in ("iteration limit", "node limit", "time limit"):
        report.warnings.append(f"saturation stopped at its {run.stop_reason.value} "
                               f"({limits.iterations} iterations, {limits.nodes} e-nodes, "
                               f"{limits.seconds:g} s); the best graph found so far is used")


def source_rules(library: CompiledRules) -> Callable[[str], str]:
    """A rewrite's source rule (``name[F=Relu]/rev`` -> ``name``)."""
    return lambda name: library.rule(name).name if library.has(name) else name


def per_rule(stats: Mapping[str, dict[str, Any]], source: Callable[[str], str]
             ) -> dict[str, dict[str, Any]]:
    """Statistics per source rule: the counts of its rewrites (directions, the ops of an op
    class, opset variants) summed, their rejection reasons merged; a rule with variants
    (``fuse_conv_activation[Act=Relu]``) also lists each one's counts under ``variants``."""
    out: dict[str, dict[str, Any]] = {}
    for name, s in stats.items():
        rule = source(name)
        for key, into in ((rule, out), (_variant(name), None)):
            if into is None:
                if key == rule:
                    continue
                into = out[rule].setdefault("variants", {})
            total = into.setdefault(key, {"matches": 0, "applied": 0, "kept": 0,
                                          "rejected": {}, "bans": 0,
                                          "ruleset": s.get("ruleset", "")})
            for k in ("matches", "applied", "kept", "bans"):
                total[k] += s.get(k, 0)
            for reason, count in s["rejected"].items():
                total["rejected"][reason] = total["rejected"].get(reason, 0) + count
    return out


def _log_rulesets(run: Report) -> None:
    """One debug line per ruleset: iterations, matches, applications, seconds."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    totals: dict[str, list[float]] = {}
    for it in run.iterations:
        t = totals.setdefault(it.ruleset, [0, 0, 0, 0.0])
        t[0] += 1
        t[1] += sum(it.matches.values())
        t[2] += sum(it.applied.values())
        t[3] += it.search_seconds + it.apply_seconds + it.rebuild_seconds
    for name, (iters, matches, applied_, seconds) in totals.items():
        log.debug("ruleset %s: %d iterations, %d matches, %d applied, %.3f s", name, iters,
                  matches, applied_, seconds)


def _extract(low: Lowered, model: NpuCostModel, options: OptimizeOptions, level: Level
             ) -> Extraction:
    allowed = onnx_only if options.target == "onnx" else any_op
    cost = ExtractionCost(low.ctx, model, allowed)
    method = options.extraction or level.extraction
    return extract(low.egraph, list(low.roots.values()), cost, method=method,
                   time_limit=level.ilp_seconds)


def _patterns(step: Step) -> dict[str, Any]:
    """Rule name -> its compiled left side, for every rule in the schedule."""
    if isinstance(step, Ruleset):
        return {r.name: r.pattern for r in step.rules}
    if isinstance(step, Repeat | Saturate):
        return _patterns(step.body)
    out: dict[str, Any] = {}
    for sub in step.steps if isinstance(step, Seq) else ():
        out.update(_patterns(sub))
    return out


def switch_names(library: CompiledRules) -> set[str]:
    """The names a fusion switch may use: rulesets, rules, and each variant of a rule over
    an op class or opsets (``fuse_conv_activation[Act=Relu]``)."""
    return set(library.rulesets) | {r.name for r in library.rules} | {
        _variant(rw.name) for rw in library.rewrites()}


def _schedule(library: CompiledRules, level: str, disabled: frozenset[str]
              ) -> tuple[Step, set[str]]:
    """The level's schedule with switched-off rules and rulesets removed; and all names."""
    known = switch_names(library)
    schedule = library.schedules.get(level)
    if schedule is None:
        raise UsageError(f"the rule library has no schedule {level}")
    return _filter(schedule, disabled, library), known


def _expand_all(library: Any, disabled: frozenset[str], enabled: frozenset[str]
                ) -> frozenset[str]:
    """``ALL`` off means every rule and ruleset off except those named in ``enabled``."""
    if "ALL" not in disabled:
        return disabled - enabled
    off = {r.name for r in library.rules if r.name not in enabled and r.ruleset not in enabled}
    if "fold" not in enabled:
        off.add("fold")  # the constant-folding analysis belongs to the fold ruleset
    return frozenset(off)


def _variant(rewrite: str) -> str:
    """The variant a rewrite runs (``name[F=Relu]/rev`` -> ``name[F=Relu]``)."""
    return rewrite.split("/")[0]


def _filter(step: Step, disabled: frozenset[str], library: CompiledRules) -> Step:
    if isinstance(step, Ruleset):
        if step.name in disabled:
            return Ruleset(step.name, ())
        keep = [r for r in step.rules if _variant(r.name) not in disabled
                and library.rule(r.name).name not in disabled]
        return step if len(keep) == len(step.rules) else Ruleset(step.name, keep)
    if isinstance(step, Seq):
        return Seq(*(_filter(s, disabled, library) for s in step.steps))
    if isinstance(step, Repeat):
        return Repeat(step.times, *(_filter(s, disabled, library) for s in step.body.steps))
    if isinstance(step, Saturate):
        return Saturate(*(_filter(s, disabled, library) for s in step.body.steps),
                        max_iters=step.max_iters)
    return step


__all__ = ["LEVELS", "OptimizeOptions", "OptimizeReport", "optimize", "replace"]
