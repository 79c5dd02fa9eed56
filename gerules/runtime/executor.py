"""The reference executor: run a Graph on NumPy arrays with the registry's kernels.

Invariants:
- Nodes run in the graph's order; each kernel sees exactly its node's inputs (``None`` for an
  omitted optional input) and the node's attributes with schema defaults applied.
- Feeds are checked before anything runs: every graph input present (unless it has an
  initializer as default), no unknown names, dtypes equal, ranks equal, known dims equal and
  each symbolic dim bound to one size across all inputs.
- A tensor is released after its last reader, so peak memory follows the live set.
- Any failure inside a kernel is re-raised as ``KernelError`` naming the node.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..errors import GeError, KernelError, ModelError
from ..ir.graph import Graph, Node, TensorType, Value
from ..ir.infer import schema_for
from ..ir.registry import Call, KernelFn, Registry, default_registry


@dataclass(frozen=True, slots=True)
class _Step:
    node: Node
    kernel: KernelFn
    call: Call
    free_after: tuple[str, ...]  # tensors whose last reader is this node


class Executor:
    """A graph prepared for repeated runs (schemas looked up and attributes resolved once)."""

    def __init__(self, graph: Graph, registry: Registry | None = None) -> None:
        registry = registry or default_registry()
        self.graph = graph
        keep = set(graph.output_names) | set(graph.initializers)
        last_use: dict[str, int] = {}
        for k, node in enumerate(graph.nodes):
            for name in node.present_inputs():
                last_use[name] = k
        steps = []
        for k, node in enumerate(graph.nodes):
            schema = schema_for(node, graph, registry)
            try:
                call = schema.call(node.attrs, len(node.outputs), node.label,
                                   input_types(node, graph))
            except GeError as e:
                raise e.with_place(node=node.label, op=node.qualified_op)
            free = tuple(n for n in dict.fromkeys(node.present_inputs())
                         if last_use.get(n) == k and n not in keep)
            steps.append(_Step(node, schema.kernel, call, free))
        self._steps = tuple(steps)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = dict(self.graph.initializers)
        env.update(check_feeds(self.graph, feeds))
        for step in self._steps:
            run_step(step.node, step.kernel, step.call, env)
            for name in step.free_after:
                env.pop(name, None)
        return {name: env[name] for name in self.graph.output_names}


def input_types(node: Node, graph: Graph) -> tuple[TensorType | None, ...]:
    """The types of a node's operands, for its ``Call`` (kernels of ops that run on blocked
    formats read them)."""
    return tuple(graph.type_of(i) if i else None for i in node.inputs)


@contextmanager
def kernel_errors(node: Node) -> Iterator[None]:
    """A kernel's failure as a ``GeError`` naming the node."""
    try:
        yield
    except GeError as e:
        raise e.with_place(node=node.label, op=node.qualified_op)
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, MemoryError,
            AssertionError, RuntimeError) as e:
        raise KernelError(f"kernel failed: {e}", node=node.label, op=node.qualified_op) from None


def run_step(node: Node, kernel: KernelFn, call: Call, env: dict[str, np.ndarray]) -> None:
    """Run one node's kernel on ``env`` and store its outputs there."""
    args = [env[i] if i else None for i in node.inputs]
    with kernel_errors(node):
        outs = kernel(args, call)
    if len(outs) < len([o for o in node.outputs if o]):
        raise KernelError(f"kernel gave {len(outs)} outputs for {len(node.outputs)}",
                          node=node.label, op=node.qualified_op)
    for name, value in zip(node.outputs, outs, strict=False):
        if name:
            env[name] = value


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Validate feeds against the graph's inputs; returns them as arrays."""
    names = set(graph.input_names)
    for name in feeds:
        if name not in names:
            raise ModelError(f"no graph input is called '{name}' (inputs: "
                             f"{', '.join(sorted(names))})", tensor=name)
    bound: dict[str, int] = {}
    out: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        if v.name not in feeds:
            if v.name in graph.initializers:
                continue
            raise ModelError("missing input", tensor=v.name)
        arr = np.asarray(feeds[v.name])
        _check_one(v, arr, bound)
        out[v.name] = arr
    return out


def _check_one(v: Value, arr: np.ndarray, bound: dict[str, int]) -> None:
    if arr.dtype.name != v.dtype:
        raise ModelError(f"expects {v.dtype}, got {arr.dtype.name}", tensor=v.name)
    shape = v.type.physical_shape  # a formatted input (NHWC) is fed in its layout
    if shape is None:
        return
    if arr.ndim != len(shape):
        raise ModelError(f"expects shape {v.type.held_str()}, got {list(arr.shape)}",
                         tensor=v.name)
    for want, got in zip(shape, arr.shape, strict=True):
        if isinstance(want, int) and want != got:
            raise ModelError(f"expects shape {v.type.held_str()}, got {list(arr.shape)}",
                             tensor=v.name)
        if isinstance(want, str):
            if bound.setdefault(want, got) != got:
                raise ModelError(f"dim '{want}' is {bound[want]} elsewhere but {got} here",
                                 tensor=v.name)


def run_graph(graph: Graph, feeds: Mapping[str, np.ndarray],
              registry: Registry | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` once on ``feeds``; returns ``{output name: array}``."""
    return Executor(graph, registry).run(feeds)
