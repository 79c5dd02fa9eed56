"""Flags shared by ``compile`` and ``optimize`` (atc's spellings and ours), parsed to options.

Invariants: every bad flag value is a ``UsageError`` naming the flag (exit 2); files named by
flags (fusion switches, mixed-precision lists, keep_dtype) are read and checked here, before
any model is loaded.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from ..budgets import DEFAULT as DEFAULT_BUDGETS
from ..budgets import FLAGS as BUDGET_FLAGS
from ..budgets import Budgets
from ..compiler import fix_input_shapes
from ..cost import DEFAULT_SOC
from ..errors import UsageError
from ..ir.graph import Graph
from ..ir.registry import suggest
from ..ir.verify import verify
from ..onnx_io import load_model
from ..opt.optimize import LEVELS, TARGETS, OptimizeOptions, rule_library, switch_names
from ..opt.switches import ATC_NAMES, Switches, read_switch_file
from ..precision import (
    DEFAULT_CHECK,
    DEFAULT_MODE,
    MODES,
    KeepDtype,
    read_keep_dtype,
    read_mixlist,
)
from ..precision.policy import check_mode

log = logging.getLogger(__name__)


def add_optimizer_flags(p: argparse.ArgumentParser, *, target: str) -> None:
    p.add_argument("--opt_level", "--opt-level", default="O2", choices=LEVELS,
                   help="O0 nothing, O1 fold+simplify, O2 + fusions (default), O3 + larger "
                   "limits and ILP extraction")
    p.add_argument("--soc_version", "--soc-version", default=DEFAULT_SOC, metavar="SOC",
                   help=f"SoC profile for the cost model (default {DEFAULT_SOC})")
    p.add_argument("--target", default=target, choices=TARGETS,
                   help=f"npu: allow fused ge.* ops; onnx: only ops onnxruntime runs "
                   f"(default {target})")
    p.add_argument("--fusion_switch_file", "--fusion-switch-file", metavar="FILE",
                   help="rules/rulesets to switch off (atc JSON or NAME:off lines)")
    p.add_argument("--input_shape", "--input-shape", action="append", default=[],
                   metavar="NAME:D0,D1,...", help="fix input shapes ('a:1,3,224,224;b:1,8'; "
                   "-1 keeps a dim dynamic)")
    add_rules_flag(p)
    add_budget_flags(p)


def add_budget_flags(p: argparse.ArgumentParser, *, timeout: bool = True) -> None:
    """The budgets of ``gerules.budgets`` as flags (atc-style and dashed spellings)."""
    d = DEFAULT_BUDGETS
    for name, help_text in (("tensor_bytes", "bytes of one tensor"),
                            ("model_bytes", "bytes of all weights together"),
                            ("archive_bytes", "bytes an archive (.pt, .pt2) may expand to"),
                            ("nodes", "nodes of the graph"),
                            ("node_outputs", "outputs of one node"),
                            ("live_bytes", "bytes alive while running (arena and kernels)")):
        flag = BUDGET_FLAGS[name]
        p.add_argument(flag, flag.replace("_", "-"), dest=f"max_{name}",
                       type=positive_int, default=getattr(d, name), metavar="N",
                       help=f"refuse models that need more {help_text} (default "
                       f"{getattr(d, name)}; exit 3)")
    if timeout:
        p.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                       help="stop with exit 3 when the command runs longer than this")


def budgets(args: argparse.Namespace) -> Budgets:
    """The ``Budgets`` of ``add_budget_flags``'s flags (defaults where a command has none)."""
    fields = ("tensor_bytes", "model_bytes", "archive_bytes", "nodes", "node_outputs",
              "live_bytes")
    values = {f: getattr(args, f"max_{f}", getattr(DEFAULT_BUDGETS, f)) for f in fields}
    return Budgets(**values, seconds=getattr(args, "timeout", None))


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text[:40]!r}") from None
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def add_rules_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", action="append", default=[], metavar="PATH",
                   help="a .ger file or folder of your own rules, added to the shipped library "
                   "(repeatable; GERULES_RULES_PATH adds more, separated like PATH)")


def rules_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--rules`` paths of a command line (checked when the library loads)."""
    return tuple(str(p) for p in getattr(args, "rules", None) or ())


def optimize_options(args: argparse.Namespace) -> OptimizeOptions:
    """The optimizer's options from the shared flags (checked)."""
    sw = switches(args)
    opts = OptimizeOptions(opt_level=args.opt_level, soc_version=args.soc_version,
                           target=args.target, disabled=sw.off, enabled=sw.on,
                           rules=rules_of(args))
    opts.check()
    return opts


def load_with_shapes(args: argparse.Namespace) -> Graph:
    """The model of ``args.model``, with ``--input_shape`` applied (a batch dim may stay)."""
    graph = load_model(args.model, budgets=budgets(args))
    if not args.input_shape:
        return graph
    fixed, _ = fix_input_shapes(graph, input_shapes(args.input_shape), keep_batch=True)
    return verify(fixed)


def switches(args: argparse.Namespace) -> Switches:
    """The fusion switch file; unknown names are a warning on stderr and are dropped. The
    rule library (with the user's ``--rules``) is loaded here, so a mistake in a rule file
    is reported before any model is read."""
    library = rule_library(rules_of(args))
    if not args.fusion_switch_file:
        return Switches(frozenset(), frozenset())
    read = read_switch_file(args.fusion_switch_file)
    known = switch_names(library) | {"ALL"}
    for name in sorted((read.off | read.on) - known):
        log.warning("%s: unknown fusion switch '%s'%s (valid: 'ALL', the rulesets %s, the "
                    "rule names of 'ge-rewrite rules list', and the atc passes %s); ignored",
                    args.fusion_switch_file, name, suggest(name, known | set(ATC_NAMES)),
                    ", ".join(sorted(library.rulesets)), ", ".join(sorted(ATC_NAMES)))
    return Switches(read.off & known, read.on & known)


def input_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    """``["a:1,3;b:2"]`` -> ``{"a": (1, 3), "b": (2,)}``; -1 allowed (a dynamic dim)."""
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        for part in filter(None, (p.strip() for p in spec.split(";"))):
            name, sep, dims = part.rpartition(":")
            if not sep or not name:
                raise UsageError(f"--input_shape: expected NAME:D0,D1,... in '{part}'")
            try:
                values = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
            except ValueError:
                raise UsageError(f"--input_shape: dims must be integers in '{part}'") from None
            if any(d < -1 for d in values):
                raise UsageError(f"--input_shape: negative dim in '{part}' (-1 = dynamic)")
            out[name] = values
    return out


def add_conversion_flags(p: argparse.ArgumentParser) -> None:
    """atc's conversion flags: formats, outputs and precision."""
    p.add_argument("--input_format", metavar="FMT",
                   help="NCHW, NHWC or ND: checked against the inputs and recorded (the graph "
                   "is not changed; ONNX is NCHW)")
    p.add_argument("--out_nodes", metavar="NODE:K;...",
                   help="make these node outputs the graph outputs ('conv1:0;fc:0')")
    p.add_argument("--precision_mode", default=DEFAULT_MODE, metavar="MODE",
                   help=f"{', '.join(MODES)} (default {DEFAULT_MODE}; atc's default is "
                   "force_fp16)")
    p.add_argument("--modify_mixlist", metavar="FILE.json",
                   help="atc's black/white/gray list changes (allow_mix_precision only)")
    p.add_argument("--keep_dtype", metavar="FILE",
                   help="nodes (or OpType::Name) that keep their original dtype, one a line")
    p.add_argument("--op_select_implmode", default="high_precision", metavar="MODE",
                   help="high_precision (default: exact forms) or high_performance (fast "
                   "forms where the library has both, e.g. GELU tanh for erf)")
    p.add_argument("--optypelist_for_implmode", metavar="TYPE,...",
                   help="op types the implmode applies to (default: all that have two forms)")
    p.add_argument("--disable_reuse_memory", default="0", metavar="0|1",
                   help="1: every tensor gets its own block (debugging; atc's flag)")
    p.add_argument("--buffer_optimize", metavar="MODE",
                   help="atc's l1_optimize, l2_optimize or off_optimize: accepted and recorded; "
                   "no effect on this cost model")
    p.add_argument("--aicore_num", type=int, metavar="N",
                   help="AI cores to estimate with: scales the SoC profile's peaks")
    p.add_argument("--enable_small_channel", default="0", metavar="0|1",
                   help="atc's small-channel layout for the first conv: recorded; no effect "
                   "until layout formats exist")
    p.add_argument("--check_precision", default=DEFAULT_CHECK, metavar="off|quick|full",
                   help="measure the output error of a precision change: off, quick (default: "
                   "one draw when it is cheap) or full (every gear, several draws)")


def conversion_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``CompileOptions`` fields of ``add_conversion_flags`` (files read, checked)."""
    check_mode(args.precision_mode)
    return {
        "input_format": (args.input_format or "").upper(),
        "out_nodes": out_nodes(args.out_nodes),
        "precision_mode": args.precision_mode,
        "modify_mixlist": read_mixlist(args.modify_mixlist) if args.modify_mixlist else None,
        "keep_dtype": read_keep_dtype(args.keep_dtype) if args.keep_dtype else KeepDtype(),
        "check_precision": args.check_precision.strip().lower(),
        "aicore_num": args.aicore_num,
        "op_select_implmode": args.op_select_implmode.strip().lower(),
        "optypelist_for_implmode": tuple(t.strip() for t in (
            args.optypelist_for_implmode or "").split(",") if t.strip()),
        "reuse_memory": not switch("--disable_reuse_memory", args.disable_reuse_memory),
        "buffer_optimize": (args.buffer_optimize or "").strip().lower(),
        "enable_small_channel": switch("--enable_small_channel", args.enable_small_channel),
    }


def switch(flag: str, value: str) -> bool:
    """atc's 0/1 switches (also true/false)."""
    text = str(value).strip().lower()
    if text not in ("0", "1", "true", "false"):
        raise UsageError(f"{flag}: expected 0 or 1, got '{value}'")
    return text in ("1", "true")


def out_nodes(text: str | None) -> tuple[tuple[str, int], ...]:
    """``"a:0;b:1"`` -> ``(("a", 0), ("b", 1))`` (atc's ``--out_nodes``)."""
    out = []
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        name, sep, index = part.rpartition(":")
        if not sep or not name or not index.strip().isdigit():
            raise UsageError(f"--out_nodes: expected NODE:INDEX in '{part}' (e.g. 'conv1:0')")
        out.append((name, int(index)))
    return tuple(out)


def stream_count(streams: int, single: str | None) -> int:
    if single is not None:
        value = single.strip().lower()
        if value not in ("true", "false"):
            raise UsageError(f"--enable_single_stream: expected true or false, got '{single}'")
        if value == "true":
            return 1
    if not 1 <= streams <= 64:
        raise UsageError(f"--streams must be between 1 and 64, got {streams}")
    return streams
