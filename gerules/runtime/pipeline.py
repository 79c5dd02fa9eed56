"""Run a pipelined ``.om`` on several devices: one stage per device, micro-batches streamed.

``PipelineModel.load(path, devices=K)`` opens a ``.om`` compiled with ``--partitions K``. Each
stage is a ``StageRunner`` (its own program, arena pool and weights). The ``ray`` backend
(``runtime.ray_backend``) makes every stage a Ray actor and passes tensors between them
through Ray's object store; the ``local`` backend runs the same stages in this process, one
after the other for each micro-batch. ``auto`` takes Ray when it is installed.

Invariants:
- A stage computes exactly what the same nodes compute in the single-device run (the same
  kernels on the same inputs), so outputs are equal bit for bit whatever the backend.
- ``Route`` is the wiring: which stages (and whether the feeds) a stage reads, and for each
  of its consumers (later stages, and the caller for model outputs) which of its outputs that
  consumer gets, so exactly the partition's cut tensors cross between stages.
- Feeds are checked against the model's inputs before anything is sent; outputs are fresh
  arrays in the model's output order.
- Importing this module never imports Ray.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from ..budgets import DEFAULT, Budgets
from ..errors import UsageError
from ..ir.registry import Registry, default_registry
from ..ir.weights import arrays
from ..om.contents import OmContents, Pipeline, Variant
from ..om.decode import decode
from ..om.encode import collect_blobs, encode
from ..om.format import Kind, Section
from .arena import ArenaPool, Program
from .executor import check_feeds
from .model import Model, TensorDesc, run_in_arena

log = logging.getLogger(__name__)

Backend = Literal["auto", "ray", "local"]
BACKENDS = ("auto", "ray", "local")
CALLER = -1  # the consumer that stands for the caller (model outputs)


class StageRunner:
    """One stage ready to run: its program in an arena pool, and its weights."""

    def __init__(self, variant: Variant, streams: int = 1,
                 registry: Registry | None = None, budgets: Budgets = DEFAULT) -> None:
        self.variant = variant
        self.pool = ArenaPool(Program(variant.graph, variant.plan, registry or default_registry(),
                                      budgets))
        self.weights = arrays(variant.graph.initializers)
        self.streams = streams if streams <= variant.plan.stream_count else 1
        self.inputs = variant.graph.input_names

    @classmethod
    def from_package(cls, doc: dict[str, Any], weights: np.ndarray, name: str,
                     streams: int = 1, budgets: Budgets = DEFAULT) -> StageRunner:
        """A stage from ``stage_package``'s JSON and weights buffer, checked as the ``.om``
        reader checks a file (this is how a Ray actor gets its stage)."""
        registry = default_registry()
        section = Section(int(Kind.WEIGHTS), 0, int(weights.nbytes), b"")
        contents = decode(doc, weights, section, name, registry)
        return cls(contents.variants[0], streams, registry, budgets)

    def run(self, parts: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Outputs of one micro-batch, from the dicts holding its inputs."""
        merged: dict[str, np.ndarray] = {}
        for p in parts:
            merged.update(p)
        feeds = {name: merged[name] for name in self.inputs}
        return run_in_arena(self.pool, self.weights, feeds, self.streams)


def stage_package(contents: OmContents, index: int) -> tuple[dict[str, Any], np.ndarray]:
    """Stage ``index`` of a pipelined model as a stand-alone MODEL_DEF (JSON) and a buffer
    of its weights laid out as in a ``.om``'s WEIGHTS section."""
    assert contents.pipeline is not None
    st = contents.pipeline.stages[index]
    g = st.variant.graph
    blobs = collect_blobs(g)
    doc = encode(OmContents(g, (st.variant,), contents.soc_version), blobs)
    buffer = np.zeros(blobs.size, dtype=np.uint8)
    for arr, off in zip(blobs.arrays, blobs.offsets, strict=True):
        flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        buffer[off:off + flat.size] = flat
    return doc, buffer


@dataclass(frozen=True, slots=True)
class Route:
    """How one stage is wired (see the module invariants)."""

    feeds: bool  # it reads graph inputs
    sources: tuple[tuple[int, int], ...]  # (producer stage, index among its consumers)
    consumers: tuple[int, ...]  # later stages it feeds, then CALLER if it makes model outputs
    sends: tuple[tuple[str, ...], ...]  # per consumer, the names it gets


def routes(pipeline: Pipeline, outputs: Sequence[str]) -> tuple[Route, ...]:
    made = {o: k for k, st in enumerate(pipeline.stages) for o in st.variant.graph.output_names}
    wanted: list[dict[int, list[str]]] = [{} for _ in pipeline.stages]
    reads: list[set[int]] = [set() for _ in pipeline.stages]
    for k, st in enumerate(pipeline.stages):
        for name in st.variant.graph.input_names:
            if name in made:
                wanted[made[name]].setdefault(k, []).append(name)
                reads[k].add(made[name])
    for name in outputs:
        if name in made:
            wanted[made[name]].setdefault(CALLER, []).append(name)
    out = []
    for k, st in enumerate(pipeline.stages):
        consumers = tuple(sorted(c for c in wanted[k] if c != CALLER)) + (
            (CALLER,) if CALLER in wanted[k] else ())
        sources = tuple((r, _consumers(wanted[r]).index(k)) for r in sorted(reads[k]))
        feeds = any(name not in made for name in st.variant.graph.input_names)
        out.append(Route(feeds, sources, consumers,
                         tuple(tuple(wanted[k][c]) for c in consumers)))
    return tuple(out)


def _consumers(wanted: Mapping[int, list[str]]) -> tuple[int, ...]:
    return tuple(sorted(c for c in wanted if c != CALLER)) + (
        (CALLER,) if CALLER in wanted else ())


class Executor(Protocol):
    def run_many(self, batches: Sequence[Mapping[str, np.ndarray]]
                 ) -> list[dict[str, np.ndarray]]: ...

    def close(self) -> None: ...


class LocalPipeline:
    """The stages in this process, one after the other for each micro-batch."""

    def __init__(self, contents: OmContents, routes_: Sequence[Route], streams: int,
                 registry: Registry, budgets: Budgets = DEFAULT) -> None:
        assert contents.pipeline is not None
        self.stages = [StageRunner(st.variant, streams, registry, budgets)
                       for st in contents.pipeline.stages]
        self.routes = tuple(routes_)

    def run_many(self, batches: Sequence[Mapping[str, np.ndarray]]
                 ) -> list[dict[str, np.ndarray]]:
        results = []
        for feeds in batches:
            sent: list[list[dict[str, np.ndarray]]] = []
            got: dict[str, np.ndarray] = {}
            for stage, route in zip(self.stages, self.routes, strict=True):
                parts = ([feeds] if route.feeds else []) + [sent[r][i] for r, i in route.sources]
                outs = stage.run(parts)
                sent.append([{n: outs[n] for n in names} for names in route.sends])
                if route.consumers and route.consumers[-1] == CALLER:
                    got.update(sent[-1][-1])
            results.append(got)
        return results

    def close(self) -> None:
        for s in self.stages:
            s.pool.clear()
        self.stages = []


class PipelineModel:
    """A pipelined ``.om`` on ``devices`` devices (see the module docstring)."""

    def __init__(self, model: Model, executor: Executor, backend: str) -> None:
        self._model: Model | None = model
        self._executor = executor
        self.backend = backend
        self.path = model.path
        assert model.pipeline is not None
        self.num_stages = len(model.pipeline.stages)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, devices: int, backend: Backend = "auto",
             ray_address: str | None = None, streams: int | None = None,
             registry: Registry | None = None, budgets: Budgets = DEFAULT) -> PipelineModel:
        """``budgets`` hold for the file (as ``Model.load``) and for every stage's runs, in
        this process or in a Ray actor."""
        registry = registry or default_registry()
        if backend not in BACKENDS:
            raise UsageError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        model = Model.load(path, streams=streams, registry=registry, budgets=budgets)
        try:
            return cls._start(model, devices, backend, ray_address, registry, budgets)
        except BaseException:
            model.close()
            raise

    @classmethod
    def _start(cls, model: Model, devices: int, backend: str, ray_address: str | None,
               registry: Registry, budgets: Budgets) -> PipelineModel:
        pipeline = model.pipeline
        if pipeline is None:
            raise UsageError(f"--devices {devices}: this .om is not pipelined; compile it with "
                             f"--partitions {devices}", file=model.path)
        if devices != len(pipeline.stages):
            raise UsageError(f"--devices {devices}: the model was compiled into "
                             f"{len(pipeline.stages)} stages; run it with --devices "
                             f"{len(pipeline.stages)} (or 1 for one device)", file=model.path)
        contents = model.contents
        wiring = routes(pipeline, model.graph.output_names)
        if backend == "auto":
            from .ray_backend import available

            backend = "ray" if available() else "local"
            if backend == "local":
                log.warning("Ray is not installed: the %d stages run in this process, one "
                            "after the other (pip install -e \".[distributed]\")", devices)
        if backend == "ray":
            from .ray_backend import RayPipeline

            executor: Executor = RayPipeline(contents, wiring, model.streams, ray_address,
                                             budgets)
        else:
            if ray_address:
                raise UsageError("--ray_address needs the ray backend")
            executor = LocalPipeline(contents, wiring, model.streams, registry, budgets)
        return cls(model, executor, backend)

    @property
    def inputs(self) -> tuple[TensorDesc, ...]:
        return self._open().inputs

    @property
    def outputs(self) -> tuple[TensorDesc, ...]:
        return self._open().outputs

    @property
    def model(self) -> Model:
        return self._open()

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One micro-batch through every stage."""
        return self.run_many([feeds])[0]

    def run_many(self, batches: Sequence[Mapping[str, Any]]) -> list[dict[str, np.ndarray]]:
        """Micro-batches streamed through the stages; one result per micro-batch, in order."""
        model = self._open()
        graph = model.variants[0].graph
        checked = [check_feeds(graph, feeds) for feeds in batches]
        results = self._executor.run_many(checked)
        weights = graph.initializers
        out = []
        for feeds, got in zip(checked, results, strict=True):
            row = {}
            for name in graph.output_names:
                value = got.get(name, feeds.get(name, weights.get(name)))
                row[name] = np.array(value, copy=True)
            out.append(row)
        return out

    def close(self) -> None:
        model, self._model = self._model, None
        if model is not None:
            self._executor.close()
            model.close()

    def __enter__(self) -> PipelineModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> Model:
        if self._model is None:
            raise UsageError("the model is closed", file=self.path)
        return self._model
