"""Flags shared by ``compile`` and ``optimize`` (atc's spellings and ours), parsed to options.

Invariant: every bad flag value is a ``UsageError`` naming the flag (exit 2).
"""

from __future__ import annotations

import argparse

from ..cost import DEFAULT_SOC
from ..errors import UsageError
from ..opt.optimize import LEVELS, TARGETS
from ..opt.switches import Switches, read_switch_file


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


def switches(args: argparse.Namespace) -> Switches:
    if not args.fusion_switch_file:
        return Switches(frozenset(), frozenset())
    return read_switch_file(args.fusion_switch_file)


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
