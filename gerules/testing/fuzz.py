"""Fuzz targets: what ``ge-rewrite`` does with a file, as one function of the file's bytes.

Each target runs the same library steps as the CLI command and must only ever raise a
``GeError`` (a clean refusal) or return; anything else is a bug. Run them inside a
``gerules.testing.sandbox.Sandbox`` so hangs and unbounded memory are caught too.

- ``onnx_target(data)``: ``ge-rewrite run`` then ``compile`` on a model file: load, random
  inputs within ``MAX_BYTES``, run with the reference executor, plan and write a ``.om``,
  load that and run it in its arena.
- ``om_target(data)``: ``ge-rewrite inspect`` and ``run`` on a ``.om`` file.
- ``rules_target(text)``: ``ge-rewrite rules check``: parse, check (with soundness), compile.
- ``caffe_target(data)``: ``ge-rewrite --framework=0`` on a prototxt + caffemodel pair
  (``caffe_case`` packs both into one byte string): convert, then run the graph.
- ``mindir_target(data)``: ``ge-rewrite --framework=1`` on a ``.mindir``: convert, run.

Invariants:
- Targets write only inside a private temporary folder per case (the file under test and
  the ``.om`` they compile), removed before they return or raise.
- Steps that would need more than ``MAX_BYTES`` per tensor (a mutated dim of 2**40) are
  refused by our own budget checks, so a target never allocates on the file's say-so.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ..ir.graph import Graph, Value

MAX_BYTES = 16 << 20
MAX_NODES = 400


@contextlib.contextmanager
def scratch(name: str, data: bytes) -> Iterator[Path]:
    """``data`` written to ``name`` in a fresh private folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="gerules-fuzz-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        yield path


def onnx_target(data: bytes) -> None:
    """Load, run, compile and run the compiled model (see the module docstring)."""
    from ..budgets import Budgets
    from ..build import build_om
    from ..onnx_io import load_model
    from ..runtime import feeds
    from ..runtime.executor import Executor

    with scratch("model.onnx", data) as path:
        graph = load_model(path, budgets=Budgets(tensor_bytes=MAX_BYTES))
        if len(graph.nodes) > MAX_NODES:
            return
        required = [v for v in graph.inputs if v.name not in graph.initializers]
        shapes = feeds.concrete_shapes(required, {})
        inputs = feeds.random_feeds(required, shapes, 0, MAX_BYTES)
        _check_sizes(graph)
        with np.errstate(all="ignore"):
            Executor(graph).run(inputs)
            dims = _dims(required, shapes)
            build_om(graph, path.with_suffix(".om"), dims=[dims] if dims else ({},))
            _run_om(path.with_suffix(".om"))


def _dims(inputs: Sequence[Value], shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in inputs:
        for d, n in zip(v.shape or (), shapes[v.name], strict=False):
            if isinstance(d, str):
                out.setdefault(d, n)
    return out


def _check_sizes(graph: Graph) -> None:
    """Refuse (as ``ResourceLimit``) graphs whose inferred tensors exceed ``MAX_BYTES``: the
    executor would allocate them; the fuzzer wants the loader's checks, not a slow run."""
    from ..errors import ResourceLimit

    for v in graph.value_info.values():
        n = v.type.nbytes()
        if n is not None and n > MAX_BYTES:
            raise ResourceLimit(f"fuzz budget: {n} bytes", tensor=v.name)


def _run_om(path: Path) -> None:
    """Run the model on one device and, when it is pipelined, its stages in this process."""
    from ..runtime import feeds
    from ..runtime.model import Model
    from ..runtime.pipeline import PipelineModel

    with Model.load(path) as model:
        inputs = [Value.of(d.name, d.dtype, d.shape) for d in model.inputs]
        shapes = feeds.concrete_shapes(inputs, {})
        x = feeds.random_feeds(inputs, shapes, 0, MAX_BYTES)
        with np.errstate(all="ignore"):
            model.run(x)
        stages = len(model.pipeline.stages) if model.pipeline else 0
    if stages:
        with PipelineModel.load(path, devices=stages, backend="local") as piped, \
                np.errstate(all="ignore"):
            piped.run(x)


def om_target(data: bytes) -> None:
    """``inspect`` (every check, MODEL_DEF and REPORT decoded, the pipeline's figures read)
    then ``run`` (and ``run --devices K --backend local`` for a pipelined model)."""
    from ..om.describe import describe
    from ..om.reader import OmFile

    with scratch("model.om", data) as path:
        with OmFile(path) as om:
            describe(om)
        _run_om(path)


def rules_target(text: str) -> None:
    """Parse, check (with the soundness check) and compile one rule file's text."""
    from ..dsl import RuleLibrary, check_library, compile_library, parse_text
    from ..dsl.errors import raise_errors

    lib = RuleLibrary((parse_text(text, "fuzz.ger"),))
    raise_errors(check_library(lib, soundness=True))
    compile_library(lib)


def ger_bytes_target(data: bytes) -> None:
    """The rule loader on raw bytes (non-UTF-8, BOMs, NULs) through a real file."""
    from ..dsl import parse_library
    from ..dsl.errors import raise_errors

    with scratch("fuzz.ger", data) as path:
        lib = parse_library([path])
        raise_errors(list(lib.errors))


def caffe_case(prototxt: bytes, caffemodel: bytes) -> bytes:
    """One fuzz case from a Caffe net and its weights (``caffe_target`` unpacks it)."""
    return len(prototxt).to_bytes(4, "little") + prototxt + caffemodel


def caffe_target(data: bytes) -> None:
    """Convert a Caffe pair (``caffe_case``) and run the graph on random inputs."""
    from ..frontends import caffe

    size = int.from_bytes(data[:4], "little")
    text, weights = data[4:4 + size], data[4 + size:]
    with scratch("net.prototxt", text) as path:
        weight_path = path.with_name("net.caffemodel")
        weight_path.write_bytes(weights)
        _run_graph(caffe.convert(path, weight_path))


def mindir_target(data: bytes) -> None:
    """Convert a ``.mindir`` and run the graph on random inputs."""
    from ..frontends import mindir

    with scratch("model.mindir", data) as path:
        _run_graph(mindir.convert(path))


def _run_graph(graph: Graph) -> None:
    """The reference executor on random inputs within ``MAX_BYTES`` (small graphs only)."""
    from ..runtime import feeds
    from ..runtime.executor import Executor

    if len(graph.nodes) > MAX_NODES:
        return
    shapes = feeds.concrete_shapes(list(graph.inputs), {})
    inputs = feeds.random_feeds(list(graph.inputs), shapes, 0, MAX_BYTES)
    _check_sizes(graph)
    with np.errstate(all="ignore"):
        Executor(graph).run(inputs)
