"""Plain-text tables for the terminal: what an optimization did, what a build planned.

Invariant: pure functions from reports to text; nothing here prints.
"""

from __future__ import annotations

from ..build import BuildResult
from ..cost.model import LABEL
from ..opt.optimize import OptimizeReport


def mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


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
    lines += op_table(report) + [""] + rules_table(report) + [""]
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
