"""Checking one rule and resolving it: ops, arity, attributes, scoping, built-in calls.

The left side is a pattern: ops (CamelCase), variables (a repeated name is the same
e-class), ``_``, constants (literals or closed expressions such as ``sqrt(2)``), ``none`` for
an absent optional input, attribute blocks that match a value or bind an attribute variable,
output indices and ``as`` binders. Clauses (``where``, ``let``) and the right side are checked
in text order against the names the pattern binds.

Invariants:
- ``Resolver.resolve`` never raises: it returns the resolved rule (``program.ResolvedRule``)
  when the rule is clean, and every ``RuleError`` it finds, at the narrowest span (the op
  name, the argument, the attribute). A rule is read exactly once.
- A resolved rule has: known ops with fitting arity and known attributes of fitting kind
  (each op node carrying the schema version it was checked against); every name on the right
  side and in clauses bound; ``n.attr`` reads of node binders only, with attributes of that
  op; built-in calls with fitting arity; pattern literals evaluated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ir.graph import TensorType
from ..ir.registry import AttrSpec, OpSchema, Registry, suggest
from . import ast, program
from .build import attr_value
from .builtins import CONSTANTS, FUNCTIONS
from .contract import check_decorators, contract_of
from .errors import RuleError
from .evaluate import evaluate
from .values import DType, EvalError
from .walk import free_names, is_closed, replace_ops, walk


@dataclass
class Scope:
    """The names a rule binds, by kind, with where each was first bound."""

    tensors: dict[str, ast.Span] = field(default_factory=dict)  # variables and binders
    nodes: dict[str, OpSchema] = field(default_factory=dict)  # binder -> op schema
    attrs: dict[str, ast.Span] = field(default_factory=dict)  # attribute variables
    lets: dict[str, ast.Span] = field(default_factory=dict)

    def bound(self) -> set[str]:
        return set(self.tensors) | set(self.attrs) | set(self.lets)

    def names(self) -> program.Names:
        return program.Names(frozenset(self.tensors), tuple(self.nodes.items()),
                             frozenset(self.attrs), frozenset(self.lets))


def fits(call: ast.OpCall, schema: OpSchema) -> bool:
    """True when ``call``'s arity and attribute names fit this version of the op."""
    n = len(call.args)
    if n < schema.min_inputs or (schema.max_inputs is not None and n > schema.max_inputs):
        return False
    return all(a.name in schema.attrs for a in call.attrs if isinstance(a, ast.AttrSet))


def input_ports(call: ast.OpCall, schema: OpSchema, versions: Sequence[OpSchema]
                ) -> tuple[str, ...]:
    """The attributes of ``call`` that are inputs of ``schema`` (an attribute in another
    version of the op), in port order, when they continue the call's inputs; else ``()``."""
    given = [a.name for a in call.attrs if isinstance(a, ast.AttrSet)]
    moved = [n for n in given if n not in schema.attrs]
    ports = {p.name: k for k, p in enumerate(schema.inputs)}
    if not moved or any(n not in ports or not any(n in v.attrs for v in versions)
                        for n in moved):
        return ()
    order = sorted(moved, key=ports.__getitem__)
    start = len(call.args)
    if [ports[n] for n in order] != list(range(start, start + len(order))):
        return ()
    n = start + len(order)
    if n < schema.min_inputs or (schema.max_inputs is not None and n > schema.max_inputs):
        return ()
    return tuple(order)


def attr_spec_in(versions: Sequence[OpSchema], name: str) -> AttrSpec:
    """The spec of attribute ``name`` in the newest version of an op that has it."""
    return next(v.attrs[name] for v in reversed(versions) if name in v.attrs)


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


class _Closed:
    """The environment of a closed expression: built-in constants only."""

    def lookup(self, name: str) -> Any:
        raise KeyError(name)

    def node_attr(self, binder: str, attr: str) -> Any:
        raise EvalError("no node is bound here")


CLOSED = _Closed()


def pattern_order(roots: list[ast.Expr], binders: set[str]) -> list[ast.OpCall] | None:
    """The pattern's ops, each after its operands and after the nodes its names refer to
    (DAG patterns); ``None`` for a cycle. Object identities are used only inside here."""
    calls = [e for root in roots for e in walk(root) if isinstance(e, ast.OpCall)]
    by_binder = {c.binder: c for c in calls if c.binder}
    deps = {id(c): [a for a in c.args if isinstance(a, ast.OpCall)] +
            [by_binder[a.name] for a in c.args if isinstance(a, ast.Name) and a.name in binders
             and a.name in by_binder] for c in calls}
    order: list[ast.OpCall] = []
    state: dict[int, int] = {}
    for c in calls:
        if state.get(id(c)) == 2:
            continue
        state[id(c)] = 1
        stack = [(c, iter(deps[id(c)]))]
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                state[id(node)] = 2
                order.append(node)
            elif state.get(id(child)) == 1:
                return None
            elif state.get(id(child)) != 2:
                state[id(child)] = 1
                stack.append((child, iter(deps[id(child)])))
    return order


Form = tuple[OpSchema, tuple[str, ...]]  # a version, and the attributes given as its inputs


class Resolver:
    """Checks one rule (op variables already replaced) against the registry and resolves it
    into its directions (``directions()``). ``forms`` picks, per pattern op, the version and
    the attributes given as inputs (an opset variant); without it each op takes the newest
    version its written form fits, and ``options`` records the forms each op could take."""

    def __init__(self, rule: ast.Rule, registry: Registry, source: str = "", *,
                 forms: Mapping[int, Form] | None = None, label: str = "") -> None:
        self.rule = rule
        self.registry = registry
        self.lines = source.split("\n")
        self.scope = Scope()
        self.errors: list[RuleError] = []
        self.forms = forms or {}
        self.label = label
        self.made: dict[str, ast.Let] = {}  # right-side node lets, by name
        self.locals: dict[str, set[int | None]] = {}  # ... resolved so far, and their uses
        self.options: dict[int, list[Form]] = {}  # pattern op -> the forms it fits
        self._keys: dict[int, int] = {}  # pattern op -> its key (local to one side)

    def error(self, span: ast.Span, message: str) -> None:
        self.errors.append(RuleError(message, span))

    def text(self, span: ast.Span) -> str:
        if span.line != span.end_line or span.line > len(self.lines):
            return "a constant"
        return self.lines[span.line - 1][span.col - 1: span.end_col - 1]

    def directions(self) -> tuple[list[program.Direction], list[RuleError]]:
        lhs = self.rule.lhs
        roots = list(lhs.items) if isinstance(lhs, ast.TupleLit) else [lhs]
        bad = [r for r in roots if not isinstance(r, ast.OpCall)]
        if bad:
            self.error(bad[0].span, "the left side must be an op pattern such as Relu(x)")
            return [], self.errors
        left, ops = self.side(roots, self.scope)  # type: ignore[arg-type]
        self.joined(roots)  # type: ignore[arg-type]
        if self.rule.bidirectional:
            back = self.check_reverse(len(roots))
        made = [c for c in self.rule.clauses if isinstance(c, ast.Let) and _builds(c.expr)]
        self.made = {c.name: c for c in made}
        clauses = [self.clause(c) for c in self.rule.clauses if c not in made]
        if not self.rule.bidirectional:
            lets = [self.node_let(c) for c in made]
            right = self.right_sides(len(roots))
            built = self.finish(lets)
        if self.errors or left is None:
            return [], self.errors
        where = tuple(c for c in clauses if c is not None)
        name = self.rule.name + self.label
        if not self.rule.bidirectional:
            return [program.Direction(name, left, where, right, self.scope.names(), ops,
                                      built)], []
        back_op, back_ops, back_scope = back
        return [program.Direction(name, left, where, (back_op,), self.scope.names(), ops),
                program.Direction(f"{name}/rev", (back_op,), where, left,
                                  back_scope.names(), back_ops)], []

    def side(self, roots: list[ast.OpCall], scope: Scope
             ) -> tuple[tuple[program.Op, ...] | None, tuple[program.Op, ...]]:
        """The roots of a pattern and its ops in dependency order (keys follow that order)."""
        binders = {e.binder for root in roots for e in walk(root)
                   if isinstance(e, ast.OpCall) and e.binder}
        order = pattern_order(list(roots), binders)
        if order is None:
            self.error(roots[0].span, "the pattern refers to its own result through 'as' "
                                      "names")
            return None, ()
        self._keys = {id(c): k for k, c in enumerate(order)}
        terms = [self.pattern(root, scope) for root in roots]
        ops = sorted((t for term in terms for t in _ops(term)), key=lambda o: o.key)
        if not all(isinstance(t, program.Op) for t in terms):
            return None, ()
        return tuple(terms), tuple(ops)  # type: ignore[arg-type]

    def joined(self, roots: list[ast.OpCall]) -> None:
        """Each root after the first shares a variable with the ones before it (the matcher
        joins roots on shared classes, never by trying every combination)."""
        seen: set[str] = set()
        for k, root in enumerate(roots):
            names = {n.name for n in free_names(root) if isinstance(n, ast.Name)} | {
                e.binder for e in walk(root) if isinstance(e, ast.OpCall) and e.binder}
            names &= set(self.scope.tensors)
            if k and not names & seen:
                self.error(root.span, "each root of a multi-root rule shares a variable with "
                                      "the roots before it (MatMul(x, wq), MatMul(x, wk))")
            seen |= names

    def right_sides(self, count: int) -> tuple[program.Term, ...]:
        rhs = self.rule.rhs
        sides = list(rhs.items) if isinstance(rhs, ast.TupleLit) else [rhs]
        if len(sides) != count:
            self.error(rhs.span, f"the right side gives {len(sides)} result"
                                 f"{'s' * (len(sides) != 1)} for {count} root"
                                 f"{'s' * (count != 1)}; give one per root, in order")
        return tuple(self.rhs(e, top=True) for e in sides)

    # ------------------------------------------------------------ right-side nodes
    def node_let(self, clause: ast.Let) -> tuple[str, program.Op, ast.Span]:
        """``let m = Op(...)``: a node of the right side, built once."""
        if clause.name in self.scope.bound() or clause.name in self.locals:
            self.error(clause.span, f"'{clause.name}' is already bound")
        term = self.rhs(clause.expr)
        self.locals[clause.name] = set()
        assert isinstance(term, program.Op)
        return clause.name, term, clause.span

    def local(self, e: ast.Expr) -> program.Local | None:
        """A use of a right-side node (``m`` or ``m[k]``), else ``None``."""
        if isinstance(e, ast.Name) and e.name in self.locals:
            self.locals[e.name].add(None)
            return program.Local(e.name, None, e.span)
        if isinstance(e, ast.Index) and isinstance(e.base, ast.Name) and (
                e.base.name in self.locals):
            if not (isinstance(e.index, ast.Num) and isinstance(e.index.value, int)):
                self.error(e.index.span, "an output of a right-side node is a number: m[0]")
                return None
            self.locals[e.base.name].add(e.index.value)
            return program.Local(e.base.name, e.index.value, e.span)
        return None

    def finish(self, lets: list[tuple[str, program.Op, ast.Span]]
               ) -> tuple[program.NodeLet, ...]:
        out = []
        for name, op, span in lets:
            used = self.locals[name]
            if None in used and len(used) > 1:
                self.error(span, f"'{name}' is used whole and by output index; use one")
            indices = [k for k in used if k is not None]
            out.append(program.NodeLet(name, op, max(indices) + 1 if indices else 0, span))
        return tuple(out)

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
        return fitting[-1] if fitting else versions[-1]

    def pattern_form(self, call: ast.OpCall) -> Form | None:
        """The version a pattern op is checked against and the attributes it takes as
        inputs there: the chosen form, else the newest version the call fits as written,
        else the newest it fits with some attributes as inputs (an opset variant)."""
        versions = self.registry.versions(call.op, call.domain)
        options: list[Form] = [(s, ()) for s in versions if fits(call, s)]
        options += [(s, ports) for s in versions if (ports := input_ports(call, s, versions))]
        options.sort(key=lambda f: f[0].since_version)
        self.options[id(call)] = options
        if id(call) in self.forms:
            return self.forms[id(call)]
        written = [f for f in options if not f[1]]
        if written or options:
            return (written or options)[-1]
        schema = self.schema(call)
        return None if schema is None else (schema, ())

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

    def attr_value_kind(self, call: ast.OpCall, spec: AttrSpec, value: ast.Expr) -> bool:
        kind = literal_kind(value)
        if not kind_fits(spec, kind):
            self.error(value.span, f"attribute '{spec.name}' of {call.qualified} takes "
                                   f"{spec.kind}, got {kind}")
            return False
        return True

    # ------------------------------------------------------------ left side
    def pattern(self, e: ast.Expr, scope: Scope) -> program.Term:
        if isinstance(e, ast.OpCall):
            return self.op_pattern(e, scope)
        if isinstance(e, ast.Name) and e.name not in CONSTANTS:
            if e.name in scope.attrs:
                self.error(e.span, f"'{e.name}' is an attribute variable; a tensor "
                                   "variable needs its own name")
            scope.tensors.setdefault(e.name, e.span)
            return program.Var(e.name, e.span)
        if isinstance(e, ast.Wildcard):
            return program.Wild(e.span)
        if isinstance(e, ast.NoneLit):
            return program.Absent(e.span)
        if isinstance(e, ast.OpRef):
            if self.registry.has(e.op, e.domain):
                self.error(e.span, f"an op in a pattern takes its inputs: {e.qualified}(...)")
            else:
                self.error(e.span, f"'{e.qualified}' is not a variable: variables start with "
                                   "a lowercase letter")
            return program.Wild(e.span)
        if not is_closed(e):
            self.error(e.span, "a pattern input must be an op, a variable, _ or a constant; "
                               "compute values in a where or let clause")
            return program.Wild(e.span)
        self.value(e, scope, "a pattern constant")
        return program.Const(self.closed(e), self.text(e.span), e.span)

    def closed(self, e: ast.Expr) -> Any:
        """The value of a closed expression (an error at its span when it has none)."""
        try:
            return evaluate(e, CLOSED)
        except EvalError as err:
            self.error(e.span, f"this constant has no value: {err}")
            return None

    def op_pattern(self, call: ast.OpCall, scope: Scope) -> program.Op:
        form = self.pattern_form(call)
        args = tuple(self.pattern(arg, scope) for arg in call.args)
        key = self._keys.get(id(call), -1)
        if form is None:
            return _unknown(call, args)
        schema, ports = form
        if not ports:
            self.op_shape(call, schema)
        attrs: list[program.Attr | program.Copy] = []
        port_terms: dict[str, program.Term] = {}
        for item in call.attrs:
            if isinstance(item, ast.AttrCopy):
                self.error(item.span, "{..n} copies attributes on the right side only")
                continue
            if item.name in ports:
                port_terms[item.name] = self.port(call, item, scope)
                continue
            spec = self.attr_spec(call, schema, item)
            if spec is not None:
                attr = self.attr_pattern(call, spec, item, scope)
                if attr is not None:
                    attrs.append(attr)
        args += tuple(port_terms[name] for name in ports)
        if call.binder is not None and call.output is not None:
            self.error(call.binder_span or call.span, "'as' cannot follow an output index; "
                                                      "bind the op without [k]")
        elif call.binder is not None:
            self.bind_node(call, schema, scope)
        return program.Op(key, schema, args, tuple(attrs), call.output, call.binder, call.span)

    def attr_pattern(self, call: ast.OpCall, spec: AttrSpec, item: ast.AttrSet,
                     scope: Scope) -> program.Attr | None:
        value = item.value
        if isinstance(value, ast.Name) and value.name not in CONSTANTS:
            if value.name in scope.tensors:
                self.error(value.span, f"'{value.name}' is a tensor variable; an attribute "
                                       "variable needs its own name")
            scope.attrs.setdefault(value.name, value.span)
            return program.Attr(item.name, spec, "var", value.name, item.span)
        if isinstance(value, ast.Wildcard):
            return None
        if not is_closed(value):
            self.error(value.span, "an attribute pattern is a constant or a new variable")
            return None
        if not self.attr_value_kind(call, spec, value):
            return None
        self.value(value, scope, "an attribute pattern")
        try:
            converted = attr_value(spec, evaluate(value, CLOSED))
        except EvalError as err:
            self.error(value.span, str(err))
            return None
        return program.Attr(item.name, spec, "value", converted, item.span)

    def port(self, call: ast.OpCall, item: ast.AttrSet, scope: Scope) -> program.Term:
        """An attribute of an older opset's form given as an input of this one (ReduceMean's
        ``axes`` from opset 18): a literal becomes a constant input; an attribute variable
        a constant input whose value binds it."""
        spec = attr_spec_in(self.registry.versions(call.op, call.domain), item.name)
        attr = self.attr_pattern(call, spec, item, scope)
        if attr is None:
            return program.Wild(item.span)
        if attr.kind == "var":
            return program.PortVar(attr.value, spec, item.span)
        return program.Const(attr.value, self.text(item.value.span), item.span)

    def bind_node(self, call: ast.OpCall, schema: OpSchema, scope: Scope) -> None:
        name, span = call.binder or "", call.binder_span or call.span
        if name in scope.nodes:
            self.error(span, f"'{name}' is bound twice with 'as'")
        elif name in scope.attrs:
            self.error(span, f"'{name}' is already an attribute variable")
        scope.nodes[name] = schema
        scope.tensors.setdefault(name, span)

    def check_reverse(self, roots: int) -> tuple[program.Op, tuple[program.Op, ...], Scope]:
        """``<=>``: the right side must be a pattern too, over the same variables."""
        rhs = self.rule.rhs
        back = Scope()
        if roots > 1 or not isinstance(rhs, ast.OpCall):
            self.error(rhs.span, "both sides of '<=>' must be op patterns, one each")
            return _unknown(rhs, ()), (), back
        found, ops = self.side([rhs], back)
        op = found[0] if found else None
        for side, names, other in (("left", self.scope, back), ("right", back, self.scope)):
            for name, span in {**names.tensors, **names.attrs}.items():
                if name not in other.tensors and name not in other.attrs:
                    self.error(span, f"'{name}' appears only on the {side} side of '<=>'")
        for e in (*walk(self.rule.lhs), *walk(rhs)):
            if isinstance(e, ast.Wildcard):
                self.error(e.span, "'_' cannot appear in a '<=>' rule: each side is built "
                                   "as the other's right side")
        for clause in self.rule.clauses:
            if isinstance(clause, ast.Let):
                self.error(clause.span, "a '<=>' rule cannot have let clauses")
        return op or _unknown(rhs, ()), ops, back

    # ------------------------------------------------------------ clauses
    def clause(self, clause: ast.Clause) -> program.Clause | None:
        if isinstance(clause, ast.Where):
            self.value(clause.expr, self.scope, "a where clause")
            return program.Where(clause.expr, clause.text, clause.span)
        self.value(clause.expr, self.scope, "a let clause")
        if clause.name in self.scope.bound():
            self.error(clause.span, f"'{clause.name}' is already bound")
        elif clause.name in CONSTANTS:
            self.error(clause.span, f"'{clause.name}' is a built-in constant")
        self.scope.lets[clause.name] = clause.span
        return program.Let(clause.name, clause.expr, clause.text, clause.span)

    def value(self, e: ast.Expr, scope: Scope, where: str) -> None:
        """A compile-time expression: names bound, functions known, no ops."""
        for sub in walk(e):
            if isinstance(sub, ast.Name):
                self.name_ref(sub, scope, where)
            elif isinstance(sub, ast.AttrRead):
                self.attr_read(sub, scope)
            elif isinstance(sub, ast.Call):
                self.call(sub)
            elif isinstance(sub, ast.Wildcard):
                self.error(sub.span, f"'_' has no value in {where}")
            elif isinstance(sub, ast.OpRef) and not self.registry.has(sub.op, sub.domain):
                hint = suggest(sub.qualified, op_names(self.registry)) or (
                    " (variables start with a lowercase letter)")
                self.error(sub.span, f"unknown op {sub.qualified}{hint}")
            elif isinstance(sub, ast.OpCall):
                self.error(sub.op_span, f"an op cannot appear in {where}; ops build or "
                                        "match graph nodes")
                return

    def name_ref(self, name: ast.Name, scope: Scope, where: str) -> None:
        if name.name in scope.bound() or name.name in CONSTANTS:
            return
        if name.name in self.made:
            self.error(name.span, f"'{name.name}' is a node the right side builds; it has no "
                                  f"value in {where}")
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
    def rhs(self, e: ast.Expr, top: bool = False) -> program.Term:
        local = self.local(e)
        if local is not None:
            return local
        if isinstance(e, ast.OpCall):
            return self.rhs_op(e)
        if isinstance(e, ast.Wildcard):
            self.error(e.span, "'_' cannot appear on the right side")
            return program.Wild(e.span)
        if isinstance(e, ast.NoneLit):
            if top:
                self.error(e.span, "the right side cannot be 'none'")
            return program.Absent(e.span)
        if isinstance(e, ast.Name) and e.name in self.scope.tensors:
            return program.Var(e.name, e.span)
        self.value(e, self.scope, "the right side")
        return program.Computed(e, e.span)

    def rhs_op(self, call: ast.OpCall) -> program.Op:
        schema = self.schema(call)
        args = tuple(self.rhs(arg) for arg in call.args)
        if call.binder is not None:
            self.error(call.binder_span or call.span, "'as' binds nodes on the left side only")
        if schema is None:
            return _unknown(call, args)
        self.op_shape(call, schema)
        given: set[str] = set()
        attrs: list[program.Attr | program.Copy] = []
        for item in call.attrs:
            if isinstance(item, ast.AttrCopy):
                given |= self.attr_copy(call, schema, item)
                attrs.append(program.Copy(item.binder, item.span))
                continue
            spec = self.attr_spec(call, schema, item)
            given.add(item.name)
            self.value(item.value, self.scope, "an attribute value")
            if spec is not None and self.attr_value_kind(call, spec, item.value):
                attrs.append(program.Attr(item.name, spec, "expr", item.value, item.span))
        for spec in schema.attrs.values():
            if spec.required and spec.name not in given:
                self.error(call.span, f"{call.qualified} needs attribute '{spec.name}'")
        return program.Op(-1, schema, args, tuple(attrs), call.output, None, call.span)

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


def resolve_rule(rule: ast.Rule, registry: Registry, source: str = "",
                 classes: Mapping[str, tuple[ast.OpRef, ...]] | None = None
                 ) -> tuple[program.ResolvedRule | None, list[RuleError]]:
    """Check and resolve one rule: every op it ranges over (``for F in CLASS``) and every
    opset form of its ops (``variants``), each a ``Direction`` of the resolved rule."""
    errors = check_decorators(rule)
    if rule.ruleset is None:
        errors.append(RuleError(f"rule '{rule.name}' is not in a ruleset; put a 'ruleset "
                                "NAME' line above it", rule.name_span))
    bindings = op_bindings(rule, registry, classes or {}, errors)
    directions: list[program.Direction] = []
    for label, ops in bindings:
        concrete = substitute(rule, ops) if ops else rule
        first = Resolver(concrete, registry, source, label=_label(label))
        found, failed = first.directions()
        if failed:
            prefix = f"(for {label}) " if label else ""
            errors += [RuleError(prefix + e.message, e.span) for e in failed]
            continue
        forms = variants(first.options)
        if len(forms) <= 1:
            directions += found
            continue
        for form_label, choice in forms:
            one = Resolver(concrete, registry, source, forms=choice,
                           label=_label(", ".join(x for x in (label, form_label) if x)))
            found, failed = one.directions()
            errors += failed
            directions += found
    if directions:
        examples = [example(d, directions[0].names, errors) for d in rule.decorators
                    if d.name == "example"]
    errors = list({(str(e), e.message): e for e in errors}.values())
    if errors or not directions:
        return None, errors
    return program.ResolvedRule(rule.name, rule.ruleset or "", contract_of(rule),
                                tuple(directions), rule, tuple(examples)), []


def example(d: ast.Decorator, names: program.Names, errors: list[RuleError]
            ) -> dict[str, Any]:
    """``@example(x: f32[2, 4], c = 0.5, p = [1, 0])``: types of tensor variables, values of
    constant tensor variables and attribute variables (checked to name the rule's own)."""
    leaves = set(names.tensors) - {b for b, _ in names.nodes}
    out: dict[str, Any] = {}
    for t in d.typed:
        dtype = CONSTANTS.get(t.dtype, (None,))[0]
        if t.name not in leaves:
            errors.append(RuleError(f"@example: '{t.name}' is not a variable of the left side"
                                    f"{suggest(t.name, leaves)}", t.span))
        elif not isinstance(dtype, DType):
            errors.append(RuleError(f"@example: unknown element type '{t.dtype}' (f32, f16, "
                                    "f64, i64, ...)", t.span))
        else:
            out[t.name] = TensorType(dtype.name, t.dims)
    for k in d.kwargs:
        if k.name not in leaves and k.name not in names.attrs:
            errors.append(RuleError(f"@example: '{k.name}' is not a variable of the left side"
                                    f"{suggest(k.name, [*leaves, *names.attrs])}", k.span))
        elif not is_closed(k.value):
            errors.append(RuleError("@example: a value is a literal", k.value.span))
        else:
            try:
                out[k.name] = evaluate(k.value, CLOSED)
            except EvalError as e:
                errors.append(RuleError(f"@example: {e}", k.value.span))
    if d.args:
        errors.append(RuleError("@example names its variables: @example(x: f32[2, 3], "
                                "c = 0.5)", d.args[0].span))
    return out


def _label(text: str) -> str:
    return f"[{text}]" if text else ""


def op_bindings(rule: ast.Rule, registry: Registry,
                classes: Mapping[str, tuple[ast.OpRef, ...]], errors: list[RuleError]
                ) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """``(label, {F: (domain, op)})`` for every combination of the rule's op variables."""
    choices: list[list[tuple[str, tuple[str, str]]]] = []
    seen: set[str] = set()
    for loop in rule.for_ops:
        if loop.var in seen:
            errors.append(RuleError(f"op variable {loop.var} is bound twice", loop.span))
        seen.add(loop.var)
        if registry.has(loop.var):
            errors.append(RuleError(f"{loop.var} is an op; name the op variable otherwise "
                                    "(F, G, Act...)", loop.span))
        if loop.classname is not None and loop.classname not in classes:
            hint = suggest(loop.classname, classes)
            errors.append(RuleError(f"unknown opclass '{loop.classname}'{hint}", loop.span))
            members: tuple[ast.OpRef, ...] = ()
        else:
            members = classes[loop.classname] if loop.classname else loop.ops
        for ref in members:
            if not registry.has(ref.op, ref.domain):
                hint = suggest(ref.qualified, op_names(registry))
                errors.append(RuleError(f"unknown op {ref.qualified}{hint}", ref.span))
        used = any(isinstance(e, (ast.OpCall, ast.OpRef)) and not e.domain
                   and e.op == loop.var for e in _rule_exprs(rule))
        if not used:
            errors.append(RuleError(f"op variable {loop.var} is not used in the rule",
                                    loop.span))
        choices.append([(loop.var, (m.domain, m.op)) for m in members])
    if errors:
        return []
    combos: list[tuple[str, dict[str, tuple[str, str]]]] = [("", {})]
    for options in choices:
        combos = [(", ".join(x for x in (label, f"{var}={_q(op)}") if x), {**ops, var: op})
                  for label, ops in combos for var, op in options]
    return combos


def _q(op: tuple[str, str]) -> str:
    return f"{op[0]}.{op[1]}" if op[0] else op[1]


def _rule_exprs(rule: ast.Rule) -> Iterator[ast.Expr]:
    for root in (rule.lhs, rule.rhs, *(c.expr for c in rule.clauses)):
        yield from walk(root)


def substitute(rule: ast.Rule, ops: Mapping[str, tuple[str, str]]) -> ast.Rule:
    """``rule`` with its op variables replaced by the ops they stand for."""
    clauses = tuple(dataclasses.replace(c, expr=replace_ops(c.expr, ops))
                    for c in rule.clauses)
    return dataclasses.replace(rule, lhs=replace_ops(rule.lhs, ops),
                               rhs=replace_ops(rule.rhs, ops), clauses=clauses)


def variants(options: Mapping[int, list[Form]]) -> list[tuple[str, dict[int, Form]]]:
    """The opset variants of a pattern: for each opset at which some op changes form (an
    attribute becomes an input), every op's form at that opset; one per distinct set of
    forms, labelled by the first opset it holds from."""
    if all(len({f[1] for f in opts}) <= 1 for opts in options.values()):
        return []
    opsets = sorted({s.since_version for opts in options.values() for s, _ in opts
                     if not s.domain})
    found: dict[tuple[tuple[str, ...], ...], tuple[int, dict[int, Form]]] = {}
    for opset in opsets:
        choice: dict[int, Form] = {}
        for call, opts in options.items():
            at = [f for f in opts if f[0].domain or f[0].since_version <= opset]
            if not at:
                break
            choice[call] = at[-1]
        else:
            key = tuple(choice[c][1] for c in options)
            first = found.get(key, (opset, {}))[0]
            found[key] = (first, choice)
    starts = sorted(first for first, _ in found.values())
    return [(_opsets(first, starts), choice) for first, choice in found.values()]


def _opsets(first: int, starts: list[int]) -> str:
    """``opset<18``, ``opset 13-17`` or ``opset>=18`` for a variant holding from ``first``."""
    later = [s for s in starts if s > first]
    if not later:
        return f"opset>={first}"
    return f"opset<{later[0]}" if first == starts[0] else f"opset {first}-{later[0] - 1}"


def _builds(e: ast.Expr) -> bool:
    """True when a ``let`` builds a right-side node (its value is an op)."""
    return isinstance(e, ast.OpCall)


def _ops(term: program.Term) -> list[program.Op]:
    out: list[program.Op] = []
    stack: list[program.Term] = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, program.Op):
            out.append(t)
            stack.extend(t.args)
    return out


def _unknown(e: ast.Expr, args: tuple[program.Term, ...]) -> program.Op:
    """A placeholder for an op that did not resolve (the rule has an error already)."""
    placeholder = OpSchema("?", 1, (), (), lambda t, c, call: [], lambda i, call: [])
    return program.Op(-1, placeholder, args, (), None, None, e.span)


def _count(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"


__all__ = ["Resolver", "Scope", "resolve_rule", "arity_text", "fits", "free_names", "literal_kind",
           "op_names"]
