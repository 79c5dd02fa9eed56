"""A counterexample as a ready-to-run pytest file.

``regression_test(rule, rewrite, graph, feeds)`` writes a test module that loads the rule
the way it was loaded, builds the counterexample's left side with the public
``GraphBuilder`` (every input, constant, node and attribute spelled out), feeds it the input
that failed and asserts that ``check_instance`` finds no counterexample there. It fails
while the rule is wrong and passes once the rule is fixed, whether the fix makes both sides
agree or makes a guard reject the instance.

Invariants:
- The text is a function of its arguments; names are sanitized into Python identifiers.
- Values are written exactly (floats by ``repr``, which reads back to the same float16,
  float32 or float64 value), so the test replays the failure bit for bit.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..dsl.compile import CompiledRule
from ..dsl.loader import shipped_root
from ..ir.graph import Graph
from ..ir.weights import materialize


def regression_test(rule: CompiledRule, rewrite: str, graph: Graph,
                    feeds: Mapping[str, np.ndarray], how: str = "") -> str:
    """The pytest module (see the module docstring); ``how`` says where the failure came
    from (``seed 0``)."""
    names = _Names()
    body = [f"rule = {_loader(rule)}.rule({rewrite!r})",
            f"g = GraphBuilder({graph.name or 'instance'!r}, opset={dict(graph.opset)!r}, "
            "registry=rule.registry)"]
    for v in graph.inputs:
        dims = list(v.shape or ())
        held = "" if v.type.format == "ND" else f", format={v.type.format!r}"  # physical feeds
        body.append(f"{names.var(v.name)} = g.input({v.name!r}, {dims!r}, {v.dtype!r}{held})")
    for name, array in graph.initializers.items():
        # instances hold arrays (the builder computes constants); a deferred one is computed
        body.append(f"{names.var(name)} = g.const({_array(materialize(array))}, name={name!r})")
    for node in graph.nodes:
        args = ", ".join(names.var(i) if i else "None" for i in node.inputs)
        attrs = "".join(f", {k}={_value(v)}" for k, v in node.attrs.items())
        outs = [o for o in node.outputs]
        call = f"g.op({node.qualified_op!r}, {args}{attrs}, name={node.name!r}"
        if len(outs) == 1:
            body.append(f"{names.var(outs[0])} = {call})")
        else:
            targets = ", ".join(names.var(o) if o else "_" for o in outs)
            body.append(f"{targets} = {call}, outputs={len(outs)})")
    body += [f"g.output({names.var(v.name)})" for v in graph.outputs]
    body.append("feeds = {" + ", ".join(f"{k!r}: {_array(a)}" for k, a in feeds.items()) + "}")
    body.append(f"result = check_instance(rule, g.build(), feeds, rewrite={rewrite!r})")
    body.append("assert result.status != COUNTEREXAMPLE, result.detail")
    where = f"{rule.span.file}:{rule.span.line}"
    source = f" ({how})" if how else ""
    lines = [
        f'"""Regression test: the counterexample `ge-rewrite rules verify` found for rule '
        f'{rule.name} ({where}){source}, shrunk."""',
        "",
        "import numpy as np",
        "",
        "from gerules import GraphBuilder",
        f"from gerules.dsl import {_loader(rule).split('(')[0]}",
        "from gerules.verify import COUNTEREXAMPLE, check_instance",
        "",
        "",
        f"def test_{_identifier(rule.name)}_counterexample() -> None:",
        *(f"    {line}" for line in body),
    ]
    return "\n".join(lines) + "\n"


def _loader(rule: CompiledRule) -> str:
    """How to load the rule again: the shipped library, or its file alone."""
    shown = Path(rule.span.file)
    shipped = shipped_root() / shown.name
    if shown == Path("rules") / shown.name and shipped.is_file() and (
            not shown.exists() or shown.resolve() == Path(str(shipped)).resolve()):
        return "load_compiled()"
    return f"load_compiled([{rule.span.file!r}], soundness=False)"


def _array(array: np.ndarray) -> str:
    a = np.asarray(array)
    values = a.astype(np.float64).tolist() if a.dtype.kind == "f" else a.tolist()
    return f"np.array({values!r}, np.{a.dtype.name})"


def _value(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return _array(v)
    if isinstance(v, tuple):
        return repr(list(v))
    return repr(v)


def _identifier(text: str) -> str:
    name = re.sub(r"\W+", "_", text).strip("_") or "v"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"v_{name}"
    return name


class _Names:
    """Tensor names to unique Python identifiers (``%t0`` -> ``t0``, ``%out`` -> ``out``)."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}
        self.taken = {"np", "g", "rule", "feeds", "result", "GraphBuilder", "check_instance",
                      "COUNTEREXAMPLE"}

    def var(self, tensor: str) -> str:
        if tensor not in self.known:
            base = name = _identifier(tensor)
            k = 1
            while name in self.taken:
                name, k = f"{base}_{k}", k + 1
            self.taken.add(name)
            self.known[tensor] = name
        return self.known[tensor]
