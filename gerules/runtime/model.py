"""``Model``: load a ``.om`` file and run it inside its planned arena.

Invariants:
- ``Model.load`` checks the whole file (see ``gerules.om.reader``) and builds one ``Program``
  per compiled variant; it allocates no arena (that happens on the first run), so loading a
  bad or huge-arena file never allocates more than the file's own checks need.
- ``inputs``/``outputs`` describe the tensors like acl's model description: the static shapes
  of a single-variant model, the declared shapes (symbolic dims as names) of a multi-variant
  (dynamic batch) model.
- ``run`` picks the variant whose input shapes match the feeds (or the first range bucket
  whose ranges take their sizes: the declared graph is bound to them and runs in the bucket's
  plan, every tensor no larger than planned), checks the feeds, executes
  every node into views of one arena (weights are read-only views into the file's memory map,
  graph inputs are read in place from the caller's arrays) and returns copies of the outputs.
- Concurrent runs (``run`` from several threads, ``run_async``) each take their own arena from
  a pool, so they never share intermediate memory; ``run_async`` runs up to
  ``max_in_flight`` at once (kernels release the GIL, so they overlap on several cores).
- ``streams`` is the file's stream count (threads with events) or 1 (plan order on the calling
  thread, always safe: it is one of the orders the stream-safe plan allows).
- After ``close()`` (or leaving the ``with`` block) every call raises ``UsageError``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..budgets import DEFAULT, Budgets
from ..errors import GeError, ModelError, UsageError
from ..ir import formats
from ..ir.dims import bind_dims, symbol_sizes
from ..ir.graph import Dim, Graph, TensorType, Value
from ..ir.registry import Registry, default_registry
from ..ir.verify import verify
from ..ir.weights import arrays
from ..memory.plan import MemoryFigures
from ..om.contents import OmContents, Variant
from ..om.reader import OmFile
from .arena import ArenaPool, Program, run_sequential, run_streams
from .executor import check_feeds

SHAPED_CACHE = 8  # range-bucket programs kept per model (one per set of sizes)
MAX_IN_FLIGHT = 64  # run_async runs executing at once, at most


@dataclass(frozen=True, slots=True)
class TensorDesc:
    """An input or output as acl's model description gives it (symbolic dims stay names):
    the shape an array fed or returned has, in its ``format`` (``NHWC``: fed channel-last,
    ``--input_format``; ``ND``, plain, otherwise)."""

    name: str
    shape: tuple[Dim, ...] | None
    dtype: str
    format: str = "ND"

    @staticmethod
    def of(v: Value) -> TensorDesc:
        return TensorDesc(v.name, v.type.physical_shape, v.dtype, v.type.format)

    @property
    def nbytes(self) -> int | None:
        return TensorType(self.dtype, self.shape).nbytes()


class Model:
    """A loaded ``.om`` model. Use ``Model.load(path)``; close it or use ``with``."""

    def __init__(self, om: OmFile, streams: int | None, registry: Registry,
                 max_in_flight: int = 1, budgets: Budgets = DEFAULT) -> None:
        self._om: OmFile | None = om
        self.path = om.path
        contents = om.contents
        self.graph: Graph = contents.graph
        self.variants: tuple[Variant, ...] = contents.variants
        self.soc_version = contents.soc_version
        self.pipeline = contents.pipeline  # a pipelined model's stages (runtime.pipeline)
        self.streams = _stream_count(contents.variants, streams)
        self._pools = [ArenaPool(Program(v.graph, v.plan, registry, budgets))
                       for v in self.variants]
        self._registry = registry
        self._budgets = budgets
        self._by_sizes: dict[tuple[int, tuple[tuple[str, int], ...]], ArenaPool] = {}
        self._weights: dict[str, np.ndarray] = arrays(self.graph.initializers)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        if not isinstance(max_in_flight, int) or not 1 <= max_in_flight <= MAX_IN_FLIGHT:
            raise UsageError(f"max_in_flight must be between 1 and {MAX_IN_FLIGHT}, got "
                             f"{max_in_flight!r}")
        self.max_in_flight = max_in_flight

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, streams: int | None = None,
             verify_weights: bool = True, registry: Registry | None = None,
             max_in_flight: int = 1, budgets: Budgets = DEFAULT) -> Model:
        """Open and check ``path``; ``streams`` is None (the file's), 1, or the file's count;
        ``max_in_flight`` bounds the ``run_async`` runs that execute at once; ``budgets``
        bounds the weights, the node count and the memory of a run."""
        registry = registry or default_registry()
        om = OmFile(path, verify_weights=verify_weights, registry=registry, budgets=budgets)
        try:
            return cls(om, streams, registry, max_in_flight, budgets)
        except BaseException:
            om.close()
            raise

    @property
    def inputs(self) -> tuple[TensorDesc, ...]:
        """The inputs: static shapes with one variant, the declared (symbolic) ones else."""
        return tuple(TensorDesc.of(v) for v in self._described().inputs)

    @property
    def outputs(self) -> tuple[TensorDesc, ...]:
        return tuple(TensorDesc.of(v) for v in self._described().outputs)

    def _described(self) -> Graph:
        single = len(self.variants) == 1 and not self.variants[0].ranges
        return self.variants[0].graph if single else self.graph

    @property
    def contents(self) -> OmContents:
        return self._open_file().contents

    def _open_file(self) -> OmFile:
        if self._om is None:
            raise UsageError("the model is closed", file=self.path)
        return self._om

    @property
    def figures(self) -> tuple[MemoryFigures | None, ...]:
        return tuple(v.plan.figures for v in self.variants)

    def arena_bytes(self, variant: int = 0) -> int:
        return self.variants[variant].plan.arena_bytes

    def run(self, feeds: Mapping[str, Any], *, poison: bool = False) -> dict[str, np.ndarray]:
        """Run once; returns ``{output name: array}`` (copies, safe to keep).

        ``poison=True`` is a checking run (``runtime.poison``): one stream, every arena byte
        the plan holds dead overwritten between steps, so an unsafe plan gives wrong numbers.
        """
        try:
            return self._run(feeds, poison)
        except GeError as e:
            raise e.with_place(file=self.path) from None

    def _run(self, feeds: Mapping[str, Any], poison: bool = False) -> dict[str, np.ndarray]:
        pools = self._open_pools()
        index, sizes = self._pick(feeds)
        pool = pools[index] if sizes is None else self._shaped(index, sizes)
        return run_in_arena(pool, self._weights, feeds, self.streams, poison)

    def _shaped(self, index: int, sizes: Mapping[str, int]) -> ArenaPool:
        """The pool of a range bucket at these sizes (built once, the last few kept)."""
        key = (index, tuple(sorted(sizes.items())))
        with self._lock:
            pool = self._by_sizes.get(key)
        if pool is None:
            pool = ArenaPool(shaped_program(self.graph, self.variants[index], sizes,
                                            self._registry, self._budgets))
            with self._lock:
                if len(self._by_sizes) >= SHAPED_CACHE:
                    self._by_sizes.pop(next(iter(self._by_sizes)))
                self._by_sizes[key] = pool
        return pool

    def run_async(self, feeds: Mapping[str, Any]) -> Future[dict[str, np.ndarray]]:
        """Run on a background thread; the future holds the outputs or the error. Up to
        ``max_in_flight`` runs execute at once, each in its own arena; later ones queue."""
        self._open_pools()
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.max_in_flight,
                                                    thread_name_prefix="gerules-run")
            return self._executor.submit(self.run, dict(feeds))

    def close(self) -> None:
        """Wait for pending async runs, release the arenas and unmap the file."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        om, self._om = self._om, None
        if om is not None:
            self._drop_weights()  # the map can only close once no view of it is left
            om.close()

    def _drop_weights(self) -> None:
        for pool in [*self._pools, *self._by_sizes.values()]:
            pool.clear()
        self._by_sizes = {}
        self._pools, self._weights, self.pipeline = [], {}, None
        self.graph = self.graph.replace(initializers={})
        self.variants = tuple(dataclasses.replace(v, graph=v.graph.replace(initializers={}))
                              for v in self.variants)

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_pools(self) -> list[ArenaPool]:
        if self._om is None:
            raise UsageError("the model is closed", file=self.path)
        return self._pools

    def _pick(self, feeds: Mapping[str, Any]) -> tuple[int, dict[str, int] | None]:
        """The variant whose input shapes match the feeds (the only one if there is one), or
        the range bucket that takes them and the sizes of its symbols."""
        shapes = {k: tuple(np.shape(v)) for k, v in feeds.items()}
        if len(self.variants) == 1 and not self.variants[0].ranges:
            return 0, None
        for i, v in enumerate(self.variants):
            if not v.ranges and all(shapes.get(x.name) == x.type.physical_shape
                                    for x in v.graph.inputs
                                    if x.name in shapes or x.name not in v.graph.initializers):
                return i, None
        sizes = symbol_sizes(self.graph.inputs, logical_shapes(self.graph.inputs, shapes))
        for i, v in enumerate(self.variants):
            if v.takes(sizes):
                return i, {s: sizes[s] for s in v.ranges}
        compiled = "; ".join(v.name if v.ranges else f"{v.name}: " + ", ".join(
            f"{x.name}{list(x.shape or ())}" for x in v.graph.inputs) for v in self.variants)
        raise ModelError(f"no compiled variant takes these input shapes ({compiled})")


def logical_shapes(inputs: tuple[Value, ...], shapes: Mapping[str, tuple[int, ...]]
                   ) -> dict[str, tuple[int, ...]]:
    """Feeds' shapes in their inputs' logical dims (an input held in a format is fed in its
    physical layout: NHWC's [N, H, W, C] is [N, C, H, W] here)."""
    out = dict(shapes)
    for v in inputs:
        if v.name in shapes and v.type.format != formats.ND and v.shape is not None:
            try:
                out[v.name] = formats.bind(v.shape, v.dtype, v.type.format, shapes[v.name])
            except GeError:
                pass  # check_feeds names the mismatch
    return out


def run_in_arena(pool: ArenaPool, weights: Mapping[str, np.ndarray], feeds: Mapping[str, Any],
                 streams: int, poison: bool = False) -> dict[str, np.ndarray]:
    """One run of ``pool``'s program in an arena of the pool: feeds checked, outputs copied."""
    program = pool.program
    arrays = check_feeds(program.graph, feeds)
    arena = pool.acquire()
    try:
        env = {**weights, **arrays, **arena.views}
        if poison:
            from .poison import run_poisoned

            run_poisoned(program, arena, env)
        elif streams > 1:
            run_streams(program, env, arena.views)
        else:
            run_sequential(program, env, arena.views)
        return {name: np.array(env[name], copy=True) for name in program.graph.output_names}
    finally:
        pool.release(arena)


def shaped_program(graph: Graph, variant: Variant, sizes: Mapping[str, int],
                   registry: Registry, budgets: Budgets = DEFAULT) -> Program:
    """The program of a range bucket at ``sizes``: the declared graph with its symbols bound,
    each tensor at the bucket plan's offset, none larger than the plan made room for."""
    bound = verify(bind_dims(graph, sizes), registry)
    for name in variant.plan.offsets:
        have, room = bound.type_of(name), variant.graph.type_of(name)
        if have is None or room is None or (have.nbytes() or 0) > (room.nbytes() or 0):
            raise ModelError(f"tensor '{name}' needs {have} at these sizes, more than the "
                             f"plan of '{variant.name}' made room for ({room})")
    return Program(bound, variant.plan, registry, budgets)


def _stream_count(variants: tuple[Variant, ...], streams: int | None) -> int:
    compiled = max(v.plan.stream_count for v in variants)
    if streams is None or streams == compiled:
        return compiled
    if streams == 1:
        return 1
    raise UsageError(f"the model was compiled for {compiled} stream(s); run it with "
                     f"streams={compiled} or streams=1")
