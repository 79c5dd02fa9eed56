"""``ge-rewrite ops list|show``: the op registry, with the ops the rule library defines.

Invariants:
- The registry shown is the one the optimizer uses: every built-in op, the fused ``ge`` ops,
  and the composite ops of the shipped library and of ``--rules`` files (and
  ``GERULES_RULES_PATH``).
- ``list`` prints one row per op: the op, its kind (``built-in``, ``fused``: a ``ge`` op with
  a kernel of its own, ``composite``: defined in ``.ger`` by a body), the opset ranges of its
  versions, its inputs and its attributes. ``show OP`` prints every version in full (ports,
  attributes with kinds and defaults, unit, traits) and a composite op's definition.
- An unknown op is a usage error with a "did you mean" (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..errors import UsageError
from ..ir.registry import OpSchema, Port, Registry, suggest
from ..opt.optimize import rule_library
from . import options


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("ops", help="list the ops the compiler knows, or show one",
                       description="The op registry: built-in ops, fused ge ops and the ops "
                       "rule files define.")
    actions = p.add_subparsers(dest="ops_command", metavar="ACTION")
    listing = actions.add_parser("list", help="one line per op")
    listing.add_argument("--domain", metavar="D", help="only this domain ('' for ai.onnx)")
    options.add_rules_flag(listing)
    listing.set_defaults(func=run_list)
    show = actions.add_parser("show", help="every version of one op in full")
    show.add_argument("op", help="the op, such as Conv, ge.FusedConv or ge.RMSNorm")
    options.add_rules_flag(show)
    show.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def registry_of(args: argparse.Namespace) -> Registry:
    return rule_library(options.rules_of(args)).registry


def opsets(versions: Sequence[OpSchema]) -> str:
    """``1-5, 6-12, 13+`` for ai.onnx; ``ge 1+`` for other domains."""
    if versions and versions[0].domain:
        return f"{versions[0].domain} {versions[0].since_version}+"
    starts = [s.since_version for s in versions]
    return ", ".join(f"{a}-{b - 1}" if b - 1 > a else str(a)
                     for a, b in zip(starts, starts[1:], strict=False)) + (
        f"{', ' if len(starts) > 1 else ''}{starts[-1]}+" if starts else "")


def port(p: Port) -> str:
    return p.name + ("?" if p.optional else "") + ("..." if p.variadic else "")


def run_list(args: argparse.Namespace) -> int:
    registry = registry_of(args)
    rows = []
    for domain, op in registry.ops(args.domain):
        versions = registry.versions(op, domain)
        last = versions[-1]
        rows.append((last.qualified_op, last.kind, opsets(versions),
                     ", ".join(port(p) for p in last.inputs),
                     ", ".join(last.attrs) or "-"))
    header = ("op", "kind", "opsets", "inputs", "attributes")
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        print("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())
    return 0


def run_show(args: argparse.Namespace) -> int:
    registry = registry_of(args)
    domain, _, name = args.op.rpartition(".")
    versions = registry.versions(name, domain)
    if not versions:
        known = [f"{d}.{o}" if d else o for d, o in registry.ops()]
        raise UsageError(f"ops show: unknown op {args.op}{suggest(args.op, known)}")
    print("\n\n".join(describe(s, registry, versions) for s in versions))
    return 0


def describe(s: OpSchema, registry: Registry, versions: Sequence[OpSchema]) -> str:
    later = [v.since_version for v in versions if v.since_version > s.since_version]
    span = f"opset {s.since_version}" + (f"-{later[0] - 1}" if later else "+")
    lines = [f"{s.qualified_op} ({s.kind}, {span if not s.domain else s.domain + ' ' + span[6:]})"]
    if s.doc and s.body is None:
        lines.append(f"  {s.doc}")
    lines.append("  inputs:  " + (", ".join(_typed(p) for p in s.inputs) or "none"))
    lines.append("  outputs: " + ", ".join(port(p) for p in s.outputs))
    for a in s.attrs.values():
        default = "required" if a.required else (
            "no default" if a.default is None else f"default {a.default!r}")
        lines.append(f"  attribute {a.name}: {a.kind}, {default}")
    traits = ", ".join(sorted(s.traits))
    lines.append(f"  unit: {s.unit}" + (f"; traits: {traits}" if traits else ""))
    if s.body is not None:
        lines.append(f"  defined at {s.body.where}, its body read at ai.onnx opset "
                     f"{s.body.opset}:")
        lines += [f"    {line}" for line in s.body.doc.splitlines()]
    return "\n".join(lines)


def _typed(p: Port) -> str:
    return port(p) + (f" ({p.dtype})" if p.dtype else "")
