"""Shape and dtype soundness: do both sides of a rule give the same type?

The check looks for a witness. It gives the left side's leaf variables concrete small types
(ranks pinned by guards such as ``rank(a) == 2`` or ``shape(b) == [c, 1]``, otherwise a few
small ranks tried per op), infers the left side with the registry's ``infer`` functions,
evaluates the clauses on random values of those types, builds the right side's types the way
the compiler would, and compares the two roots.

Invariants:
- An error is reported only with a witness: a typing of the left side under which every
  guard holds and both sides infer, yet their dtypes, ranks or known dims differ. The
  message names both types and the variables' types.
- Anything inconclusive (an op without inference for these inputs, a guard that random
  values do not satisfy, an evaluation error) is silently skipped: this check finds
  mistakes, the property-based verifier (issue 8) proves rules.
- The work per rule is bounded (``MAX_INFER`` inference calls) and deterministic (fixed
  pseudo-random values, see ``candidates``), so checking a library stays fast and repeatable.
- A ``<=>`` rule is checked in its forward direction (type equality is symmetric).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.graph import TensorType
from ..ir.registry import OpSchema, Registry
from . import ast
from .build import attr_value, input_constant
from .builtins import CONSTANTS
from .candidates import Config, configs, dims, pinned_ranks, random_value, topo_ops
from .errors import RuleError
from .evaluate import evaluate
from .rulecheck import Scope
from .values import EvalError, Tensor, truth

log = logging.getLogger(__name__)

MAX_INFER = 200
MAX_COMBOS = 64  # operand typings tried per pattern op
MAX_COMBOS_LATER = 8  # ... once some typing worked (later candidates are variations)
GIVE_UP = 3  # candidate typings without any conclusive one: this rule is beyond the check
ENOUGH = 3  # typings that passed every guard and agreed: stop looking
# Inference functions and kernels are run on synthetic operands here, so any exception they
# raise only means "not these operands" (an op that rejects them should say so with a
# GeError, but a NumPy RuntimeError must not turn a rule check into a crash).
_INFER_ERRORS = (Exception,)


class Inconclusive(Exception):
    """This candidate cannot decide anything (an op does not infer, a guard is false...)."""


@dataclass
class Case:
    """One candidate typing of the left side."""

    var_types: dict[str, TensorType] = field(default_factory=dict)
    var_values: dict[str, np.ndarray | None] = field(default_factory=dict)
    node_types: dict[int, TensorType] = field(default_factory=dict)  # id(OpCall) -> type
    node_values: dict[int, np.ndarray] = field(default_factory=dict)
    binder_types: dict[str, TensorType] = field(default_factory=dict)
    binder_values: dict[str, np.ndarray] = field(default_factory=dict)
    node_attrs: dict[str, dict[str, Any]] = field(default_factory=dict)  # binder -> given
    resolved: dict[str, dict[str, Any]] = field(default_factory=dict)  # binder -> defaults
    attr_vars: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # variables' values, lets


class _Env:
    def __init__(self, case: Case) -> None:
        self.case = case

    def lookup(self, name: str) -> Any:
        return self.case.values[name]

    def node_attr(self, binder: str, attr: str) -> Any:
        return self.case.resolved.get(binder, {}).get(attr)


def check_soundness(rule: ast.Rule, scope: Scope, registry: Registry) -> list[RuleError]:
    """``[error]`` when a witness shows the sides differ in type, else ``[]``."""
    if not isinstance(rule.lhs, ast.OpCall):
        return []
    checker = Soundness(rule, scope, registry)
    try:
        message = checker.run()
    except Exception as e:  # noqa: BLE001 - a best-effort check never fails a rule file
        log.warning("soundness check of rule '%s' stopped: %s: %s", rule.name,
                    type(e).__name__, e)
        return []
    return [RuleError(message, rule.name_span)] if message else []


class Soundness:
    def __init__(self, rule: ast.Rule, scope: Scope, registry: Registry) -> None:
        self.rule = rule
        self.scope = scope
        self.registry = registry
        self.order = topo_ops(rule.lhs, set(scope.nodes))
        self.pinned = pinned_ranks(rule)
        self.budget = MAX_INFER
        self.failed: set[tuple[Any, ...]] = set()  # (op, operand types, attrs) that fail
        self.literals: dict[int, Any] = {}
        self._options: dict[tuple[Any, ...], list[TensorType]] = {}
        # (rank order, operand) -> the rank that typed the operand under that order before
        self.preferred: dict[tuple[Any, Any], int] = {}
        self.searched: set[tuple[Any, int]] = set()  # (rank order, op) searched in full once

    def run(self) -> str | None:
        if self.order is None:
            return None
        seen: set[tuple[Any, ...]] = set()
        passed = 0
        for tried, config in enumerate(configs(), 1):
            try:
                case = self.instantiate(config)
                key = (tuple(sorted(case.var_types.items())), tuple(case.node_types.values()))
                if key in seen:
                    continue
                seen.add(key)
                verdict = self.judge(case)
            except Inconclusive as e:
                log.debug("%s: %s", self.rule.name, e)
                verdict = None
            else:
                passed += 1
            if verdict:
                return verdict
            if self.budget <= 0 or passed >= ENOUGH or (not passed and tried >= GIVE_UP):
                break
        return None

    # ------------------------------------------------------------ left side
    def instantiate(self, config: Config) -> Case:
        case = Case()
        for call in self.order or ():
            self.type_op(call, case, config)
        case.values.update(case.attr_vars)
        for name, t in case.var_types.items():
            case.values[name] = Tensor(name, t, case.var_values.get(name))
        for name, t in case.binder_types.items():
            case.values.setdefault(name, Tensor(name, t, None))  # an op's result: not constant
        return case

    def schema(self, call: ast.OpCall) -> OpSchema:
        found = self.scope.schemas.get(id(call))
        return found if found is not None else self.registry.get(call.op, call.domain)

    def type_op(self, call: ast.OpCall, case: Case, config: Config) -> None:
        schema = self.schema(call)
        slots = [self.known(arg, case) for arg in call.args]
        open_slots = [i for i, s in enumerate(slots) if s is _OPEN]
        fixed_attrs = not self.type_dependent_attrs(call, case)
        attrs: dict[str, Any] = {}
        chosen: dict[str, Any] = {}
        attrs_key = ""
        for combo in self.combos(call, open_slots, config):
            types = [s if s is _OPEN else s[0] for s in slots]
            for i, t in zip(open_slots, combo, strict=True):
                types[i] = t
            if not fixed_attrs or not attrs_key:
                chosen = {}
                attrs = self.lhs_attrs(call, schema, case, types, chosen)
                attrs_key = repr(sorted(attrs.items()))
            key = (id(call), tuple(types), attrs_key)
            if key in self.failed:
                continue
            values = [s if s is _OPEN else s[1] for s in slots]
            out = self.infer(schema, call, types, values, open_slots, attrs, case)
            if out is None:
                self.failed.add(key)
                continue
            case.attr_vars.update(chosen)
            self.commit(call, types, values, out, case, attrs, schema, config)
            return
        raise Inconclusive(f"cannot type {call.qualified} with {config}")

    def type_dependent_attrs(self, call: ast.OpCall, case: Case) -> bool:
        """True when a new attribute variable's candidate depends on operand types."""
        return any(isinstance(a, ast.AttrSet) and a.name == "perm"
                   and isinstance(a.value, ast.Name) and a.value.name not in case.attr_vars
                   for a in call.attrs)

    def known(self, arg: ast.Expr, case: Case) -> Any:
        """``(type, value)`` of an operand typed already, else ``_OPEN``."""
        if isinstance(arg, ast.OpCall):
            return case.node_types[id(arg)], case.node_values[id(arg)]
        if isinstance(arg, ast.NoneLit):
            return None, None
        if isinstance(arg, ast.Name) and arg.name in self.scope.nodes:
            if arg.name not in case.binder_types:
                raise Inconclusive(f"{arg.name} is used before its node is typed")
            return case.binder_types[arg.name], case.binder_values[arg.name]
        if isinstance(arg, ast.Name) and arg.name in case.var_types:
            return case.var_types[arg.name], case.var_values[arg.name]
        return _OPEN

    def operand_value(self, arg: ast.Expr, t: TensorType, case: Case) -> np.ndarray | None:
        literal = self.literal_array(arg, t)
        return literal if literal is not None else random_value(t)

    def combos(self, call: ast.OpCall, open_slots: list[int], config: Config
               ) -> Iterator[tuple[TensorType, ...]]:
        """Operand typings: same-rank ones first, then floats of mixed ranks, then ints."""
        options = [self.options(call.args[i], k, config) for k, i in enumerate(open_slots)]
        nfloat = [sum(t.dtype != "int64" for t in o) or len(o) for o in options]
        width = max(nfloat, default=1)
        diagonal = [tuple(min(i, n - 1) for n in nfloat) for i in range(width)]
        one_off = (d[:k] + (j,) + d[k + 1:] for d in diagonal for k in range(len(d))
                   for j in range(nfloat[k]))
        indices = itertools.chain(diagonal, one_off,
                                  itertools.product(*(range(n) for n in nfloat)),
                                  itertools.product(*(range(len(o)) for o in options)))
        seen: set[tuple[int, ...]] = set()
        tried = (config.ranks, id(call)) in self.searched or any(
            ranks == config.ranks for ranks, _ in self.preferred)
        self.searched.add((config.ranks, id(call)))
        limit = MAX_COMBOS_LATER if tried else MAX_COMBOS
        for idx in indices:
            if len(seen) >= limit:
                return
            if idx not in seen:
                seen.add(idx)
                yield tuple(o[i] for o, i in zip(options, idx, strict=True))

    def options(self, arg: ast.Expr, k: int, config: Config) -> list[TensorType]:
        key = (id(arg), k, config, self.preferred.get((config.ranks, _key(arg))))
        found = self._options.get(key)
        if found is None:
            found = self._options[key] = self.make_options(arg, k, config)
        return found

    def make_options(self, arg: ast.Expr, k: int, config: Config) -> list[TensorType]:
        literal = self.literal(arg)
        if isinstance(literal, tuple):
            kind = "int64" if all(isinstance(v, int) for v in literal) else "float32"
            return [TensorType(kind, (len(literal),))]
        ranks = list(config.ranks)
        if config.shift and k:
            ranks = ranks[1:] + ranks[:1]
        if isinstance(arg, ast.Name) and arg.name in self.pinned:
            ranks = [self.pinned[arg.name]]
        elif (config.ranks, _key(arg)) in self.preferred:
            best = self.preferred[config.ranks, _key(arg)]
            first = [best + 1, best] if config.shift and k and best < 4 else [best]
            ranks = first + [r for r in ranks if r not in first]
        floats = [TensorType("float32", dims(r, config.dims, k)) for r in ranks]
        if literal is not None:
            return floats
        return floats + [TensorType("int64", dims(1, "aligned", k)),
                         TensorType("int64", ())]

    def literal(self, arg: ast.Expr) -> Any:
        """The value of a pattern constant, or ``None`` for variables and wildcards."""
        if id(arg) not in self.literals:
            self.literals[id(arg)] = _literal(arg)
        return self.literals[id(arg)]

    def lhs_attrs(self, call: ast.OpCall, schema: OpSchema, case: Case, types: list[Any],
                  chosen: dict[str, Any]) -> dict[str, Any]:
        """The attributes of a pattern op; new attribute variables get candidates."""
        attrs: dict[str, Any] = {}
        for item in call.attrs:
            if not isinstance(item, ast.AttrSet) or isinstance(item.value, ast.Wildcard):
                continue
            spec = schema.attrs[item.name]
            if isinstance(item.value, ast.Name) and item.value.name not in CONSTANTS:
                name = item.value.name
                if name not in case.attr_vars and name not in chosen:
                    chosen[name] = self.attr_candidate(spec, types, case)
                value = case.attr_vars.get(name, chosen.get(name))
            else:
                try:
                    value = attr_value(spec, evaluate(item.value, _Env(case)))
                except EvalError as e:
                    raise Inconclusive(str(e)) from None
            if value is not None:
                attrs[item.name] = value
        return attrs

    def attr_candidate(self, spec: Any, types: list[Any], case: Case) -> Any:
        """A value for an attribute variable: the default, or a telling permutation."""
        first = types[0] if types else None
        if spec.name != "perm" or not isinstance(first, TensorType) or first.shape is None:
            return spec.default
        r = len(first.shape)
        if sum(isinstance(v, tuple) for v in case.attr_vars.values()) % 2 == 0:
            return tuple(range(1, r)) + (0,) if r else ()
        return tuple(reversed(range(r)))

    def infer(self, schema: OpSchema, call: ast.OpCall, types: list[Any], values: list[Any],
              open_slots: list[int], attrs: dict[str, Any], case: Case
              ) -> tuple[TensorType, np.ndarray] | None:
        """The op's output type and value, when both inference and the kernel accept.

        Values for the open operands are drawn (into ``values``) only once inference
        has accepted their types.
        """
        self.budget -= 1
        if self.budget < 0:
            raise Inconclusive("inference budget exhausted")
        consts = [self.literal_array(a, t) if self.literal(a) is not None else None
                  for a, t in zip(call.args, types, strict=True)]
        index = call.output or 0
        try:
            op_call = schema.call(attrs, index + 1)
            out = list(schema.infer(types, consts, op_call))
            if index >= len(out):
                return None
            for i in open_slots:
                values[i] = self.operand_value(call.args[i], types[i], case)
            with np.errstate(all="ignore"):
                result = list(schema.kernel(values, op_call))
        except _INFER_ERRORS:
            return None
        return (out[index], np.asarray(result[index])) if index < len(result) else None

    def literal_array(self, arg: ast.Expr, t: Any) -> np.ndarray | None:
        value = self.literal(arg)
        if value is None or not isinstance(t, TensorType) or not t.is_static:
            return None
        if isinstance(value, tuple):
            return np.asarray(value, dtype=t.dtype)
        return np.full(t.shape, value, dtype=t.dtype)  # type: ignore[arg-type]

    def commit(self, call: ast.OpCall, types: list[Any], values: list[Any],
               out: tuple[TensorType, np.ndarray], case: Case, attrs: dict[str, Any],
               schema: OpSchema, config: Config) -> None:
        for arg, t, v in zip(call.args, types, values, strict=True):
            if isinstance(t, TensorType) and t.shape is not None and t.dtype != "int64":
                self.preferred.setdefault((config.ranks, _key(arg)), len(t.shape))
            if isinstance(arg, ast.Name) and arg.name not in CONSTANTS:
                case.var_types.setdefault(arg.name, t)
                case.var_values.setdefault(arg.name, v)
        case.node_types[id(call)], case.node_values[id(call)] = out
        if call.binder:
            case.binder_types[call.binder], case.binder_values[call.binder] = out
            case.node_attrs[call.binder] = attrs
            case.resolved[call.binder] = schema.resolve(attrs)

    # ------------------------------------------------------------ clauses and right side
    def judge(self, case: Case) -> str | None:
        env = _Env(case)
        for clause in self.rule.clauses:
            try:
                value = evaluate(clause.expr, env)
            except EvalError as e:
                raise Inconclusive(f"{clause.text}: {e}") from None
            if isinstance(clause, ast.Let):
                case.values[clause.name] = value
            elif not _holds(value):
                raise Inconclusive(f"guard {clause.text} is false")
        root = self.rule.lhs
        assert isinstance(root, ast.OpCall)
        left = case.node_types[id(root)]
        right = self.rhs_type(self.rule.rhs, case, left.dtype)
        return differs(left, right, case)

    def rhs_type(self, e: ast.Expr, case: Case, like: str | None) -> TensorType | None:
        if isinstance(e, ast.NoneLit):
            return None
        if isinstance(e, ast.Name) and e.name in case.var_types:
            return case.var_types[e.name]
        if isinstance(e, ast.Name) and e.name in case.binder_types:
            return case.binder_types[e.name]
        if isinstance(e, ast.OpCall):
            return self.rhs_op(e, case, like)
        value = self.rhs_value(e, case, like)
        return TensorType(value.dtype.name, tuple(int(d) for d in value.shape))

    def rhs_value(self, e: ast.Expr, case: Case, like: str | None) -> np.ndarray:
        try:
            return input_constant(evaluate(e, _Env(case)), like)
        except EvalError as err:
            raise Inconclusive(str(err)) from None

    def rhs_op(self, call: ast.OpCall, case: Case, outer: str | None) -> TensorType:
        """Typed as ``apply.Builder.op`` builds it (the same dtype rule for literals)."""
        schema = self.schema(call)
        tensors = [a for a in call.args if isinstance(a, (ast.OpCall, ast.NoneLit)) or (
            isinstance(a, ast.Name) and a.name in self.scope.tensors)]
        types: dict[int, Any] = {id(a): self.rhs_type(a, case, outer) for a in tensors}
        like = next((t.dtype for a, t in types.items() if t is not None and not isinstance(
            _arg(call, a), ast.OpCall)), outer)
        consts: list[np.ndarray | None] = []
        for a in call.args:
            if id(a) not in types:
                value = self.rhs_value(a, case, like)
                types[id(a)] = TensorType(value.dtype.name, tuple(value.shape))
                consts.append(value)
            else:
                consts.append(None)
        attrs = self.rhs_attrs(call, schema, case)
        try:
            out = schema.infer([types[id(a)] for a in call.args], consts, schema.call(attrs))
            return out[call.output or 0]
        except (*_INFER_ERRORS,) as err:
            raise Inconclusive(f"right side {call.qualified}: {err}") from None

    def rhs_attrs(self, call: ast.OpCall, schema: OpSchema, case: Case) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for item in call.attrs:
            if isinstance(item, ast.AttrCopy):
                attrs.update(case.node_attrs.get(item.binder, {}))
                continue
            try:
                attrs[item.name] = attr_value(schema.attrs[item.name],
                                              evaluate(item.value, _Env(case)))
            except EvalError as e:
                raise Inconclusive(str(e)) from None
        return attrs


_OPEN = object()


def _key(arg: ast.Expr) -> Any:
    return arg.name if isinstance(arg, ast.Name) else id(arg)


def _literal(arg: ast.Expr) -> Any:
    if isinstance(arg, (ast.Name, ast.Wildcard)) and not (
            isinstance(arg, ast.Name) and arg.name in CONSTANTS):
        return None
    try:
        return evaluate(arg, _Env(Case()))
    except EvalError:
        return None


def _arg(call: ast.OpCall, key: int) -> ast.Expr | None:
    return next((a for a in call.args if id(a) == key), None)


def _holds(value: Any) -> bool:
    try:
        return truth(value)
    except EvalError as e:
        raise Inconclusive(str(e)) from None


def differs(left: TensorType, right: TensorType | None, case: Case) -> str | None:
    """The unsoundness message when ``left`` and ``right`` provably differ."""
    if right is None:
        return None
    same_dtype = left.dtype == right.dtype
    if same_dtype and (left.shape is None or right.shape is None):
        return None
    if same_dtype and len(left.shape) == len(right.shape) and all(  # type: ignore[arg-type]
            not (isinstance(a, int) and isinstance(b, int)) or a == b
            for a, b in zip(left.shape, right.shape, strict=True)):  # type: ignore[arg-type]
        return None
    witness = ", ".join(f"{k}: {v}" for k, v in list(case.var_types.items())[:4])
    return (f"rule is shape-unsound: the left side is {left} but the right side is {right} "
            f"(when {witness})")
