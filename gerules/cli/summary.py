"""Plain-text tables for the terminal: what a conversion or an optimization did.

Invariants: pure functions from reports to text; nothing here prints. A conversion's headline,
op table, precision and memory lines read only the report's record of figures
(``gerules.figures``), the same record the HTML report and ``--mode=6`` read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import figures
from ..cost.model import LABEL
from ..memory.plan import weights_bytes
from ..om.reader import OmFile
from ..opt.optimize import OptimizeReport


def mib(n: int) -> str:
    """A byte count for people: KiB below 1 MiB, else MiB (GiB from 10 GiB)."""
    if n >= 10 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    return f"{n / (1 << 20):.2f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


def op_table(before: Mapping[str, int], after: Mapping[str, int],
             us_before: Mapping[str, float], us_after: Mapping[str, float],
             totals: tuple[int, int, float, float]) -> list[str]:
    ops = sorted(set(before) | set(after), key=lambda op: (-before.get(op, 0), op))
    width = max([len(op) for op in ops] + [8])
    lines = [f"{'op':<{width}}  {'before':>6}  {'after':>6}  {'est. us before':>14}  "
             f"{'est. us after':>13}"]
    for op in ops:
        lines.append(f"{op:<{width}}  {before.get(op, 0):>6}  {after.get(op, 0):>6}  "
                     f"{us_before.get(op, 0.0):>14.1f}  {us_after.get(op, 0.0):>13.1f}")
    lines.append(f"{'total':<{width}}  {totals[0]:>6}  {totals[1]:>6}  {totals[2]:>14.1f}  "
                 f"{totals[3]:>13.1f}")
    return lines


def rules_table(rules: Mapping[str, Mapping[str, Any]], limit: int = 12) -> list[str]:
    """Per rule that took effect: matched, applied (changed the e-graph), kept (in the graph
    written); the rest are counted in one line."""
    used = {k: v for k, v in rules.items() if v.get("applied")}
    if not used:
        return ["rules applied: none"]
    width = max(len(k) for k in used)
    lines = [f"{'rule':<{width}}  {'matched':>7}  {'applied':>7}  {'kept':>5}"]
    ranked = sorted(used.items(), key=lambda kv: (-kv[1].get("kept", 0),
                                                 -kv[1]["applied"], kv[0]))
    for name, stats in ranked[:limit]:
        lines.append(f"{name:<{width}}  {stats['matches']:>7}  {stats['applied']:>7}  "
                     f"{stats.get('kept', 0):>5}")
    if len(ranked) > limit:
        rest = ranked[limit:]
        lines.append(f"... {len(rest)} more rules (applied {sum(s['applied'] for _, s in rest)}"
                     f", kept {sum(s.get('kept', 0) for _, s in rest)}; all in the report)")
    return lines


def fusion_lines(fusions: list[Mapping[str, Any]], rules: Mapping[str, Mapping[str, Any]],
                 limit: int = 8) -> list[str]:
    """The fusions, most frequent rule first, and the guards that stopped matched rules."""
    by_rule: dict[str, int] = {}
    for f in fusions:
        by_rule[str(f["rule"])] = by_rule.get(str(f["rule"]), 0) + 1
    items = sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{rule} x{n}" for rule, n in items[:limit])
    more = f", ... ({len(items) - limit} more rules)" if len(items) > limit else ""
    lines = [f"fusions: {len(fusions)}" + (f" ({text}{more})" if text else "")]
    reasons = figures.top_reasons(rules)
    total = sum(n for _, _, n in reasons)
    if not total:
        return [*lines, "matched but not applied: none"]
    lines.append(f"matched but not applied: {total}; top reasons:")
    lines += [f"  {n:>5}  {rule}: {reason}" for rule, reason, n in reasons[:3]]
    return lines


def saturation_line(opt: Mapping[str, Any]) -> str:
    sat = opt.get("saturation", {})
    lim = sat.get("limits", {})
    line = (f"saturation: {sat.get('stop_reason')} after {sat.get('iterations')} iterations, "
            f"{sat.get('egraph_nodes')} e-nodes (limits: {lim.get('iterations')} iterations, "
            f"{lim.get('nodes')} e-nodes, {lim.get('seconds')} s)")
    lay = sat.get("layout")
    if lay:  # the NPU data layout's own e-graph, built from the graph the first one gave
        line += (f"; layout: {lay.get('stop_reason')} after {lay.get('iterations')} "
                 f"iterations, {lay.get('egraph_nodes')} e-nodes")
    return line


def time_line(phases: Mapping[str, float]) -> str:
    """Every phase with its seconds, and their total."""
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
    return f"time: {parts}; total {sum(phases.values()):.2f} s"


def optimize_summary(report: OptimizeReport, phases: Mapping[str, float]) -> str:
    """``ge-rewrite optimize``: the graph before and after the rule library."""
    speedup = report.estimate_before.total_us / max(report.estimate_after.total_us, 1e-9)
    data = report.to_json()
    lines = [f"optimized at {report.level} for {report.target} ({report.soc}): "
             f"{report.nodes_before} -> {report.nodes_after} nodes, "
             f"{report.estimate_before.total_us:.1f} -> {report.estimate_after.total_us:.1f} us "
             f"({speedup:.2f}x, {LABEL})", ""]
    lines += op_table(report.ops_before, report.ops_after, report.estimate_before.by_op,
                      report.estimate_after.by_op,
                      (report.nodes_before, report.nodes_after,
                       report.estimate_before.total_us, report.estimate_after.total_us))
    lines += ["", *rules_table(data["rules"]), *fusion_lines(data["fusions"], data["rules"]),
              "", saturation_line(data), time_line(phases)]
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def conversion_summary(report: Mapping[str, Any], phases: Mapping[str, float]) -> str:
    """``ge-rewrite compile``: everything from the report's record of figures (and its
    optimize section for rules, fusions and saturation)."""
    rec, opt = figures.of_report(report), report.get("optimize", {})
    h = figures.headline(rec)
    lines = [f"converted at {opt.get('opt_level')} for {opt.get('target')} ({rec.get('soc')}): "
             f"{h.nodes_source} -> {h.nodes_final} nodes, {h.us_source:.1f} -> "
             f"{h.us_final:.1f} us ({h.speedup:.2f}x, {h.label})",
             f"  optimize {h.us_source:.1f} -> {h.us_optimized:.1f} us "
             f"({rec['nodes']['optimized']} nodes), precision "
             f"{report.get('precision', {}).get('mode')} -> {h.us_final:.1f} us "
             f"({h.nodes_final} nodes)", ""]
    ops, us = rec.get("ops", {}), rec.get("by_op_us", {})
    lines += op_table(ops.get("source", {}), ops.get("final", {}), us.get("source", {}),
                      us.get("final", {}), (h.nodes_source, h.nodes_final, h.us_source,
                                            h.us_final))
    lines += ["", *rules_table(opt.get("rules", {})),
              *fusion_lines(opt.get("fusions", []), opt.get("rules", {})), "",
              saturation_line(opt)]
    lines += [f"warning: {w}" for w in opt.get("warnings", [])]
    lines += ["", precision_summary(report), *implmode_lines(report.get("implmode", {}))]
    casts = figures.cast_warning(rec)
    lines += [f"warning: {casts}"] if casts else []
    lines += [f"note: {n}" for n in report.get("notes", [])]
    layout = figures.layout_line(rec)
    lines += ["", *memory_lines(rec), *([layout] if layout else []),
              *pipeline_lines(rec.get("pipeline")), time_line(phases)]
    return "\n".join(lines)


def pipeline_lines(pipe: Any) -> list[str]:
    """The stages (estimated time, weights, arena, bytes received per micro-batch) and the
    schedule's estimate, from the record's ``pipeline``."""
    if not figures.pipeline_shaped(pipe):
        return []
    link = pipe.get("link", {})
    lines = ["", f"pipeline: {len(pipe['stages'])} stages by {pipe.get('method')}, balance "
                 f"{pipe.get('balance', 0):.2f} (slowest / mean), link {link.get('gbps')} GB/s",
             f"{'stage':<7}{'nodes':>6}{'est. us':>10}{'transfer us':>13}{'weights':>12}"
             f"{'arena':>12}{'received':>12}"]
    for st in pipe["stages"]:
        lines.append(f"{str(st.get('stage')):<7}{st['nodes']:>6}{st['compute_us']:>10.1f}"
                     f"{st['transfer_us']:>13.1f}{mib(st['weights_bytes']):>12}"
                     f"{mib(st.get('arena_bytes', 0)):>12}{mib(st['transfer_bytes']):>12}")
    sch = pipe.get("schedule", {})
    keys = ("micro_batches", "makespan_us", "throughput_per_s",
            "single_device_throughput_per_s", "speedup", "bubble")
    if sch and all(isinstance(sch.get(k), int | float) for k in keys):
        lines.append(f"schedule (GPipe, {sch['micro_batches']} micro-batches, estimated): "
                     f"{sch['makespan_us']:.1f} us, {sch['throughput_per_s']:.0f} per s vs "
                     f"{sch['single_device_throughput_per_s']:.0f} on one device "
                     f"({sch['speedup']:.2f}x), bubble {100 * sch['bubble']:.0f} %")
    return lines


def implmode_lines(impl: Mapping[str, Any]) -> list[str]:
    """What ``--op_select_implmode`` changed, by op and attribute."""
    if not impl or impl.get("mode") == "high_precision":
        return []
    changed = impl.get("changed", [])
    kinds: dict[str, int] = {}
    for c in changed:
        key = f"{c['op']} {c['attribute']} {c['from']} -> {c['to']}"
        kinds[key] = kinds.get(key, 0) + 1
    what = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
    scope = f" (op types {', '.join(impl['op_types'])})" if impl.get("op_types") else ""
    return [f"implmode: {impl.get('mode')}{scope}: {len(changed)} node(s) to their fast form"
            + (f": {what}" if what else " (none has one)")]


def memory_lines(rec: Mapping[str, Any]) -> list[str]:
    lines = [f"{'variant':<16}{'no reuse':>12}{'lower bound':>14}{'arena':>12}{'weights':>12}"]
    for name, f in rec.get("memory", {}).items():
        lines.append(f"{name:<16}{mib(f['no_reuse']):>12}{mib(f['lower_bound']):>14}"
                     f"{mib(f['arena']):>12}{mib(f['weights']):>12}")
    return lines


def precision_summary(report: Mapping[str, Any]) -> str:
    """One to three lines on what the precision mode did (or what float16 would save)."""
    precision, rec = report.get("precision", {}), figures.of_report(report)
    mode, est = precision.get("mode", ""), precision.get("estimate", {})
    if "estimated_us_fp16" in est:
        return (f"precision: {mode} (nothing changed dtype); force_fp16 would take "
                f"{est['estimated_us_fp16']:.1f} instead of {est['estimated_us']:.1f} us "
                f"(estimate) and halve the weights to {mib(est.get('weights_bytes_fp16', 0))}")
    h = figures.headline(rec)
    lines = [f"precision: {mode}: {precision.get('nodes_converted', 0)} nodes in "
             f"{precision.get('target_dtype')}, {len(precision.get('kept', []))} kept in "
             f"{precision.get('source_dtype')}, {precision.get('casts_after_rules', 0)} Casts, "
             f"{h.us_optimized:.1f} -> {h.us_final:.1f} us (estimate)"]
    lines += precision_lines(rec.get("precision", {}))
    if precision.get("weight_saturated"):
        lines.append(f"  warning: {precision['weight_saturated']} weight values were beyond "
                     "float16's range and saturated to +-65504")
    return "\n".join(lines)


def precision_lines(checked: Mapping[str, Any]) -> list[str]:
    """The record's precision check as lines (measured errors, or why nothing was measured)."""
    if checked.get("status") == "measured":
        return [f"  output {e['output']}: max abs error {_sci(e['max_abs'])}, max rel "
                f"{_sci(e['max_rel'])} against float32 (measured, random inputs)"
                for e in checked.get("outputs", [])]
    if checked.get("status") == "not measured":
        return [f"  error {checked.get('note')}"]
    return []


def _sci(x: float | None) -> str:
    return "inf" if x is None else f"{x:.2e}"


def om_info(om: OmFile) -> dict[str, Any]:
    """``--mode=6``: what a .om holds (plain data); figures from its record of the conversion."""
    c, report = om.contents, om.report()
    rec = figures.of_report(report)
    options = dict(c.compile_options)
    memory = rec.get("memory", {})
    h = figures.headline(rec)
    return {
        "file": om.path, "bytes": om.header.file_size,
        "format_version": f"{om.header.major}.{om.header.minor}", "producer": c.producer,
        "soc_version": c.soc_version, "command_line": c.command_line,
        "framework": report.get("framework", "onnx"),
        "opt_level": options.get("opt_level"), "precision_mode": options.get("precision_mode"),
        "inputs": [{"name": v.name, "type": v.type.held_str()} for v in c.graph.inputs],
        "outputs": [{"name": v.name, "type": str(v.type)} for v in c.graph.outputs],
        "nodes": h.nodes_final if rec else len(c.graph.nodes),
        "ops": rec.get("ops", {}).get("final") or c.graph.op_counts(),
        "weights_bytes": weights_bytes(c.graph),
        "variants": [{"name": v.name, "dims": dict(v.dims), "streams": v.plan.stream_count,
                      "inputs": [{"name": x.name, "type": x.type.held_str()}
                                 for x in v.graph.inputs],
                      "memory": memory.get(v.name)
                      or (v.plan.figures.to_json() if v.plan.figures else {})}
                     for v in c.variants],
        "estimate_us": h.us_final if rec else None,
        "estimate_source_us": h.us_source if rec else None,
        "precision": rec.get("precision"),
        "layout": figures.layout_line(rec),
        **({"pipeline": figures.pipeline_summary(rec.get("pipeline"))}
           if rec.get("pipeline") else {}),
    }


def om_info_text(info: dict[str, Any]) -> str:
    lines = [f"model: {info['file']} ({mib(info['bytes'])}, format {info['format_version']}, "
             f"{info['producer']})",
             f"source framework: {info['framework']}  soc_version: {info['soc_version']}  "
             f"opt level: {info['opt_level']}  precision: {info['precision_mode']}",
             f"command line: {info['command_line'] or '(not recorded)'}"]
    lines += [f"input  {x['name']}: {x['type']}" for x in info["inputs"]]
    lines += [f"output {x['name']}: {x['type']}" for x in info["outputs"]]
    ops = ", ".join(f"{op} {n}" for op, n in sorted(info["ops"].items(), key=lambda kv: -kv[1]))
    lines.append(f"nodes: {info['nodes']} ({ops}); weights {mib(info['weights_bytes'])}")
    if info.get("estimate_us") is not None:
        lines.append(f"latency: {info['estimate_us']:.1f} us (source model "
                     f"{info['estimate_source_us']:.1f} us; {LABEL})")
    lines += precision_lines(info.get("precision") or {})
    lines += [info["layout"]] if info.get("layout") else []
    lines.append(f"{'variant':<16}{'inputs':<34}{'arena':>12}{'lower bound':>14}{'streams':>9}")
    for v in info["variants"]:
        shapes = ", ".join(f"{x['name']}{x['type'][x['type'].index('['):]}" for x in v["inputs"])
        m = v["memory"]
        lines.append(f"{v['name']:<16}{shapes:<34}{mib(m.get('arena', 0)):>12}"
                     f"{mib(m.get('lower_bound', 0)):>14}{v['streams']:>9}")
    lines += pipeline_lines(info.get("pipeline"))
    return "\n".join(lines)


def precheck_text(result: dict[str, Any], path: Path) -> str:
    s = result["summary"]
    unit = "layer" if result.get("framework") == "caffe" else "node"
    lines = [f"pre-check {result['result']} ({result.get('framework', 'onnx')}): "
             f"{s['supported']} of {s['nodes']} {unit}s supported ({s['op_types']} "
             f"{unit} types); wrote {path}"]
    for n in result["nodes"]:
        if n["result"] != "supported":
            lines.append(f"  {n['result']}: {unit} '{n['name']}' ({n['op']}): "
                         f"{n.get('reason', '')}")
    lines += [f"  error: {e['message']}" for e in result.get("errors", []) if not e.get("node")]
    return "\n".join(lines)
