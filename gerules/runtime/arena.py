"""Execution programs over one arena: every node output is a view at its planned offset.

Invariants:
- A ``Program`` is built once per compiled variant: the steps in plan order with their kernels
  and resolved attributes, each tensor's (offset, dtype, shape), and per step the positions on
  other streams it must wait for.
- An ``Arena`` is one ``np.empty`` buffer (64-byte aligned) with a view per tensor. An op
  with a ``kernel_out`` computes straight into its output views (no temporary, no copy);
  other kernels compute fresh arrays that the step then copies into the views. Either way
  in-place and reused blocks behave exactly as the plan says: a wrong plan gives wrong numbers.
- The environment a step reads (weights, feeds, arena views) is never mutated during a run, so
  steps on different threads never race on it; a step's outputs live only in its own scratch
  dict until copied into the arena.
- A kernel output whose dtype or shape differs from the plan's tensor table raises
  ``KernelError`` naming the node and the tensor; for ops whose output sizes follow from
  input values (``guard``: a tampered ``.om``'s weights driving a Tile) this is checked from
  the inputs *before* the kernel allocates anything.
- An arena is allocated only when it and the largest step's kernel outputs (copied into it
  afterwards) fit the run-time budget (``Budgets.live_bytes``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..budgets import DEFAULT, Budgets
from ..errors import GeError, KernelError, ResourceLimit
from ..ir.dtypes import to_numpy
from ..ir.graph import Graph, Node
from ..ir.infer import schema_for
from ..ir.registry import Call, KernelOutFn, OpSchema, Registry
from ..memory.plan import MemoryPlan
from ..memory.timeline import stream_preds
from .executor import input_types, kernel_errors, run_step
from .guard import predict, value_shaped

BASE_ALIGN = 64


@dataclass(frozen=True, slots=True)
class Step:
    node: Node
    schema: OpSchema
    call: Call
    waits: tuple[int, ...]  # positions on other streams whose outputs this step reads
    predict: bool  # output sizes follow from input values: check them before the kernel
    kernel_out: KernelOutFn | None = None


@dataclass(frozen=True, slots=True)
class Slot:
    offset: int
    dtype: np.dtype
    shape: tuple[int, ...]
    nbytes: int


class Program:
    """A variant ready to run: steps, streams and the tensor layout of its arena."""

    def __init__(self, graph: Graph, plan: MemoryPlan, registry: Registry,
                 budgets: Budgets = DEFAULT) -> None:
        self.graph = graph
        self.plan = plan
        self.budgets = budgets
        preds = stream_preds(graph, plan.order, plan.streams)
        self.steps = tuple(self._step(graph, k, pos, preds[pos], registry)
                           for pos, k in enumerate(plan.order))
        self.by_stream: tuple[tuple[int, ...], ...] = tuple(
            tuple(p for p, s in enumerate(plan.streams) if s == stream)
            for stream in range(plan.stream_count))
        self.slots = {name: self._slot(graph, name, off) for name, off in plan.offsets.items()}
        self.scratch_bytes = max((sum(self.slots[o].nbytes for o in s.node.outputs
                                      if o in self.slots) for s in self.steps), default=0)

    def _step(self, graph: Graph, k: int, pos: int, preds: Sequence[int],
              registry: Registry) -> Step:
        node = graph.nodes[k]
        schema = schema_for(node, graph, registry)
        try:
            call = schema.call(node.attrs, len(node.outputs), node.label,
                               input_types(node, graph))
        except GeError as e:
            raise e.with_place(node=node.label, op=node.qualified_op) from None
        mine = self.plan.streams[pos]
        waits = tuple(p for p in preds if self.plan.streams[p] != mine)
        return Step(node, schema, call, waits, value_shaped(schema), schema.kernel_out)

    @staticmethod
    def _slot(graph: Graph, name: str, offset: int) -> Slot:
        t = graph.type_of(name)
        assert t is not None and t.shape is not None, f"no static type for {name}"
        shape = tuple(int(d) for d in t.physical_shape or ())  # the arena holds the layout
        return Slot(offset, to_numpy(t.dtype), shape, int(t.nbytes() or 0))


class Arena:
    """One aligned buffer and a view per planned tensor."""

    def __init__(self, program: Program) -> None:
        size = program.plan.arena_bytes
        program.budgets.check("live_bytes", size + program.scratch_bytes,
                              "the arena and the largest step's outputs")
        try:
            raw = np.empty(size + BASE_ALIGN, dtype=np.uint8)
        except MemoryError:
            raise ResourceLimit(f"the arena needs {size} bytes and memory ran out") from None
        start = -raw.ctypes.data % BASE_ALIGN
        self.buffer = raw[start:start + size]
        self.views = {name: self._view(s) for name, s in program.slots.items()}

    def _view(self, s: Slot) -> np.ndarray:
        return self.buffer[s.offset:s.offset + s.nbytes].view(s.dtype).reshape(s.shape)


class ArenaPool:
    """Arenas for concurrent runs of one program: one per run in flight, reused afterwards."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._free: list[Arena] = []
        self._lock = threading.Lock()

    def acquire(self) -> Arena:
        with self._lock:
            if self._free:
                return self._free.pop()
        return Arena(self.program)

    def release(self, arena: Arena) -> None:
        with self._lock:
            self._free.append(arena)

    def clear(self) -> None:
        with self._lock:
            self._free.clear()


def execute(step: Step, env: Mapping[str, np.ndarray], views: Mapping[str, np.ndarray]) -> None:
    """Run one step: read ``env``, compute into (or copy into) each output's arena view."""
    node = step.node
    if step.predict:
        _check_planned(step, [env[i] if i else None for i in node.inputs], views)
    if step.kernel_out is not None and all(name in views for name in node.outputs):
        args = [env[i] if i else None for i in node.inputs]
        with kernel_errors(node, node.outputs[0] if len(node.outputs) == 1 else None):
            step.kernel_out(args, step.call, [views[name] for name in node.outputs])
        return
    scratch = {name: env[name] for name in node.present_inputs()}
    run_step(node, step.schema.kernel, step.call, scratch)
    for name in node.outputs:
        value, dst = np.asarray(scratch[name]), views[name]
        if value.dtype != dst.dtype or value.shape != dst.shape:
            raise KernelError(f"kernel gave {value.dtype.name}{list(value.shape)}, the plan "
                              f"expects {dst.dtype.name}{list(dst.shape)}", node=node.label,
                              op=node.qualified_op, tensor=name)
        if not _same_memory(value, dst):
            np.copyto(dst, value)


def _check_planned(step: Step, args: Sequence[np.ndarray | None],
                   views: Mapping[str, np.ndarray]) -> None:
    """Outputs that input values size must come out as planned: checked before allocating."""
    node = step.node
    for name, t in zip(node.outputs, predict(node, step.schema, step.call, args) or (),
                       strict=False):
        dst = views.get(name)
        if dst is not None and t.is_static and tuple(t.physical_shape or ()) != dst.shape:
            raise KernelError(f"the input values give {t}, the plan expects "
                              f"{dst.dtype.name}{list(dst.shape)}", node=node.label,
                              op=node.qualified_op, tensor=name)


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    return a.size == 0 or (a.ctypes.data == b.ctypes.data and a.strides == b.strides)


def run_sequential(program: Program, env: Mapping[str, np.ndarray],
                   views: Mapping[str, np.ndarray]) -> None:
    with np.errstate(all="ignore"):  # for the whole run (see ``ir.registry.OpSchema``)
        for step in program.steps:
            execute(step, env, views)


def run_streams(program: Program, env: Mapping[str, np.ndarray],
                views: Mapping[str, np.ndarray]) -> None:
    """One thread per stream; each waits on the events of its cross-stream inputs."""
    done = [threading.Event() for _ in program.steps]
    failures: list[BaseException] = []

    def work(positions: Sequence[int]) -> None:
        with np.errstate(all="ignore"):  # per thread: a new thread starts with the defaults
            _work(positions)

    def _work(positions: Sequence[int]) -> None:
        for pos in positions:
            step = program.steps[pos]
            for w in step.waits:
                done[w].wait()
            if failures:
                return
            try:
                execute(step, env, views)
            except BaseException as e:  # handed to the caller below
                failures.append(e)
                for ev in done:
                    ev.set()
                return
            done[pos].set()

    threads = [threading.Thread(target=work, args=(positions,), daemon=True,
                                name=f"gerules-stream-{s}")
               for s, positions in enumerate(program.by_stream) if s > 0 and positions]
    for t in threads:
        t.start()
    work(program.by_stream[0])
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
