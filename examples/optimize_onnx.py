"""Parse an ONNX model, optimize it for the NPU and print what the optimizer did.

    python examples/optimize_onnx.py [MODEL.onnx] [--input-shape "x:1,3,224,224"]

Without a model it writes a small residual network (built with onnx.helper, random weights)
to a temporary file and uses that. The report lists the op counts before and after, every
fusion with the rule that made it and the nodes it replaced, rules that matched but were not
applied (with the guard's reason) and the cost model's latency estimate.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import onnx

import gerules as ge
from gerules.testing.models import residual_block


def print_report(report: ge.OptimizeReport) -> None:
    before, after = report.estimate_before.total_us, report.estimate_after.total_us
    print(f"{report.level} for {report.soc}: {report.nodes_before} -> {report.nodes_after} "
          f"nodes, estimated {before:.1f} -> {after:.1f} us ({before / max(after, 1e-9):.2f}x)")
    for op in sorted(set(report.ops_before) | set(report.ops_after)):
        print(f"  {op:<22} {report.ops_before.get(op, 0):>4} -> {report.ops_after.get(op, 0)}")
    print(f"fusions ({len(report.fusions)}):")
    for fusion in report.fusions:
        replaced = ", ".join(f"{node} ({op})" for node, op in fusion.replaced)
        print(f"  {fusion.node} = {fusion.op} by {fusion.rule}, replacing {replaced}")
    for rule, reasons in report.rejected().items():
        for reason, count in reasons.items():
            print(f"  matched, not applied: {rule} x{count}: {reason}")
    print(f"saturation: {report.stop_reason} after {report.iterations} iterations")
    for warning in report.warnings:
        print(f"warning: {warning}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, nargs="?", help="an .onnx file (default: a demo)")
    parser.add_argument("--input-shape", help="atc-style shapes, e.g. 'x:1,3,224,224'")
    parser.add_argument("--opt-level", default="O2", choices=["O0", "O1", "O2", "O3"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gerules-example-") as tmp:
        model = args.model
        if model is None:
            model = Path(tmp) / "residual.onnx"
            onnx.save(residual_block(batch=1).model, str(model))
        graph = ge.parse_model(model, input_shape=args.input_shape)
        print(f"parsed {model.name}: inputs " + ", ".join(
            f"{v.name} {v.type}" for v in graph.inputs))
        optimized, report = ge.optimize(graph, ge.OptimizeOptions(opt_level=args.opt_level))
        print_report(report)
        print("optimized graph outputs:", ", ".join(str(v.type) for v in optimized.outputs))


if __name__ == "__main__":
    main()
