"""``ge-rewrite compile MODEL --output NAME``: convert a model into ``NAME.om`` (atc's job).

Invariants:
- The work is ``gerules.compiler.compile_model``; this module parses flags (atc's spellings
  and ours, see ``atc`` for modes 1/3/6 and the atc flags we lack), loads the model (ONNX, or
  PyTorch through ``gerules.frontends.torch``) and prints the summary.
- Every flag value is checked before the model is loaded; a bad one is one line, exit 2.
- ``NAME.om`` is written atomically (``NAME`` may already end in ``.om``); ``--report X.html``
  writes the HTML page and ``X.json`` beside it, ``--report X.json`` only the JSON; the file
  records the exact command line. A short summary goes to stdout, progress to stderr (only on
  a terminal).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..compiler import CompileOptions, compile_model
from ..errors import ModelError, ResourceLimit, UsageError
from ..fileio import check_output_path
from ..ir.graph import Graph
from ..onnx_io import DEFAULT_MAX_TENSOR_BYTES, load_model
from ..onnx_io.load import read_file
from . import atc, options, summary
from .progress import Progress


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compile", help="compile a model into a .om offline model",
                       description="Optimize a model for the NPU, plan its memory and write "
                       "NAME.om. atc's flag names are accepted (docs/CONVERTING.md).")
    p.add_argument("model", type=Path, nargs="?", help="model file (.onnx, or .pt/.pt2)")
    p.add_argument("--model", dest="model_flag", type=Path, metavar="MODEL",
                   help="model file (atc spelling)")
    p.add_argument("--output", metavar="NAME", help="write NAME.om")
    p.add_argument("--framework", metavar="F",
                   help="5 = ONNX (default for .onnx), pytorch = TorchScript or torch.export "
                   "archive (default for .pt/.pt2)")
    p.add_argument("--trust_archive", "--trust-archive", action="store_true",
                   help="PyTorch archives: also accept TorchScript and pickled modules, which "
                   "run their own code when loaded; the conversion then runs in a separate, "
                   "limited process (docs/SECURITY.md). Only for archives you trust")
    p.add_argument("--mode", default="0", metavar="M",
                   help="0 compile (default), 1 .om to JSON, 3 pre-check only, 6 .om info")
    p.add_argument("--om", type=Path, metavar="NAME.om", help="the .om for --mode 1 and 6")
    p.add_argument("--json", type=Path, metavar="FILE", help="--mode 1/6: write JSON here")
    p.add_argument("--check_report", type=Path, metavar="FILE",
                   help="--mode 3: the report file (default check_result.json)")
    options.add_optimizer_flags(p, target="npu")
    options.add_conversion_flags(p)
    p.add_argument("--dynamic_batch_size", "--dynamic-batch-size", metavar="B1,B2,...",
                   help="one plan per batch size (the batch dim is -1 in --input_shape)")
    p.add_argument("--streams", type=int, default=1, metavar="N",
                   help="run independent branches on N streams (default 1)")
    p.add_argument("--enable_single_stream", metavar="true|false",
                   help="atc spelling: true means --streams 1")
    p.add_argument("--report", type=Path, metavar="PATH",
                   help="X.html: the HTML report and X.json beside it; X.json: JSON only")
    p.add_argument("--log", choices=options.LOG_LEVELS, default=argparse.SUPPRESS,
                   help="log level (atc's --log; also accepted before 'compile')")
    atc.add_unsupported(p)
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
    streams = options.stream_count(args.streams, args.enable_single_stream)
    opts = CompileOptions(
        opt_level=args.opt_level, soc_version=args.soc_version, target=args.target,
        input_shape=options.input_shapes(args.input_shape),
        dynamic_batch_size=batch_sizes(args.dynamic_batch_size),
        disabled=switches.off, enabled=switches.on, streams=streams,
        rules=options.rules_of(args), **options.conversion_options(args))
    opts.check()
    return opts


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
    mode = atc.mode(str(args.mode))
    if mode == "1":
        return atc.om_to_json(args)
    if mode == "6":
        return atc.model_info(args)
    source = model_path(args)
    framework = atc.framework(args.framework, source)
    if mode == "3":
        return atc.pre_check(args, source, _onnx_bytes(source, framework, args))
    return _compile(args, source, framework)


def _output(args: argparse.Namespace) -> Path:
    if not args.output:
        raise UsageError("compile: --output NAME is required (writes NAME.om)")
    return Path(args.output if args.output.endswith(".om") else f"{args.output}.om")


def _compile(args: argparse.Namespace, source: Path, framework: str) -> int:
    output = _output(args)
    check_output_path(output, [source])
    if args.report:
        from ..report import report_paths

        for path in report_paths(args.report):
            if path is not None:
                check_output_path(path, [source, output])
    opts = compile_options(args)
    with Progress() as progress:
        progress(f"load {framework} model")
        graph = _load(source, framework, opts, args.trust_archive)
        try:
            result = compile_model(graph, opts, output, command_line=args.command_line,
                                   source=str(source), progress=progress)
        except (ModelError, ResourceLimit) as e:  # found in the model after loading it
            raise e.with_place(file=str(source))
        written = _write_report(args, result, progress) if args.report else []
    print(summary.optimize_summary(result.optimize))
    print(summary.precision_summary(result.report["precision"]))
    print()
    print(summary.build_summary(result.build))
    for path in written:
        print(f"wrote {path}")
    return 0


def _load(source: Path, framework: str, opts: CompileOptions, trust: bool) -> Graph:
    if framework == "pytorch":
        from ..frontends.torch import convert_archive

        batch = min(opts.dynamic_batch_size or (1,))
        return convert_archive(source, opts.input_shape, batch=batch, trust=trust)
    return load_model(source, max_bytes=DEFAULT_MAX_TENSOR_BYTES)


def _onnx_bytes(source: Path, framework: str, args: argparse.Namespace) -> bytes:
    if framework == "pytorch":
        from ..frontends.torch import archive_onnx

        return archive_onnx(source, options.input_shapes(args.input_shape),
                            trust=args.trust_archive)
    return read_file(source)


def _write_report(args: argparse.Namespace, result: object, progress: Progress) -> list[Path]:
    from ..report import conversion_report, write_report

    progress("write the report")
    report = conversion_report(result, command_line=args.command_line)  # type: ignore[arg-type]
    return write_report(args.report, report)
