"""``Session``: run a compiled ``.om`` file or a graph, synchronously or in the background.

A graph given directly is compiled (``gerules.compile`` with the session's ``options``) into a
``.om`` in a private temporary folder and run from there, so a session computes exactly what
the deployed file computes (optimized graph, planned arena, streams). ``executor="reference"``
instead runs the graph as given on the reference executor (no optimization, no arena; symbolic
dims stay symbolic), for debugging and for models whose shapes are not fixed yet.

Invariants:
- ``inputs``/``outputs`` describe the tensors as ``TensorDesc`` (name, shape, dtype) like acl's
  model description; ``run`` checks feeds against them and raises ``ModelError`` naming the
  tensor; outputs are fresh arrays the caller owns.
- ``run_async`` returns a ``concurrent.futures.Future`` holding the outputs or the error; runs
  never share intermediate memory; up to ``max_in_flight`` runs of a ``.om`` are in flight at
  once (one arena each).
- ``devices=K`` runs a model cut into K pipeline stages (a ``.om`` compiled with
  ``--partitions K``; a graph is compiled so, by cost, unless ``options`` partition it) on K
  Ray actors, or in this process stage by stage without Ray (``backend``); results equal the
  single-device run bit for bit; ``run_many`` streams micro-batches through the stages.
- ``close()`` (or leaving ``with``) waits for pending runs, releases the arena, unmaps the
  file and deletes the temporary folder; afterwards every call raises ``UsageError``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..compiler import CompileOptions
from ..errors import UsageError
from ..ir.graph import Graph
from ..runtime.executor import Executor
from ..runtime.model import Model, TensorDesc
from ..runtime.pipeline import Backend, PipelineModel
from .compiling import GraphLike, as_graph, compile

Feeds = Mapping[str, Any] | Sequence[Any]
"""Inputs by name, or in the order of ``Session.inputs``."""
Outputs = dict[str, np.ndarray]


class Session:
    """A model ready to run: ``Session("model.om")``, ``Session(graph)``, or a builder.

    ``options`` compile a graph (default ``CompileOptions()``); ``streams`` picks how a
    ``.om`` runs (``None``: as compiled, or 1); ``executor`` is ``"om"`` or ``"reference"``.
    """

    def __init__(self, source: str | os.PathLike[str] | GraphLike, *,
                 options: CompileOptions | None = None, streams: int | None = None,
                 executor: Literal["om", "reference"] = "om", devices: int = 1,
                 backend: Backend = "auto", ray_address: str | None = None,
                 max_in_flight: int = 1) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._model: Model | None = None
        self._pipeline: PipelineModel | None = None
        self._max_in_flight = max_in_flight
        self._reference: Executor | None = None
        self._cleanup: weakref.finalize[..., Any] | None = None
        self._closed = False
        if not isinstance(devices, int) or devices < 1:
            raise UsageError(f"Session: devices must be a positive integer, got {devices!r}")
        if executor == "reference":
            if devices != 1:
                raise UsageError("Session: devices apply to compiled (.om) sessions")
            self._open_reference(source, options, streams)
        elif executor == "om":
            self._open_om(source, options, streams, devices, backend, ray_address)
        else:
            raise UsageError(f"Session: executor must be 'om' or 'reference', got {executor!r}")

    def _open_om(self, source: str | os.PathLike[str] | GraphLike,
                 options: CompileOptions | None, streams: int | None, devices: int,
                 backend: Backend, ray_address: str | None) -> None:
        if isinstance(source, str | os.PathLike):
            path = Path(source)
        else:
            graph = as_graph(source)
            folder = tempfile.mkdtemp(prefix="gerules-session-")
            self._cleanup = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
            if devices > 1 and (options is None or not options.pipelined):
                options = dataclasses.replace(options or CompileOptions(), partitions=devices)
            path = compile(graph, options, Path(folder) / f"{_safe(graph.name)}.om")
        if devices > 1:
            self._pipeline = PipelineModel.load(path, devices=devices, backend=backend,
                                                ray_address=ray_address, streams=streams)
            self._model = self._pipeline.model
        else:
            self._model = Model.load(path, streams=streams, max_in_flight=self._max_in_flight)

    def _open_reference(self, source: object, options: CompileOptions | None,
                        streams: int | None) -> None:
        if isinstance(source, str | os.PathLike):
            raise UsageError("Session: executor='reference' runs a Graph or a GraphBuilder, "
                             "not a .om file")
        if options is not None or streams not in (None, 1):
            raise UsageError("Session: options and streams apply to compiled (.om) sessions, "
                             "not to executor='reference'")
        self._reference = Executor(as_graph(source))  # type: ignore[arg-type]

    # ------------------------------------------------------------------ description

    @property
    def inputs(self) -> tuple[TensorDesc, ...]:
        """The inputs (name, shape with symbolic dims as names, dtype), in order."""
        if self._reference is not None:
            return tuple(TensorDesc.of(v) for v in self._reference.graph.inputs)
        return self._open().inputs

    @property
    def outputs(self) -> tuple[TensorDesc, ...]:
        if self._reference is not None:
            return tuple(TensorDesc.of(v) for v in self._reference.graph.outputs)
        return self._open().outputs

    @property
    def variants(self) -> tuple[tuple[TensorDesc, ...], ...]:
        """The static input shapes of each compiled variant (one per dynamic batch size; a
        single entry for a static ``.om`` and for the reference executor)."""
        if self._reference is not None:
            return (self.inputs,)
        return tuple(tuple(TensorDesc.of(v) for v in variant.graph.inputs)
                     for variant in self._open().variants)

    @property
    def graph(self) -> Graph:
        """The graph that runs (for a ``.om``: the compiled, optimized graph)."""
        if self._reference is not None:
            return self._reference.graph
        return self._open().graph

    @property
    def path(self) -> Path | None:
        """The ``.om`` file that runs (a temporary one for a graph), or ``None``."""
        return None if self._model is None else Path(self._model.path)

    @property
    def streams(self) -> int:
        """How many streams a run uses (the compiled count, or 1)."""
        return 1 if self._reference is not None else self._open().streams

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ running

    @property
    def devices(self) -> int:
        """How many devices (pipeline stages) a run goes through."""
        return 1 if self._pipeline is None else self._pipeline.num_stages

    def run(self, feeds: Feeds) -> Outputs:
        """Run once; returns ``{output name: array}``."""
        named = self._named(feeds)
        if self._reference is not None:
            self._check_open()
            return {k: np.array(v, copy=True) for k, v in self._reference.run(named).items()}
        if self._pipeline is not None:
            self._check_open()
            return self._pipeline.run(named)
        return self._open().run(named)

    def run_many(self, batches: Sequence[Feeds]) -> list[Outputs]:
        """Several runs (micro-batches); through a pipeline they overlap across the stages."""
        named = [self._named(b) for b in batches]
        if self._pipeline is not None:
            self._check_open()
            return self._pipeline.run_many(named)
        return [self.run(b) for b in named]

    def run_async(self, feeds: Feeds) -> Future[Outputs]:
        """Run on a background thread; the future holds the outputs or the error."""
        named = self._named(feeds)
        if self._model is not None and self._pipeline is None:
            return self._open().run_async(named)
        with self._lock:
            self._check_open()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1,
                                                thread_name_prefix="gerules-session")
            return self._pool.submit(self.run, named)

    def close(self) -> None:
        """Wait for pending runs, release the arena, unmap the file, delete temp files."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self._pipeline is not None:
            self._pipeline.close()
        elif self._model is not None:
            self._model.close()
        if self._cleanup is not None:
            self._cleanup()  # deletes the temporary folder (once)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        where = self._model.path if self._model is not None else "reference executor"
        return f"<Session {where} ({state})>"

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the session is closed")

    def _open(self) -> Model:
        self._check_open()
        assert self._model is not None
        return self._model

    def _named(self, feeds: Feeds) -> dict[str, Any]:
        if isinstance(feeds, Mapping):
            return dict(feeds)
        if isinstance(feeds, str | bytes) or not isinstance(feeds, Sequence):
            raise UsageError(f"feeds must be a mapping {{input name: array}} or a list in "
                             f"input order, got {type(feeds).__name__}")
        names = [d.name for d in self.inputs]
        if len(feeds) != len(names):
            raise UsageError(f"{len(feeds)} feeds given for {len(names)} inputs "
                             f"({', '.join(names)})")
        return dict(zip(names, feeds, strict=True))


def _safe(name: str) -> str:
    """A file name from a graph name."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip(".")
    return cleaned or "model"
