"""Run a compiled .om asynchronously on batches of inputs.

    python examples/run_async.py [MODEL.om] [--rounds 3]

Without a model it compiles a small CNN for batch sizes 1, 2 and 4 (atc's dynamic batch:
one plan per size in one .om) into a temporary folder. Every compiled input shape is then
submitted ``--rounds`` times with ``Session.run_async``; the futures are collected as they
finish. Each run takes its own arena, so the runs never share intermediate memory.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import Future, as_completed
from pathlib import Path

import numpy as np

import gerules as ge
from gerules.testing.models import cnn


def compile_demo(folder: Path) -> Path:
    graph = ge.parse_model(cnn(batch=1).model)  # an onnx.ModelProto works as well as a path
    options = ge.CompileOptions(input_shape={"input": (-1, 3, 16, 16)},
                                dynamic_batch_size=(1, 2, 4))
    return ge.compile(graph, options, output=folder / "cnn_dynamic")


def random_feeds(inputs: tuple[ge.TensorDesc, ...], rng: np.random.Generator
                 ) -> dict[str, np.ndarray]:
    feeds = {}
    for desc in inputs:
        shape = tuple(int(d) for d in desc.shape or ())
        if np.issubdtype(np.dtype(desc.dtype), np.floating):
            feeds[desc.name] = rng.standard_normal(shape).astype(desc.dtype)
        else:
            feeds[desc.name] = np.zeros(shape, desc.dtype)
    return feeds


def run(path: Path, rounds: int) -> None:
    rng = np.random.default_rng(0)
    with ge.Session(path) as session:
        print(f"{path.name}: inputs " + ", ".join(f"{d.name}{list(d.shape or [])}"
                                                  for d in session.inputs))
        batches = [random_feeds(v, rng) for v in session.variants for _ in range(rounds)]
        start = time.perf_counter()
        futures: dict[Future[dict[str, np.ndarray]], int] = {
            session.run_async(feeds): k for k, feeds in enumerate(batches)}
        for future in as_completed(futures):
            outputs = future.result()
            shapes = ", ".join(f"{name}{list(a.shape)}" for name, a in outputs.items())
            print(f"  batch {futures[future]}: {shapes}")
        seconds = time.perf_counter() - start
    print(f"{len(batches)} runs in {seconds * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, nargs="?", help="a .om file (default: a demo)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per compiled shape")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gerules-example-") as tmp:
        run(args.model or compile_demo(Path(tmp)), args.rounds)


if __name__ == "__main__":
    main()
