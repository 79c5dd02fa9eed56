"""Checked rules -> engine rewrites, rulesets and schedules.

Each rule becomes a ``gerules.engine.Rewrite`` (two for ``<=>``: ``name`` and ``name/rev``):
- searcher: the left side as an engine pattern (ops by qualified name, ``Var`` per variable,
  ``as n`` binders, attribute constants and ``AttrVar``s, ``Proj`` for ``Op(...)[k]``,
  ``Absent`` for ``none``), with the library's ``commutative`` ops;
- conditions, in order: the pattern's constants (``Mul(x, 1)``: the class holds a constant
  equal to 1 everywhere) and float attributes (compared at float32 precision), then the
  rule's ``where`` / ``let`` clauses in text order (a failing guard's reason is its source
  text), then ``prepare`` of the right side (see ``apply``);
- applier: ``emit`` of the prepared right side.

Invariants:
- Only a library that passed ``check_library`` is compiled (``compile_library`` re-checks
  names and raises ``RuleError`` otherwise); compiled rules never raise on a match: every
  failure is a ``Reject`` with a reason the optimizer's report shows.
- Conditions read only the matched classes' data and bound nodes (``incremental=True``).
- Each compiled rule keeps its numerical contract and source span for the verifier.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine import (
    WILDCARD,
    AttrVar,
    EGraph,
    Pattern,
    PatternNode,
    POp,
    Reject,
    Repeat,
    Rewrite,
    Ruleset,
    Saturate,
    Seq,
    Subst,
    Var,
)
from ..engine.schedule import Step
from ..ir.registry import OpSchema, Registry, default_registry
from ..terms.terms import ABSENT, PROJ, class_value, hashable_attr, ir_attr
from . import ast
from .apply import Builder, PrepareError, emit, tensor_of
from .build import attr_value, matches_literal
from .builtins import CONSTANTS
from .contract import Contract, contract_of
from .errors import RuleError, raise_errors
from .evaluate import evaluate
from .loader import RuleLibrary
from .rulecheck import RuleChecker
from .values import EvalError, truth

log = logging.getLogger(__name__)

RHS = "#rhs"  # the prepared right side in a substitution (a name no rule can write)


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """One source rule: its rewrites (two for ``<=>``), contract and place."""

    name: str
    ruleset: str
    rewrites: tuple[Rewrite, ...]
    contract: Contract
    span: ast.Span
    source: ast.Rule


@dataclass(frozen=True)
class CompiledRules:
    """A compiled library: rules, engine rulesets and schedules by name."""

    rules: tuple[CompiledRule, ...]
    rulesets: Mapping[str, Ruleset]
    schedules: Mapping[str, Step]
    commutative: frozenset[str]
    _by_rewrite: Mapping[str, CompiledRule] = field(default_factory=dict, repr=False)

    def rewrites(self) -> tuple[Rewrite, ...]:
        return tuple(rw for r in self.rules for rw in r.rewrites)

    def rule(self, name: str) -> CompiledRule:
        """The compiled rule for a rule or rewrite name (``name/rev`` included)."""
        return self._by_rewrite[name]

    def contract(self, name: str) -> Contract:
        return self.rule(name).contract


class MatchEnv:
    """An expression environment over one match: classes, attribute variables, lets."""

    def __init__(self, egraph: EGraph, subst: Subst, tensors: frozenset[str]) -> None:
        self.egraph = egraph
        self.subst = subst
        self.tensors = tensors

    def lookup(self, name: str) -> Any:
        value = self.subst[name]
        if name in self.tensors:
            return tensor_of(self.egraph, name, int(value))
        return ir_attr(value)

    def node_attr(self, binder: str, attr: str) -> Any:
        return ir_attr(self.subst.node(binder).get(attr))

    def node(self, binder: str) -> Any:
        return self.subst.node(binder)


class _Source:
    def __init__(self, sources: Mapping[str, str]) -> None:
        self.lines = {f: text.split("\n") for f, text in sources.items()}

    def text(self, span: ast.Span) -> str:
        lines = self.lines.get(span.file)
        if not lines or span.line != span.end_line or span.line > len(lines):
            return "a constant"
        return lines[span.line - 1][span.col - 1: span.end_col - 1]


# ---------------------------------------------------------------- conditions


class LiteralCheck:
    """The class bound to ``name`` holds a constant equal to the pattern's literal."""

    def __init__(self, name: str, value: Any, text: str) -> None:
        self.name, self.value, self.reason = name, value, f"pattern constant {text}"

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        array = class_value(egraph, int(subst[self.name]))
        if array is not None and matches_literal(np.asarray(array), self.value):
            return subst
        return Reject(self.reason)


class FloatAttrCheck:
    """A float attribute equals the pattern's value at float32 precision."""

    def __init__(self, name: str, attr: str, value: float) -> None:
        self.name, self.value = name, np.float32(value)
        self.reason = f"attribute {attr} = {value:g}"

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        found = subst[self.name]
        ok = isinstance(found, (int, float)) and np.float32(found) == self.value
        return subst if ok else Reject(self.reason)


class Where:
    def __init__(self, clause: ast.Where, tensors: frozenset[str]) -> None:
        self.expr, self.reason, self.tensors = clause.expr, clause.text, tensors

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        try:
            ok = truth(evaluate(self.expr, MatchEnv(egraph, subst, self.tensors)))
        except EvalError as e:
            return Reject(f"{self.reason} ({e})")
        except Exception as e:  # noqa: BLE001 - a match must never stop the optimizer
            return unexpected(self.reason, e)
        return subst if ok else Reject(self.reason)


class LetValue:
    def __init__(self, clause: ast.Let, tensors: frozenset[str]) -> None:
        self.name, self.expr, self.tensors = clause.name, clause.expr, tensors
        self.text = clause.text

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        try:
            value = evaluate(self.expr, MatchEnv(egraph, subst, self.tensors))
        except EvalError as e:
            return Reject(f"let {self.text} ({e})")
        except Exception as e:  # noqa: BLE001
            return unexpected(f"let {self.text}", e)
        return subst.extend(self.name, value)


class Prepare:
    def __init__(self, builder: Builder, tensors: frozenset[str]) -> None:
        self.builder, self.tensors = builder, tensors

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        env = MatchEnv(egraph, subst, self.tensors)
        try:
            prepared = self.builder.prepare(egraph, root, env, lambda n: int(subst[n]))
        except PrepareError as e:
            return Reject(f"right side: {e}")
        except Exception as e:  # noqa: BLE001
            return unexpected("right side", e)
        return subst.extend(RHS, prepared)


def unexpected(what: str, error: Exception) -> Reject:
    """A failure that is not the rule's doing (a bug, a kernel error): rejected and logged."""
    log.warning("%s failed unexpectedly: %s: %s", what, type(error).__name__, error)
    return Reject(f"{what} (unexpected {type(error).__name__}: {error})")


def _emit(egraph: EGraph, root: int, subst: Subst) -> tuple[int, ...]:
    return (emit(egraph, subst[RHS]),)


# ---------------------------------------------------------------- patterns


class _PatternBuilder:
    """The left side as an engine pattern, plus the checks its constants need."""

    def __init__(self, schemas: Mapping[int, OpSchema], source: _Source) -> None:
        self.schemas = schemas
        self.source = source
        self.checks: list[Any] = []
        self.fresh = itertools.count()

    def node(self, e: ast.Expr) -> PatternNode:
        if isinstance(e, ast.OpCall):
            return self.op(e)
        if isinstance(e, ast.Name) and e.name not in CONSTANTS:
            return Var(e.name)
        if isinstance(e, ast.Wildcard):
            return WILDCARD
        if isinstance(e, ast.NoneLit):
            return POp(ABSENT)
        name = f"#k{next(self.fresh)}"
        value = evaluate(e, _EMPTY)
        self.checks.append(LiteralCheck(name, value, self.source.text(e.span)))
        return Var(name)

    def op(self, call: ast.OpCall) -> PatternNode:
        schema = self.schemas[id(call)]
        attrs = tuple(self.attr(item, schema) for item in call.attrs
                      if isinstance(item, ast.AttrSet) and not isinstance(item.value,
                                                                        ast.Wildcard))
        children = tuple(self.node(a) for a in call.args)
        node = POp(call.qualified, children, tuple(sorted(attrs)), call.binder)
        if call.output is None:
            return node
        return POp(PROJ, (node,), (("index", call.output),))

    def attr(self, item: ast.AttrSet, schema: OpSchema) -> tuple[str, Any]:
        if isinstance(item.value, ast.Name) and item.value.name not in CONSTANTS:
            return item.name, AttrVar(item.value.name)
        spec = schema.attrs[item.name]
        value = attr_value(spec, evaluate(item.value, _EMPTY))
        if spec.kind == "float":
            name = f"#a{next(self.fresh)}"
            self.checks.append(FloatAttrCheck(name, item.name, value))
            return item.name, AttrVar(name)
        return item.name, hashable_attr(value)


class _Empty:
    def lookup(self, name: str) -> Any:
        raise KeyError(name)

    def node_attr(self, binder: str, attr: str) -> Any:
        raise EvalError("no node is bound here")


_EMPTY = _Empty()


# ---------------------------------------------------------------- rules


def _direction(name: str, lhs: ast.Expr, rhs: ast.Expr, clauses: Iterable[ast.Clause],
               schemas: Mapping[int, OpSchema], commutative: frozenset[str],
               source: _Source) -> Rewrite:
    builder = _PatternBuilder(schemas, source)
    pattern = Pattern(builder.node(lhs), commutative)
    tensors = frozenset(pattern.layout.classes)
    conditions: list[Any] = list(builder.checks)
    for clause in clauses:
        conditions.append(Where(clause, tensors) if isinstance(clause, ast.Where)
                          else LetValue(clause, tensors))
    conditions.append(Prepare(Builder(rhs, set(tensors)), tensors))
    return Rewrite(name, pattern, _emit, conditions=conditions, incremental=True)


def compile_rule(rule: ast.Rule, registry: Registry, commutative: frozenset[str],
                 sources: Mapping[str, str]) -> CompiledRule:
    """One checked rule as engine rewrites; raises ``RuleError`` for an unchecked one."""
    checker = RuleChecker(rule, registry)
    raise_errors(checker.check())
    source, schemas = _Source(sources), checker.scope.schemas
    rewrites = [_direction(rule.name, rule.lhs, rule.rhs, rule.clauses, schemas, commutative,
                           source)]
    if rule.bidirectional:
        rewrites.append(_direction(f"{rule.name}/rev", rule.rhs, rule.lhs, rule.clauses,
                                   schemas, commutative, source))
    return CompiledRule(rule.name, rule.ruleset or "", tuple(rewrites), contract_of(rule),
                        rule.span, rule)


def _step(step: ast.Step, rulesets: Mapping[str, Ruleset]) -> Step:
    if isinstance(step, ast.Run):
        return rulesets[step.ruleset]
    inner = [_step(s, rulesets) for s in step.steps]
    if isinstance(step, ast.Repeat):
        return Repeat(step.times, *inner)
    return Saturate(*inner)


def compile_library(lib: RuleLibrary, registry: Registry | None = None) -> CompiledRules:
    """Compile a checked library (see ``load_rules``) into engine objects."""
    registry = registry or default_registry()
    commutative = frozenset(op.qualified for op in lib.commutative)
    sources = lib.sources
    try:
        rules = tuple(compile_rule(r, registry, commutative, sources) for r in lib.rules)
    except RuleError as e:
        raise e.attach(sources) from None
    grouped: dict[str, list[Rewrite]] = {name: [] for name in lib.rulesets}
    for r in rules:
        grouped.setdefault(r.ruleset, []).extend(r.rewrites)
    rulesets = {name: Ruleset(name, rws) for name, rws in grouped.items()}
    schedules = {s.name: Seq(*(_step(step, rulesets) for step in s.steps))
                 for s in lib.schedules.values()}
    by_rewrite = {rw.name: r for r in rules for rw in r.rewrites}
    return CompiledRules(rules, rulesets, schedules, commutative, by_rewrite)


def load_compiled(paths: Iterable[str | os.PathLike[str]] | None = None,
                  registry: Registry | None = None, *, soundness: bool = True
                  ) -> CompiledRules:
    """``load_rules`` then ``compile_library``: rule files to engine objects in one call."""
    from . import load_rules

    return compile_library(load_rules(paths, registry, soundness=soundness), registry)
