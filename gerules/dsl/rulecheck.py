"""Checking one rule: ops, arity, attributes, scoping of names, built-in calls.

The left side is a pattern: ops (CamelCase), variables (a repeated name is the same
e-class), ``_``, constants (literals or closed expressions such as ``sqrt(2)``), ``none`` for
an absent optional input, attribute blocks that match a value or bind an attribute variable,
output indices and ``as`` binders. Clauses (``where``, ``let``) and the right side are checked
in text order against the names the pattern binds.

Invariants:
- ``RuleChecker.check`` never raises: it returns every ``RuleError`` it finds, at the
  narrowest span (the op name, the argument, the attribute).
- A rule that passes has: known ops with fitting arity and known attributes of fitting
  kind; every name on the right side and in clauses bound; ``n.attr`` reads of node
  binders only, with attributes of that op; built-in calls with fitting arity.
- ``Scope`` records, per name, what it is (tensor, node binder, attribute variable, let);
  the soundness check and the compiler read the same classification.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..ir.registry import AttrSpec, OpSchema, Registry, suggest
from . import ast
from .builtins import CONSTANTS, FUNCTIONS
from .errors import RuleError


@dataclass
class Scope:
    """The names a rule binds, by kind, with where each was first bound."""

    tensors: dict[str, ast.Span] = field(default_factory=dict)  # variables and binders
    nodes: dict[str, OpSchema] = field(default_factory=dict)  # binder -> op schema
    attrs: dict[str, ast.Span] = field(default_factory=dict)  # attribute variables
    lets: dict[str, ast.Span] = field(default_factory=dict)
    schemas: dict[int, OpSchema] = field(default_factory=dict)  # id(OpCall) -> version used

    def bound(self) -> set[str]:
        return set(self.tensors) | set(self.attrs) | set(self.lets)

    def values(self) -> set[str]:
        return set(self.attrs) | set(self.lets)


def fits(call: ast.OpCall, schema: OpSchema) -> bool:
    """True when ``call``'s arity and attribute names fit this version of the op."""
    n = len(call.args)
    if n < schema.min_inputs or (schema.max_inputs is not None and n > schema.max_inputs):
        return False
    return all(a.name in schema.attrs for a in call.attrs if isinstance(a, ast.AttrSet))


def op_names(registry: Registry) -> list[str]:
    return [f"{d}.{o}" if d else o for d, o in registry.ops()]


def arity_text(schema: OpSchema) -> str:
    lo, hi = schema.min_inputs, schema.max_inputs
    noun = "input" if (hi or lo) == 1 else "inputs"
    if hi is None:
        return f"at least {lo} {noun}"
    return f"{lo} {noun}" if lo == hi else f"{lo} to {hi} {noun}"


def literal_kind(expr: ast.Expr) -> str | None:
    """The attribute kind a literal expression has (``None``: not a plain literal)."""
    if isinstance(expr, ast.Unary) and expr.op == "-" and isinstance(expr.operand, ast.Num):
        expr = expr.operand
    if isinstance(expr, ast.Bool):
        return "int"
    if isinstance(expr, ast.Num):
        return "int" if isinstance(expr.value, int) else "float"
    if isinstance(expr, ast.Str):
        return "string"
    if isinstance(expr, (ast.ListLit, ast.TupleLit)):
        kinds = {literal_kind(i) for i in expr.items}
        if not kinds:
            return "list"
        if len(kinds) == 1 and None not in kinds:
            return f"{kinds.pop()}s"
        return "floats" if kinds == {"int", "float"} else None
    return None


_FITS = {
    "int": {"int"}, "float": {"int", "float"}, "string": {"string"},
    "ints": {"ints", "list"}, "floats": {"ints", "floats", "list"}, "strings": {"strings", "list"},
}


def kind_fits(spec: AttrSpec, kind: str | None) -> bool:
    return kind is None or spec.kind not in _FITS or kind in _FITS[spec.kind]


def free_names(expr: ast.Expr) -> Iterable[ast.Name | ast.AttrRead | ast.Wildcard]:
    """Every name, attribute read and wildcard in ``expr`` (ops' children included)."""
    stack: list[ast.Expr] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (ast.Name, ast.AttrRead, ast.Wildcard)):
            yield e
        stack.extend(children(e))


def children(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Unary):
        return [e.operand]
    if isinstance(e, ast.Binary):
        return [e.left, e.right]
    if isinstance(e, ast.Index):
        return [e.base, e.index]
    if isinstance(e, ast.Slice):
        return [x for x in (e.base, e.lo, e.hi) if x is not None]
    if isinstance(e, (ast.ListLit, ast.TupleLit)):
        return list(e.items)
    if isinstance(e, ast.Call):
        return [*e.args, *(k.value for k in e.kwargs)]
    if isinstance(e, ast.OpCall):
        values = [a.value for a in e.attrs if isinstance(a, ast.AttrSet)]
        return [*e.args, *(k.value for k in e.kwargs), *values]
    return []


def is_closed(expr: ast.Expr) -> bool:
    """True when ``expr`` mentions no variable (built-in constants are fine)."""
    if any(isinstance(e, ast.OpCall) for e in _walk(expr)):
        return False
    return all(isinstance(n, ast.Name) and n.name in CONSTANTS for n in free_names(expr))


def _walk(expr: ast.Expr) -> Iterable[ast.Expr]:
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(children(e))


class RuleChecker:
    """Checks one rule against the registry; ``check()`` returns the errors."""

    def __init__(self, rule: ast.Rule, registry: Registry) -> None:
        self.rule = rule
        self.registry = registry
        self.scope = Scope()
        self.errors: list[RuleError] = []

    def error(self, span: ast.Span, message: str) -> None:
        self.errors.append(RuleError(message, span))

    def check(self) -> list[RuleError]:
        lhs = self.rule.lhs
        if not isinstance(lhs, ast.OpCall):
            self.error(lhs.span, "the left side must be an op pattern such as Relu(x)")
            return self.errors
        self.pattern(lhs, self.scope)
        if self.rule.bidirectional:
            self.check_reverse()
        for clause in self.rule.clauses:
            self.clause(clause)
        if not self.rule.bidirectional:
            self.rhs(self.rule.rhs, top=True)
        return self.errors

    # ------------------------------------------------------------ ops
    def schema(self, call: ast.OpCall) -> OpSchema | None:
        """The newest version of the op whose signature fits the call (else the newest).

        A pattern matches any opset's form of an op (ReduceMean's ``axes`` is an attribute
        before opset 18 and an input from 18), so the call is checked against the version
        it fits.
        """
        versions = self.registry.versions(call.op, call.domain)
        if not versions:
            hint = suggest(call.qualified, op_names(self.registry))
            self.error(call.op_span, f"unknown op {call.qualified}{hint}")
            return None
        fitting = [s for s in versions if fits(call, s)]
        chosen = fitting[-1] if fitting else versions[-1]
        self.scope.schemas[id(call)] = chosen
        return chosen

    def op_shape(self, call: ast.OpCall, schema: OpSchema) -> None:
        """Arity, keyword arguments and output index of an op call."""
        n = len(call.args)
        lo, hi = schema.min_inputs, schema.max_inputs
        if n < lo or (hi is not None and n > hi):
            self.error(call.span, f"{call.qualified} takes {arity_text(schema)}, got {n}")
        for k in call.kwargs:
            self.error(k.span, f"op inputs are positional; attributes go in braces: "
                               f"{call.qualified}(...) {{{k.name} = ...}}")
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.NoneLit) and i < len(schema.inputs) and not (
                    schema.inputs[i].optional):
                self.error(arg.span, f"input {i} ({schema.inputs[i].name}) of "
                                     f"{call.qualified} is required; 'none' marks an absent "
                                     "optional input")
        if call.output is not None:
            most = schema.max_outputs
            if most is not None and call.output >= most:
                self.error(call.span, f"{call.qualified} has {most} output"
                                      f"{'s' * (most != 1)}; output [{call.output}] does not "
                                      "exist")

    def attr_spec(self, call: ast.OpCall, schema: OpSchema, item: ast.AttrSet
                  ) -> AttrSpec | None:
        spec = schema.attrs.get(item.name)
        if spec is None:
            versions = self.registry.versions(schema.op, schema.domain)
            hint = suggest(item.name, {a for v in versions for a in v.attrs})
            self.error(item.span, f"{call.qualified} has no attribute '{item.name}'{hint}")
        return spec

    def attr_value_kind(self, call: ast.OpCall, spec: AttrSpec, value: ast.Expr) -> None:
        kind = literal_kind(value)
        if not kind_fits(spec, kind):
            self.error(value.span, f"attribute '{spec.name}' of {call.qualified} takes "
                                   f"{spec.kind}, got {kind}")

    # ------------------------------------------------------------ left side
    def pattern(self, e: ast.Expr, scope: Scope) -> None:
        if isinstance(e, ast.OpCall):
            self.op_pattern(e, scope)
        elif isinstance(e, ast.Name):
            if e.name in CONSTANTS:
                return  # a constant such as pi; matched by value
            if e.name in scope.attrs:
                self.error(e.span, f"'{e.name}' is an attribute variable; a tensor "
                                   "variable needs its own name")
            scope.tensors.setdefault(e.name, e.span)
        elif isinstance(e, (ast.Wildcard, ast.NoneLit)):
            return
        elif not is_closed(e):
            self.error(e.span, "a pattern input must be an op, a variable, _ or a constant; "
                               "compute values in a where or let clause")
        else:
            self.value(e, scope, "a pattern constant")

    def op_pattern(self, call: ast.OpCall, scope: Scope) -> None:
        schema = self.schema(call)
        for arg in call.args:
            self.pattern(arg, scope)
        if schema is None:
            return
        self.op_shape(call, schema)
        for item in call.attrs:
            if isinstance(item, ast.AttrCopy):
                self.error(item.span, "{..n} copies attributes on the right side only")
                continue
            spec = self.attr_spec(call, schema, item)
            if spec is not None:
                self.attr_pattern(call, spec, item.value, scope)
        if call.binder is not None and call.output is not None:
            self.error(call.binder_span or call.span, "'as' cannot follow an output index; "
                                                      "bind the op without [k]")
        elif call.binder is not None:
            self.bind_node(call, schema, scope)

    def attr_pattern(self, call: ast.OpCall, spec: AttrSpec, value: ast.Expr,
                     scope: Scope) -> None:
        if isinstance(value, ast.Name) and value.name not in CONSTANTS:
            if value.name in scope.tensors:
                self.error(value.span, f"'{value.name}' is a tensor variable; an attribute "
                                       "variable needs its own name")
            scope.attrs.setdefault(value.name, value.span)
        elif isinstance(value, ast.Wildcard):
            return
        elif not is_closed(value):
            self.error(value.span, "an attribute pattern is a constant or a new variable")
        else:
            self.attr_value_kind(call, spec, value)
            self.value(value, scope, "an attribute pattern")

    def bind_node(self, call: ast.OpCall, schema: OpSchema, scope: Scope) -> None:
        name, span = call.binder or "", call.binder_span or call.span
        if name in scope.nodes:
            self.error(span, f"'{name}' is bound twice with 'as'")
        elif name in scope.attrs:
            self.error(span, f"'{name}' is already an attribute variable")
        scope.nodes[name] = schema
        scope.tensors.setdefault(name, span)

    def check_reverse(self) -> None:
        """``<=>``: the right side must be a pattern too, over the same variables."""
        rhs = self.rule.rhs
        if not isinstance(rhs, ast.OpCall):
            self.error(rhs.span, "both sides of '<=>' must be op patterns")
            return
        back = Scope()
        self.pattern(rhs, back)
        for side, names, other in (("left", self.scope, back), ("right", back, self.scope)):
            for name, span in {**names.tensors, **names.attrs}.items():
                if name not in other.tensors and name not in other.attrs:
                    self.error(span, f"'{name}' appears only on the {side} side of '<=>'")
        for clause in self.rule.clauses:
            if isinstance(clause, ast.Let):
                self.error(clause.span, "a '<=>' rule cannot have let clauses")

    # ------------------------------------------------------------ clauses
    def clause(self, clause: ast.Clause) -> None:
        if isinstance(clause, ast.Where):
            self.value(clause.expr, self.scope, "a where clause")
            return
        self.value(clause.expr, self.scope, "a let clause")
        if clause.name in self.scope.bound():
            self.error(clause.span, f"'{clause.name}' is already bound")
        elif clause.name in CONSTANTS:
            self.error(clause.span, f"'{clause.name}' is a built-in constant")
        self.scope.lets[clause.name] = clause.span

    def value(self, e: ast.Expr, scope: Scope, where: str) -> None:
        """A compile-time expression: names bound, functions known, no ops."""
        for sub in _walk(e):
            if isinstance(sub, ast.Name):
                self.name_ref(sub, scope, where)
            elif isinstance(sub, ast.AttrRead):
                self.attr_read(sub, scope)
            elif isinstance(sub, ast.Call):
                self.call(sub)
            elif isinstance(sub, ast.Wildcard):
                self.error(sub.span, f"'_' has no value in {where}")
            elif isinstance(sub, ast.OpCall):
                self.error(sub.op_span, f"an op cannot appear in {where}; ops build or "
                                        "match graph nodes")
                return

    def name_ref(self, name: ast.Name, scope: Scope, where: str) -> None:
        if name.name in scope.bound() or name.name in CONSTANTS:
            return
        hint = suggest(name.name, [*scope.bound(), *CONSTANTS])
        if where == "the right side":
            self.error(name.span, f"unbound variable '{name.name}' on the right side{hint}")
        else:
            self.error(name.span, f"unknown name '{name.name}' in {where}{hint}")

    def attr_read(self, read: ast.AttrRead, scope: Scope) -> None:
        schema = scope.nodes.get(read.binder)
        if schema is None:
            hint = suggest(read.binder, scope.nodes)
            self.error(read.span, f"'{read.binder}' is not a node bound with 'as'{hint}")
        elif not any(read.attr in v.attrs
                     for v in self.registry.versions(schema.op, schema.domain)):
            hint = suggest(read.attr, schema.attrs)
            self.error(read.span, f"{schema.qualified_op} has no attribute "
                                  f"'{read.attr}'{hint}")

    def call(self, call: ast.Call) -> None:
        fn = FUNCTIONS.get(call.func)
        if fn is None:
            hint = suggest(call.func, FUNCTIONS) or self.op_hint(call.func)
            self.error(call.span, f"unknown function '{call.func}'{hint}")
            return
        n = len(call.args)
        if n < fn.min_args or (fn.max_args is not None and n > fn.max_args):
            self.error(call.span, f"{fn.signature} takes {_count(fn.min_args, fn.max_args)} "
                                  f"argument{'s' * (fn.max_args != 1)}, got {n}")
        for k in call.kwargs:
            if k.name not in fn.kwargs:
                hint = suggest(k.name, fn.kwargs)
                self.error(k.span, f"{fn.signature} has no argument '{k.name}'{hint}")

    def op_hint(self, func: str) -> str:
        ops = [o for o in op_names(self.registry) if o.lower() == func.lower()]
        return f" (ops start with a capital letter: {ops[0]})" if ops else ""

    # ------------------------------------------------------------ right side
    def rhs(self, e: ast.Expr, top: bool = False) -> None:
        if isinstance(e, ast.OpCall):
            self.rhs_op(e)
        elif isinstance(e, ast.Wildcard):
            self.error(e.span, "'_' cannot appear on the right side")
        elif isinstance(e, ast.NoneLit) and top:
            self.error(e.span, "the right side cannot be 'none'")
        elif not isinstance(e, ast.NoneLit):
            self.value(e, self.scope, "the right side")

    def rhs_op(self, call: ast.OpCall) -> None:
        schema = self.schema(call)
        for arg in call.args:
            self.rhs(arg)
        if call.binder is not None:
            self.error(call.binder_span or call.span, "'as' binds nodes on the left side only")
        if schema is None:
            return
        self.op_shape(call, schema)
        given: set[str] = set()
        for item in call.attrs:
            if isinstance(item, ast.AttrCopy):
                given |= self.attr_copy(call, schema, item)
                continue
            spec = self.attr_spec(call, schema, item)
            given.add(item.name)
            self.value(item.value, self.scope, "an attribute value")
            if spec is not None:
                self.attr_value_kind(call, spec, item.value)
        for spec in schema.attrs.values():
            if spec.required and spec.name not in given:
                self.error(call.span, f"{call.qualified} needs attribute '{spec.name}'")

    def attr_copy(self, call: ast.OpCall, schema: OpSchema, item: ast.AttrCopy) -> set[str]:
        source = self.scope.nodes.get(item.binder)
        if source is None:
            hint = suggest(item.binder, self.scope.nodes)
            self.error(item.span, f"'{item.binder}' is not a node bound with 'as'{hint}")
            return set()
        extra = [a for a in source.attrs if a not in schema.attrs]
        if extra:
            self.error(item.span, f"{{..{item.binder}}} would copy {source.qualified_op}'s "
                                  f"attribute '{extra[0]}', which {call.qualified} does not "
                                  "have; set the attributes one by one")
        return set(source.attrs)


def _count(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"
