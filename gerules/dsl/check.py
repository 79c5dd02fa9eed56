"""Checking a whole library once: names across files, rulesets, schedules, commutativity,
every rule resolved (``resolve``), and the resolved program.

Invariants:
- ``resolve_library`` reads every rule exactly once and returns the ``program.Program`` of
  the clean rules with every error it found, sorted by file (load order), line and column,
  each with its source line attached; it never raises for bad rules.
- Rule names are unique across the library (includes too), as are ruleset and schedule
  names; every rule belongs to a ruleset; schedules name declared rulesets only.
- ``commutative`` may only name ops that exist, take two or more inputs and that the
  registry marks commutative (so a declaration can never make the matcher unsound).
- A program is complete (``errors == []``) or only a partial view for reporting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.registry import COMMUTATIVE, Registry, default_registry, suggest
from . import ast
from .errors import RuleError
from .loader import RuleLibrary
from .program import Program, ResolvedRule
from .resolve import Resolver, op_names

log = logging.getLogger(__name__)

MAX_REPEAT = 1000


def resolve_library(lib: RuleLibrary, registry: Registry | None = None
                    ) -> tuple[Program, list[RuleError]]:
    """The resolved program of ``lib``'s clean rules, and every mistake in ``lib``."""
    registry = registry or default_registry()
    sources = lib.sources
    if lib.errors:  # a file did not parse: its names are unknown, so check nothing else
        return Program((), {}, {}, frozenset(), registry, sources), sort_errors(
            lib, list(lib.errors))
    errors: list[RuleError] = []
    errors += _unique(lib.rules, "rule", lambda r: r.name_span)
    errors += _unique(lib.items(ast.RulesetDecl), "ruleset", lambda d: d.span)
    errors += _unique(lib.items(ast.Schedule), "schedule", lambda s: s.span)
    errors += _schedules(lib)
    errors += _commutative(lib, registry)
    rules: list[ResolvedRule] = []
    for rule in lib.rules:
        resolved, found = Resolver(rule, registry, sources.get(rule.span.file, "")).resolve()
        errors += found
        if resolved is not None:
            rules.append(resolved)
    program = Program(tuple(rules), {k: tuple(r.name for r in v)
                                     for k, v in lib.rulesets.items()},
                      {s.name: s.steps for s in lib.schedules.values()},
                      frozenset(op.qualified for op in lib.commutative), registry, sources)
    log.debug("resolved %d rules in %d files: %d errors", len(rules), len(lib.files),
              len(errors))
    return program, sort_errors(lib, errors)


def sort_errors(lib: RuleLibrary, errors: list[RuleError]) -> list[RuleError]:
    """``errors`` by file (load order), line and column, with their source lines."""
    order = {f.path: i for i, f in enumerate(lib.files)}
    errors = sorted(errors, key=lambda e: (order.get(e.span.file, -1), e.span.line,
                                           e.span.col))
    sources = lib.sources
    return [e.attach(sources) for e in errors]


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
