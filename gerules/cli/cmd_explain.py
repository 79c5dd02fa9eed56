"""``ge-rewrite explain MODEL [--node TEXT] [--rule NAME]``: why did (or didn't) it fuse?

Runs the optimizer exactly as ``optimize`` would (same flags) and prints, for every fusion,
the new node, the chain of rules behind it (earliest first) and the source nodes it replaced;
then, per rule, where it matched, applied and was kept in the graph, and the guards that
rejected its matches ("matched but not applied") with counts.
``--node`` keeps fusions whose new or replaced node names contain TEXT; ``--rule`` keeps one
rule's fusions and rejections. Nothing is written.

Invariant: the output is plain text on stdout, one fusion or one reason per line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..opt.optimize import OptimizeReport, optimize
from ..opt.provenance import Fusion
from . import options


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("explain", help="explain which rules fused what, and why others did "
                       "not apply", description="Optimize a model (nothing is written) and "
                       "explain each fusion and each rejected match.")
    p.add_argument("model", type=Path, help="model file (.onnx)")
    p.add_argument("--node", metavar="TEXT", help="only fusions of nodes whose name has TEXT")
    p.add_argument("--rule", metavar="NAME", help="only this rule's fusions and rejections")
    options.add_optimizer_flags(p, target="npu")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    opts = options.optimize_options(args)
    _, report = optimize(options.load_with_shapes(args), opts)
    print("\n".join(explain_lines(report, args.node, args.rule)))
    return 0


def explain_lines(report: OptimizeReport, node: str | None, rule: str | None) -> list[str]:
    fusions = [f for f in report.fusions if _keep(f, node, rule)]
    lines = [f"{len(fusions)} fusion(s) at {report.level} for {report.target}"
             + (f" matching '{node}'" if node else "") + ":"]
    for f in fusions:
        replaced = ", ".join(f"{n} ({op})" for n, op in f.replaced) or "nothing"
        lines.append(f"  {f.node} ({f.op}) <- {' -> '.join(f.chain or (f.rule,))}; "
                     f"replaces {replaced}")
    stats = {r: s for r, s in report.rules.items() if rule is None or r == rule}
    lines.append("rules (places matched / applied / kept in the graph):" if stats
                 else "no rule matched")
    for name, s in sorted(stats.items(), key=lambda kv: (-kv[1]["kept"], kv[0])):
        lines.append(f"  {name}: {s['matches']} / {s['applied']} / {s['kept']}")
    rejected = {r: reasons for r, reasons in report.rejected().items() if r in stats}
    lines.append("matched but not applied:" if rejected else "no rule was rejected by a guard")
    for name, reasons in sorted(rejected.items()):
        for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {name} ({count}x): {reason}")
    if report.warnings:
        lines += [f"warning: {w}" for w in report.warnings]
    return lines


def _keep(f: Fusion, node: str | None, rule: str | None) -> bool:
    if rule is not None and rule not in (f.rule, *f.chain):
        return False
    if node is None:
        return True
    return node in f.node or any(node in n for n, _ in f.replaced)
