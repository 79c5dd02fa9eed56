"""``ge-rewrite compile MODEL.onnx --output NAME``: compile a model into ``NAME.om``.

Invariants:
- The command is three steps: load (``gerules.onnx_io.load_model``), ``OPTIMIZE`` (a hook;
  the identity until the optimizer plugs in), build (``gerules.build.build_om``).
- ``--input-shape`` (atc's ``--input_shape``) fixes symbolic input dims; any symbolic dim left
  is 1, with a warning, because a .om needs static shapes.
- ``NAME.om`` is written atomically; ``NAME`` may already end in ``.om``. The summary (memory
  figures per variant) goes to stdout; the file records the command line (normalised from the
  parsed arguments) and the options.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..build import BuildResult, build_om
from ..ir.graph import Graph
from ..onnx_io import DEFAULT_MAX_TENSOR_BYTES, load_model
from . import feeds

Optimize = Callable[[Graph, argparse.Namespace], tuple[Graph, Mapping[str, Any]]]


def _no_optimization(graph: Graph, args: argparse.Namespace) -> tuple[Graph, Mapping[str, Any]]:
    return graph, {}


# The optimizer step; replaced when ``ge-rewrite optimize`` exists.
OPTIMIZE: Optimize = _no_optimization


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compile", help="compile a model into a .om offline model",
                       description="Load a model, plan its memory and write NAME.om.")
    p.add_argument("model", type=Path, help="model file (.onnx)")
    p.add_argument("--output", required=True, metavar="NAME", help="write NAME.om")
    p.add_argument("--input-shape", "--input_shape", action="append", default=[],
                   metavar="NAME:D0,D1,...", help="fix the shape of an input ('a:1,3;b:2' or "
                   "repeated); symbolic dims not given are 1")
    p.add_argument("--streams", type=int, default=1, metavar="N",
                   help="run independent branches on N streams (default 1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    graph = load_model(args.model, max_bytes=DEFAULT_MAX_TENSOR_BYTES)
    dims = bound_dims(graph, feeds.parse_shape_specs(args.input_shape))
    graph, report = OPTIMIZE(graph, args)
    output = Path(args.output if args.output.endswith(".om") else f"{args.output}.om")
    result = build_om(graph, output, options=_options(args), report=report,
                      command_line=command_line(args), streams=args.streams, dims=[dims])
    print(summary(result))
    return 0


def bound_dims(graph: Graph, given: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """Symbolic input dim -> size, from ``--input-shape`` (1 where not given)."""
    shapes = feeds.concrete_shapes(graph.inputs, given)
    dims: dict[str, int] = {}
    for v in graph.inputs:
        for d, n in zip(v.shape or (), shapes[v.name], strict=False):
            if isinstance(d, str):
                dims.setdefault(d, n)
    return dims


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {"streams": args.streams, "input_shape": list(args.input_shape)}


def command_line(args: argparse.Namespace) -> str:
    words = ["ge-rewrite", "compile", str(args.model), "--output", args.output]
    for spec in args.input_shape:
        words += ["--input_shape", spec]
    if args.streams != 1:
        words += ["--streams", str(args.streams)]
    return shlex.join(words)


def summary(result: BuildResult) -> str:
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


def mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"
