"""Lark parse tree -> AST, without recursion (deep input cannot overflow the Python stack).

Invariants:
- Each method builds one AST node from already-built children and the Lark ``meta``; spans
  come from ``propagate_positions`` and point into the file being parsed.
- Expression depth is tracked as nodes are built; an expression deeper than
  ``MAX_NESTING`` is a ``RuleError`` at the node that crossed the limit, so every later
  (recursive) walk over the tree is bounded.
- Integer literals fit in 64 bits; anything larger is a ``RuleError`` at the literal.
- Rules get the ruleset of the nearest ``ruleset`` line above them in the same file.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from lark import Token, Transformer_NonRecursive

from . import ast
from .ast import Span
from .errors import RuleError
from .source import MAX_NESTING

N = TypeVar("N", bound=Any)
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*')


# Binding power per operator (Python's order); ``**`` is right-associative.
BINARY = {"or": 1, "and": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4, "in": 4,
          "not in": 4, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6, "**": 8}
PREFIX = {"not": 3, "-": 7, "+": 7}
COMPARISON = 4


@dataclass(frozen=True, slots=True)
class Operator:
    op: str
    span: Span
    prefix: bool = False


def joined(a: Span, b: Span) -> Span:
    return Span(a.file, a.line, a.col, b.end_line, b.end_col)


class _Precedence:
    """Precedence climbing over a flat ``[prefix*, atom, (op, prefix*, atom)*]`` list.

    Recursion is bounded: the caller allows at most ``MAX_NESTING`` operators.
    """

    def __init__(self, items: list[Any], owner: ToAst) -> None:
        self.items = items
        self.pos = 0
        self.owner = owner

    def parse(self, min_bp: int) -> Any:
        item = self.items[self.pos]
        self.pos += 1
        left: Any
        if isinstance(item, Operator):
            operand = self.parse(2 * PREFIX[item.op])
            left = self.owner.nested(
                ast.Unary(item.op, operand, joined(item.span, operand.span)),  # type: ignore
                operand)
        else:
            left = item
        compared = False
        while self.pos < len(self.items):
            op = self.items[self.pos]
            power = BINARY[op.op]
            left_bp = 2 * power + (op.op == "**")
            if left_bp < min_bp:
                break
            if power == COMPARISON and compared:
                raise RuleError("comparisons cannot be chained; join them with 'and'",
                                op.span)
            self.pos += 1
            right = self.parse(2 * power + (op.op != "**"))
            left = self.owner.nested(ast.Binary(op.op, left, right,
                                                joined(left.span, right.span)), left, right)
            compared = power == COMPARISON
        return left


def clause_text(raw: str, keyword: str) -> str:
    """A clause's source on one line, without its keyword and comments (a guard's reason)."""
    body = _COMMENT_OR_STRING.sub(lambda m: m.group() if m.group()[0] == '"' else "", raw)
    body = body.strip()
    if body.startswith(keyword):
        body = body[len(keyword):]
    return " ".join(body.split())


def unquote(token: str) -> str:
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), token[1:-1])


class ToAst(Transformer_NonRecursive):  # type: ignore[type-arg]
    """Builds ``ast`` nodes; one instance per file (it knows the file's name and text).

    Every method takes ``(meta, children)``. Dispatch is direct (no ``v_args`` wrappers,
    which cost a wrapper object per call) and exceptions are not wrapped in ``VisitError``.
    """

    def _call_userfunc(self, tree: Any, new_children: Any = None) -> Any:
        children = new_children if new_children is not None else tree.children
        return getattr(self, tree.data)(tree.meta, children)

    def __init__(self, file: str, source: str) -> None:
        super().__init__()
        self.file = file
        self.source = source
        self._depth: dict[int, int] = {}
        self._prefixed: dict[int, Operator] = {}  # Unary built by ``operand`` -> its prefix

    # ------------------------------------------------------------ helpers
    def span(self, meta: Any) -> Span:
        return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def tspan(self, tok: Token) -> Span:
        return Span(self.file, tok.line or 1, tok.column or 1, tok.end_line or 1,
                    tok.end_column or 1)

    def nested(self, node: N, *children: Any) -> N:
        """Record ``node``'s depth; refuse expressions nested beyond ``MAX_NESTING``."""
        depth = 1 + max((self._depth.get(id(c), 0) for c in children), default=0)
        if depth > MAX_NESTING:
            raise RuleError(f"expression nests deeper than {MAX_NESTING} levels",
                            node.span)
        self._depth[id(node)] = depth
        return node

    def split_args(self, items: Any) -> tuple[tuple[ast.Expr, ...], tuple[ast.Kwarg, ...]]:
        args: list[ast.Expr] = []
        kwargs: list[ast.Kwarg] = []
        for item in items or ():
            if isinstance(item, ast.Kwarg):
                kwargs.append(item)
            elif kwargs:
                raise RuleError("a positional argument cannot follow a keyword argument",
                                item.span)
            else:
                args.append(item)
        return tuple(args), tuple(kwargs)

    # ------------------------------------------------------------ file level
    def start(self, meta: Any, items: list[Any]) -> list[Any]:
        out: list[Any] = []
        current: str | None = None
        for item in items:
            if isinstance(item, ast.RulesetDecl):
                current = item.name
            elif isinstance(item, ast.Rule):
                item = dataclasses.replace(item, ruleset=current)
            out.append(item)
        return out

    def include(self, meta: Any, c: list[Any]) -> ast.Include:
        return ast.Include(unquote(c[0]), self.span(meta))

    def ruleset(self, meta: Any, c: list[Any]) -> ast.RulesetDecl:
        return ast.RulesetDecl(str(c[1]), self.span(meta), extend=c[0] is not None)

    def commutative(self, meta: Any, c: list[Any]) -> ast.Commutative:
        return ast.Commutative(tuple(ast.OpRef(d, o, s) for d, o, s in c), self.span(meta))

    def opclass(self, meta: Any, c: list[Any]) -> ast.OpClass:
        members = tuple(m if isinstance(m, ast.Name) else ast.OpRef(*m) for m in c[1:])
        return ast.OpClass(str(c[0]), members, self.span(meta))

    def class_ref(self, meta: Any, c: list[Any]) -> ast.Name:
        return ast.Name(str(c[0]), self.span(meta))

    def op_for(self, meta: Any, c: list[Any]) -> ast.OpFor:
        var, rest = str(c[0]), [x for x in c[2:] if x is not None]
        if len(rest) == 1 and isinstance(rest[0], Token):
            return ast.OpFor(var, str(rest[0]), (), self.span(meta))
        return ast.OpFor(var, None, tuple(ast.OpRef(*r) for r in rest), self.span(meta))

    def opdef(self, meta: Any, c: list[Any]) -> ast.OpDef:
        (domain, op, op_span), params, attrs, body = c
        text = self.source[meta.start_pos:meta.end_pos]
        return self.nested(ast.OpDef(ast.OpRef(domain, op, op_span), tuple(params or ()),
                                     tuple(attrs or ()), body, self.span(meta), text), body)

    def params(self, meta: Any, c: list[Any]) -> list[Any]:
        return c

    def param(self, meta: Any, c: list[Any]) -> ast.Param:
        return ast.Param(str(c[0]), c[1] is not None, self.span(meta))

    def attr_decls(self, meta: Any, c: list[Any]) -> list[Any]:
        return [x for x in c if x is not None]

    def attr_decl(self, meta: Any, c: list[Any]) -> ast.AttrDecl:
        return ast.AttrDecl(str(c[0]), str(c[1]), c[2], self.span(meta))

    def roots(self, meta: Any, c: list[Any]) -> ast.TupleLit:
        """A side with several roots, as a tuple of its patterns or right sides."""
        return self.nested(ast.TupleLit(tuple(c), self.span(meta)), *c)

    def op_value(self, meta: Any, c: list[Any]) -> ast.OpRef:
        domain, op, _ = c[0]
        return ast.OpRef(domain, op, self.span(meta))

    def opname(self, meta: Any, c: list[Any]) -> tuple[str, str, Span]:
        domain, _, op = str(c[0]).rpartition(".")
        return domain, op, self.tspan(c[0])

    # ------------------------------------------------------------ rules
    def rule(self, meta: Any, c: list[Any]) -> ast.Rule:
        decorators = [x for x in c if isinstance(x, ast.Decorator)]
        rest = c[len(decorators):]
        name = rest[0]
        for_ops = tuple(x for x in rest[1:] if isinstance(x, ast.OpFor))
        rest = [name, *rest[1 + len(for_ops):]]
        lhs = rest[1]
        arrow = next(i for i, x in enumerate(rest) if isinstance(x, str) and x in ("=>", "<=>"))
        clauses = tuple(rest[2:arrow]) + tuple(rest[arrow + 2:])
        return ast.Rule(str(name), tuple(decorators), lhs, clauses, rest[arrow] == "<=>",
                        rest[arrow + 1], None, self.span(meta), self.tspan(name), for_ops)

    def arrow(self, meta: Any, c: list[Any]) -> str:
        return str(c[0])

    def decorator(self, meta: Any, c: list[Any]) -> ast.Decorator:
        items = c[1] if len(c) > 1 and c[1] is not None else []
        typed = tuple(x for x in items if isinstance(x, ast.TypedArg))
        args, kwargs = self.split_args([x for x in items if not isinstance(x, ast.TypedArg)])
        return ast.Decorator(str(c[0]), args, kwargs, self.span(meta), typed)

    def dec_args(self, meta: Any, c: list[Any]) -> list[Any]:
        return c

    def typed_arg(self, meta: Any, c: list[Any]) -> ast.TypedArg:
        name, dtype, *dims = c
        return ast.TypedArg(str(name), str(dtype),
                            tuple(self.int_value(d) for d in dims if d is not None),
                            self.span(meta))

    def where(self, meta: Any, c: list[Any]) -> ast.Where:
        raw = self.source[meta.start_pos:meta.end_pos]
        return ast.Where(c[0], clause_text(raw, "where"), self.span(meta))

    def let(self, meta: Any, c: list[Any]) -> ast.Let:
        raw = self.source[meta.start_pos:meta.end_pos]
        return ast.Let(str(c[0]), c[1], clause_text(raw, "let"), self.span(meta))

    # ------------------------------------------------------------ schedules
    def schedule(self, meta: Any, c: list[Any]) -> ast.Schedule:
        extend = len(c) == 3
        return ast.Schedule(c[0], c[-1], self.span(meta), extend=extend)

    def sched_name(self, meta: Any, c: list[Any]) -> str:
        return str(c[0])

    def steps(self, meta: Any, c: list[Any]) -> tuple[ast.Step, ...]:
        return tuple(c)

    def run(self, meta: Any, c: list[Any]) -> ast.Run:
        return ast.Run(str(c[0]), self.span(meta))

    def saturate(self, meta: Any, c: list[Any]) -> ast.Saturate:
        return ast.Saturate(c[0], self.span(meta))

    def repeat(self, meta: Any, c: list[Any]) -> ast.Repeat:
        return ast.Repeat(self.int_value(c[0]), c[1], self.span(meta))

    # ------------------------------------------------------------ expressions
    def prefix(self, meta: Any, c: list[Any]) -> Operator:
        return Operator(str(c[0]), self.tspan(c[0]), prefix=True)

    def binop(self, meta: Any, c: list[Any]) -> Operator:
        return Operator(" ".join(str(t) for t in c), self.span(meta))

    def operand(self, meta: Any, c: list[Any]) -> ast.Expr:
        """Prefix operators on an atom, applied tightly (right for a standalone operand);
        ``expr`` takes them apart again when binary operators need precedence."""
        node = c[-1]
        for op in reversed(c[:-1]):
            node = self.nested(ast.Unary(op.op, node, joined(op.span, node.span)), node)
            self._prefixed[id(node)] = op
        return node  # type: ignore[no-any-return]

    def paren(self, meta: Any, c: list[Any]) -> ast.Expr:
        """``(e)``: its prefix operators stay with it, whatever operators surround it."""
        self._prefixed.pop(id(c[0]), None)
        return c[0]  # type: ignore[no-any-return]

    def expr(self, meta: Any, c: list[Any]) -> ast.Expr:
        items: list[Any] = []
        for part in c:
            if isinstance(part, Operator):
                items.append(part)
                continue
            while id(part) in self._prefixed:
                items.append(self._prefixed[id(part)])
                part = part.operand
            items.append(part)
        if sum(isinstance(i, Operator) for i in items) > MAX_NESTING:
            raise RuleError(f"expression nests deeper than {MAX_NESTING} levels",
                            self.span(meta))
        return _Precedence(items, self).parse(0)  # type: ignore[no-any-return]

    def index(self, meta: Any, c: list[Any]) -> ast.Index:
        return self.nested(ast.Index(c[0], c[1], self.span(meta)), c[0], c[1])

    def slice(self, meta: Any, c: list[Any]) -> ast.Slice:
        return self.nested(ast.Slice(c[0], c[1], c[2], self.span(meta)), *c)

    def int_value(self, tok: Token) -> int:
        digits = str(tok).replace("_", "")
        if len(digits) > 19 or int(digits) >= 1 << 63:
            raise RuleError(f"integer {tok} does not fit in 64 bits", self.tspan(tok))
        return int(digits)

    def int_lit(self, meta: Any, c: list[Any]) -> ast.Num:
        return ast.Num(self.int_value(c[0]), self.span(meta))

    def float_lit(self, meta: Any, c: list[Any]) -> ast.Num:
        return ast.Num(float(str(c[0]).replace("_", "")), self.span(meta))

    def string(self, meta: Any, c: list[Any]) -> ast.Str:
        return ast.Str(unquote(c[0]), self.span(meta))

    def true(self, meta: Any, c: list[Any]) -> ast.Bool:
        return ast.Bool(True, self.span(meta))

    def false(self, meta: Any, c: list[Any]) -> ast.Bool:
        return ast.Bool(False, self.span(meta))

    def none(self, meta: Any, c: list[Any]) -> ast.NoneLit:
        return ast.NoneLit(self.span(meta))

    def name(self, meta: Any, c: list[Any]) -> ast.Name | ast.Wildcard:
        if str(c[0]) == "_":
            return ast.Wildcard(self.span(meta))
        return ast.Name(str(c[0]), self.span(meta))

    def attr_read(self, meta: Any, c: list[Any]) -> ast.AttrRead:
        return ast.AttrRead(str(c[0]), str(c[1]), self.span(meta))

    def call(self, meta: Any, c: list[Any]) -> ast.Call:
        args, kwargs = self.split_args(c[1])
        node = ast.Call(str(c[0]), args, kwargs, self.span(meta))
        return self.nested(node, *args, *(k.value for k in kwargs))

    def items(self, meta: Any, c: list[Any]) -> tuple[ast.Expr, ...]:
        return tuple(c)

    def list_lit(self, meta: Any, c: list[Any]) -> ast.ListLit:
        items = c[0] or ()
        return self.nested(ast.ListLit(items, self.span(meta)), *items)

    def tuple_lit(self, meta: Any, c: list[Any]) -> ast.TupleLit:
        items = (c[0], *(c[1] or ()))
        return self.nested(ast.TupleLit(items, self.span(meta)), *items)

    def args(self, meta: Any, c: list[Any]) -> list[Any]:
        return c

    def kwarg(self, meta: Any, c: list[Any]) -> ast.Kwarg:
        return self.nested(ast.Kwarg(str(c[0]), c[1], self.span(meta)), c[1])

    # ------------------------------------------------------------ ops
    def op_call(self, meta: Any, c: list[Any]) -> ast.OpCall:
        (domain, op, op_span), raw_args, attrs, output, binder = c
        args, kwargs = self.split_args(raw_args)
        node = ast.OpCall(domain, op, args, kwargs, attrs or (), output, binder and binder[0],
                          self.span(meta), op_span, binder and binder[1])
        values = [a.value for a in node.attrs if isinstance(a, ast.AttrSet)]
        return self.nested(node, *args, *(k.value for k in kwargs), *values)

    def attr_block(self, meta: Any, c: list[Any]) -> tuple[ast.AttrItem, ...]:
        return tuple(x for x in c if x is not None)

    def attr_set(self, meta: Any, c: list[Any]) -> ast.AttrSet:
        return ast.AttrSet(str(c[0]), c[1], self.span(meta))

    def attr_copy(self, meta: Any, c: list[Any]) -> ast.AttrCopy:
        return ast.AttrCopy(str(c[0]), self.span(meta))

    def output(self, meta: Any, c: list[Any]) -> int:
        return self.int_value(c[0])

    def binder(self, meta: Any, c: list[Any]) -> tuple[str, Span]:
        return str(c[0]), self.tspan(c[0])
