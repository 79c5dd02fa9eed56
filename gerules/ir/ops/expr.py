"""``ge.Elementwise``: a fused chain of elementwise ai.onnx ops written as an S-expression.

Syntax (no ``eval``; a small tokenizer and a recursive-descent parser with a depth limit)::

    expr  := "(" OP attrs? expr* ")" | INPUT | NUMBER
    attrs := "{" [NAME "=" value ("," NAME "=" value)*] "}"
    value := NUMBER | "string" | NAME | "[" NUMBER ("," NUMBER)* "]"
    INPUT := "x0" | "x1" | ...

e.g. ``(Relu (Add x0 (Mul x1 x2)))``, ``(LeakyRelu{alpha=0.1} x0)``, ``(Mul x0 0.5)``.

Invariants:
- Every OP is an ai.onnx op of the default registry (latest version) with the ELEMENTWISE
  trait; its arity and attributes are checked at parse time against its schema.
- Evaluation and inference call the registry's own kernels and inference functions, so the
  fused op means exactly what the unfused chain means; FLOPs are the sum of the parts.
- A literal is a scalar of the dtype of its first non-literal, non-bool sibling operand
  (else of ``x0``).
- Any malformed expression raises ``ShapeError`` saying what is wrong and where.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ...errors import GeError, ShapeError
from ..graph import TensorType
from ..registry import ELEMENTWISE, INPLACE, Call, OpSchema, default_registry, suggest
from ._common import Arrays, Types, attr, numel_of, sattr, schema

MAX_DEPTH = 64
MAX_LENGTH = 10_000
_TOKEN = re.compile(r"""\s*(?:(?P<num>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?
                    |inf|nan))|(?P<str>"[^"]*")|(?P<name>[A-Za-z_][A-Za-z0-9_.]*)
                    |(?P<punct>[(){}\[\]=,]))""", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class Input:
    index: int


@dataclass(frozen=True, slots=True)
class Literal:
    value: float


@dataclass(frozen=True, slots=True)
class Apply:
    op: str
    attrs: tuple[tuple[str, Any], ...]
    args: tuple[Expr, ...]


Expr = Input | Literal | Apply


# ----------------------------------------------------------------------------- parsing


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """``(kind, text, offset)`` triples; an unknown character raises."""
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise ShapeError(f"ge.Elementwise: unexpected character {text[pos:].lstrip()[0]!r} "
                             f"at offset {pos} in expr {text!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        if len(text) > MAX_LENGTH:
            raise ShapeError(f"ge.Elementwise: expr is longer than {MAX_LENGTH} characters")
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def fail(self, what: str) -> ShapeError:
        where = self.toks[self.i][2] if self.i < len(self.toks) else len(self.text)
        return ShapeError(f"ge.Elementwise: {what} at offset {where} in expr {self.text!r}")

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i][:2] if self.i < len(self.toks) else ("end", "")

    def take(self, text: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok[0] == "end" or (text is not None and tok[1] != text):
            raise self.fail(f"expected {text or 'a token'!r}, found {tok[1] or 'the end'!r}")
        self.i += 1
        return tok

    def parse(self) -> Expr:
        e = self.expr(0)
        if self.peek()[0] != "end":
            raise self.fail(f"unexpected {self.peek()[1]!r} after the expression")
        return e

    def expr(self, depth: int) -> Expr:
        if depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH}")
        kind, text = self.take()
        if kind == "num":
            return Literal(float(text))
        if kind == "name" and re.fullmatch(r"x\d+", text):
            return Input(int(text[1:]))
        if text != "(":
            raise self.fail(f"expected '(', an input x<N> or a number, found {text!r}")
        kind, op = self.take()
        if kind != "name":
            raise self.fail(f"expected an op name, found {op!r}")
        attrs = self.attrs() if self.peek()[1] == "{" else ()
        args = []
        while self.peek()[1] != ")":
            if self.peek()[0] == "end":
                raise self.fail("missing ')'")
            args.append(self.expr(depth + 1))
        self.take(")")
        return Apply(op, attrs, tuple(args))

    def attrs(self) -> tuple[tuple[str, Any], ...]:
        self.take("{")
        out: list[tuple[str, Any]] = []
        while self.peek()[1] != "}":
            if out:
                self.take(",")
            kind, name = self.take()
            if kind != "name":
                raise self.fail(f"expected an attribute name, found {name!r}")
            self.take("=")
            out.append((name, self.value()))
        self.take("}")
        return tuple(out)

    def value(self) -> Any:
        kind, text = self.take()
        if kind == "num":
            return float(text) if any(c in text for c in ".eEn") else int(text)
        if kind == "str":
            return text[1:-1]
        if kind == "name":
            return text
        if text == "[":
            items: list[Any] = []
            while self.peek()[1] != "]":
                if items:
                    self.take(",")
                items.append(self.value())
            self.take("]")
            return tuple(items)
        raise self.fail(f"expected an attribute value, found {text!r}")


@cache
def parse(text: str) -> Expr:
    """The checked expression tree of ``text`` (cached; trees are immutable)."""
    tree = _Parser(text).parse()
    _check(tree, text)
    return tree


def _check(e: Expr, text: str) -> None:
    if not isinstance(e, Apply):
        return
    sch = sub_schema(e.op, text)
    n = len(e.args)
    hi = sch.max_inputs
    if n < sch.min_inputs or (hi is not None and n > hi):
        want = f"{sch.min_inputs}" + ("+" if hi is None else f"..{hi}" if hi != sch.min_inputs
                                      else "")
        raise ShapeError(f"ge.Elementwise: {e.op} takes {want} operands, got {n} in {text!r}")
    try:
        sch.resolve(dict(e.attrs))
    except GeError as err:
        raise ShapeError(f"ge.Elementwise: {err.message} in {text!r}") from None
    for a in e.args:
        _check(a, text)


def sub_schema(op: str, text: str = "") -> OpSchema:
    reg = default_registry()
    if not reg.has(op):
        hint = suggest(op, [o for d, o in reg.ops("")])
        raise ShapeError(f"ge.Elementwise: unknown op {op!r}{hint} in {text!r}")
    sch = reg.get(op)
    if not sch.has(ELEMENTWISE):
        raise ShapeError(f"ge.Elementwise: {op} is not elementwise in {text!r}")
    return sch


def inputs_used(e: Expr) -> set[int]:
    if isinstance(e, Input):
        return {e.index}
    if isinstance(e, Apply):
        return set().union(*(inputs_used(a) for a in e.args)) if e.args else set()
    return set()


# ----------------------------------------------------------------------------- evaluation


def _literal_dtype(values: Sequence[Any], fallback: str) -> str:
    for v in values:
        if v is not None and str(v.dtype) != "bool":
            return str(v.dtype)
    return fallback


def evaluate(e: Expr, xs: Sequence[np.ndarray]) -> np.ndarray:
    if isinstance(e, Input):
        return xs[e.index]
    if isinstance(e, Literal):
        return np.asarray(e.value, dtype=xs[0].dtype)
    vals = [None if isinstance(a, Literal) else evaluate(a, xs) for a in e.args]
    dtype = _literal_dtype(vals, str(xs[0].dtype))
    args = [np.asarray(a.value, dtype=dtype) if isinstance(a, Literal) else v
            for a, v in zip(e.args, vals, strict=True)]
    sch = sub_schema(e.op)
    return np.asarray(sch.kernel(args, sch.call(dict(e.attrs)))[0])


def infer_expr(e: Expr, types: Sequence[TensorType]) -> tuple[TensorType, int]:
    """The type of ``e`` and the FLOPs of its parts (symbolic dims count as 1)."""
    if isinstance(e, Input):
        return types[e.index], 0
    if isinstance(e, Literal):
        return TensorType(types[0].dtype, ()), 0
    parts = [None if isinstance(a, Literal) else infer_expr(a, types) for a in e.args]
    dtype = _literal_dtype([p[0] for p in parts if p is not None], types[0].dtype)
    ins = [TensorType(dtype, ()) if p is None else p[0] for p in parts]
    sch = sub_schema(e.op)
    call = sch.call(dict(e.attrs))
    out = sch.infer(ins, [None] * len(ins), call)[0]
    return out, sum(p[1] for p in parts if p is not None) + _flops(sch, ins, out, call)


def _flops(sch: OpSchema, ins: list[TensorType], out: TensorType, call: Call) -> int:
    if sch.flops is None:
        return numel_of(out)
    static = [TensorType(t.dtype, tuple(d if isinstance(d, int) else 1 for d in t.shape or ()))
              for t in [*ins, out]]
    return int(sch.flops(static[:-1], static[-1:], call))


def _tree(call: Call, n_inputs: int) -> Expr:
    tree = parse(sattr(call, "expr"))
    used = inputs_used(tree)
    if used and max(used) >= n_inputs:
        raise ShapeError(f"ge.Elementwise: expr reads x{max(used)} but the node has "
                         f"{n_inputs} inputs")
    return tree


def _infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    present = [t for t in types if t is not None]
    if len(present) != len(types) or not present:
        raise ShapeError("ge.Elementwise: every input must be present")
    return [infer_expr(_tree(call, len(present)), present)[0]]


def _kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    xs = [x for x in inputs if x is not None]
    return [evaluate(_tree(call, len(xs)), xs)]


def _flops_total(ins: Types, outs: Sequence[TensorType], call: Call) -> int:
    present = [t for t in ins if t is not None]
    try:
        return infer_expr(_tree(call, len(present)), present)[1]
    except GeError:
        return numel_of(outs[0])


SCHEMAS = [
    schema("Elementwise", 1, "inputs*", "Y", _infer, _kernel, domain="ge",
           attrs=[attr("expr", "string", required=True)], traits={ELEMENTWISE, INPLACE},
           flops=_flops_total,
           doc="a fused chain of elementwise ops, e.g. expr='(Relu (Add x0 x1))'"),
]
