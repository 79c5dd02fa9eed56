"""The resolved rule program: what the checker makes of a rule library, once.

The checker (``resolve``) reads each rule's syntax tree once and returns these values; the
compiler (``compile``), the shape soundness check (``soundness``), the instance generator
(``instances``) and the verifier consume them and never look a rule up again (egglog's
resolved commands are the model: typechecking turns surface syntax into a core form whose
every call carries its resolved signature).

Invariants:
- Every op node (``Op``) carries the ``OpSchema`` version it was checked against; a pattern's
  op nodes also carry a ``key``: their position in the direction's ``ops`` (each after its
  operands and after the nodes its names refer to; right-side-only nodes have ``-1``). Stages
  that keep per-node state key it by ``Op.key``, never by object identity.
- Names are classified: ``Var`` is a class (a pattern variable, a binder, or a right-side
  node ``let``); ``Computed`` wraps an expression of values (lets, attribute variables,
  built-ins) evaluated on each match; ``Const`` is a literal known when the rule is read.
- A rule has one ``Direction`` per rewrite the optimizer runs: ``<=>`` gives the forward one
  and ``/rev``. Each direction names its left-side roots, its clauses in text order, one
  right side per root and the kinds of the names it binds.
- Everything here is frozen; op nodes compare by identity (``eq=False``) because schemas hold
  functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..ir.composite import CompositeOp
from ..ir.registry import AttrSpec, OpSchema, Registry
from . import ast
from .contract import Contract

# ---------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class Var:
    """A class: a pattern variable, a binder, or a node bound by a right-side ``let``."""

    name: str
    span: ast.Span


@dataclass(frozen=True, slots=True)
class Wild:
    """``_``: any class, bound to nothing."""

    span: ast.Span


@dataclass(frozen=True, slots=True)
class Absent:
    """``none``: an omitted optional input."""

    span: ast.Span


@dataclass(frozen=True, slots=True)
class Const:
    """A literal known when the rule is read (``1``, ``[0, 1]``, ``sqrt(2)``).

    In a pattern it matches a constant class equal to it; on a right side it is a constant
    input (its dtype taken from a sibling, see ``apply``). ``text`` is its source.
    """

    value: Any
    text: str
    span: ast.Span


@dataclass(frozen=True, slots=True)
class Computed:
    """A value computed on each match (a let, ``w * bcast(s, rank(w), axis=0)``)."""

    expr: ast.Expr
    span: ast.Span


@dataclass(frozen=True, slots=True)
class PortVar:
    """An attribute variable given as an input (``ReduceMean(x) {axes = a}`` at opset 18,
    where ``axes`` is an input): a constant class whose value binds the attribute variable
    ``attr`` (of the kind ``spec`` says). Every occurrence of one variable is one class."""

    attr: str
    spec: AttrSpec
    span: ast.Span

    @property
    def name(self) -> str:
        """The class variable: a name no rule can write."""
        return f"#{self.attr}"


@dataclass(frozen=True, slots=True)
class Local:
    """A node a right-side ``let`` built (``let m = Split(...)``): the node itself, or its
    output ``output`` (``m[1]``)."""

    name: str
    output: int | None
    span: ast.Span


AttrKind = Literal["value", "var", "expr"]


@dataclass(frozen=True, slots=True)
class Attr:
    """``{name = ...}`` of an op node.

    ``value``: a literal already converted to the attribute's kind (patterns compare it);
    ``var``: an attribute variable named ``value`` (bound on first sight, compared after);
    ``expr``: an ``ast.Expr`` evaluated on each match (right sides).
    """

    name: str
    spec: AttrSpec
    kind: AttrKind
    value: Any
    span: ast.Span


@dataclass(frozen=True, slots=True)
class Copy:
    """``{..n}``: every attribute of the node bound ``as n`` (right sides)."""

    binder: str
    span: ast.Span


@dataclass(frozen=True, slots=True, eq=False)
class Op:
    """An op node: ``schema(args) {attrs} [output] as binder``."""

    key: int
    schema: OpSchema
    args: tuple[Term, ...]
    attrs: tuple[Attr | Copy, ...]
    output: int | None
    binder: str | None
    span: ast.Span

    @property
    def qualified(self) -> str:
        return self.schema.qualified_op

    @property
    def op(self) -> str:
        return self.schema.op

    @property
    def domain(self) -> str:
        return self.schema.domain

    def attr_items(self) -> Iterator[Attr]:
        return (a for a in self.attrs if isinstance(a, Attr))


Term = Op | Var | Wild | Absent | Const | Computed | PortVar | Local


# ---------------------------------------------------------------- clauses


@dataclass(frozen=True, slots=True)
class Where:
    """A guard; ``text`` is its source, the reason reports show when it rejects a match."""

    expr: ast.Expr
    text: str
    span: ast.Span


@dataclass(frozen=True, slots=True)
class Let:
    """``let name = value``: a value computed on each match, visible to later clauses."""

    name: str
    expr: ast.Expr
    text: str
    span: ast.Span


Clause = Where | Let


@dataclass(frozen=True, slots=True)
class NodeLet:
    """``let m = Op(...)``: a right-side node built once, used by ``Local``s (``outputs``:
    how many outputs it has, when its outputs are taken by index; 0 when it is used whole)."""

    name: str
    op: Op
    outputs: int
    span: ast.Span


# ---------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class Names:
    """What each name of a direction is (the evaluator and the builder read this)."""

    tensors: frozenset[str]  # classes: variables and binders
    nodes: tuple[tuple[str, OpSchema], ...]  # binder -> the schema of its op
    attrs: frozenset[str]  # attribute variables
    lets: frozenset[str]  # value lets

    def node_schema(self, binder: str) -> OpSchema | None:
        return dict(self.nodes).get(binder)


@dataclass(frozen=True, slots=True, eq=False)
class Direction:
    """One rewrite of a rule: left-side roots (several for a multi-root rule, joined on the
    variables they share), clauses, one right side per root."""

    name: str  # the rewrite's name: ``rule``, ``rule/rev``
    roots: tuple[Op, ...]
    clauses: tuple[Clause, ...]
    rhs: tuple[Term, ...]
    names: Names
    ops: tuple[Op, ...]  # the pattern's ops, children and binders first (instances, checks)
    lets: tuple[NodeLet, ...] = ()  # right-side nodes, built before the right sides

    @property
    def root(self) -> Op:
        return self.roots[0]


@dataclass(frozen=True, slots=True, eq=False)
class ResolvedRule:
    """One rule of the library as the checker resolved it; ``examples`` are its
    ``@example`` decorators: per variable, a tensor type (a graph input of that type) or a
    value (a constant tensor, or an attribute variable's value)."""

    name: str
    ruleset: str
    contract: Contract
    directions: tuple[Direction, ...]
    source: ast.Rule
    examples: tuple[Mapping[str, Any], ...] = ()

    @property
    def span(self) -> ast.Span:
        return self.source.span

    @property
    def name_span(self) -> ast.Span:
        return self.source.name_span

    @property
    def arrow(self) -> str:
        return self.source.arrow


@dataclass(frozen=True, slots=True)
class Replacement:
    """A rule marked ``@replace`` took the place of another rule of its name."""

    name: str
    new: ast.Span
    old: ast.Span

    def describe(self) -> str:
        return f"rule {self.name} at {self.new} replaces the one at {self.old}"


@dataclass(frozen=True, eq=False)
class Program:
    """A checked library: rules, rulesets and schedules by name, and what they run on."""

    rules: tuple[ResolvedRule, ...]
    rulesets: Mapping[str, tuple[str, ...]]  # ruleset -> its rule names, in order
    schedules: Mapping[str, tuple[ast.Step, ...]]  # extensions (``+=``) appended
    commutative: frozenset[str]
    registry: Registry
    sources: Mapping[str, str] = field(default_factory=dict)
    replaced: tuple[Replacement, ...] = ()
    warnings: tuple[Any, ...] = ()  # RuleErrors that do not stop the library (unused rulesets)
    ops: tuple[CompositeOp, ...] = ()  # the ops the library defines (``registry`` has them)

    def rule(self, name: str) -> ResolvedRule:
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)
