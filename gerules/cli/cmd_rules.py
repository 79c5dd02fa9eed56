"""``ge-rewrite rules check|list|verify [PATHS] [--rules PATH]``: check, list, verify rules.

Invariants:
- Without PATHS the shipped library (``gerules.rules``, shown as ``rules/<file>``) is used,
  with the user's ``--rules`` files and folders (and ``GERULES_RULES_PATH``) added to it, as
  the optimizer runs them. PATHS alone are checked as a library of their own.
- ``check`` prints one line per loaded file to stdout (``rules/fuse.ger: ok, 14 rules in 1
  ruleset``) and every error to stderr as ``file:line:col: message`` followed by the source
  line and a caret; once there are no errors, replaced rules and (when the files join the
  shipped library) rulesets no schedule runs go to stderr too, prefixed ``note:`` and
  ``warning:``; it exits 1 when any file has an error, 0
  otherwise.
- ``list`` prints one row per rule (ruleset, rule, direction, contract, file:line) and exits
  1 with the same error report when the library does not check.
- Errors in rule files never produce a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..dsl import Built, RuleLibrary, build_library, parse_library
from ..dsl.ast import RuleFile, RulesetDecl
from ..dsl.errors import RuleError
from ..dsl.library import user_paths
from ..errors import UsageError, visible
from . import options


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("rules", help="check, list or verify .ger rule files",
                       description="Check .ger rule files, list the rules they define, or "
                       "verify them on random instances.")
    actions = p.add_subparsers(dest="rules_command", metavar="ACTION")
    check = actions.add_parser("check", help="check rule files (default: the shipped rules)")
    add_paths(check)
    check.add_argument("--no-soundness", action="store_true",
                       help="skip the shape/dtype soundness check of each rule")
    check.set_defaults(func=run_check)
    listing = actions.add_parser("list", help="list rules with ruleset, direction and contract")
    add_paths(listing)
    listing.set_defaults(func=run_list)
    from .rules_verify import register as register_verify  # imports this module: late

    register_verify(actions)
    p.set_defaults(func=lambda args: _usage(p))


def add_paths(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", type=Path,
                   help="rule files or folders checked as a library of their own (default: "
                   "the shipped rules/ folder with --rules added)")
    options.add_rules_flag(p)


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return 2


def load(args: argparse.Namespace) -> RuleLibrary:
    """The library a ``rules`` command works on (see the module docstring)."""
    paths: Sequence[Path] = args.paths
    if paths and options.rules_of(args):
        raise UsageError("give rule files either as PATHS (a library of their own) or with "
                         "--rules (added to the shipped library), not both")
    if not paths:
        return parse_library(user_paths(options.rules_of(args)), shipped=True)
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
        if path.is_dir() and not any(path.rglob("*.ger")):
            raise UsageError(f"{path}: no .ger files in this folder")
    return parse_library(paths)


def build(args: argparse.Namespace, lib: RuleLibrary, soundness: bool) -> Built:
    """``lib`` checked once; the shipped files' soundness is left to their own tests unless
    the shipped library is what is being checked."""
    user = bool(set(f.path for f in lib.files) - lib.shipped)
    return build_library(lib, soundness=soundness, trust_shipped=user)


def report(errors: Sequence[RuleError]) -> None:
    for e in errors:
        print(visible(e.render(), keep_newlines=True), file=sys.stderr)


def notes(built: Built, unscheduled: bool = True) -> None:
    """Replaced rules and (``unscheduled``) rulesets no schedule runs, on stderr."""
    for w in built.program.warnings if unscheduled else ():
        print(f"warning: {w.render()}", file=sys.stderr)
    for r in built.program.replaced:
        print(f"note: {r.describe()}", file=sys.stderr)


def run_check(args: argparse.Namespace) -> int:
    lib = load(args)
    if not lib.files and not lib.errors:
        print("no rule files found", file=sys.stderr)
    checked = not lib.errors
    built = build(args, lib, soundness=not args.no_soundness)
    errors = built.errors
    bad = {e.span.file for e in errors}
    for f in lib.files:
        if f.path not in bad:
            print(f"{f.path}: {summary(f, checked)}")
    report(errors)
    if not errors:
        notes(built, unscheduled=not args.paths)
    return 1 if errors else 0


def summary(f: RuleFile, checked: bool) -> str:
    """``ok, 14 rules in 1 ruleset`` (``parsed, not checked`` when some file did not load)."""
    n = len(f.rules)
    m = len({d.name for d in f.items if isinstance(d, RulesetDecl)})
    state = "ok" if checked else "parsed, not checked (fix the errors below first)"
    return f"{state}, {n} rule{'s' * (n != 1)} in {m} ruleset{'s' * (m != 1)}"


def run_list(args: argparse.Namespace) -> int:
    lib = load(args)
    built = build(args, lib, soundness=False)
    if built.errors:
        report(built.errors)
        return 1
    replaced = {r.name for r in built.program.replaced}
    rows = [(r.ruleset or "-", r.name + (" (replaces)" * (r.name in replaced)), r.arrow,
             r.contract.tags, f"{r.span.file}:{r.span.line}") for r in built.program.rules]
    header = ("ruleset", "rule", "dir", "contract", "defined at")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())
    notes(built, unscheduled=not args.paths)
    return 0
