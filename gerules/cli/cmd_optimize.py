"""``ge-rewrite optimize MODEL -o OUT.onnx``: optimize a model and write it back as ONNX.

Invariants:
- ``--target onnx`` (the default) writes only ops onnxruntime runs; ``--target npu`` may write
  fused ``ge.*`` ops (domain ``ge``), which only our runtime executes.
- The output is written atomically and never over the input; ``--report PATH`` writes the JSON
  report. A summary table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..errors import UsageError
from ..fileio import atomic_write, check_output_path
from ..onnx_io import save_model
from ..opt.optimize import optimize
from . import options, started, summary


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("optimize", help="optimize a model and write it as ONNX",
                       description="Rewrite a model with the rule library and write the "
                       "cheapest equivalent graph as ONNX.")
    p.add_argument("model", type=Path, help="model file (.onnx)")
    p.add_argument("-o", "--output", type=Path, required=True, help="output .onnx file")
    options.add_optimizer_flags(p, target="onnx")
    p.add_argument("--report", type=Path, metavar="PATH", help="write the JSON report here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_output_path(args.output, [args.model])
    if args.output.suffix.lower() != ".onnx":
        raise UsageError(f"{args.output}: the output of optimize is an .onnx file")
    if args.report:
        check_output_path(args.report, [args.model, args.output])
    opts = options.optimize_options(args)
    start = time.perf_counter()
    graph = options.load_with_shapes(args)
    phases = {"start": start - started(), "load": time.perf_counter() - start}
    result, report = optimize(graph, opts)
    phases.update(report.phases)
    start = time.perf_counter()
    save_model(result, args.output)
    if args.report:
        atomic_write(args.report, json.dumps(report.to_json(), indent=1).encode())
    phases["write"] = time.perf_counter() - start
    print(summary.optimize_summary(report, phases))
    print(f"wrote {args.output}")
    return 0
