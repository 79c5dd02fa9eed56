"""The reference executor: run a Graph on NumPy arrays with the registry's kernels.

Invariants:
- Nodes run in the graph's order; each kernel sees exactly its node's inputs (``None`` for an
  omitted optional input) and the node's attributes with schema defaults applied.
- Feeds are checked before anything runs: every graph input present (unless it has an
  initializer as default), no unknown names, dtypes equal, ranks equal, known dims equal and
  each symbolic dim bound to one size across all inputs.
- A tensor is released after its last reader, so peak memory follows the live set.
- Budgets (``gerules.budgets``) hold before each kernel runs: the bytes alive plus what the
  node will produce stay within ``live_bytes``, each output within ``tensor_bytes``. Output
  sizes come from the graph's static types, or, where they are not static or follow from
  input values (``guard``), from inference on the actual inputs.
- Any failure inside a kernel is re-raised as ``KernelError`` naming the node (a kernel
  running out of memory is a ``ResourceLimit``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..budgets import DEFAULT, Budgets
from ..errors import GeError, KernelError, ModelError, ResourceLimit
from ..ir.graph import Graph, Node, TensorType, Value
from ..ir.infer import schema_for
from ..ir.registry import Call, KernelFn, OpSchema, Registry, default_registry
from ..ir.weights import arrays
from .guard import output_bytes, predict, value_shaped


@dataclass(frozen=True, slots=True)
class _Step:
    node: Node
    schema: OpSchema
    call: Call
    free_after: tuple[str, ...]  # tensors whose last reader is this node
    out_bytes: int | None  # bytes of its outputs when the graph fixes them, else None


class Executor:
    """A graph prepared for repeated runs (schemas looked up and attributes resolved once)."""

    def __init__(self, graph: Graph, registry: Registry | None = None, *,
                 budgets: Budgets = DEFAULT) -> None:
        registry = registry or default_registry()
        self.graph = graph
        self.budgets = budgets
        keep = set(graph.output_names) | set(graph.initializers)
        last_use: dict[str, int] = {}
        for k, node in enumerate(graph.nodes):
            for name in node.present_inputs():
                last_use[name] = k
        types = {v.name: v.type for v in (*graph.outputs, *graph.value_info.values())}
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
            steps.append(_Step(node, schema, call, free, _static_bytes(types, node, schema)))
        self._steps = tuple(steps)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = arrays(self.graph.initializers)
        given = check_feeds(self.graph, feeds)
        env.update(given)
        live = sum(a.nbytes for a in given.values())
        for step in self._steps:
            self._check(step, env, live)
            run_step(step.node, step.schema.kernel, step.call, env)
            live += sum(env[o].nbytes for o in step.node.outputs if o)
            for name in step.free_after:
                if name in env:
                    live -= env.pop(name).nbytes
        return {name: env[name] for name in self.graph.output_names}

    def _check(self, step: _Step, env: Mapping[str, np.ndarray], live: int) -> None:
        """The step's outputs fit the budgets, before its kernel allocates them."""
        need = step.out_bytes
        node = step.node
        if need is None:
            args = [env[i] if i else None for i in node.inputs]
            predicted = predict(node, step.schema, step.call, args)
            for name, t in zip(node.outputs, predicted or (), strict=False):
                self.budgets.check("tensor_bytes", t.nbytes() or 0, f"output {t}",
                                   node=node.label, op=node.qualified_op, tensor=name)
            need = output_bytes(predicted)
        self.budgets.check("live_bytes", live + need, "running the node",
                           node=node.label, op=node.qualified_op)


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
    except MemoryError as e:
        raise ResourceLimit(f"the kernel ran out of memory ({e}); the machine has less than "
                            "the run-time budget (lower --max_live_bytes to be refused "
                            "earlier)", node=node.label, op=node.qualified_op) from None
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError,
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


def _static_bytes(types: Mapping[str, TensorType], node: Node, schema: OpSchema
                  ) -> int | None:
    """Bytes of the node's outputs when the graph fixes them and no input value can change
    them; ``None`` when they must be predicted at run time."""
    if value_shaped(schema):
        return None
    total = 0
    for name in node.outputs:
        if name:
            t = types.get(name)
            n = t.nbytes() if t is not None else None
            if n is None:
                return None
            total += n
    return total


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
              registry: Registry | None = None, *, budgets: Budgets = DEFAULT
              ) -> dict[str, np.ndarray]:
    """Run ``graph`` once on ``feeds``; returns ``{output name: array}``."""
    return Executor(graph, registry, budgets=budgets).run(feeds)
