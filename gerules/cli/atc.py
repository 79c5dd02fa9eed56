"""atc compatibility for ``ge-rewrite compile``: frameworks, modes 1/3/6, flags we lack.

Invariants:
- ``route(argv)``: a command line that starts with an atc flag (``--model=...``,
  ``--mode=...``, ``--om=...``, ``--framework=...``), after any global flags, is a ``compile``
  command line, so ``ge-rewrite --model=m.onnx --framework=5 --output=m`` works as atc's does.
  Every other command line is returned unchanged.
- An atc flag we do not implement is accepted by the parser only to fail with one line that
  names it and says what to do instead (exit 2), never argparse's generic text.
- Importing this module is cheap (``main`` imports it for ``route``); the work imports lazily.
- ``--mode``: 0 compile; 1 ``.om`` -> JSON (``inspect``'s document, to ``--json FILE`` or
  stdout); 3 pre-check only, writing ``--check_report`` (default ``check_result.json``);
  6 model information of a ``.om``. Other values name what is not supported.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..fileio import atomic_write, check_output_path

ATC_START = ("--model", "--om", "--mode", "--framework", "--weight", "--singleop", "--rules")
GLOBAL = ("--debug", "--log", "--quiet", "-q")  # ge-rewrite's own flags, before a command
MODES = {"0": "compile", "1": "om to json", "3": "pre-check", "6": "model info"}

# atc flags without an equivalent here, each with what to do instead.
UNSUPPORTED: dict[str, str] = {
    "--insert_op_conf": "AIPP preprocessing is not implemented; put it in the model",
    "--input_fp16_nodes": "inputs keep their dtype; cast in the model",
    "--is_input_adjust_hw_layout": "no layout transforms on inputs",
    "--is_output_adjust_hw_layout": "no layout transforms on outputs",
    "--output_type": "outputs keep their dtype (see --precision_mode)",
    "--op_name_map": "custom op mappings are not implemented",
    "--customize_dtypes": "use --keep_dtype or --modify_mixlist",
    "--precision_mode_v2": "use --precision_mode",
    "--op_precision_mode": "use --precision_mode",
    "--auto_tune_mode": "no tuning; the cost model picks the graph",
    "--enable_compress_weight": "weights are stored as they are",
    "--compress_weight_conf": "weights are stored as they are",
    "--enable_scope_fusion_passes": "TensorFlow scope fusion does not apply to ONNX",
    "--singleop": "single-op compilation is not implemented",
    "--external_weight": "weights are always in the .om's memory-mapped section",
    "--op_debug_level": "kernels are NumPy; nothing to debug-compile",
    "--dump_mode": "use 'ge-rewrite inspect' on the .om",
    "--debug_dir": "use 'ge-rewrite inspect' on the .om",
    "--op_compiler_cache_mode": "nothing is compiled per op",
    "--op_compiler_cache_dir": "nothing is compiled per op",
    "--mdl_bank_path": "no tuning banks",
    "--op_bank_path": "no tuning banks",
    "--core_type": "the SoC profile (--soc_version) decides",
    "--virtual_type": "the SoC profile (--soc_version) decides",
    "--sparsity": "not implemented",
    "--compression_optimize_conf": "not implemented",
    "--shape_generalized_build_mode": "not implemented",
    "--status_check": "not implemented",
    "--atomic_clean_policy": "not implemented",
    "--deterministic": "every run here is deterministic",
    "--host_env_os": "the runtime is this machine's Python",
    "--host_env_cpu": "the runtime is this machine's Python",
    "--oo_level": "use --opt_level (O0-O3)",
    "--display_model_info": "use --mode=6 --om=NAME.om",
    "--save_original_model": "not implemented",
}


class _Unsupported(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        flag = option_string or self.dest
        parser.error(f"{flag} is an atc flag ge-rewrite does not support: "
                     f"{UNSUPPORTED.get(flag, 'not implemented')}")


def add_unsupported(p: argparse.ArgumentParser) -> None:
    for flag in UNSUPPORTED:
        p.add_argument(flag, nargs="?", action=_Unsupported, help=argparse.SUPPRESS)


def route(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``compile`` inserted when it starts like an atc command line.

    Global flags (``--debug``, ``--log LEVEL``) may come first; ``compile`` goes after them.
    """
    args = list(argv)
    k = 0
    while k < len(args) and args[k].split("=", 1)[0] in GLOBAL:
        k += 2 if args[k] == "--log" else 1
    if k >= len(args) or args[k].split("=", 1)[0] not in ATC_START:
        return args
    return [*args[:k], "compile", *args[k:]]


def framework(value: str | None, model: Path | None) -> str:
    """Our name of the model's format from ``--framework``, else from the model's path."""
    from ..frontends.formats import framework_name, framework_of

    return framework_of(model) if value is None else framework_name(value)


def mode(value: str) -> str:
    if value in MODES:
        return value
    if value == "5":
        raise UsageError("--mode=5 (pbtxt to JSON) is not supported: ONNX has no pbtxt form "
                         "here; use --mode=1 for a .om")
    raise UsageError(f"--mode: unknown value '{value}' (0 compile, 1 .om to JSON, 3 pre-check, "
                     "6 model info)")


def om_path(args: argparse.Namespace) -> Path:
    path = args.om or args.model_flag or args.model
    if path is None:
        raise UsageError(f"--mode={args.mode} needs the .om file: --om=NAME.om")
    return Path(path)


def om_to_json(args: argparse.Namespace) -> int:
    """``--mode=1``: the .om as JSON, like ``ge-rewrite inspect``."""
    from ..om.describe import describe
    from ..om.reader import OmFile

    with OmFile(om_path(args)) as om:
        doc = describe(om)
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    if args.json:
        atomic_write(check_output_path(args.json, [om_path(args)]), text.encode())
        print(f"wrote {args.json}")
    else:
        print(text)
    return 0


def model_info(args: argparse.Namespace) -> int:
    """``--mode=6``: what a .om holds, for people (and as JSON with ``--json``)."""
    from ..om.reader import OmFile
    from . import summary

    path = om_path(args)
    with OmFile(path) as om:
        info = summary.om_info(om)
    if args.json:
        atomic_write(check_output_path(args.json, [path]), json.dumps(info, indent=1).encode())
    print(summary.om_info_text(info))
    return 0


def pre_check(args: argparse.Namespace, model: Path, framework: str) -> int:
    """``--mode=3``: per-node support into ``--check_report``; exit 1 if anything fails."""
    from ..report import precheck
    from . import options, summary

    out = Path(args.check_report or "check_result.json")
    check_output_path(out, [model])
    shapes = options.input_shapes(args.input_shape)
    if framework == "caffe":
        result = precheck.precheck_caffe(model, args.weight, shapes)
    elif framework == "tensorflow":
        result = precheck.precheck_tensorflow(model, shapes, options.out_nodes(args.out_nodes))
    elif framework == "mindspore":
        result = precheck.precheck_mindir(model, shapes)
    else:
        result = precheck.precheck(_onnx_bytes(model, framework, shapes, args), str(model))
    atomic_write(out, json.dumps(result, indent=1).encode())
    print(summary.precheck_text(result, out))
    return 0 if result["result"] == "success" else 1


def _onnx_bytes(model: Path, framework: str, shapes: dict[str, tuple[int, ...]],
                args: argparse.Namespace) -> bytes:
    if framework == "pytorch":
        from ..frontends.torch import archive_onnx
        from . import options

        return archive_onnx(model, shapes, trust=args.trust_archive,
                            budgets=options.budgets(args))
    from ..onnx_io.load import read_file

    return read_file(model)
