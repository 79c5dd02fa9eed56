"""atc's ``--op_select_implmode``: exact or fast kernel forms, where the library has both.

``implmodes.yaml`` lists the ops with two forms (GELU: erf, exact, or tanh, fast) and the
attribute that selects one. ``select(graph, mode, op_types)`` sets that attribute on every
node it applies to and returns what it changed, node by node, for the report.

Invariants:
- ``high_precision`` (the default here) never changes a node: a model's own tanh GELU stays
  tanh, because that is what the model computes; ``high_performance`` turns exact forms into
  fast ones. ``op_types`` (``--optypelist_for_implmode``) limits the mode to nodes answering
  to those op types; others keep their form.
- The change is an approximation with a known bound (tanh GELU differs from erf GELU by less
  than 1e-3 absolute); the report names every node changed.
- Only attributes change: graph inputs, outputs and node names stay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ..errors import UsageError
from ..ir.attrs import Attrs
from ..ir.graph import Graph
from ..ir.registry import suggest

MODES = ("high_precision", "high_performance")
DEFAULT_MODE = "high_precision"


@dataclass(frozen=True, slots=True)
class Form:
    op: str
    type: str
    attribute: str
    exact: Any
    fast: Any
    when: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Change:
    node: str
    op: str
    attribute: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "attribute": self.attribute,
                "from": self.old, "to": self.new}


@lru_cache(maxsize=1)
def forms() -> tuple[Form, ...]:
    text = resources.files("gerules.opt").joinpath("implmodes.yaml").read_text()
    return tuple(Form(e["op"], e["type"], e["attribute"], e["exact"], e["fast"],
                      tuple(sorted((e.get("when") or {}).items())))
                 for e in yaml.safe_load(text))


def check(mode: str, op_types: Iterable[str]) -> None:
    if mode not in MODES:
        raise UsageError(f"--op_select_implmode: unknown mode '{mode}'{suggest(mode, MODES)}; "
                         f"choose one of {', '.join(MODES)}")
    known = {f.type for f in forms()}
    for t in op_types:
        if t not in known:
            raise UsageError(f"--optypelist_for_implmode: no op type '{t}' has two forms here"
                             f"{suggest(t, known)} (op types with an exact and a fast form: "
                             f"{', '.join(sorted(known))})")


def select(graph: Graph, mode: str, op_types: Iterable[str] = ()) -> tuple[Graph, list[Change]]:
    """``graph`` with the forms ``mode`` asks for, and the nodes that changed."""
    chosen = set(op_types)
    if mode != "high_performance":
        return graph, []
    by_op: dict[str, list[Form]] = {}
    for f in forms():
        if not chosen or f.type in chosen:
            by_op.setdefault(f.op, []).append(f)
    nodes, changes = [], []
    for node in graph.nodes:
        for f in by_op.get(node.qualified_op, ()):
            attrs = dict(node.attrs)
            if all(attrs.get(k) == v for k, v in f.when) and \
                    attrs.get(f.attribute, f.exact) == f.exact:
                attrs[f.attribute] = f.fast
                changes.append(Change(node.label, node.qualified_op, f.attribute,
                                      f.exact, f.fast))
                node = dataclasses.replace(node, attrs=Attrs(attrs))
        nodes.append(node)
    return (graph.replace(nodes=tuple(nodes)) if changes else graph), changes
