"""Text for people: a small graph as one line per node, and a counterexample report.

Invariant: every line names dtypes and shapes explicitly (``float32[1,3,4,4]``); constants show
their value when they hold at most ``SHOWN`` elements, so a report reproduces by hand.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..dsl.instances import NO_TYPING, SOLVED
from ..ir.graph import Graph, Node
from ..ir.weights import materialize
from ..testing.equivalence import Mismatch

SHOWN = 8


def _value(array: np.ndarray) -> str:
    flat = np.asarray(array).reshape(-1)
    if flat.size <= SHOWN:
        text = np.array2string(np.asarray(array), precision=4, separator=", ",
                               max_line_width=10_000).replace("\n", "")
        return f" = {text}"
    return f" (min {float(flat.min()):.4g}, max {float(flat.max()):.4g})"


def _attr(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"tensor{list(value.shape)}"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)


def _node(node: Node, graph: Graph) -> str:
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in node.attrs.items())
    outs = ", ".join(f"{o}: {graph.type_of(o)}" for o in node.outputs if o)
    args = ", ".join(i or "none" for i in node.inputs)
    return f"{outs} = {node.qualified_op}({args})" + (f" {{{attrs}}}" if attrs else "")


def graph_lines(graph: Graph) -> list[str]:
    """Inputs, constants and nodes of a small graph, one per line."""
    lines = [f"input {v.name}: {v.type}" for v in graph.inputs]
    for name, weight in graph.initializers.items():
        array = materialize(weight)
        lines.append(f"const {name}: {array.dtype.name}{list(array.shape)}{_value(array)}")
    lines += [_node(n, graph) for n in graph.nodes]
    lines.append("output " + ", ".join(f"{v.name}: {v.type}" for v in graph.outputs))
    return lines


def counterexample_text(lhs: Graph, rhs: Graph | None, problem: str,
                        mismatch: Mismatch | None, feeds: dict[str, np.ndarray],
                        tolerance: tuple[float, float] | None, note: str = "") -> str:
    """Both sides, the inputs (with their values when small), the error and the tolerance;
    ``note`` (where the left side overflows) last."""
    lines = [f"counterexample: {problem}", "  left side:"]
    lines += [f"    {line}" for line in graph_lines(lhs)]
    if rhs is not None:
        lines.append("  right side:")
        lines += [f"    {line}" for line in graph_lines(rhs)]
    shapes = ", ".join(f"{k}: {v.dtype.name}{list(v.shape)}{_shown(v)}"
                       for k, v in feeds.items()) or (
        ", ".join(f"{v.name}: {v.type}" for v in lhs.inputs))
    lines.append(f"  inputs: {shapes or 'none (all constant)'}")
    if mismatch is not None:
        lines.append(f"  {mismatch.describe()}")
    if tolerance is not None:
        lines.append(f"  tolerance: rtol={tolerance[0]:.3g}, atol={tolerance[1]:.3g}")
    if note:
        lines.append(f"  {note}")
    return "\n".join(lines)


def _shown(array: np.ndarray) -> str:
    """`` = [..]`` for an input small enough to read."""
    return _value(array) if np.asarray(array).size <= SHOWN else ""


def no_instance_text(budget: int, blockers: Counter[str], template: str) -> str:
    """Why a rule never fired: the guard that rejected most candidates (after the verifier
    solved what it could), the next ones, and what the author can add."""
    lines = [f"no instance found under its guards in {budget} attempts"]
    ranked = blockers.most_common(3)
    if ranked:
        (first, n), rest = ranked[0], ranked[1:]
        what = "the left side could not be typed" if first == NO_TYPING else \
            f"the guard `{first}` rejected most candidates"
        lines[0] += f": {what} ({n} of {sum(blockers.values())})"
        if rest:
            lines.append("  then: " + "; ".join(
                f"`{b}` ({k})" if b != NO_TYPING else f"{b} ({k})" for b, k in rest))
    lines.append(f"  the verifier solves guards of the forms {', '.join(SOLVED)} for a "
                 "variable v of the left side; for other guards, give an instance that "
                 "passes them above the rule")
    if template:
        lines.append(f"  with @example, e.g. (edit the values) {template}")
    else:
        lines.append("  with @example(x: f32[2, 3], c = 0.5)")
    return "\n".join(lines)
