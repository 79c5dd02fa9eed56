"""The syntax tree of `.ger` files: frozen dataclasses with a source span each, no logic.

Invariants:
- Every node carries a ``Span`` (1-based lines and columns; ``end_col`` is exclusive) into the
  file it was parsed from, so any later stage can report an error at the right place.
- The tree mirrors the text: one expression language for patterns, guards, lets and right
  sides. What is allowed where is the checker's business (``check.py``), not the parser's.
- Names are plain strings; ops are split into ``(domain, op)`` with ``""`` for ai.onnx.
- Nodes are immutable and hashable except where they hold tuples of other nodes (still
  hashable); nothing here imports the registry or NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file (``end_col`` exclusive, all 1-based)."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Num:
    value: int | float
    span: Span


@dataclass(frozen=True, slots=True)
class Str:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class NoneLit:
    """``none``: an absent optional op input (ONNX's empty input name)."""

    span: Span


@dataclass(frozen=True, slots=True)
class Name:
    """A variable, a let name or a built-in constant (``f32``)."""

    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class Wildcard:
    """``_``: matches any class and binds nothing."""

    span: Span


@dataclass(frozen=True, slots=True)
class ListLit:
    items: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TupleLit:
    items: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class AttrRead:
    """``n.attr``: an attribute of the node bound by ``as n`` (schema defaults apply)."""

    binder: str
    attr: str
    span: Span


@dataclass(frozen=True, slots=True)
class Index:
    base: Expr
    index: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Slice:
    base: Expr
    lo: Expr | None
    hi: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class Unary:
    op: Literal["-", "+", "not"]
    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Binary:
    """Infix arithmetic, comparison, ``and``/``or``, ``in`` and ``not in``."""

    op: str
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Kwarg:
    name: str
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Call:
    """A lowercase call: a built-in function evaluated at compile or apply time."""

    func: str
    args: tuple[Expr, ...]
    kwargs: tuple[Kwarg, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class AttrSet:
    """``name = value`` in an attribute block: match (left side) or set (right side)."""

    name: str
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class AttrCopy:
    """``..n``: copy every attribute of the node bound by ``as n`` (right side)."""

    binder: str
    span: Span


AttrItem = AttrSet | AttrCopy


@dataclass(frozen=True, slots=True)
class OpCall:
    """A graph op: ``Op(args) {attrs} [output] as binder``."""

    domain: str
    op: str
    args: tuple[Expr, ...]
    kwargs: tuple[Kwarg, ...]  # always an error; kept so the checker can say so precisely
    attrs: tuple[AttrItem, ...]
    output: int | None
    binder: str | None
    span: Span
    op_span: Span
    binder_span: Span | None = None

    @property
    def qualified(self) -> str:
        return f"{self.domain}.{self.op}" if self.domain else self.op


@dataclass(frozen=True, slots=True)
class OpRef:
    """An op named without inputs: in ``commutative`` and ``opclass`` lines, and as a value
    (``activation = F``: the op's qualified name, a string; for an op variable, the name of
    the op it stands for)."""

    domain: str
    op: str
    span: Span

    @property
    def qualified(self) -> str:
        return f"{self.domain}.{self.op}" if self.domain else self.op


Expr = (
    Num | Str | Bool | NoneLit | Name | Wildcard | ListLit | TupleLit | AttrRead | Index |
    Slice | Unary | Binary | Call | OpCall | OpRef
)


# ---------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class TypedArg:
    """``x: f32[2, 4, 16]`` in a decorator: a variable and the tensor type it takes."""

    name: str
    dtype: str
    dims: tuple[int, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Decorator:
    """``@exact``, ``@approx(rtol=1e-3, atol=1e-5)`` or ``@example(x: f32[2, 4], c = 0.5)``."""

    name: str
    args: tuple[Expr, ...]
    kwargs: tuple[Kwarg, ...]
    span: Span
    typed: tuple[TypedArg, ...] = ()


@dataclass(frozen=True, slots=True)
class Where:
    """A guard; ``text`` is its source, the reason shown when it rejects a match."""

    expr: Expr
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Let:
    name: str
    expr: Expr
    text: str
    span: Span


Clause = Where | Let


@dataclass(frozen=True, slots=True)
class OpFor:
    """``for F in CLASS`` (or ``for F in (Relu, Tanh)``): ``F`` stands for each op in turn."""

    var: str
    classname: str | None  # a declared ``opclass``, or None for the listed ``ops``
    ops: tuple[OpRef, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Rule:
    """``rule name: lhs clauses => rhs clauses`` (clauses run in text order)."""

    name: str
    decorators: tuple[Decorator, ...]
    lhs: Expr
    clauses: tuple[Clause, ...]
    bidirectional: bool
    rhs: Expr
    ruleset: str | None
    span: Span
    name_span: Span
    for_ops: tuple[OpFor, ...] = ()

    @property
    def arrow(self) -> str:
        return "<=>" if self.bidirectional else "=>"


@dataclass(frozen=True, slots=True)
class Include:
    path: str
    span: Span


@dataclass(frozen=True, slots=True)
class RulesetDecl:
    """``ruleset name``: the rules below it, up to the next ``ruleset`` line, belong to it.
    ``extend ruleset name`` does the same for a ruleset declared in another file."""

    name: str
    span: Span
    extend: bool = False


@dataclass(frozen=True, slots=True)
class OpClass:
    """``opclass unary_math = Relu | Sigmoid | activations``: a named set of ops (a member
    ``Name`` is another class)."""

    name: str
    members: tuple[OpRef | Name, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Commutative:
    """``commutative Add, Mul``: the matcher tries both orders of the first two operands."""

    ops: tuple[OpRef, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Run:
    """Run one ruleset for one iteration."""

    ruleset: str
    span: Span


@dataclass(frozen=True, slots=True)
class Saturate:
    steps: tuple[Step, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Repeat:
    times: int
    steps: tuple[Step, ...]
    span: Span


Step = Run | Saturate | Repeat


@dataclass(frozen=True, slots=True)
class Schedule:
    """``schedule O2: saturate(fold, simplify), repeat(3, fuse)``: steps run in sequence.
    ``schedule O2 += steps`` appends steps to a schedule declared in another file."""

    name: str
    steps: tuple[Step, ...]
    span: Span
    extend: bool = False


@dataclass(frozen=True, slots=True)
class Param:
    """An input of an op definition; ``b?`` is optional (absent inputs reach the body as
    absent inputs)."""

    name: str
    optional: bool
    span: Span


@dataclass(frozen=True, slots=True)
class AttrDecl:
    """``epsilon: float = 1e-6``: an attribute of an op definition, its kind and default."""

    name: str
    kind: str
    default: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class OpDef:
    """``op ge.RMSNorm(x, w) {epsilon: float = 1e-6} = body``: an op defined by its body (a
    tuple of expressions for several outputs); ``text`` is the declaration as written."""

    ref: OpRef  # the op being defined
    params: tuple[Param, ...]
    attrs: tuple[AttrDecl, ...]
    body: Expr
    span: Span
    text: str


Item = Include | RulesetDecl | Commutative | OpClass | OpDef | Rule | Schedule


@dataclass(frozen=True, slots=True)
class RuleFile:
    """One parsed file: its display path, its text and its items in order."""

    path: str
    source: str
    items: tuple[Item, ...]

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(i for i in self.items if isinstance(i, Rule))
