"""``ge-rewrite rules check|list|verify [PATHS]``: check rule files, list and verify rules.

Invariants:
- Without PATHS the shipped library (``gerules.rules``) is used, shown as ``rules/<file>``.
- ``check`` prints one line per loaded file to stdout (``rules/fuse.ger: ok, 14 rules in 1
  ruleset``) and every error to stderr as ``file:line:col: message`` followed by the source
  line and a caret; it exits 1 when any file has an error, 0 otherwise.
- ``list`` prints one row per rule (ruleset, rule, direction, contract, file:line) and exits
  1 with the same error report when the library does not check.
- Errors in rule files never produce a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..dsl import RuleLibrary, check_library, contract_of, parse_library, parse_shipped
from ..dsl.ast import RuleFile, RulesetDecl
from ..dsl.errors import RuleError
from ..errors import UsageError, visible


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("rules", help="check, list or verify .ger rule files",
                       description="Check .ger rule files, list the rules they define, or "
                       "verify them on random instances.")
    actions = p.add_subparsers(dest="rules_command", metavar="ACTION")
    check = actions.add_parser("check", help="check rule files (default: the shipped rules)")
    _paths(check)
    check.add_argument("--no-soundness", action="store_true",
                       help="skip the shape/dtype soundness check of each rule")
    check.set_defaults(func=run_check)
    listing = actions.add_parser("list", help="list rules with ruleset, direction and contract")
    _paths(listing)
    listing.set_defaults(func=run_list)
    from .rules_verify import register as register_verify  # imports this module: late

    register_verify(actions)
    p.set_defaults(func=lambda args: _usage(p))


def _paths(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", type=Path,
                   help="rule files or folders (default: the shipped rules/ folder)")


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return 2


def load(paths: Sequence[Path]) -> RuleLibrary:
    if not paths:
        return parse_shipped()
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
        if path.is_dir() and not any(path.rglob("*.ger")):
            raise UsageError(f"{path}: no .ger files in this folder")
    return parse_library(paths)


def report(errors: Sequence[RuleError]) -> None:
    for e in errors:
        print(visible(e.render(), keep_newlines=True), file=sys.stderr)


def run_check(args: argparse.Namespace) -> int:
    lib = load(args.paths)
    if not lib.files and not lib.errors:
        print("no rule files found", file=sys.stderr)
    checked = not lib.errors
    errors = list(lib.errors) or check_library(lib, soundness=not args.no_soundness)
    bad = {e.span.file for e in errors}
    for f in lib.files:
        if f.path not in bad:
            print(f"{f.path}: {summary(f, checked)}")
    report(errors)
    return 1 if errors else 0


def summary(f: RuleFile, checked: bool) -> str:
    """``ok, 14 rules in 1 ruleset`` (``parsed, not checked`` when some file did not load)."""
    n = len(f.rules)
    m = len({d.name for d in f.items if isinstance(d, RulesetDecl)})
    state = "ok" if checked else "parsed, not checked (fix the errors below first)"
    return f"{state}, {n} rule{'s' * (n != 1)} in {m} ruleset{'s' * (m != 1)}"


def run_list(args: argparse.Namespace) -> int:
    lib = load(args.paths)
    errors = list(lib.errors) or check_library(lib, soundness=False)
    if errors:
        report(errors)
        return 1
    rows = [(r.ruleset or "-", r.name, r.arrow, contract_of(r).tags,
             f"{r.span.file}:{r.span.line}") for r in lib.rules]
    header = ("ruleset", "rule", "dir", "contract", "defined at")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())
    return 0
