"""The Ray backend of ``runtime.pipeline``: one actor per stage, tensors through the object
store. Imported only when a pipelined model runs with the ``ray`` backend.

Invariants:
- ``ray.init`` is called only when this process is not connected yet: with ``address`` when
  given (an existing cluster; Ray's own connection timeouts apply), else a local cluster (no
  dashboard, 1 GiB of object store); the connection made here is shut down again by
  ``close``. Failing to join is a ``UsageError`` naming the address (``ResourceLimit`` when
  a local cluster cannot start).
- Each actor receives its stage as ``runtime.pipeline.stage_package``'s JSON plus one weights
  buffer (passed through the object store, so actors on other nodes need no copy of the
  ``.om``); it decodes it with the ``.om`` reader's checks and keeps its arena pool.
- A micro-batch's feeds are put in the object store once; every stage call gets the object
  references of exactly the dicts it reads (``Route``) and returns one dict per consumer, so
  calls for all micro-batches are submitted at once and the stages overlap (each actor runs
  its calls in submission order).
- Each actor asks for ``min(1, cluster CPUs / stages)`` CPUs, so K stages fit a cluster with
  fewer CPUs than stages (they then share cores).
- An actor copies the arrays it receives out of the object store into memory of its own
  before running: zero-copy views of objects were seen to make NumPy's products slower and
  round differently (a non-BLAS path), which broke equality with the single-device run.
- A failure inside a stage is raised here as the stage's own ``GeError`` when it is one.
- Actors run their BLAS with the thread count of the caller's NumPy BLAS: OpenBLAS splits a
  product's sums by thread count, so equal counts are what makes the results equal bit for
  bit (on the same CPU kind; Ray alone would give each worker one thread). The count goes
  into the actor's environment (so every BLAS library the worker loads, at any time, starts
  with it) and through ``threadpoolctl`` to the libraries loaded already.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..budgets import DEFAULT, Budgets
from ..errors import GeError, ResourceLimit, UsageError
from ..om.contents import OmContents
from .pipeline import Route, StageRunner, stage_package

log = logging.getLogger(__name__)

LOCAL_OBJECT_STORE = 1 << 30  # bytes of shared memory for a local cluster started here


def available() -> bool:
    """Ray can be imported (the ``distributed`` extra is installed)."""
    return importlib.util.find_spec("ray") is not None


def blas_threads() -> int:
    """The thread count of the BLAS NumPy's products run on in this process (NumPy's own
    library when threadpoolctl can tell it from others loaded beside it, e.g. SciPy's)."""
    import numpy
    from threadpoolctl import threadpool_info

    blas = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    home = os.path.dirname(os.path.dirname(numpy.__file__))
    mine = [p for p in blas if str(p.get("filepath", "")).startswith(
        (os.path.join(home, "numpy.libs"), os.path.join(home, "numpy")))]
    return max((int(p["num_threads"]) for p in mine or blas), default=1)


def blas_env(threads: int) -> dict[str, str]:
    """Environment that starts every BLAS library of a worker with ``threads`` threads."""
    return {k: str(threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                      "MKL_NUM_THREADS")}


class StageActor:
    """What runs inside a Ray actor: one ``StageRunner``, with the caller's BLAS threads."""

    def __init__(self, doc: dict[str, Any], weights: np.ndarray, name: str, streams: int,
                 threads: int, budgets: dict[str, Any]) -> None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads, user_api="blas")  # libraries loaded already
        self.runner = StageRunner.from_package(doc, weights, name, streams, Budgets(**budgets))

    def ready(self) -> bool:
        return True

    def run(self, sends: Sequence[Sequence[str]], *parts: Mapping[str, np.ndarray]) -> Any:
        own = [{k: np.array(v, copy=True) for k, v in p.items()} for p in parts]
        outs = self.runner.run(own)
        split = tuple({n: outs[n] for n in names} for names in sends)
        return split[0] if len(split) == 1 else split


class RayPipeline:
    """The stages as Ray actors (see the module invariants)."""

    def __init__(self, contents: OmContents, wiring: Sequence[Route], streams: int,
                 address: str | None, budgets: Budgets = DEFAULT) -> None:
        import ray

        assert contents.pipeline is not None
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            _init(ray, address)
        self.routes = tuple(wiring)
        try:
            cpus = float(ray.cluster_resources().get("CPU", 1.0))  # type: ignore[no-untyped-call]
            share = min(1.0, cpus / len(self.routes))
            actor: Any = ray.remote(StageActor)
            threads = blas_threads()
            self.actors: list[Any] = []
            for k, st in enumerate(contents.pipeline.stages):
                doc, weights = stage_package(contents, k)
                self.actors.append(actor.options(
                    num_cpus=share, runtime_env={"env_vars": blas_env(threads)}).remote(
                    doc, ray.put(weights), st.name, streams, threads,
                    dataclasses.asdict(budgets)))
            self._get([a.ready.remote() for a in self.actors])
        except BaseException:
            self.close()
            raise

    def run_many(self, batches: Sequence[Mapping[str, np.ndarray]]
                 ) -> list[dict[str, np.ndarray]]:
        ray = self._ray
        pending = []
        for feeds in batches:
            feeds_ref = ray.put(dict(feeds))
            sent: list[list[Any]] = []
            for actor, route in zip(self.actors, self.routes, strict=True):
                args = ([feeds_ref] if route.feeds else []) + [sent[r][i]
                                                               for r, i in route.sources]
                call = actor.run.options(num_returns=max(1, len(route.sends)))
                refs = call.remote(route.sends, *args)
                sent.append(refs if isinstance(refs, list) else [refs])
            pending.append([s[-1] for s, r in zip(sent, self.routes, strict=True)
                            if r.consumers and r.consumers[-1] == -1])
        results = []
        for refs in pending:
            got: dict[str, np.ndarray] = {}
            for part in self._get(refs):
                got.update(part)
            results.append(got)
        return results

    def _get(self, refs: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, GeError):
                raise cause from None
            raise
        except ray.exceptions.OutOfMemoryError as e:
            raise ResourceLimit(f"a stage ran out of memory on the Ray cluster: {e}") from None

    def close(self) -> None:
        ray = self._ray
        for a in getattr(self, "actors", []):
            ray.kill(a)
        self.actors = []
        if self._owned and ray.is_initialized():
            ray.shutdown()
            self._owned = False


def _init(ray: Any, address: str | None) -> None:
    """Join ``address``, or start a local cluster without the dashboard."""
    common: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": False}
    try:
        if address:
            ray.init(address=address, **common)
        else:
            ray.init(object_store_memory=LOCAL_OBJECT_STORE, **common)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise (UsageError if address else ResourceLimit)(
            f"cannot join {where}: {first}") from None
