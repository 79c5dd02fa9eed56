"""Checking a whole library: names across files, rulesets, schedules, commutativity, rules.

Invariants:
- ``check_library`` returns every error it finds, sorted by file (load order), line and
  column, each with its source line attached; it never raises for bad rules.
- Rule names are unique across the library (includes too), as are ruleset and schedule
  names; every rule belongs to a ruleset; schedules name declared rulesets only.
- ``commutative`` may only name ops that exist, take two or more inputs and that the
  registry marks commutative (so a declaration can never make the matcher unsound).
- A rule is checked for shape soundness only when it has no other error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.registry import COMMUTATIVE, Registry, default_registry, suggest
from . import ast
from .contract import check_decorators
from .errors import RuleError
from .loader import RuleLibrary
from .rulecheck import RuleChecker, op_names
from .soundness import check_soundness

log = logging.getLogger(__name__)

MAX_REPEAT = 1000


def check_library(lib: RuleLibrary, registry: Registry | None = None, *,
                  soundness: bool = True) -> list[RuleError]:
    """Every mistake in ``lib``'s declarations and rules (empty when it is clean)."""
    registry = registry or default_registry()
    errors: list[RuleError] = []
    errors += _unique(lib.rules, "rule", lambda r: r.name_span)
    errors += _unique(lib.items(ast.RulesetDecl), "ruleset", lambda d: d.span)
    errors += _unique(lib.items(ast.Schedule), "schedule", lambda s: s.span)
    errors += _schedules(lib)
    errors += _commutative(lib, registry)
    for rule in lib.rules:
        errors += check_rule(rule, registry, soundness=soundness)
    order = {f.path: i for i, f in enumerate(lib.files)}
    errors.sort(key=lambda e: (order.get(e.span.file, -1), e.span.line, e.span.col))
    log.debug("checked %d rules in %d files: %d errors", len(lib.rules), len(lib.files),
              len(errors))
    sources = lib.sources
    return [e.attach(sources) for e in errors]


def check_rule(rule: ast.Rule, registry: Registry, *, soundness: bool = True
               ) -> list[RuleError]:
    """The errors of one rule: decorators, names, ops, and (if clean) shape soundness."""
    errors = check_decorators(rule)
    if rule.ruleset is None:
        errors.append(RuleError(f"rule '{rule.name}' is not in a ruleset; put a "
                                "'ruleset NAME' line above it", rule.name_span))
    checker = RuleChecker(rule, registry)
    errors += checker.check()
    if not errors and soundness:
        errors += check_soundness(rule, checker.scope, registry)
    return errors


def _unique(items: Sequence[Any], what: str, span_of: Callable[[Any], ast.Span]
            ) -> list[RuleError]:
    first: dict[str, ast.Span] = {}
    errors = []
    for item in items:
        span = span_of(item)
        if item.name in first:
            errors.append(RuleError(f"duplicate {what} '{item.name}' (first defined at "
                                    f"{first[item.name]})", span))
        else:
            first[item.name] = span
    return errors


def _schedules(lib: RuleLibrary) -> list[RuleError]:
    known = {d.name for d in lib.items(ast.RulesetDecl)}
    errors: list[RuleError] = []
    stack: list[ast.Step] = [s for sched in lib.items(ast.Schedule) for s in sched.steps]
    while stack:
        step = stack.pop()
        if isinstance(step, ast.Run):
            if step.ruleset not in known:
                hint = suggest(step.ruleset, known)
                errors.append(RuleError(f"unknown ruleset '{step.ruleset}'{hint}", step.span))
            continue
        if isinstance(step, ast.Repeat) and not 1 <= step.times <= MAX_REPEAT:
            errors.append(RuleError(f"repeat count must be between 1 and {MAX_REPEAT}",
                                    step.span))
        stack.extend(step.steps)
    return errors


def _commutative(lib: RuleLibrary, registry: Registry) -> list[RuleError]:
    errors: list[RuleError] = []
    for ref in lib.commutative:
        if not registry.has(ref.op, ref.domain):
            hint = suggest(ref.qualified, op_names(registry))
            errors.append(RuleError(f"unknown op {ref.qualified}{hint}", ref.span))
            continue
        schema = registry.get(ref.op, ref.domain)
        two = len(schema.inputs) >= 2 or bool(schema.inputs and schema.inputs[-1].variadic)
        if not schema.has(COMMUTATIVE) or not two:
            errors.append(RuleError(f"{ref.qualified} is not commutative (the op registry "
                                    "does not mark it so)", ref.span))
    return errors
