"""``ge-rewrite compile MODEL --output NAME``: convert a model into ``NAME.om`` (atc's job).

Invariants:
- The work is ``gerules.compiler.compile_model``; this module parses flags (atc's spellings
  and ours, see ``atc`` for modes 1/3/6 and the atc flags we lack), loads the model (ONNX, or
  PyTorch through ``gerules.frontends.torch``) and prints the summary.
- Every flag value is checked before the model is loaded; a bad one is one line, exit 2.
- ``NAME.om`` is written atomically (``NAME`` may already end in ``.om``), and atc's
  ``fusion_result.json`` next to it; ``--report X.html`` writes the HTML page and ``X.json``
  beside it, ``--report X.json`` only the JSON; the file records the exact command line. A
  short summary goes to stdout, progress to stderr (only on a terminal).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..compiler import CompileOptions, compile_model
from ..errors import ModelError, ResourceLimit, UsageError, visible
from ..fileio import atomic_write, check_output_path
from ..ir.graph import Graph
from ..onnx_io import load_model
from . import atc, options, started, summary
from .progress import Progress

log = logging.getLogger(__name__)

FUSION_RESULT = "fusion_result.json"  # atc's statistics file, written next to the .om


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compile", help="compile a model into a .om offline model",
                       description="Optimize a model for the NPU, plan its memory and write "
                       "NAME.om. atc's flag names are accepted (docs/CONVERTING.md).")
    p.add_argument("model", type=Path, nargs="?",
                   help="model file (.onnx, .pt/.pt2, .prototxt, .mindir, .pb or a SavedModel "
                   "folder)")
    p.add_argument("--model", dest="model_flag", type=Path, metavar="MODEL",
                   help="model file (atc spelling)")
    p.add_argument("--output", metavar="NAME", help="write NAME.om")
    p.add_argument("--framework", metavar="F",
                   help="0 = Caffe (.prototxt), 1 = MindSpore (.mindir), 3 = TensorFlow "
                   "(frozen .pb or SavedModel folder), 5 = ONNX, pytorch = TorchScript or "
                   "torch.export archive (.pt/.pt2); default: by the model's extension")
    p.add_argument("--weight", type=Path, metavar="FILE",
                   help="--framework=0: the .caffemodel with the net's weights")
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
    p.add_argument("--dynamic_image_size", metavar="H,W;H,W",
                   help="one plan per image size (height and width are -1 in --input_shape)")
    p.add_argument("--dynamic_dims", metavar="D,D;D,D",
                   help="one plan per gear: a size for each -1 of --input_shape, in order")
    p.add_argument("--input_shape_range", metavar="NAME:[LO~HI],D,...",
                   help="dims in ranges: compiled symbolically, one plan per range bucket")
    p.add_argument("--fix_batch_dims", action="store_true",
                   help="rewrite Reshape targets that hard-code the exported batch size (each "
                   "gear is checked by shape inference)")
    p.add_argument("--streams", type=int, default=1, metavar="N",
                   help="run independent branches on N streams (default 1)")
    p.add_argument("--partitions", type=int, default=0, metavar="K",
                   help="cut the model into K pipeline stages, one per device (run it with "
                   "'run --devices K')")
    p.add_argument("--partition_by", default="cost", metavar="depth|memory|cost",
                   help="how stages are cut: equal layers (depth), under --device_memory "
                   "(memory), or the fastest slowest stage by the cost model (cost, default)")
    p.add_argument("--device_memory", metavar="SIZE",
                   help="memory of one device (e.g. 8G): every stage's weights and "
                   "activations must fit; with --partition_by memory and no --partitions, "
                   "the fewest stages that fit")
    p.add_argument("--micro_batches", type=int, default=8, metavar="M",
                   help="micro-batches in the pipeline schedule's estimate (default 8)")
    p.add_argument("--enable_single_stream", metavar="true|false",
                   help="atc spelling: true means --streams 1")
    p.add_argument("--report", type=Path, metavar="PATH",
                   help="X.html: the HTML report and X.json beside it; X.json: JSON only")
    p.add_argument("--save_onnx", action="store_true",
                   help="also write the graph compiled into the .om as NAME.optimized.onnx "
                   "beside it (Netron opens it; fused ops are in domain 'ge')")
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
        **dynamic_shapes(args),
        disabled=switches.off, enabled=switches.on, streams=streams,
        rules=options.rules_of(args), **partition_options(args),
        **options.conversion_options(args))
    opts.check()
    return opts


def partition_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--partitions``, ``--partition_by``, ``--device_memory``, ``--micro_batches``."""
    from ..partition import parse_bytes

    memory = parse_bytes(args.device_memory) if args.device_memory else None
    return {"partitions": args.partitions, "partition_by": args.partition_by,
            "device_memory": memory, "micro_batches": args.micro_batches}


def dynamic_shapes(args: argparse.Namespace) -> dict[str, Any]:
    """``--dynamic_image_size``, ``--dynamic_dims``, ``--input_shape_range`` and
    ``--fix_batch_dims`` as ``CompileOptions`` fields."""
    from .. import gears

    out: dict[str, Any] = {"fix_batch_dims": args.fix_batch_dims}
    for mode in ("dynamic_image_size", "dynamic_dims"):
        text = getattr(args, mode)
        if text:
            out[mode] = tuple(gears.gear_values(mode, text, text.split(";")[0].count(",") + 1))
    if args.input_shape_range:
        shapes, ranges = gears.parse_ranges(args.input_shape_range)
        out["input_shape_range"] = {
            name: tuple(ranges.get((name, k), d) for k, d in enumerate(dims))
            for name, dims in shapes.items()}
    return out


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
    if args.weight is not None and framework != "caffe":
        raise UsageError("--weight is the Caffe .caffemodel; it needs --framework=0")
    if mode == "3":
        return atc.pre_check(args, source, framework)
    return _compile(args, source, framework)


def _output(args: argparse.Namespace) -> Path:
    if not args.output:
        raise UsageError("compile: --output NAME is required (writes NAME.om)")
    name = args.output
    if name.endswith(("/", os.sep)) or Path(name).name in ("", ".", "..", ".om"):
        raise UsageError(f"--output {visible(name[:200])!r}: give a file name, e.g. "
                         "'out/model' (writes out/model.om), not a folder")
    return Path(name if name.endswith(".om") else f"{name}.om")


def _compile(args: argparse.Namespace, source: Path, framework: str) -> int:
    output = _output(args)
    check_output_path(output, [source])
    fusion_json = check_output_path(output.parent / FUSION_RESULT, [source, output])
    onnx_out = (check_output_path(output.with_suffix(".optimized.onnx"), [source, output])
                if args.save_onnx else None)
    if args.report:
        from ..report import report_paths

        for path in report_paths(args.report):
            if path is not None:
                check_output_path(path, [source, output])
    opts = compile_options(args)
    with Progress() as progress:
        progress(f"load {framework} model")
        start = time.perf_counter()
        graph = _load(source, framework, opts, args)
        loaded = {"start": start - started(), "load": time.perf_counter() - start}
        log.debug("phase load: %.3f s (%s)", loaded["load"], source)
        if framework == "tensorflow":
            opts = _tensorflow_options(opts, graph)
        try:
            result = compile_model(graph, opts, output, command_line=args.command_line,
                                   source=str(source), framework=framework,
                                   progress=progress, phases=loaded)
        except (ModelError, ResourceLimit) as e:  # found in the model after loading it
            raise e.with_place(file=str(source))
        written: list[Path] = [result.path]  # renamed into place with the others at the end
        phases = dict(result.phases)
        start = time.perf_counter()
        written += _write_report(args, result, progress) if args.report else []
        written.append(_write_fusion_result(fusion_json, result.report))
        if onnx_out is not None:
            from ..onnx_io import save_model

            written.append(save_model(result.graph, onnx_out))
        phases["report"] = time.perf_counter() - start
        progress.close()
        print(summary.conversion_summary(result.report, phases))
        print(f"wrote {result.path} ({summary.mib(result.build.size)}, "
              f"{len(result.build.variants)} variant(s))")
        for path in written[1:]:
            print(f"wrote {path}")
        sys.stdout.flush()
    return 0


def _load(source: Path, framework: str, opts: CompileOptions, args: argparse.Namespace
          ) -> Graph:
    budgets = options.budgets(args)
    if framework == "pytorch":
        from ..frontends.torch import convert_archive

        batch = min(opts.dynamic_batch_size or (1,))
        return convert_archive(source, opts.input_shape, batch=batch,
                               trust=args.trust_archive, budgets=budgets)
    if framework != "onnx":
        from ..frontends.formats import load

        return load(source, framework, opts.input_shape, weight=args.weight,
                    out_nodes=options.out_nodes(args.out_nodes))
    return load_model(source, budgets=budgets)


def _tensorflow_options(opts: CompileOptions, graph: Graph) -> CompileOptions:
    """atc's TF defaults: shapes by the graph's names, NHWC; out_nodes done by tf2onnx."""
    from ..frontends.tensorflow import graph_shapes

    fmt = opts.input_format or ("NHWC" if any(v.type.rank == 4 for v in graph.inputs) else "")
    return dataclasses.replace(opts, input_shape=graph_shapes(opts.input_shape), out_nodes=(),
                               input_format=fmt)


def _write_fusion_result(path: Path, report: dict[str, Any]) -> Path:
    """atc's ``fusion_result.json`` (``report.fusion_result``), next to the ``.om``."""
    from ..report.fusion_result import fusion_result

    data = fusion_result(report["optimize"]["rules"])
    return atomic_write(path, json.dumps(data, indent=4).encode())


def _write_report(args: argparse.Namespace, result: object, progress: Progress) -> list[Path]:
    from ..report import conversion_report, write_report

    progress("write the report")
    report = conversion_report(result, command_line=args.command_line)  # type: ignore[arg-type]
    return write_report(args.report, report)
