"""Streams that overlap: a two-tower model on one stream against two, and run_async with
several runs in flight, in one process.

The model (built with the API, random weights) has two independent towers of ``--depth``
large MatMul + Relu layers over one input, joined by an Add: the shape of a wide-and-deep
or two-tower recommender, whose kernels (BLAS products) release the GIL. NumPy's BLAS gets
one thread (threadpoolctl; ``--blas_threads``), so the parallelism measured is the
runtime's own: ``--streams 2`` runs the towers on two threads with events, ``max_in_flight``
runs whole requests side by side, each in its own arena.

    python bench/streams.py [--hidden 1024] [--rows 256] [--depth 4] [--runs 15] [--json out.json]

Prints the median latency of one run on 1 and 2 streams (runs alternate, so load on the
machine hits both alike) and their ratio, beside the same towers in bare NumPy serially and
on two threads (the most two threads can gain on the machine at its present load), then the
throughput of ``--requests`` runs through ``run_async`` with 1 and 2 runs in flight; every
figure with the machine facts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import gerules as ge
from gerules.runtime.model import Model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe, facts  # noqa: E402 - bench/machine.py: the machine facts


def two_towers(hidden: int, rows: int, depth: int, seed: int = 0) -> ge.Graph:
    rng = np.random.default_rng(seed)
    g = ge.GraphBuilder("two_towers")
    x = g.input("x", [rows, hidden])
    towers = []
    for t in range(2):
        y = x
        for k in range(depth):
            w = g.const((rng.standard_normal((hidden, hidden)) / np.sqrt(hidden))
                        .astype(np.float32), f"tower{t}.w{k}")
            y = g.ops.Relu(g.ops.MatMul(y, w))
        towers.append(y)
    g.output(g.ops.Add(*towers), "y")
    return g.build()


def ceiling(graph: ge.Graph, x: dict[str, np.ndarray]) -> dict[str, Callable[[], object]]:
    """The same towers in plain NumPy, one after the other and on two bare threads: the most
    two threads can gain on this machine at its present load."""
    import threading

    ws = [[graph.initializers[n.inputs[1]] for n in graph.nodes
           if n.op == "MatMul" and n.inputs[1].startswith(f"tower{t}.")] for t in range(2)]

    def tower(t: int) -> None:
        y = x["x"]
        for w in ws[t]:
            y = np.maximum(y @ w, 0)

    def both() -> None:
        threads = [threading.Thread(target=tower, args=(t,)) for t in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()

    return {"numpy serial": lambda: (tower(0), tower(1)), "numpy 2 threads": both}


def paired(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Median seconds of each, runs interleaved."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--blas_threads", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.blas_threads, user_api="blas")
    graph = two_towers(args.hidden, args.rows, args.depth)
    x = {"x": np.random.default_rng(1).standard_normal((args.rows, args.hidden))
         .astype(np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        path = ge.compile(graph, ge.CompileOptions(streams=2), Path(tmp) / "towers.om")
        with Model.load(path, streams=1) as one, Model.load(path) as two, \
                Model.load(path, streams=1, max_in_flight=2) as wide:
            assert two.streams == 2
            assert all(np.array_equal(one.run(x)[k], v) for k, v in two.run(x).items())
            lat = paired({"streams=1": lambda: one.run(x), "streams=2": lambda: two.run(x),
                          **ceiling(graph, x)}, args.runs)

            def burst(model: Model) -> Callable[[], object]:
                return lambda: [f.result() for f in [model.run_async(x)
                                                     for _ in range(args.requests)]]

            thr = paired({"in_flight=1": burst(one), "in_flight=2": burst(wide)},
                         max(3, args.runs // 3))
    report = {
        "model": {"hidden": args.hidden, "rows": args.rows, "depth": args.depth,
                  "nodes": len(graph.nodes)},
        "latency_ms": {k: round(1e3 * v, 2) for k, v in lat.items()},
        "streams_speedup": round(lat["streams=1"] / lat["streams=2"], 3),
        "numpy_threads_speedup": round(lat["numpy serial"] / lat["numpy 2 threads"], 3),
        "throughput_per_s": {k: round(args.requests / v, 2) for k, v in thr.items()},
        "in_flight_speedup": round(thr["in_flight=1"] / thr["in_flight=2"], 3),
        "machine": facts(),
    }
    print(f"two towers of {args.depth} x MatMul [{args.rows}x{args.hidden}]x[{args.hidden}x"
          f"{args.hidden}] + Relu, BLAS threads {args.blas_threads}")
    print(f"latency   streams=1 {report['latency_ms']['streams=1']:8.2f} ms   streams=2 "
          f"{report['latency_ms']['streams=2']:8.2f} ms   {report['streams_speedup']:.2f}x   "
          f"(bare NumPy on 2 threads: {report['numpy_threads_speedup']:.2f}x at this load)")
    print(f"run_async in_flight=1 {report['throughput_per_s']['in_flight=1']:8.2f}/s   "
          f"in_flight=2 {report['throughput_per_s']['in_flight=2']:8.2f}/s   "
          f"{report['in_flight_speedup']:.2f}x")
    print(describe(report["machine"]))  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
