"""Raise an extraction back into a Graph.

Invariants:
- Nodes come out in the extraction's order (children first), so the graph is topologically
  sorted; only classes reachable from the outputs appear (dead nodes vanish).
- Graph inputs and outputs keep their names and order; a tensor keeps the name it had in the
  source graph when its class held it there; new tensors get fresh ``<op>_<n>`` names that never
  collide with existing ones.
- A node whose e-node is unchanged from the source keeps its node name; a new node takes the name
  of the source node whose tensor it now computes, prefixed with its op.
- Attributes equal to the schema default are dropped, so exported models stay clean.
- Constants become initializers (reusing the source initializer's name for identical bytes).
- The graph carries the composite ops (``ir.composite``) its nodes use, and only those.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..engine import ENode, Extraction
from ..ir.attrs import Attrs
from ..ir.composite import with_uses
from ..ir.formats import ND
from ..ir.graph import Graph, Node, Value
from ..ir.weights import Weight
from .lower import Lowered
from .terms import ABSENT, CONST, INPUT, OUTPUTS_ATTR, PROJ, const_type, ir_attr, split_op


@dataclass
class _Namer:
    taken: set[str]
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def fresh(self, base: str) -> str:
        while True:
            name = f"{base}_{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def claim(self, name: str) -> str:
        if name in self.taken:
            return self.fresh(name)
        self.taken.add(name)
        return name


def raise_graph(source: Graph, low: Lowered, ext: Extraction) -> Graph:
    """The graph chosen by ``ext`` over the e-graph ``low`` was lowered into."""
    eg = low.egraph
    origin: dict[ENode, Node] = {}
    for node, enode, _ in low.node_enodes:
        origin.setdefault(eg.canonical(enode), node)
    namer = _Namer(set(source.input_names))
    names: dict[int, str] = {}
    out_names: dict[int, str] = {}
    for v in source.outputs:
        out_names.setdefault(eg.find(low.roots[v.name]), v.name)
    # an output's name goes to the class that is that output, never to another class that
    # held it in the source (Relu(x) => Relu(Relu(x)): the old output is now inside)
    taken = set(out_names.values())
    preferred = {c: n for c, n in _preferred_names(low).items()
                 if n not in taken or out_names.get(c) == n}
    nodes: list[Node] = []
    inits: dict[str, Weight] = {}
    held: dict[str, Value] = {}  # weights held in a blocked format: their logical types
    proj_index = {}
    for cid in ext.order:
        enode = ext.choices[cid]
        if enode.op == PROJ:
            proj_index[cid] = (eg.find(enode.children[0]), int(enode.get("index")))
    tuple_outputs = _tuple_outputs(ext, proj_index)
    for cid in ext.order:
        enode = ext.choices[cid]
        op = enode.op
        if op == INPUT:
            names[cid] = enode.get("name")
        elif op == ABSENT:
            names[cid] = ""
        elif op == CONST:
            tensor = enode.get("value")
            want = out_names.get(cid) or low.const_names.get(tensor) or "const"
            name = namer.claim(want) if want != "const" else namer.fresh("const")
            names[cid] = name
            inits[name] = tensor.array
            t = const_type(enode)
            if t.format != ND:
                held[name] = Value(name, t)
        elif op == PROJ:
            continue  # named when its tuple node is emitted
        else:
            hint = out_names.get(cid) or preferred.get(cid)
            node = _emit(low, cid, enode, names, namer, hint, origin, tuple_outputs, preferred)
            nodes.append(node)
    nodes, outputs = _bind_outputs(source, low, ext, names, nodes, namer)
    bodies = [low.ctx.schema(n.qualified_op).body for n in nodes if n.domain]
    return source.replace(nodes=tuple(nodes), initializers=inits, outputs=outputs,
                          value_info=held, functions=with_uses([b for b in bodies if b]))


def _tuple_outputs(ext: Extraction, proj_index: dict[int, tuple[int, int]]
                   ) -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for proj, (tup, index) in proj_index.items():
        out.setdefault(tup, {})[index] = proj
    return out


def _preferred_names(low: Lowered) -> dict[int, str]:
    """Class -> the first source tensor name it held."""
    out: dict[int, str] = {}
    for name, cid in low.tensors.items():
        out.setdefault(low.egraph.find(cid), name)
    return out


def _emit(low: Lowered, cid: int, enode: ENode, names: dict[int, str], namer: _Namer,
          want: str | None, origin: dict[ENode, Node], tuple_outputs: dict[int, dict[int, int]],
          preferred: dict[int, str]) -> Node:
    domain, op = split_op(enode.op)
    inputs = tuple(names[low.egraph.find(c)] for c in enode.children)
    source = origin.get(enode)
    if enode.has(OUTPUTS_ATTR):
        count = int(enode.get(OUTPUTS_ATTR))
        projs = tuple_outputs.get(cid, {})
        outputs = []
        for k in range(count):
            proj = projs.get(k)
            if proj is None:
                outputs.append(namer.fresh(f"{op}_unused"))
                continue
            pname = preferred.get(proj)
            names[proj] = namer.claim(pname) if pname else namer.fresh(op)
            outputs.append(names[proj])
    else:
        name = namer.claim(want) if want else namer.fresh(op)
        names[cid] = name
        outputs = [name]
    node_name = source.name if source is not None and source.name else (
        f"{op}/{want}" if want else outputs[0])
    return Node(op, inputs, tuple(outputs), _clean_attrs(low, enode), node_name, domain)


def _clean_attrs(low: Lowered, enode: ENode) -> Attrs:
    schema = low.ctx.schema(enode.op)
    kept = {}
    for key, value in enode.attrs:
        if key == OUTPUTS_ATTR:
            continue
        spec = schema.attrs.get(key)
        plain = ir_attr(value)
        if spec is not None and spec.default is not None and not isinstance(plain, np.ndarray):
            if Attrs(v=plain) == Attrs(v=spec.default):
                continue
        kept[key] = plain
    return Attrs(kept)


def _bind_outputs(source: Graph, low: Lowered, ext: Extraction, names: dict[int, str],
                  nodes: list[Node], namer: _Namer) -> tuple[list[Node], tuple[Value, ...]]:
    """Make every graph output name a tensor of the graph (Identity where it must)."""
    outputs = []
    for v in source.outputs:
        cid = low.egraph.find(low.roots[v.name])
        have = names[cid]
        if have != v.name:
            nodes.append(Node("Identity", (have,), (v.name,), name=f"Identity/{v.name}"))
            namer.taken.add(v.name)
        outputs.append(Value(v.name, v.type))
    return nodes, tuple(outputs)
