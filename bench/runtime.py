"""Our reference runtime against onnxruntime on real architectures (latency and accuracy).

For each model (default: ResNet-50 and BERT-base from ``bench/models.py``, exported once
into ``bench/.cache``): load it with ``gerules.onnx_io``, run it with our executor and with
onnxruntime (graph optimizations disabled, 1 intra-op thread), ``--warmup`` runs then
``--runs`` runs alternating between the two; report both median latencies, the median of
the per-pair ratios ours / onnxruntime and the max abs difference of the outputs. NumPy's
BLAS gets ``--threads`` threads (default 1, like onnxruntime). ``--profile`` adds our time
per op type. ``--json PATH`` writes the figures.

    python bench/runtime.py [--models resnet50 bert_base] [--runs 10] [--json out.json]

Needs the ``torch`` extra only to export a model that is not in the cache yet.
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":  # must happen before NumPy loads its BLAS
    _threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), None)
    if _threads is None and "--threads" in sys.argv[:-1]:
        _threads = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _threads or "1")

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

from gerules.ir.graph import Graph
from gerules.ir.infer import schema_for
from gerules.ir.registry import default_registry
from gerules.onnx_io import load_model
from gerules.runtime.executor import Executor, run_step

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as bench_models  # noqa: E402  (bench/ is not a package)

TARGET_RATIO = {"resnet50": 3.0}


def paired_ms(ours: Callable[[], object], theirs: Callable[[], object], warmup: int,
              runs: int) -> tuple[float, float, float]:
    """Median ms of each, and the median of per-pair ratios (runs alternate, so background
    load hits both sides alike)."""
    for _ in range(warmup):
        ours()
        theirs()
    a, b = [], []
    for _ in range(runs):
        for fn, times in ((ours, a), (theirs, b)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    return 1e3 * statistics.median(a), 1e3 * statistics.median(b), ratio


def ort_session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def feeds_for(name: str) -> dict[str, np.ndarray]:
    inputs = bench_models.example_inputs(name)
    names = bench_models.MODELS[name][2]
    return {n: t.numpy() for n, t in zip(names, inputs, strict=True)}


def profile_ops(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, float]:
    """Milliseconds per op type for one run of our executor (after a warm-up run)."""
    registry = default_registry()
    last_use = {name: k for k, node in enumerate(graph.nodes) for name in node.inputs}
    keep = set(graph.output_names) | set(graph.initializers)
    steps = []
    for k, node in enumerate(graph.nodes):
        schema = schema_for(node, graph, registry)
        dead = [n for n in set(node.inputs) if last_use.get(n) == k and n not in keep]
        steps.append((node, schema.kernel, schema.call(node.attrs, len(node.outputs)), dead))
    totals: dict[str, float] = {}
    for _ in range(2):  # the first pass warms caches; the second is measured
        totals.clear()
        env = {**graph.initializers, **feeds}
        for node, kernel, call, dead in steps:
            start = time.perf_counter()
            run_step(node, kernel, call, env)
            totals[node.op] = totals.get(node.op, 0.0) + time.perf_counter() - start
            for name in dead:  # free as the executor does, so memory behaves the same
                env.pop(name, None)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    return {op: round(1e3 * t, 2) for op, t in ranked}


def bench(name: str, opset: int, warmup: int, runs: int, profile: bool) -> dict[str, object]:
    path = bench_models.export(name, opset)
    start = time.perf_counter()
    graph = load_model(path)
    load_s = time.perf_counter() - start
    feeds = feeds_for(name)
    executor = Executor(graph)
    session = ort_session(path)
    ours = executor.run(feeds)
    theirs = session.run(None, feeds)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ours.values(), theirs, strict=True))
    ours_ms, ort_ms, ratio = paired_ms(lambda: executor.run(feeds),
                                       lambda: session.run(None, feeds), warmup, runs)
    result: dict[str, object] = {
        "opset": opset, "nodes": len(graph.nodes), "load_s": round(load_s, 3),
        "ours_ms": round(ours_ms, 2), "onnxruntime_ms": round(ort_ms, 2),
        "ratio": round(ratio, 3), "max_abs_diff": diff,
    }
    if name in TARGET_RATIO:
        result["target_ratio"] = TARGET_RATIO[name]
    if profile:
        result["ms_per_op"] = profile_ops(graph, feeds)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "bert_base"],
                        choices=list(bench_models.MODELS))
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="NumPy BLAS threads")
    parser.add_argument("--profile", action="store_true", help="our time per op type")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    report = {"config": {"runs": args.runs, "warmup": args.warmup, "blas_threads": args.threads,
                         "onnxruntime": ort.__version__, "ort_threads": 1,
                         "ort_graph_optimizations": "disabled", "cpus": os.cpu_count()},
              "models": {}}
    for name in args.models:
        result = bench(name, args.opset, args.warmup, args.runs, args.profile)
        report["models"][name] = result  # type: ignore[index]
        print(f"{name:12s} ours {result['ours_ms']:9.1f} ms   onnxruntime "
              f"{result['onnxruntime_ms']:8.1f} ms   ratio {result['ratio']:6.2f}x   "
              f"max|diff| {result['max_abs_diff']:.2e}   load {result['load_s']:.2f} s")
        if args.profile:
            top = list(result["ms_per_op"].items())[:8]  # type: ignore[attr-defined,unused-ignore]
            print("    ours per op (ms): " + ", ".join(f"{op} {ms}" for op, ms in top))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
