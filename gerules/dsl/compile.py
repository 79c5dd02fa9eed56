"""Resolved rules -> engine rewrites, rulesets and schedules.

Each direction of a resolved rule (``program.Direction``) becomes a ``gerules.engine.Rewrite``
(two for ``<=>``: ``name`` and ``name/rev``):
- searcher: the left side as an engine pattern (ops by qualified name, ``Var`` per variable,
  ``as n`` binders, attribute constants and ``AttrVar``s, ``Proj`` for ``Op(...)[k]``,
  ``Absent`` for ``none``), with the library's ``commutative`` ops;
- conditions, in order: the pattern's constants (``Mul(x, 1)``: the class holds a constant
  equal to 1 everywhere) and float attributes (compared at float32 precision), then the
  rule's ``where`` / ``let`` clauses in text order (a failing guard's reason is its source
  text), then ``prepare`` of the right side (see ``apply``);
- applier: ``emit`` of the prepared right side.

Invariants:
- Only resolved rules are compiled (the checker read each rule once; nothing here looks at
  the syntax tree again); compiled rules never raise on a match: every failure is a
  ``Reject`` with a reason the optimizer's report shows.
- Conditions read only the matched classes' data and bound nodes (``incremental=True``).
- Each compiled rule keeps its numerical contract and source span for the verifier.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine import (
    UNSET,
    WILDCARD,
    AttrVar,
    EGraph,
    MultiPattern,
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
from ..ir.registry import Registry
from ..ir.weights import Deferred
from ..terms.terms import ABSENT, OUTPUTS_ATTR, PROJ, class_value, hashable_attr, ir_attr
from . import ast, program
from .apply import Builder, PrepareError, emit, tensor_of
from .build import attr_value, matches_literal
from .contract import Contract
from .evaluate import evaluate
from .program import Direction, Program, ResolvedRule, Term
from .values import EvalError, truth

log = logging.getLogger(__name__)

RHS = "#rhs"  # the prepared right side in a substitution (a name no rule can write)


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """One source rule: its rewrites (one per direction of ``resolved``), contract, place."""

    name: str
    ruleset: str
    rewrites: tuple[Rewrite, ...]
    contract: Contract
    span: ast.Span
    resolved: ResolvedRule
    registry: Registry  # the ops the rule was checked against (the library's own included)

    @property
    def source(self) -> ast.Rule:
        return self.resolved.source

    @property
    def directions(self) -> tuple[Direction, ...]:
        return self.resolved.directions


@dataclass(frozen=True)
class CompiledRules:
    """A compiled library: rules, engine rulesets and schedules by name."""

    rules: tuple[CompiledRule, ...]
    rulesets: Mapping[str, Ruleset]
    schedules: Mapping[str, Step]
    commutative: frozenset[str]
    _by_rewrite: Mapping[str, CompiledRule] = field(default_factory=dict, repr=False)
    program: Program | None = field(default=None, repr=False)

    def rewrites(self) -> tuple[Rewrite, ...]:
        return tuple(rw for r in self.rules for rw in r.rewrites)

    def rule(self, name: str) -> CompiledRule:
        """The compiled rule for a rule or rewrite name (``name/rev`` included)."""
        return self._by_rewrite[name]

    def has(self, name: str) -> bool:
        return name in self._by_rewrite

    @property
    def registry(self) -> Registry:
        """The registry with the library's own ops (``op`` declarations)."""
        if self.program is None:
            from ..ir.registry import default_registry

            return default_registry()
        return self.program.registry

    @property
    def notes(self) -> list[str]:
        """What a run should say about the library: replaced rules, unscheduled rulesets."""
        if self.program is None:
            return []
        return [r.describe() for r in self.program.replaced] + [
            str(w) for w in self.program.warnings]

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


# ---------------------------------------------------------------- conditions


class LiteralCheck:
    """The class bound to ``name`` holds a constant equal to the pattern's literal; any other
    class is no match at all (``Reject.miss``), not a rejected one. A deferred constant (a
    large folded weight, ``ir.weights``) is not computed to be compared: it is no match, so
    at worst a simplification is missed, never made wrongly."""

    def __init__(self, name: str, value: Any, text: str) -> None:
        self.name, self.value, self.reason = name, value, f"pattern constant {text}"

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        array = class_value(egraph, int(subst[self.name]))
        if (array is not None and not isinstance(array, Deferred)
                and matches_literal(np.asarray(array), self.value)):
            return subst
        return Reject(self.reason, miss=True)


class FloatAttrCheck:
    """A float attribute equals the pattern's value at float32 precision (else no match)."""

    def __init__(self, name: str, attr: str, value: float) -> None:
        self.name, self.value = name, np.float32(value)
        self.reason = f"attribute {attr} = {value:g}"

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        found = subst[self.name]
        ok = isinstance(found, (int, float)) and np.float32(found) == self.value
        return subst if ok else Reject(self.reason, miss=True)


class PortAttr:
    """An attribute variable given as an input (``program.PortVar``): the class bound to
    ``name`` holds a constant, which binds the attribute variable."""

    def __init__(self, name: str, attr: str, spec: Any) -> None:
        self.name, self.attr, self.spec = name, attr, spec
        self.reason = f"{attr}: the input is not a constant"

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        array = class_value(egraph, int(subst[self.name]))
        if array is None:
            return Reject(self.reason)
        try:
            return subst.extend(self.attr, attr_value(self.spec, np.asarray(array)))
        except EvalError as e:
            return Reject(f"{self.attr}: {e}")


class Where:
    def __init__(self, clause: program.Where, tensors: frozenset[str]) -> None:
        self.expr, self.reason, self.tensors = clause.expr, clause.text, tensors

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        try:
            ok = truth(evaluate(self.expr, MatchEnv(egraph, subst, self.tensors)))
        except EvalError as e:
            return Reject(f"{self.reason} ({e})")
        except Exception as e:  # noqa: BLE001 - a match must never stop the optimizer
            return unexpected(self.reason, e)
        return subst if ok else Reject(self.reason)


class ConstCheck:
    """``where const(a, b)`` (or ``where not const(a)``) alone: every class has a known value
    (none has one), the evaluator's answer read straight from the constant analysis: no
    values built per match. Like a pattern literal, such a guard says which operands the rule
    is for (a fold of constants), so a class that is not (or is) constant is no match
    (``Reject.miss``), not a rejected one: the reports do not list every TransData of a
    computed tensor as a fold that failed."""

    def __init__(self, names: tuple[str, ...], reason: str, want: bool = True) -> None:
        self.names, self.reason, self.want = names, reason, want

    @staticmethod
    def of(clause: program.Where, tensors: frozenset[str]) -> ConstCheck | None:
        e, want = clause.expr, True
        if isinstance(e, ast.Unary) and e.op == "not":
            e, want = e.operand, False
        if isinstance(e, ast.Call) and e.func == "const" and not e.kwargs and e.args and all(
                isinstance(a, ast.Name) and a.name in tensors for a in e.args) and (
                want or len(e.args) == 1):
            return ConstCheck(tuple(a.name for a in e.args),  # type: ignore[union-attr]
                              clause.text, want)
        return None

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        for name in self.names:
            if (class_value(egraph, int(subst[name])) is not None) != self.want:
                return Reject(self.reason, miss=True)
        return subst


class LetValue:
    def __init__(self, clause: program.Let, tensors: frozenset[str]) -> None:
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
        roots = [int(subst.match[r]) for r in subst.layout.roots]
        try:
            prepared = self.builder.prepare(egraph, roots, env, lambda n: int(subst[n]))
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
    memo: dict[int, int] = {}
    return tuple(emit(egraph, p, memo) for p in subst[RHS])


# ---------------------------------------------------------------- patterns


class _PatternBuilder:
    """The left side as an engine pattern, plus the checks its constants need."""

    def __init__(self) -> None:
        self.checks: list[Any] = []
        self.ports: set[str] = set()
        self.fresh = itertools.count()

    def node(self, t: Term) -> PatternNode:
        if isinstance(t, program.Op):
            return self.op(t)
        if isinstance(t, program.Var):
            return Var(t.name)
        if isinstance(t, program.Absent):
            return POp(ABSENT)
        if isinstance(t, program.Const):
            name = f"#k{next(self.fresh)}"
            self.checks.append(LiteralCheck(name, t.value, t.text))
            return Var(name)
        if isinstance(t, program.PortVar):
            if t.name not in self.ports:
                self.ports.add(t.name)
                self.checks.append(PortAttr(t.name, t.attr, t.spec))
            return Var(t.name)
        return WILDCARD

    def op(self, call: program.Op) -> PatternNode:
        attrs = tuple(self.attr(item) for item in call.attr_items())
        if call.output is None and call.schema.max_outputs != 1:
            # a plain Op(...) is a node whose only used output is the first: never the
            # tuple node of one whose other outputs are used (``Op(...)[k]`` reads those)
            attrs += ((OUTPUTS_ATTR, UNSET),)
        children = tuple(self.node(a) for a in call.args)
        node = POp(call.qualified, children, tuple(sorted(attrs)), call.binder)
        if call.output is None:
            return node
        return POp(PROJ, (node,), (("index", call.output),))

    def attr(self, item: program.Attr) -> tuple[str, Any]:
        if item.kind == "var":
            return item.name, AttrVar(item.value)
        if item.spec.kind == "float":
            name = f"#a{next(self.fresh)}"
            self.checks.append(FloatAttrCheck(name, item.name, item.value))
            return item.name, AttrVar(name)
        return item.name, hashable_attr(item.value)


# ---------------------------------------------------------------- rules


def compile_direction(direction: Direction, commutative: frozenset[str]) -> Rewrite:
    """One direction of a resolved rule as an engine rewrite."""
    builder = _PatternBuilder()
    nodes = [builder.node(r) for r in direction.roots]
    pattern: Pattern | MultiPattern = Pattern(nodes[0], commutative) if len(nodes) == 1 else \
        MultiPattern(nodes, commutative, ordered=symmetric(direction.roots))
    tensors = frozenset(pattern.layout.classes)
    conditions: list[Any] = list(builder.checks)
    for clause in direction.clauses:
        if isinstance(clause, program.Where):
            conditions.append(ConstCheck.of(clause, tensors) or Where(clause, tensors))
        else:
            conditions.append(LetValue(clause, tensors))
    conditions.append(Prepare(Builder(direction.rhs, direction.lets), tensors))
    return Rewrite(direction.name, pattern, _emit, conditions=conditions, incremental=True)


def symmetric(roots: tuple[program.Op, ...]) -> bool:
    """True when the roots are one pattern up to the names they do not share (horizontal
    fusion's ``MatMul(x, wq), MatMul(x, wk)``): every order of a set of roots would match,
    so each set is matched once (the guards must then treat the roots alike)."""
    counts: dict[str, int] = {}
    for root in roots:
        for name in set(_names(root)):
            counts[name] = counts.get(name, 0) + 1
    shared = {n for n, c in counts.items() if c > 1}
    shapes = {_shape(root, shared, {}) for root in roots}
    return len(shapes) == 1


def _names(t: Term) -> Iterable[str]:
    if isinstance(t, program.Var | program.PortVar):
        yield t.name
    elif isinstance(t, program.Op):
        if t.binder:
            yield t.binder
        for a in t.attr_items():
            if a.kind == "var":
                yield a.value
        for arg in t.args:
            yield from _names(arg)


def _shape(t: Term, shared: set[str], renamed: dict[str, str]) -> Any:
    """``t`` with the names not in ``shared`` renamed in order of first use."""
    def name(n: str) -> str:
        return n if n in shared else renamed.setdefault(n, f"#{len(renamed)}")

    if isinstance(t, program.Var | program.PortVar):
        return ("var", name(t.name))
    if isinstance(t, program.Const):
        return ("const", repr(t.value))
    if isinstance(t, program.Op):
        attrs = tuple((a.name, a.kind, name(a.value) if a.kind == "var" else repr(a.value))
                      for a in t.attr_items())
        return (t.qualified, t.output, t.binder and name(t.binder), attrs,
                tuple(_shape(a, shared, renamed) for a in t.args))
    return (type(t).__name__,)


def compile_rule(rule: ResolvedRule, commutative: frozenset[str], registry: Registry
                 ) -> CompiledRule:
    """One resolved rule as engine rewrites (one per direction)."""
    rewrites = tuple(compile_direction(d, commutative) for d in rule.directions)
    return CompiledRule(rule.name, rule.ruleset, rewrites, rule.contract, rule.span, rule,
                        registry)


def _step(step: ast.Step, rulesets: Mapping[str, Ruleset]) -> Step:
    if isinstance(step, ast.Run):
        return rulesets[step.ruleset]
    inner = [_step(s, rulesets) for s in step.steps]
    if isinstance(step, ast.Repeat):
        return Repeat(step.times, *inner)
    return Saturate(*inner)


def compile_program(program: Program) -> CompiledRules:
    """Compile a complete resolved program (see ``check.resolve_library``)."""
    return assemble(program, [compile_rule(r, program.commutative, program.registry)
                              for r in program.rules])


def assemble(program: Program, rules: Iterable[CompiledRule]) -> CompiledRules:
    """Engine rulesets and schedules around compiled rules."""
    rules = tuple(rules)
    grouped: dict[str, list[Rewrite]] = {name: [] for name in program.rulesets}
    for r in rules:
        grouped.setdefault(r.ruleset, []).extend(r.rewrites)
    rulesets = {name: Ruleset(name, rws) for name, rws in grouped.items()}
    schedules = {name: Seq(*(_step(step, rulesets) for step in steps))
                 for name, steps in program.schedules.items()}
    by_rewrite = {rw.name: r for r in rules for rw in r.rewrites}
    return CompiledRules(rules, rulesets, schedules, program.commutative, by_rewrite, program)
