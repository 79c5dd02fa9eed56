"""Plain-text tables for the terminal: what an optimization did, what a build planned.

Invariant: pure functions from reports to text; nothing here prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..build import BuildResult
from ..cost.model import LABEL
from ..memory.plan import weights_bytes
from ..om.reader import OmFile
from ..opt.optimize import OptimizeReport


def mib(n: int) -> str:
    """A byte count for people: KiB below 1 MiB, else MiB (GiB from 10 GiB)."""
    if n >= 10 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    return f"{n / (1 << 20):.2f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


def op_table(report: OptimizeReport) -> list[str]:
    ops = sorted(set(report.ops_before) | set(report.ops_after),
                 key=lambda op: (-report.ops_before.get(op, 0), op))
    width = max([len(op) for op in ops] + [8])
    before, after = report.estimate_before.by_op, report.estimate_after.by_op
    lines = [f"{'op':<{width}}  {'before':>6}  {'after':>6}  {'est. us before':>14}  "
             f"{'est. us after':>13}"]
    for op in ops:
        lines.append(f"{op:<{width}}  {report.ops_before.get(op, 0):>6}  "
                     f"{report.ops_after.get(op, 0):>6}  {before.get(op, 0.0):>14.1f}  "
                     f"{after.get(op, 0.0):>13.1f}")
    lines.append(f"{'total':<{width}}  {report.nodes_before:>6}  {report.nodes_after:>6}  "
                 f"{report.estimate_before.total_us:>14.1f}  "
                 f"{report.estimate_after.total_us:>13.1f}")
    return lines


def rules_table(report: OptimizeReport) -> list[str]:
    applied = {k: v for k, v in report.rules.items() if v.get("applied")}
    if not applied:
        return ["rules applied: none"]
    width = max(len(k) for k in applied)
    lines = [f"{'rule':<{width}}  {'applied':>7}  {'matched':>7}"]
    for name, stats in sorted(applied.items(), key=lambda kv: -kv[1]["applied"]):
        lines.append(f"{name:<{width}}  {stats['applied']:>7}  {stats['matches']:>7}")
    return lines


def optimize_summary(report: OptimizeReport) -> str:
    speedup = report.estimate_before.total_us / max(report.estimate_after.total_us, 1e-9)
    lines = [f"optimized at {report.level} for {report.target} ({report.soc}): "
             f"{report.nodes_before} -> {report.nodes_after} nodes, "
             f"{report.estimate_before.total_us:.1f} -> {report.estimate_after.total_us:.1f} us "
             f"({speedup:.2f}x, {LABEL})", ""]
    lines += op_table(report) + [""] + rules_table(report) + fusion_lines(report) + [""]
    lines.append(f"saturation: {report.stop_reason} after {report.iterations} iterations, "
                 f"{report.egraph_nodes} e-nodes (limits: {report.limits.get('iterations')} "
                 f"iterations, {report.limits.get('nodes')} e-nodes, "
                 f"{report.limits.get('seconds')} s)")
    phases = ", ".join(f"{k} {v:.2f} s" for k, v in report.phases.items())
    lines.append(f"time: {phases}")
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def build_summary(result: BuildResult) -> str:
    size = result.path.stat().st_size
    lines = [f"wrote {result.path} ({mib(size)}, {len(result.variants)} variant(s), "
             f"{result.seconds:.2f} s)",
             f"{'variant':<12}{'no reuse':>12}{'lower bound':>14}{'arena':>12}{'weights':>12}"]
    for v in result.variants:
        f = v.plan.figures
        if f is not None:
            lines.append(f"{v.name:<12}{mib(f.no_reuse):>12}{mib(f.lower_bound):>14}"
                         f"{mib(f.arena):>12}{mib(f.weights):>12}")
    return "\n".join(lines)


def precision_summary(precision: dict[str, Any]) -> str:
    """One to three lines on what the precision mode did (or what float16 would save)."""
    mode, est = precision.get("mode", ""), precision.get("estimate", {})
    if "estimated_us_fp16" in est:
        return (f"precision: {mode} (nothing changed dtype); force_fp16 would take "
                f"{est['estimated_us_fp16']:.1f} instead of {est['estimated_us']:.1f} us "
                f"(estimate) and halve the weights to {mib(est.get('weights_bytes_fp16', 0))}")
    lines = [f"precision: {mode}: {precision.get('nodes_converted', 0)} nodes in "
             f"{precision.get('target_dtype')}, {len(precision.get('kept', []))} kept in "
             f"{precision.get('source_dtype')}, {precision.get('casts_after_rules', 0)} Casts, "
             f"{est.get('estimated_us_before', 0):.1f} -> {est.get('estimated_us_after', 0):.1f} "
             "us (estimate)"]
    for e in precision.get("error", {}).get("outputs", []):
        lines.append(f"  output {e['output']}: max abs error {_sci(e['max_abs'])}, max rel "
                     f"{_sci(e['max_rel'])} against float32 (measured, random inputs)")
    if precision.get("weight_saturated"):
        lines.append(f"  warning: {precision['weight_saturated']} weight values were beyond "
                     "float16's range and saturated to +-65504")
    return "\n".join(lines)


def _sci(x: float | None) -> str:
    return "inf" if x is None else f"{x:.2e}"


def fusion_lines(report: OptimizeReport, limit: int = 8) -> list[str]:
    """The fusions, most frequent rule first (the full list is in the report)."""
    by_rule: dict[str, int] = {}
    for f in report.fusions:
        by_rule[f.rule] = by_rule.get(f.rule, 0) + 1
    rejected = sum(sum(r.values()) for r in report.rejected().values())
    items = sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{rule} x{n}" for rule, n in items[:limit])
    more = f", ... ({len(items) - limit} more rules)" if len(items) > limit else ""
    return [f"fusions: {len(report.fusions)}" + (f" ({text}{more})" if text else ""),
            f"matched but not applied: {rejected} (guard reasons in the report)"]


def om_info(om: OmFile) -> dict[str, Any]:
    """``--mode=6``: what a .om holds (plain data)."""
    c, report = om.contents, om.report()
    options = dict(c.compile_options)
    return {
        "file": om.path, "bytes": om.header.file_size,
        "format_version": f"{om.header.major}.{om.header.minor}", "producer": c.producer,
        "soc_version": c.soc_version, "command_line": c.command_line,
        "framework": report.get("framework", "onnx"),
        "opt_level": options.get("opt_level"), "precision_mode": options.get("precision_mode"),
        "inputs": [{"name": v.name, "type": str(v.type)} for v in c.graph.inputs],
        "outputs": [{"name": v.name, "type": str(v.type)} for v in c.graph.outputs],
        "nodes": len(c.graph.nodes), "ops": c.graph.op_counts(),
        "weights_bytes": weights_bytes(c.graph),
        "variants": [{"name": v.name, "dims": dict(v.dims), "streams": v.plan.stream_count,
                      "inputs": [{"name": x.name, "type": str(x.type)} for x in v.graph.inputs],
                      "memory": v.plan.figures.to_json() if v.plan.figures else {}}
                     for v in c.variants],
        "estimate_us": report.get("optimize", {}).get("estimate", {}).get("after", {})
        .get("total_us"),
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
        lines.append(f"latency: {info['estimate_us']:.1f} us ({LABEL})")
    lines.append(f"{'variant':<16}{'inputs':<34}{'arena':>12}{'lower bound':>14}{'streams':>9}")
    for v in info["variants"]:
        shapes = ", ".join(f"{x['name']}{x['type'][x['type'].index('['):]}" for x in v["inputs"])
        m = v["memory"]
        lines.append(f"{v['name']:<16}{shapes:<34}{mib(m.get('arena', 0)):>12}"
                     f"{mib(m.get('lower_bound', 0)):>14}{v['streams']:>9}")
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
