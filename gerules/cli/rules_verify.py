"""``ge-rewrite rules verify [PATHS] [--rules PATH] [--examples N]``: prove rules on random
instances.

Invariants:
- The files are checked first with every check ``rules check`` runs, the shape soundness
  check included (a rule file error is reported as ``rules check`` reports it, exit 1), so a
  rule ``check`` rejects is never "verified".
- With ``--rules`` (or ``GERULES_RULES_PATH``) the library is the shipped one with those
  files added, and the rules verified are the user's (the shipped ones are verified by their
  own tests); ``--rule NAME`` picks any rule of the library.
- stdout gets one line per rule as it is verified (``file:line: rule name (@exact):
  verified on 10 instance(s)``), the counterexample or the missing instance's reasons
  indented under a failing rule, and last ``rules verified: K / N``; exit 0 only when K == N.
  A counterexample (shrunk) is followed by a regression test, a pytest module between
  ``----8<----`` and ``---->8----`` lines, unindented so it can be saved as it is.
- ``--rule NAME`` (repeatable) restricts the run; an unknown name is a usage error.
- ``--seed S`` (repeatable) runs the whole search once per seed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..dsl import CompiledRule
from ..errors import UsageError
from ..ir.registry import suggest
from ..verify import Settings, verify_rule
from .cmd_rules import add_paths, build, load, notes, report


def register(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = actions.add_parser("verify", help="verify rules on random instances of their left side",
                           description="Check that both sides of every rule compute the same "
                                       "values, within the rule's @exact or @approx contract, "
                                       "on random instances that satisfy its guards.")
    add_paths(p)
    p.add_argument("--examples", type=_positive, default=10, metavar="N",
                   help="instances per rule where the rule fires (default 10)")
    p.add_argument("--seed", type=int, action="append", default=[], metavar="S",
                   help="seed of the instances (default 0); repeat it for several searches")
    p.add_argument("--rule", action="append", default=[], metavar="NAME",
                   help="verify only this rule (repeatable)")
    p.set_defaults(func=run)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def run(args: argparse.Namespace) -> int:
    lib = load(args)
    built = build(args, lib, soundness=True)
    if built.errors:
        report(built.errors)
        return 1
    notes(built, unscheduled=False)
    assert built.compiled is not None
    everything = built.compiled.rules
    user = [r for r in everything if r.span.file not in lib.shipped]
    rules = select(everything, args.rule) if args.rule or args.paths or not user else user
    settings = Settings(examples=args.examples, seed=tuple(args.seed) or 0)
    passed = 0
    for rule in rules:
        result = verify_rule(rule, settings)
        print(result.line(), flush=True)
        if not result.ok:
            print("    " + result.detail.replace("\n", "\n    "), flush=True)
        if result.regression:
            print(f"    regression test (save as test_{rule.name}.py, run pytest on it):\n"
                  f"----8<----\n{result.regression}---->8----", flush=True)
        passed += result.ok
    print(f"rules verified: {passed} / {len(rules)}")
    sys.stdout.flush()
    return 0 if passed == len(rules) else 1


def select(rules: Sequence[CompiledRule], names: Sequence[str]) -> list[CompiledRule]:
    if not names:
        return list(rules)
    known = {r.name for r in rules}
    for name in names:
        if name not in known:
            raise UsageError(f"--rule {name}: no such rule{suggest(name, known)}")
    return [r for r in rules if r.name in names]
