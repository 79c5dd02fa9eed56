"""Checking a whole library once: names across files, rulesets, schedules, commutativity,
every rule resolved (``resolve``), and the resolved program.

Invariants:
- ``resolve_library`` reads every rule exactly once and returns the ``program.Program`` of
  the clean rules with every error it found, sorted by file (load order), line and column,
  each with its source line attached; it never raises for bad rules.
- Rule names are unique across the library (includes too), unless a rule marked
  ``@replace`` replaces the one other rule of its name (the program records it); ruleset
  and schedule names are declared once, ``extend ruleset`` and ``schedule NAME += ...``
  add to a declared one (extensions append in load order); every rule belongs to a
  ruleset; schedules name declared rulesets only. A ruleset no schedule runs is a warning.
- ``commutative`` may only name ops that exist, take two or more inputs and that the
  registry marks commutative (so a declaration can never make the matcher unsound).
- A program is complete (``errors == []``) or only a partial view for reporting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.composite import CompositeOp
from ..ir.registry import COMMUTATIVE, Registry, default_registry, suggest
from . import ast
from .composite import define_op
from .contract import replaces
from .errors import RuleError
from .loader import RuleLibrary
from .program import Program, Replacement, ResolvedRule
from .resolve import op_names, resolve_rule

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
    ops, registry, errors = _ops(lib, registry)
    kept, replaced, found = _rules(lib)
    errors += found
    errors += _rulesets(lib)
    schedules, found = _schedules(lib)
    errors += found
    errors += _commutative(lib, registry)
    rules: list[ResolvedRule] = []
    classes, found = _classes(lib, registry)
    errors += found
    for rule in kept:
        resolved, found = resolve_rule(rule, registry, sources.get(rule.span.file, ""),
                                       classes)
        errors += found
        if resolved is not None:
            rules.append(resolved)
    rulesets: dict[str, list[str]] = {d.name: [] for d in lib.items(ast.RulesetDecl)}
    for r in rules:
        rulesets.setdefault(r.ruleset, []).append(r.name)
    program = Program(tuple(rules), {k: tuple(v) for k, v in rulesets.items()}, schedules,
                      frozenset(op.qualified for op in lib.commutative), registry, sources,
                      replaced, tuple(sort_errors(lib, _unscheduled(lib, schedules))), ops)
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


def _unique(items: Sequence[Any], what: str, span_of: Callable[[Any], ast.Span],
            hint: str = "") -> list[RuleError]:
    first: dict[str, ast.Span] = {}
    errors = []
    for item in items:
        span = span_of(item)
        if item.name in first:
            errors.append(RuleError(f"duplicate {what} '{item.name}' (first defined at "
                                    f"{first[item.name]}){hint.format(name=item.name)}",
                                    span))
        else:
            first[item.name] = span
    return errors


def _rules(lib: RuleLibrary) -> tuple[list[ast.Rule], tuple[Replacement, ...], list[RuleError]]:
    """The rules that stay (a ``@replace`` rule takes the place of the one it replaces)."""
    by_name: dict[str, list[ast.Rule]] = {}
    for rule in lib.rules:
        by_name.setdefault(rule.name, []).append(rule)
    dropped: set[int] = set()
    replaced: list[Replacement] = []
    errors: list[RuleError] = []
    for name, rules in by_name.items():
        marked = [r for r in rules if replaces(r)]
        plain = [r for r in rules if not replaces(r)]
        for r in marked:
            if not plain:
                errors.append(RuleError(f"@replace: there is no rule '{name}' to replace",
                                        r.name_span))
        if len(marked) == 1 and len(plain) == 1:
            dropped.add(id(plain[0]))
            replaced.append(Replacement(name, marked[0].name_span, plain[0].name_span))
            continue
        shown = plain + marked[1:] if marked else plain
        errors += _unique(shown if len(marked) < 2 else rules, "rule", lambda r: r.name_span,
                          "; to replace it, mark the new rule @replace")
    kept = [r for r in lib.rules if id(r) not in dropped]
    return kept, tuple(replaced), errors


def _rulesets(lib: RuleLibrary) -> list[RuleError]:
    decls = lib.items(ast.RulesetDecl)
    errors = _unique([d for d in decls if not d.extend], "ruleset", lambda d: d.span,
                     "; write 'extend ruleset {name}' to add rules to it")
    declared = {d.name for d in decls if not d.extend}
    for d in decls:
        if d.extend and d.name not in declared:
            errors.append(RuleError(f"extend ruleset: there is no ruleset '{d.name}'"
                                    f"{suggest(d.name, declared)}", d.span))
    return errors


def _schedules(lib: RuleLibrary) -> tuple[dict[str, tuple[ast.Step, ...]], list[RuleError]]:
    """Each schedule's steps, extensions appended in load order; and the mistakes."""
    scheds = lib.items(ast.Schedule)
    errors = _unique([s for s in scheds if not s.extend], "schedule", lambda s: s.span,
                     "; write 'schedule {name} += ...' to add steps to it")
    steps: dict[str, tuple[ast.Step, ...]] = {}
    for sched in scheds:
        if not sched.extend:
            steps.setdefault(sched.name, sched.steps)
    for sched in scheds:
        if sched.extend and sched.name not in steps:
            hint = suggest(sched.name, steps) or ("" if steps else (
                " (the shipped schedules are there when the file is added to the shipped "
                "library: --rules FILE)"))
            errors.append(RuleError(f"schedule {sched.name} +=: there is no schedule "
                                    f"'{sched.name}'{hint}", sched.span))
        elif sched.extend:
            steps[sched.name] += sched.steps
    known = {d.name for d in lib.items(ast.RulesetDecl)}
    stack: list[ast.Step] = [s for sched in scheds for s in sched.steps]
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
    return steps, errors


def _unscheduled(lib: RuleLibrary, schedules: dict[str, tuple[ast.Step, ...]]
                 ) -> list[RuleError]:
    """Warnings: declared rulesets that no schedule runs (their rules never fire)."""
    run: set[str] = set()
    stack = [s for steps in schedules.values() for s in steps]
    while stack:
        step = stack.pop()
        if isinstance(step, ast.Run):
            run.add(step.ruleset)
        else:
            stack.extend(step.steps)
    example = next(iter(schedules), "O2")
    return [RuleError(f"ruleset '{d.name}' is not run by any schedule, so its rules never "
                      f"fire; add 'schedule {example} += {d.name}' or put its rules in a "
                      "scheduled ruleset with 'extend ruleset NAME'", d.span)
            for d in lib.items(ast.RulesetDecl) if not d.extend and d.name not in run]


def _ops(lib: RuleLibrary, registry: Registry
         ) -> tuple[tuple[CompositeOp, ...], Registry, list[RuleError]]:
    """The ops the library defines (``op ...``), in load order, and the registry that has
    them too: each is checked against the ops defined before it."""
    base, errors = registry, []
    defined: dict[str, CompositeOp] = {}
    for decl in lib.items(ast.OpDef):
        op, found = define_op(decl, registry, defined)
        errors += found
        if op is not None:
            defined[op.qualified] = op
            registry = registry.extend([op.schema(base)])
    return tuple(defined.values()), registry, errors


def _classes(lib: RuleLibrary, registry: Registry
             ) -> tuple[dict[str, tuple[ast.OpRef, ...]], list[RuleError]]:
    """Each ``opclass`` as its ops (classes named inside expanded, in order, once each)."""
    decls: dict[str, ast.OpClass] = {}
    for d in lib.items(ast.OpClass):
        decls.setdefault(d.name, d)
    errors = _unique(lib.items(ast.OpClass), "opclass", lambda d: d.span)
    out: dict[str, tuple[ast.OpRef, ...]] = {}

    def expand(name: str, chain: tuple[str, ...]) -> tuple[ast.OpRef, ...]:
        if name in out:
            return out[name]
        ops: dict[str, ast.OpRef] = {}
        for m in decls[name].members:
            if isinstance(m, ast.OpRef):
                if not registry.has(m.op, m.domain):
                    hint = suggest(m.qualified, op_names(registry))
                    errors.append(RuleError(f"unknown op {m.qualified}{hint}", m.span))
                ops.setdefault(m.qualified, m)
            elif m.name not in decls:
                errors.append(RuleError(f"unknown opclass '{m.name}'{suggest(m.name, decls)}",
                                        m.span))
            elif m.name in chain:
                errors.append(RuleError(f"opclass cycle: {' -> '.join((*chain, m.name))}",
                                        m.span))
            else:
                for ref in expand(m.name, (*chain, m.name)):
                    ops.setdefault(ref.qualified, ref)
        out[name] = tuple(ops.values())
        return out[name]

    for name in decls:
        expand(name, (name,))
    return out, errors


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
