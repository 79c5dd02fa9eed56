"""Building a rule's right side in the e-graph, in two steps: prepare, then emit.

``prepare`` runs as the rule's last condition: it evaluates every computed value (folded
constants such as ``w * bcast(s, rank(w), axis=0)``, attribute expressions, ``{..n}`` copies)
and resolves every new op's attributes against the e-graph's opset schema (defaults applied,
as ``gerules.terms`` requires). Anything that fails rejects the match with a reason, so
the applier never fails half-way. ``emit`` then only adds e-nodes.

Invariants:
- ``prepare`` never changes the e-graph; ``emit`` adds exactly the prepared nodes.
- A computed input takes the dtype of its first tensor sibling (``Mul(x, 0.5)`` multiplies by
  a scalar of x's type; see ``build.input_constant``), a computed root the matched root's.
- Copied attributes exclude the tuple marker ``_outputs``; explicit ones override copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import EGraph, ENode
from ..errors import GeError
from ..ir.graph import TensorType
from ..ir.weights import Deferred
from ..terms.terms import (
    ABSENT,
    OUTPUTS_ATTR,
    PROJ,
    SYM,
    add_const,
    class_type,
    class_value,
    context_of,
    ir_attr,
)
from . import program
from .build import attr_value, input_constant
from .evaluate import Env, evaluate
from .values import EvalError, Tensor


@dataclass(frozen=True, slots=True, eq=False)
class Prepared:
    """One right-side node: ``kind`` is ``class``, ``const``, ``absent``, ``op`` or ``proj``
    (output ``value`` of the node in ``children``). A node built by a ``let`` is one object
    wherever it is used, and emitted once."""

    kind: str
    value: Any = None  # class id, array, or qualified op name
    attrs: tuple[tuple[str, Any], ...] = ()
    children: tuple[Prepared, ...] = ()
    output: int | None = None


class PrepareError(Exception):
    """The right side cannot be built for this match (message says why)."""


Lookup = Callable[[str], Any]


class Builder:
    """Prepares and emits the right sides of one direction (one per root) and the nodes its
    ``let`` clauses build."""

    def __init__(self, rhs: tuple[program.Term, ...],
                 lets: tuple[program.NodeLet, ...] = ()) -> None:
        self.rhs = rhs
        self.lets = lets

    def prepare(self, egraph: EGraph, roots: Sequence[int], env: Env, classes: Lookup
                ) -> tuple[Prepared, ...]:
        """One prepared right side per root; a computed root takes its root's dtype."""
        likes = [_dtype(class_type(egraph, r)) for r in roots]
        built: dict[str, Prepared] = {}
        for let in self.lets:
            built[let.name] = self.op(let.op, egraph, env, classes, likes[0], built,
                                      let.outputs)
        return tuple(_held(self.node(t, egraph, env, classes, like, built),
                           class_type(egraph, r))
                     for t, like, r in zip(self.rhs, likes, roots, strict=True))

    def node(self, t: program.Term, egraph: EGraph, env: Env, classes: Lookup,
             like: str | None, built: dict[str, Prepared]) -> Prepared:
        if isinstance(t, program.Var):
            return Prepared("class", classes(t.name))
        if isinstance(t, program.Local):
            base = built[t.name]
            return base if t.output is None else Prepared("proj", t.output, children=(base,))
        if isinstance(t, program.Absent):
            return Prepared("absent")
        if isinstance(t, program.Op):
            return self.op(t, egraph, env, classes, like, built)
        try:
            if isinstance(t, program.Const):
                return Prepared("const", input_constant(t.value, like))
            if isinstance(t, program.Computed):
                return Prepared("const", input_constant(evaluate(t.expr, env), like))
        except EvalError as err:
            raise PrepareError(str(err)) from None
        raise PrepareError("'_' has no value on a right side")

    def op(self, call: program.Op, egraph: EGraph, env: Env, classes: Lookup,
           outer: str | None, built: dict[str, Prepared], outputs: int = 0) -> Prepared:
        """A new node; computed inputs take the first tensor input's dtype, else ``outer``
        (the dtype expected where this node is used: the matched root's at the top);
        ``outputs`` > 0 makes it a node whose outputs are taken by index."""
        ctx = context_of(egraph)
        try:
            schema = ctx.schema(call.qualified)
        except GeError as err:
            raise PrepareError(f"{call.qualified}: {err}") from None
        # A port with one element type (int64 shapes and axes) decides its operand's dtype.
        fixed = [_port_dtype(schema, k) for k in range(len(call.args))]
        done: dict[int, Prepared] = {
            k: self.node(a, egraph, env, classes, fixed[k] or outer, built)
            for k, a in enumerate(call.args) if isinstance(a, _TENSORS)}
        like = next((d for k, p in done.items()
                     if not fixed[k] and (d := _prepared_dtype(egraph, p))), outer)
        children = tuple(done[k] if k in done else self.node(a, egraph, env, classes,
                                                             fixed[k] or like, built)
                         for k, a in enumerate(call.args))
        try:
            attrs = self.attrs(call, schema, env)
            children += self.ports(call, schema, attrs)
            if call.output is not None or outputs:
                attrs[OUTPUTS_ATTR] = schema.max_outputs or max(outputs, (call.output or 0) + 1)
            resolved = ctx.op_attrs(call.qualified, attrs)
        except (GeError, EvalError) as err:
            raise PrepareError(f"{call.qualified}: {err}") from None
        return Prepared("op", call.qualified, resolved, children, call.output)

    def attrs(self, call: program.Op, schema: Any, env: Env) -> dict[str, Any]:
        out: dict[str, Any] = {}
        ports = {p.name for p in schema.inputs}
        for item in call.attrs:
            if isinstance(item, program.Copy):
                out.update(copied(env, item.binder))
            elif item.name in schema.attrs:
                out[item.name] = attr_value(schema.attrs[item.name], attr_of(item, env))
            elif item.name in ports:  # an attribute of older opsets, an input of this one
                out[item.name] = attr_value(item.spec, attr_of(item, env))
            else:
                raise EvalError(f"no attribute '{item.name}' at this opset")
        return out

    @staticmethod
    def ports(call: program.Op, schema: Any, attrs: dict[str, Any]) -> tuple[Prepared, ...]:
        """Attributes given that are inputs at this opset (ReduceMean's ``axes`` from 18)
        become constant inputs after the written ones, absent ones filling any gap;
        ``attrs`` keeps only the real attributes."""
        index = {p.name: k for k, p in enumerate(schema.inputs)}
        moved = {index[k]: attrs.pop(k) for k in list(attrs)
                 if k not in schema.attrs and k in index}
        if not moved:
            return ()
        if min(moved) < len(call.args):
            raise EvalError(f"input {min(moved)} is given twice")
        out = []
        for k in range(len(call.args), max(moved) + 1):
            if k not in moved:
                out.append(Prepared("absent"))
                continue
            dtype = _port_dtype(schema, k) or "int64"
            out.append(Prepared("const", np.asarray(moved[k]).astype(dtype)))
        return tuple(out)


_TENSORS = (program.Op, program.Var, program.Absent, program.Local)


def attr_of(item: program.Attr, env: Env) -> Any:
    """An attribute's value on one match: a literal, an attribute variable or a value."""
    if item.kind == "value":
        return item.value
    if item.kind == "var":
        return env.lookup(item.value)
    return evaluate(item.value, env)


def copied(env: Env, binder: str) -> dict[str, Any]:
    node: ENode = env.node(binder)  # type: ignore[attr-defined]
    return {k: ir_attr(v) for k, v in node.attrs if k != OUTPUTS_ATTR}


def _held(p: Prepared, root: Any) -> Prepared:
    """A computed root in a blocked format (``transdata(w, "FRACTAL_Z")``) is held as the
    matched root is: the constant carries its format and logical shape."""
    if p.kind != "const" or not isinstance(root, TensorType) or root.format == "ND":
        return p
    if tuple(np.shape(p.value)) != tuple(root.physical_shape or ()):
        raise PrepareError(f"the computed value has shape {list(np.shape(p.value))}, but "
                           f"the matched {root} is held as {list(root.physical_shape or ())}")
    return Prepared("const", p.value, (("type", root),))


def _dtype(t: Any) -> str | None:
    return t.dtype if isinstance(t, TensorType) else None


def _prepared_dtype(egraph: EGraph, p: Prepared) -> str | None:
    if p.kind == "class":
        return _dtype(class_type(egraph, p.value))
    if p.kind == "const":
        return str(p.value.dtype)
    return None


def _port_dtype(schema: Any, index: int) -> str | None:
    """The element type input ``index`` of ``schema`` requires, if it requires one."""
    ports = schema.inputs
    if index < len(ports):
        return ports[index].dtype  # type: ignore[no-any-return]
    return ports[-1].dtype if ports and ports[-1].variadic else None


def emit(egraph: EGraph, p: Prepared, memo: dict[int, int] | None = None) -> int:
    """Add the prepared right side; returns its class. ``memo`` (per application) emits a
    node that several right sides share once."""
    memo = {} if memo is None else memo
    found = memo.get(id(p))
    if found is not None:
        return found
    if p.kind == "class":
        cid = int(p.value)
    elif p.kind == "const":
        cid = int(add_const(egraph, p.value if isinstance(p.value, Deferred)
                            else np.asarray(p.value), dict(p.attrs).get("type")))
    elif p.kind == "absent":
        cid = int(egraph.add(ENode(ABSENT, (), ())))
    elif p.kind == "proj":
        cid = int(egraph.add(ENode(PROJ, (("index", p.value),), (emit(egraph, p.children[0],
                                                                         memo),))))
    else:
        cid = _emit_op(egraph, p, memo)
    memo[id(p)] = cid
    return cid


def _emit_op(egraph: EGraph, p: Prepared, memo: dict[int, int]) -> int:
    children = tuple(emit(egraph, c, memo) for c in p.children)
    cid = int(egraph.add(ENode(p.value, p.attrs, children)))
    count = dict(p.attrs).get(OUTPUTS_ATTR)
    if count is None:
        return cid
    # Every output of a new tuple node gets its projection, so rules rooted at another
    # output (``ge.AddLayerNorm(...)[1] => Add(x, r)``) can find it.
    projs = [int(egraph.add(ENode(PROJ, (("index", k),), (cid,)))) for k in range(int(count))]
    return cid if p.output is None else projs[p.output]


def tensor_of(egraph: EGraph, name: str, cid: int) -> Tensor:
    """A class as an expression value: its type and constant value (if known)."""
    t = class_type(egraph, cid)
    sym = egraph.data(cid, SYM) if SYM in egraph.analysis_names() else None
    return Tensor(name, t if isinstance(t, TensorType) else None, class_value(egraph, cid),
                  None if sym is None else sym.values)
