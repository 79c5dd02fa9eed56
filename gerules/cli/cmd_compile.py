"""``ge-rewrite compile MODEL --output NAME``: convert a model into ``NAME.om``.

Invariants:
- The work is ``gerules.compiler.compile_model``; this module only parses flags (atc's
  spellings and ours), loads the model and prints the summary.
- ``NAME.om`` is written atomically (``NAME`` may already end in ``.om``); ``--report PATH``
  writes the JSON report atomically too. The file records the exact command line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..compiler import CompileOptions, compile_model
from ..errors import UsageError
from ..fileio import atomic_write, check_output_path
from ..onnx_io import DEFAULT_MAX_TENSOR_BYTES, load_model
from . import options, summary


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compile", help="compile a model into a .om offline model",
                       description="Optimize a model for the NPU, plan its memory and write "
                       "NAME.om (atc's flag names are accepted).")
    p.add_argument("model", type=Path, nargs="?", help="model file (.onnx)")
    p.add_argument("--model", dest="model_flag", type=Path, help="model file (atc spelling)")
    p.add_argument("--output", required=True, metavar="NAME", help="write NAME.om")
    options.add_optimizer_flags(p, target="npu")
    p.add_argument("--dynamic_batch_size", "--dynamic-batch-size", metavar="B1,B2,...",
                   help="one plan per batch size (the batch dim is -1 in --input_shape)")
    p.add_argument("--streams", type=int, default=1, metavar="N",
                   help="run independent branches on N streams (default 1)")
    p.add_argument("--report", type=Path, metavar="PATH", help="write the JSON report here")
    p.set_defaults(func=run)


def model_path(args: argparse.Namespace) -> Path:
    path = args.model_flag or args.model
    if path is None:
        raise UsageError("compile: give the model file (MODEL or --model=MODEL)")
    if args.model_flag and args.model and args.model_flag != args.model:
        raise UsageError("compile: two different model files given")
    return Path(path)


def compile_options(args: argparse.Namespace) -> CompileOptions:
    switches = options.switches(args)
    if not 1 <= args.streams <= 64:
        raise UsageError(f"--streams must be between 1 and 64, got {args.streams}")
    return CompileOptions(
        opt_level=args.opt_level, soc_version=args.soc_version, target=args.target,
        input_shape=options.input_shapes(args.input_shape),
        dynamic_batch_size=batch_sizes(args.dynamic_batch_size),
        disabled=switches.off, enabled=switches.on, streams=args.streams)


def batch_sizes(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        sizes = tuple(int(b) for b in text.split(","))
    except ValueError:
        raise UsageError(f"--dynamic_batch_size: expected sizes like '1,2,4', got '{text}'"
                         ) from None
    if any(b < 1 for b in sizes) or len(set(sizes)) != len(sizes):
        raise UsageError(f"--dynamic_batch_size: sizes must be distinct and positive: '{text}'")
    return sizes


def run(args: argparse.Namespace) -> int:
    source = model_path(args)
    output = Path(args.output if args.output.endswith(".om") else f"{args.output}.om")
    check_output_path(output, [source])
    if args.report:
        check_output_path(args.report, [source, output])
    opts = compile_options(args)
    graph = load_model(source, max_bytes=DEFAULT_MAX_TENSOR_BYTES)
    result = compile_model(graph, opts, output, command_line=args.command_line,
                           source=str(source))
    if args.report:
        atomic_write(args.report, json.dumps(result.report, indent=1).encode())
    print(summary.optimize_summary(result.optimize))
    print()
    print(summary.build_summary(result.build))
    return 0
