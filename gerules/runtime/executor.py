"""The reference executor: run a Graph on NumPy arrays with the registry's kernels.

Invariants:
- Nodes run in the graph's order; each kernel sees exactly its node's inputs (``None`` for an
  omitted optional input) and the node's attributes with schema defaults applied.
- Feeds are checked before anything runs: every graph input present (unless it has an
  initializer as default), no unknown names, dtypes equal, ranks equal, known dims equal and
  each symbolic dim bound to one size across all inputs.
- A tensor is released after its last reader, so peak memory follows the live set.
- Memory is recycled (as onnxruntime's arena does): a step whose op has a ``kernel_out`` and
  whose outputs have static types (the graph's, with symbolic dims bound by the feeds)
  computes straight into buffers the executor hands out, taken from its ``BufferPool`` when
  one of that size is spare, else fresh; an ``INPLACE`` op whose first input (any input,
  for an elementwise op) dies at it writes over that input when it is a whole buffer of
  the output's type nothing else views. When the last tensor viewing such a buffer dies,
  the buffer goes back to the pool.
  Only buffers the executor handed out are ever pooled, and only once no tensor of the run
  views them: graph inputs, initializers and kernels' own arrays never are, and a buffer an
  output returned to the caller views leaves the executor for good (a second run never
  writes over a result the caller kept).
- Budgets (``gerules.budgets``) hold before each kernel runs: the bytes alive plus what the
  node will produce stay within ``live_bytes``, each output within ``tensor_bytes``. Output
  sizes come from the graph's static types (symbolic dims bound by the feeds), or, where
  they are not static or follow from input values (``guard``), from inference on the actual
  inputs. The pool's spare bytes count too: when live + new + spare would pass
  ``live_bytes``, the spare is dropped first, so the budget refuses exactly what it refused
  without a pool and the process never holds more than the budget. The spare is at most the
  largest live set a run of this executor has reached.
- Any failure inside a kernel is re-raised as ``KernelError`` naming the node (a kernel
  running out of memory is a ``ResourceLimit``).
- Settled values are computed once per binding of the symbolic dims: a step is *settled*
  when its op is deterministic, none of its outputs is a graph output, and its value cannot
  change between runs with the same dims: a Constant (no inputs), an op that folds from its
  input's *type* (Shape, Size) on a type the feeds' dims fix, or an op whose every input is
  an initializer no feed can override or a settled value. The first run of a binding runs
  such a step as any other and keeps a read-only copy of its outputs when each has at most
  ``CONST_ELEMENTS`` elements (shape chains, scalars); later runs of that binding put the
  copies in place of running the kernel. They still count toward ``live_bytes`` like any
  output, are never pooled or written over, and a new binding starts over.
- Likewise the bytes ``guard.predict`` gives a step (a Reshape to a settled shape) are kept
  per binding when every input is settled or has a type the dims fix and those that are
  not settled are larger than ``CONST_ELEMENTS`` (inference reads values only up to that
  size): the prediction cannot change, so later runs check the budgets with the kept
  bytes. An input whose value may change and that inference reads (a fed shape) keeps the
  prediction per run.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..budgets import DEFAULT, Budgets
from ..errors import GeError, KernelError, ModelError, ResourceLimit
from ..ir.dtypes import to_numpy
from ..ir.graph import Graph, Node, TensorType, Value
from ..ir.infer import schema_for
from ..ir.registry import (
    ELEMENTWISE,
    INPLACE,
    NONDETERMINISTIC,
    Call,
    KernelFn,
    OpSchema,
    Registry,
    default_registry,
)
from ..ir.weights import CACHE_LINE, arrays, mapping_of, packed, release
from .guard import CONST_ELEMENTS, output_bytes, predict, value_shaped
from .pool import BufferPool, owner


@dataclass(frozen=True, slots=True)
class _Step:
    node: Node
    schema: OpSchema
    call: Call
    free_after: tuple[str, ...]  # tensors whose last reader is this node
    out_bytes: int | None  # bytes of its outputs when the graph fixes them, else None
    # the outputs' types when every output is named and typed and no input value sizes them
    # (dims may be symbols the feeds bind), else None: inference on the inputs sizes them
    out_types: tuple[TensorType, ...] | None = None
    into: bool = False  # the op has a kernel_out: sized outputs are handed to it
    # the ports whose tensor dies here (read at no other port) and whose buffer the first
    # output may take when nothing else views it: the first of an INPLACE op, any of an
    # elementwise INPLACE one (out[i] depends on the operands' element i alone)
    over_inputs: tuple[int, ...] = ()
    settled: bool = False  # its value is the same in every run with the same dims
    # when each input is settled or has a type the dims fix: the inputs that are not settled
    # (their values may change between runs); else None. ``guard.predict`` reads the values
    # of inputs up to CONST_ELEMENTS only, so when these are all larger, the bytes it
    # predicts are the same in every run with the same dims
    loose: tuple[str, ...] | None = None


Slot = tuple[np.dtype, tuple[int, ...], int]  # an output's dtype, shape and nbytes
Slots = tuple[Slot, ...]  # per output
Bound = tuple[Any, ...]  # a step's outputs' total bytes, then its Slots
KeptStep = tuple[int, tuple[tuple[str, np.ndarray], ...]]  # nbytes, (name, value) pairs
Kept = tuple[KeptStep | None, ...]  # per step, its settled outputs when kept


class Executor:
    """A graph prepared for repeated runs (schemas looked up and attributes resolved once)."""

    def __init__(self, graph: Graph, registry: Registry | None = None, *,
                 budgets: Budgets = DEFAULT) -> None:
        registry = registry or default_registry()
        self.graph = graph
        self.budgets = budgets
        self.pool = BufferPool()
        keep = set(graph.output_names) | set(graph.initializers)
        last_use: dict[str, int] = {}
        for k, node in enumerate(graph.nodes):
            for name in node.present_inputs():
                last_use[name] = k
        types = {v.name: v.type for v in (*graph.outputs, *graph.value_info.values())}
        settled = _Settled(graph)
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
            steps.append(_Step(node, schema, call, free, _static_bytes(types, node, schema),
                               _out_types(types, node, schema),
                               over_inputs=_over_inputs(node, schema, free),
                               into=schema.kernel_out is not None,
                               loose=settled.loose(node),
                               settled=settled.step(node, schema)))
        self._steps = tuple(steps)
        self._slots: tuple[tuple[tuple[str, int], ...], tuple[Bound | None, ...]] | None = None
        # per binding, each step's kept outputs (settled steps only; None: run the kernel)
        # and the bytes its outputs need (steps whose prediction cannot change; None:
        # predict them)
        self._kept: tuple[tuple[tuple[str, int], ...], Kept, tuple[int | None, ...]
                          ] | None = None
        self._aligned: dict[str, np.ndarray] | None = None
        self._lock = threading.Lock()

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        with np.errstate(all="ignore"):  # for the whole run (see ``ir.registry.OpSchema``)
            return self._run(feeds)

    def _run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = arrays(self.graph.initializers)
        env.update(self._aligned_weights())
        bound: dict[str, int] = {}
        given = check_feeds(self.graph, feeds, bound)
        env.update(given)
        key = tuple(sorted(bound.items()))
        slots = self._bind(key, bound)
        kept_now = self._kept
        keeping: list[KeptStep | None] | None = None
        needing: list[int | None] = []
        if kept_now is not None and kept_now[0] == key:
            kept, needs = kept_now[1], kept_now[2]
        else:
            kept = needs = (None,) * len(self._steps)
            keeping = []
        holders: dict[int, list[Any]] = {}  # id(buffer) -> [buffer, tensors viewing it]
        live = sum(a.nbytes for a in given.values())
        pool = self.pool
        limit = self.budgets.live_bytes
        for step, slot, values, need in zip(self._steps, slots, kept, needs, strict=True):
            node = step.node
            if values is not None:  # settled values this binding already computed
                total = live + values[0]
                if total + pool.spare > limit:
                    self._check_live(step, total)
                env.update(values[1])
            elif slot is not None and step.into:
                if live + slot[0] + pool.spare > limit:
                    self._check_live(step, live + slot[0])
                args = [env[i] if i else None for i in node.inputs]
                outs = [self._buffer(s) for s in slot[2:]]
                outs.insert(0, self._first_output(step, slot[1], args, holders))
                with kernel_errors(node, _single(node)):
                    step.schema.kernel_out(args, step.call, outs)  # type: ignore[misc]
                for name, out in zip(node.outputs, outs, strict=True):
                    env[name] = out
                    if out.nbytes:
                        buf = _owner(out)
                        holders.setdefault(id(buf), [buf, 0])[1] += 1
            else:
                if slot is not None:
                    if live + slot[0] + pool.spare > limit:
                        self._check_live(step, live + slot[0])
                elif need is not None:  # predicted on this binding's first run
                    if live + need + pool.spare > limit:
                        self._check_live(step, live + need)
                else:
                    need = self._check(step, env, live)
                run_step(node, step.schema.kernel, step.call, env)
                if holders:
                    for name in node.outputs:
                        held = holders.get(id(_owner(env[name]))) if name else None
                        if held is not None:
                            held[1] += 1
            if keeping is not None:
                keeping.append(_keep(node, env) if step.settled else None)
                needing.append(need if step.loose is not None and all(
                    env[n].size > CONST_ELEMENTS for n in step.loose) else None)
            if values is not None:
                live += values[0]
            else:
                for o in node.outputs:
                    if o:
                        live += env[o].nbytes
            if live > pool.limit:  # the spare never passes the largest live set
                pool.limit = live
            for name in step.free_after:
                dead = env.pop(name, None)
                if dead is not None:
                    live -= dead.nbytes
                    if holders:
                        self._release(holders, dead)
        if keeping is not None:
            self._kept = (key, tuple(keeping), tuple(needing))
        result = {name: env[name] for name in self.graph.output_names}
        for value in result.values():  # the caller's now: never handed out again
            holders.pop(id(owner(value)), None)
        for buf, _ in holders.values():  # outputs of the run nobody read
            pool.give(buf)
        return result

    def _aligned_weights(self) -> dict[str, np.ndarray]:
        """Copies of the initializers read in place from the model file or not on a 64-byte
        boundary, made on the first run and kept: one arena, each weight at a multiple of
        ``weights.CACHE_LINE``.

        A weight read in place from the model file sits at any byte offset. NumPy copies
        an operand misaligned for its dtype on *every* call (BLAS refuses it: a 2048x1000
        FC takes 30 ms instead of 0.06; ``np.take`` copies a whole embedding table), and
        BLAS packs one that straddles cache lines, in 4 KiB file pages, several per cent
        slower than an aligned one in anonymous memory (which NumPy backs with huge pages
        when the system allows it for its large allocations). So each such weight is copied
        once per executor into the arena, read-only like the weight, and the file's pages
        under it are given back (``weights.release``) so resident memory does not double.
        """
        with self._lock:
            if self._aligned is None:
                moved = {name: w for name, w in self.graph.initializers.items()
                         if isinstance(w, np.ndarray) and w.nbytes and not w.dtype.hasobject
                         and (w.ctypes.data % CACHE_LINE or mapping_of(w) is not None)}
                self._aligned = dict(zip(moved, packed(list(moved.values())), strict=True))
                for w in moved.values():
                    release(w)
            return self._aligned

    def _bind(self, key: tuple[tuple[str, int], ...], bound: Mapping[str, int]
              ) -> tuple[Bound | None, ...]:
        """Per step, its outputs' total bytes then each one's (dtype, shape, nbytes) with the
        feeds' dims, or ``None`` when their types do not say (sized by input values, or a
        dim nothing binds). Each output the feeds' dims size is checked against
        ``tensor_bytes`` here, before any node runs (kept per binding: a refused binding is
        never kept)."""
        slots_now = self._slots
        if slots_now is not None and slots_now[0] == key:
            return slots_now[1]
        slots = tuple(None if s.out_types is None else _slots(s.out_types, bound)
                      for s in self._steps)
        for step, slot in zip(self._steps, slots, strict=True):
            node = step.node
            if slot is not None and step.out_bytes is None:
                for name, (_, shape, nbytes) in zip(node.outputs, slot, strict=True):
                    self.budgets.check("tensor_bytes", nbytes, f"output {list(shape)}",
                                       node=node.label, op=node.qualified_op, tensor=name)
        ready = tuple(None if slot is None else (sum(o[2] for o in slot), *slot)
                      for slot in slots)
        self._slots = (key, ready)
        return ready

    def _first_output(self, step: _Step, slot: tuple[np.dtype, tuple[int, ...], int],
                      args: list[np.ndarray | None], holders: Mapping[int, list[Any]]
                      ) -> np.ndarray:
        """A dying input itself for an in-place step, when it is the whole of a buffer of the
        output's type that no other tensor views, and writeable (a kernel's read-only view,
        such as Expand's broadcast, is never written through); else a buffer."""
        for k in step.over_inputs:
            x = args[k]
            if x is not None and x.dtype == slot[0] and x.shape == slot[1]:
                held = holders.get(id(owner(x)))
                if (held is not None and held[1] == 1 and x.nbytes == held[0].nbytes
                        and x.flags.c_contiguous and x.flags.writeable):
                    return x
        return self._buffer(slot)

    def _buffer(self, slot: tuple[np.dtype, tuple[int, ...], int]) -> np.ndarray:
        dtype, shape, nbytes = slot
        if not nbytes:
            return np.empty(shape, dtype)
        return self.pool.take(nbytes).view(dtype).reshape(shape)

    def _release(self, holders: dict[int, list[Any]], dead: np.ndarray) -> None:
        """``dead`` left the run: its buffer goes back to the pool once nothing views it."""
        key = id(_owner(dead))
        held = holders.get(key)
        if held is not None:
            held[1] -= 1
            if held[1] == 0:
                del holders[key]
                self.pool.give(held[0])

    def _check(self, step: _Step, env: Mapping[str, np.ndarray], live: int) -> int:
        """The step's outputs fit the budgets, before its kernel allocates them; returns the
        bytes they need."""
        need = step.out_bytes
        node = step.node
        if need is None:
            args = [env[i] if i else None for i in node.inputs]
            predicted = predict(node, step.schema, step.call, args)
            for name, t in zip(node.outputs, predicted or (), strict=False):
                self.budgets.check("tensor_bytes", t.nbytes() or 0, f"output {t}",
                                   node=node.label, op=node.qualified_op, tensor=name)
            need = output_bytes(predicted)
        self._check_live(step, live + need)
        return need

    def _check_live(self, step: _Step, total: int) -> None:
        """``total`` bytes alive fit ``live_bytes``; the pool's spare is dropped first when
        they would not fit with it. (``run`` calls it only when ``total`` plus the spare
        would not fit: otherwise it does nothing.)"""
        limit = self.budgets.live_bytes
        if total + self.pool.spare > limit:
            self.pool.clear()
            self.budgets.check("live_bytes", total, "running the node",
                               node=step.node.label, op=step.node.qualified_op)


class _Settled:
    """Which steps' values cannot change between runs with the same dims (the module
    docstring's *settled*): built in graph order, one ``loose`` then ``step`` call per
    node."""

    def __init__(self, graph: Graph) -> None:
        fed = set(graph.input_names)
        self.names = {n for n in graph.initializers if n not in fed}
        self.symbols = {d for v in graph.inputs for d in (v.type.shape or ())
                        if isinstance(d, str)}
        self.outputs = set(graph.output_names)
        self.graph = graph

    def loose(self, node: Node) -> tuple[str, ...] | None:
        """The inputs of ``node`` that are not settled (call before ``step``) when all of
        them have types the feeds' dims fix, else ``None``."""
        ins = [n for n in node.present_inputs() if n not in self.names]
        return tuple(ins) if all(self._fixed(n) for n in ins) else None

    def _fixed(self, name: str) -> bool:
        t = self.graph.type_of(name)
        return t is not None and t.shape is not None and all(
            isinstance(d, int) or d in self.symbols for d in t.shape)

    def step(self, node: Node, schema: OpSchema) -> bool:
        ins = node.present_inputs()
        if (NONDETERMINISTIC in schema.traits or not node.outputs
                or any(o in self.outputs for o in node.outputs)):
            return False
        if schema.fold_types is not None and len(ins) == 1:
            ok = self._fixed(ins[0])
        else:
            ok = all(n in self.names for n in ins)
        if ok:
            self.names.update(o for o in node.outputs if o)
        return ok


def _keep(node: Node, env: Mapping[str, np.ndarray]) -> KeptStep | None:
    """Read-only copies of a settled step's outputs with their total bytes, or ``None`` when
    one is unnamed or larger than ``CONST_ELEMENTS`` (recomputed each run rather than
    held)."""
    if not all(node.outputs):
        return None
    values = [env[o] for o in node.outputs]
    if any(v.size > CONST_ELEMENTS for v in values):
        return None
    copies = tuple(np.array(v, copy=True) for v in values)
    for c in copies:
        c.flags.writeable = False
    return (sum(c.nbytes for c in copies), tuple(zip(node.outputs, copies, strict=True)))


def _owner(array: np.ndarray) -> np.ndarray:
    """``owner(array)``, without the call for an array that owns its memory."""
    return array if array.base is None else owner(array)


def input_types(node: Node, graph: Graph) -> tuple[TensorType | None, ...]:
    """The types of a node's operands, for its ``Call`` (kernels of ops that run on blocked
    formats read them)."""
    return tuple(graph.type_of(i) if i else None for i in node.inputs)


class kernel_errors:  # noqa: N801  (used as a function: ``with kernel_errors(node):``)
    """A kernel's failure as a ``GeError`` naming the node (and ``tensor``, the output a
    ``kernel_out`` wrote, when it has one). A class, not a generator: it wraps every step."""

    __slots__ = ("node", "tensor")

    def __init__(self, node: Node, tensor: str | None = None) -> None:
        self.node = node
        self.tensor = tensor

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None,
                 _tb: object) -> None:
        if e is None:
            return
        node = self.node
        if isinstance(e, GeError):
            raise e.with_place(node=node.label, op=node.qualified_op, tensor=self.tensor)
        if isinstance(e, MemoryError):
            raise ResourceLimit(f"the kernel ran out of memory ({e}); the machine has less "
                                "than the run-time budget (lower --max_live_bytes to be "
                                "refused earlier)", node=node.label,
                                op=node.qualified_op) from None
        if isinstance(e, (ValueError, TypeError, IndexError, KeyError, ArithmeticError,
                          AssertionError, RuntimeError)):
            raise KernelError(f"kernel failed: {e}", node=node.label,
                              op=node.qualified_op) from None


def _single(node: Node) -> str | None:
    return node.outputs[0] if len(node.outputs) == 1 else None


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


def _over_inputs(node: Node, schema: OpSchema, free: tuple[str, ...]) -> tuple[int, ...]:
    """The ports whose buffer the step's first output may take (see ``_Step``)."""
    if INPLACE not in schema.traits:
        return ()
    ports = range(len(node.inputs)) if ELEMENTWISE in schema.traits else range(1)
    return tuple(k for k in ports if k < len(node.inputs) and node.inputs[k] in free
                 and node.inputs.count(node.inputs[k]) == 1)


def _out_types(types: Mapping[str, TensorType], node: Node, schema: OpSchema
               ) -> tuple[TensorType, ...] | None:
    """The output types that size a step (and that a ``kernel_out`` computes into), or
    ``None`` when inference on the actual inputs must (an output unnamed or untyped, sizes
    set by input values)."""
    if value_shaped(schema) or not node.outputs:
        return None
    out = tuple(types.get(name) if name else None for name in node.outputs)
    if any(t is None or t.shape is None for t in out):
        return None
    return out  # type: ignore[return-value]


def _slots(types: tuple[TensorType, ...], bound: Mapping[str, int]) -> Slots | None:
    """Each type's (dtype, physical shape, nbytes) with ``bound``'s dims, or ``None`` when a
    dim stays unknown."""
    out = []
    for t in types:
        dims = [bound.get(d) if isinstance(d, str) else d for d in t.shape or ()]
        if any(d is None for d in dims):
            return None
        sized = TensorType(t.dtype, tuple(int(d or 0) for d in dims), t.format)
        shape = tuple(int(d) for d in sized.physical_shape or ())
        out.append((to_numpy(t.dtype), shape, int(sized.nbytes() or 0)))
    return tuple(out)


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


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray],
                bound: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Validate feeds against the graph's inputs; returns them as arrays. ``bound`` (when
    given) receives the size each symbolic dim of the inputs takes."""
    names = set(graph.input_names)
    for name in feeds:
        if name not in names:
            raise ModelError(f"no graph input is called '{name}' (inputs: "
                             f"{', '.join(sorted(names))})", tensor=name)
    bound = {} if bound is None else bound
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
