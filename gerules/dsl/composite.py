"""Op definitions (``op ge.RMSNorm(x, w) {epsilon: float = 1e-6} = body``) -> ``ir.composite``.

The body is an expression over the op's inputs: ops (checked as a right side is: the newest
version the call fits, arity, attributes), the inputs, ``as`` names shared by later parts,
literals and the op's attributes (as an attribute value, ``{axis = axis}``, or as a tensor,
``Add(v, epsilon)``), ``none`` for an absent input; a tuple ``(a, b)`` gives several outputs.

Invariants:
- ``define_op`` never raises: it returns the ``CompositeOp`` or every ``RuleError``.
- The body is pinned to one ai.onnx opset: the newest version each op's call fits, read at
  the largest of their versions; an attribute that is an input at that opset (ReduceMean's
  ``axes`` from 18) becomes a constant input there.
- Literals and attributes used as tensors become ``Constant`` nodes (an attribute through
  ``ref``, as ONNX functions do); one takes the element type of the first tensor input of
  its node (an input, an earlier result; else the op's first input) through ``CastLike``,
  unless its port has one element type (int64 axes and shapes), so the body needs opset 15.
- Ops defined earlier in the library may be used (``uses``); an op cannot use itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..ir.attrs import Attrs
from ..ir.composite import AttrRef, CompositeOp
from ..ir.graph import Node
from ..ir.registry import AttrSpec, OpSchema, Port, Registry, suggest
from . import ast
from .build import attr_value, input_constant
from .errors import RuleError
from .evaluate import evaluate
from .resolve import CLOSED, arity_text, fits, input_ports, kind_fits, literal_kind, op_names
from .values import EvalError
from .walk import is_closed

KINDS = ("int", "float", "string", "ints", "floats", "strings")


def define_op(decl: ast.OpDef, registry: Registry, defined: Mapping[str, CompositeOp]
              ) -> tuple[CompositeOp | None, list[RuleError]]:
    """The composite op ``decl`` defines, checked against ``registry`` (which holds the ops
    defined before it, ``defined``)."""
    return _Definer(decl, registry, defined).run()


class _Definer:
    def __init__(self, decl: ast.OpDef, registry: Registry,
                 defined: Mapping[str, CompositeOp]) -> None:
        self.decl = decl
        self.registry = registry
        self.defined = defined
        self.errors: list[RuleError] = []
        self.nodes: list[tuple[ast.OpCall, OpSchema, list[str], list[str], dict[str, Any]]] = []
        self.constants: dict[str, tuple[str, Any]] = {}  # name -> (Constant attr, value)
        self.tensors: dict[str, str] = {}  # name in the body text -> tensor
        self.attrs: dict[str, AttrSpec] = {}
        self.uses: dict[str, CompositeOp] = {}
        self.count = 0

    def error(self, span: ast.Span, message: str) -> None:
        self.errors.append(RuleError(message, span))

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    # ------------------------------------------------------------ header
    def run(self) -> tuple[CompositeOp | None, list[RuleError]]:
        d = self.decl
        if not d.ref.domain:
            self.error(d.ref.span, f"an op you define needs a domain, such as ge.{d.ref.op} "
                                   f"or my.{d.ref.op} (ai.onnx ops are the standard's)")
        elif d.ref.qualified in self.defined:
            self.error(d.ref.span, f"op {d.ref.qualified} is defined twice (first at "
                                  f"{self.defined[d.ref.qualified].where})")
        elif self.registry.has(d.ref.op, d.ref.domain):
            self.error(d.ref.span, f"{d.ref.qualified} is a built-in op; give yours another name")
        self.header()
        outputs = self.outputs()
        if self.errors:
            return None, self.errors
        opset = self.opset()
        nodes = [n for call, schema, ins, outs, attrs in self.nodes
                 for n in self.node(call, schema, ins, outs, attrs, opset)]
        if self.errors:
            return None, self.errors
        op = CompositeOp(d.ref.domain, d.ref.op, tuple(Port(p.name, p.optional) for p in d.params),
                         tuple(outputs), tuple(self.attrs.values()), tuple(nodes), opset,
                         tuple(self.uses.values()), d.text, f"{d.span.file}:{d.span.line}")
        return op, []

    def header(self) -> None:
        seen: set[str] = set()
        for p in self.decl.params:
            if p.name in seen:
                self.error(p.span, f"input '{p.name}' is declared twice")
            seen.add(p.name)
            self.tensors[p.name] = p.name
        for a in self.decl.attrs:
            if a.name in seen:
                self.error(a.span, f"'{a.name}' is declared twice")
            seen.add(a.name)
            if a.kind not in KINDS:
                self.error(a.span, f"attribute '{a.name}': unknown kind '{a.kind}'"
                                   f"{suggest(a.kind, KINDS)} (kinds: {', '.join(KINDS)})")
                continue
            spec = AttrSpec(a.name, a.kind)  # type: ignore[arg-type]
            default = None
            if a.default is not None:
                if not is_closed(a.default) or not kind_fits(spec, literal_kind(a.default)):
                    self.error(a.default.span, f"the default of '{a.name}' must be a "
                                               f"{a.kind} literal")
                    continue
                try:
                    default = attr_value(spec, evaluate(a.default, CLOSED))
                except EvalError as e:
                    self.error(a.default.span, str(e))
            self.attrs[a.name] = AttrSpec(a.name, a.kind, default,  # type: ignore[arg-type]
                                          required=default is None)

    def outputs(self) -> list[str]:
        body = self.decl.body
        parts = body.items if isinstance(body, ast.TupleLit) else (body,)
        outs: list[str] = []
        for part in parts:
            name = self.tensor(part, top=True)
            produced = {o for _, _, _, node_outs, _ in self.nodes for o in node_outs}
            if name in outs or (name and name not in produced):
                self.error(part.span, "each output of the body is a different op's result, "
                                      "not an input")
            outs.append(name)
        return outs

    # ------------------------------------------------------------ body
    def tensor(self, e: ast.Expr, top: bool = False) -> str:
        """The body tensor ``e`` computes ("" for an absent input)."""
        if isinstance(e, ast.OpCall):
            return self.call(e)
        if isinstance(e, ast.Name) and e.name in self.tensors:
            return self.tensors[e.name]
        if top:
            self.error(e.span, "the body computes its outputs with ops, such as "
                               "Mul(x, Sigmoid(x))")
            return ""
        if isinstance(e, ast.NoneLit):
            return ""
        return self.constant(e)

    def constant(self, e: ast.Expr) -> str:
        """A constant input: one of the op's attributes, or a literal."""
        name = self.fresh("const")
        if isinstance(e, ast.Name) and e.name in self.attrs:
            kind = self.attrs[e.name].kind
            if kind not in _CONSTANT_ATTRS:
                self.error(e.span, f"'{e.name}' is {kind}: a tensor input needs a number or "
                                   "a list of numbers")
            self.constants[name] = (_CONSTANT_ATTRS.get(kind, "value"), AttrRef(e.name))
            return name
        if isinstance(e, ast.Name) or not is_closed(e):
            self.error(e.span, f"the body of {self.decl.ref.qualified} reads its inputs, its "
                               "attributes and literals only"
                               + (f"; unknown name '{e.name}'{suggest(e.name, self.names())}"
                                  if isinstance(e, ast.Name) else ""))
            return name
        try:
            value = input_constant(evaluate(e, CLOSED), None)
        except EvalError as err:
            self.error(e.span, f"this constant has no value: {err}")
            return name
        self.constants[name] = ("value", value)
        return name

    def names(self) -> list[str]:
        return [*self.tensors, *self.attrs]

    def call(self, call: ast.OpCall) -> str:
        schema = self.schema(call)
        inputs = [self.tensor(a) for a in call.args]
        if schema is None:
            return ""
        if call.kwargs:
            self.error(call.kwargs[0].span, "op inputs are positional; attributes go in "
                                            "braces")
        outs = [self.fresh(call.op.lower()) for _ in range((call.output or 0) + 1)]
        attrs: dict[str, Any] = {}
        for item in call.attrs:
            if isinstance(item, ast.AttrCopy):
                self.error(item.span, "{..n} copies attributes of matched nodes (rules only)")
                continue
            attrs[item.name] = self.attr(call, schema, item)
        self.nodes.append((call, schema, inputs, outs, attrs))
        result = outs[call.output or 0]
        if call.binder is not None:
            if call.binder in self.tensors or call.binder in self.attrs:
                self.error(call.binder_span or call.span, f"'{call.binder}' is already bound")
            self.tensors[call.binder] = result
        return result

    def schema(self, call: ast.OpCall) -> OpSchema | None:
        if call.qualified == self.decl.ref.qualified:
            self.error(call.op_span, f"{call.qualified} cannot use itself")
            return None
        versions = self.registry.versions(call.op, call.domain)
        if not versions:
            hint = suggest(call.qualified, op_names(self.registry))
            self.error(call.op_span, f"unknown op {call.qualified}{hint}")
            return None
        if call.qualified in self.defined:
            self.uses[call.qualified] = self.defined[call.qualified]
        fitting = [s for s in versions if fits(call, s)]
        schema = fitting[-1] if fitting else versions[-1]
        n = len(call.args)
        if not fitting and not any(input_ports(call, s, versions) for s in versions):
            if n < schema.min_inputs or (schema.max_inputs is not None and
                                         n > schema.max_inputs):
                self.error(call.span, f"{call.qualified} takes {arity_text(schema)}, got {n}")
            for item in call.attrs:
                if isinstance(item, ast.AttrSet) and not any(item.name in v.attrs
                                                             for v in versions):
                    self.error(item.span, f"{call.qualified} has no attribute "
                                          f"'{item.name}'")
        for spec in schema.attrs.values():
            given = {a.name for a in call.attrs if isinstance(a, ast.AttrSet)}
            if spec.required and spec.name not in given:
                self.error(call.span, f"{call.qualified} needs attribute '{spec.name}'")
        return schema

    def attr(self, call: ast.OpCall, schema: OpSchema, item: ast.AttrSet) -> Any:
        versions = self.registry.versions(call.op, call.domain)
        spec = next((v.attrs[item.name] for v in reversed(versions) if item.name in v.attrs),
                    None)
        value = item.value
        if isinstance(value, ast.Name) and value.name in self.attrs:
            mine = self.attrs[value.name]
            if spec is not None and spec.kind != mine.kind and not (
                    spec.kind == "float" and mine.kind == "int"):
                self.error(value.span, f"'{value.name}' is {mine.kind}; attribute "
                                       f"'{item.name}' of {call.qualified} takes {spec.kind}")
            return AttrRef(value.name)
        if spec is None or not is_closed(value) or not kind_fits(spec, literal_kind(value)):
            self.error(value.span, f"attribute '{item.name}' of {call.qualified}: a literal "
                                   f"of its kind or one of {self.decl.ref.qualified}'s "
                                   "attributes")
            return None
        try:
            return attr_value(spec, evaluate(value, CLOSED))
        except EvalError as e:
            self.error(value.span, str(e))
            return None

    # ------------------------------------------------------------ opset
    def opset(self) -> int:
        """The ai.onnx opset the body is read at: the newest version its calls fit (15 at
        least when a constant follows a tensor's element type through CastLike)."""
        versions = [s.since_version for _, s, _, _, _ in self.nodes if not s.domain]
        return max(versions + [15] * bool(self.constants), default=1)

    def node(self, call: ast.OpCall, chosen: OpSchema, inputs: list[str], outputs: list[str],
             attrs: dict[str, Any], opset: int) -> list[Node]:
        """The node of ``call`` read at ``opset``, after the constants it reads."""
        schema = chosen if call.domain else self.registry.get(call.op, "", opset)
        ports = {p.name: k for k, p in enumerate(schema.inputs)}
        inputs = list(inputs)
        for name in [k for k in attrs if k not in schema.attrs]:
            if name not in ports or ports[name] < len(call.args):
                self.error(call.span, f"{call.qualified} has no attribute '{name}' at opset "
                                      f"{opset}, where the body's other ops are read")
                continue
            const = self.fresh("const")
            self.constants[const] = ("value", np.asarray(attrs.pop(name), np.int64))
            inputs += [""] * (ports[name] + 1 - len(inputs))
            inputs[ports[name]] = const
        first = next((i for i in inputs if i and i not in self.constants), None)
        like = first or (self.decl.params[0].name if self.decl.params else None)
        out: list[Node] = []
        for k, name in enumerate(inputs):
            if name not in self.constants:
                continue
            out += self.constant_nodes(name, schema, k, like)
            inputs[k] = out[-1].outputs[0]
        out.append(Node(call.op, tuple(inputs), tuple(outputs), Attrs(attrs),
                        name=outputs[call.output or 0], domain=call.domain))
        return out

    def constant_nodes(self, name: str, schema: OpSchema, k: int, like: str | None
                       ) -> list[Node]:
        """``Constant`` (and ``CastLike`` to ``like`` unless the port fixes the type)."""
        attr, value = self.constants.pop(name)
        port = schema.inputs[min(k, len(schema.inputs) - 1)] if schema.inputs else None
        if port is not None and port.dtype is not None and isinstance(value, np.ndarray):
            value = value.astype(port.dtype)
        nodes = [Node("Constant", (), (name,), Attrs({attr: value}), name=name)]
        if (port is None or port.dtype is None) and like is not None:
            nodes.append(Node("CastLike", (name, like), (f"{name}_cast",),
                              name=f"{name}_cast"))
        return nodes


# The Constant attribute that holds an attribute of each kind as a tensor.
_CONSTANT_ATTRS = {"float": "value_float", "int": "value_int", "floats": "value_floats",
                   "ints": "value_ints"}
