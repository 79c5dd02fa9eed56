"""Our runtime against onnxruntime on real architectures (latency and accuracy).

For each model (default: ResNet-50 and BERT-base from ``bench/models.py``, exported once
into ``bench/.cache``, batch 1), two pairings, each ``--warmup`` runs then ``--runs`` runs
alternating between the two sides (so background load hits both alike):

- ``reference``: our executor on the graph as loaded, against onnxruntime with graph
  optimizations disabled (kernel for kernel, the same graph);
- ``compiled``: the ``.om`` that ``ge-rewrite compile`` writes with default options, run by
  ``gerules.runtime.Model`` in its arena, against onnxruntime with all optimizations.

``BLAS floor``: the time NumPy's BLAS takes for the model's products alone (each Conv as its
im2col GEMM, each MatMul/Gemm; warm operands, preallocated outputs), over onnxruntime's whole
run: a floor no runtime on this BLAS goes below, so it tells a target this BLAS kernel cannot
reach from one the runtime misses.

Both onnxruntime sessions use 1 intra-op thread; NumPy's BLAS gets ``--threads`` (default 1).
Reported: both median latencies, the median of the per-pair ratios ours / onnxruntime and the
max abs difference of the outputs; ``--profile`` adds our time per op type. ``startup`` is
the median wall time of whole ``ge-rewrite run TINY.om`` processes (the bundled tiny model),
the time before a user sees a result, with Python's bytecode cached as after an install.
``first runs``: each of the compiled model's first three runs in a fresh process (bytecode
cached likewise): what a program that loads a model and runs it sees; with the ``jit``
extra the second run compiles the loops the model uses, once per process.

OpenBLAS picks its kernel from ``OPENBLAS_CORETYPE`` when set, else from the CPU, and the
figures differ between the two, so by default (``--coretype both``) the measurement runs
twice in child processes, with the variable set (to its current value, or ``Haswell``) and
unset, and reports both. Targets (issue 19), printed as PASS/FAIL lines per setting: reference
within 1.2x and compiled within 1.5x of onnxruntime on ResNet-50 and BERT-base; startup under
0.5 s. A FAIL line whose BLAS floor over that line's onnxruntime run is already past the
target says so (and the JSON line carries ``blas_floor_over_target``). The machine facts
(load, BLAS library and kernel) are printed and written.

    python bench/runtime.py [--models resnet50 bert_base] [--runs 10] [--json out.json]

Needs the ``torch`` extra only to export a model that is not in the cache yet.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

if __name__ == "__main__":  # must happen before NumPy loads its BLAS
    _threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), None)
    if _threads is None and "--threads" in sys.argv[:-1]:
        _threads = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _threads or "1")

import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from gerules.compiler import CompileOptions, compile_model
from gerules.ir.dims import bind_dims, symbol_sizes
from gerules.ir.graph import Graph
from gerules.ir.registry import default_registry
from gerules.ir.verify import verify
from gerules.onnx_io import load_model
from gerules.runtime.arena import execute
from gerules.runtime.executor import Executor, check_feeds
from gerules.runtime.model import Model

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as bench_models  # noqa: E402  (bench/ is not a package)
from machine import Verdicts, describe, facts, process_env  # noqa: E402

TARGETS = {"resnet50": {"reference": 1.2, "compiled": 1.5},
           "bert_base": {"reference": 1.2, "compiled": 1.5}}
STARTUP_S = 0.5
TINY = Path(__file__).resolve().parent.parent / "examples" / "models" / "tiny_resnet.onnx"


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


def ort_session(path: Path, optimize: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def feeds_for(name: str) -> dict[str, np.ndarray]:
    inputs = bench_models.example_inputs(name)
    names = bench_models.MODELS[name][2]
    return {n: t.numpy() for n, t in zip(names, inputs, strict=True)}


def profile_ops(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, float]:
    """Milliseconds per op type in one ``Executor.run`` (after a warm-up run): each step's
    kernel is timed where the executor calls it (its buffer pool, aligned weights and
    in-place outputs as in a real run); ``(executor)`` is the run's time outside kernels."""
    executor = Executor(graph)
    totals: dict[str, float] = {}

    def timed(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                totals[op] = totals.get(op, 0.0) + time.perf_counter() - start
        return run

    executor._steps = tuple(dataclasses.replace(step, schema=dataclasses.replace(
        step.schema, kernel=timed(step.node.qualified_op, step.schema.kernel),
        kernel_out=None if step.schema.kernel_out is None else timed(
            step.node.qualified_op, step.schema.kernel_out))) for step in executor._steps)
    for _ in range(2):  # the first run warms caches and the pool; the second is measured
        totals.clear()
        start = time.perf_counter()
        executor.run(feeds)
        whole = time.perf_counter() - start
    totals["(executor)"] = whole - sum(totals.values())
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    return {op: round(1e3 * t, 2) for op, t in ranked}


def profile_model_ops(model: Model, feeds: dict[str, np.ndarray]) -> dict[str, float]:
    """Milliseconds per op type for one run of a loaded ``.om`` in its arena (after a
    warm-up run), each step as ``Model.run`` executes it."""
    pool = model._pools[0]
    program = pool.program
    totals: dict[str, float] = {}
    arena = pool.acquire()
    try:
        for _ in range(2):  # the first pass warms caches; the second is measured
            totals.clear()
            env = {**model._weights, **check_feeds(program.graph, feeds), **arena.views}
            for step in program.steps:
                start = time.perf_counter()
                execute(step, env, arena.views)
                op = step.node.qualified_op
                totals[op] = totals.get(op, 0.0) + time.perf_counter() - start
    finally:
        pool.release(arena)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    return {op: round(1e3 * t, 2) for op, t in ranked}


def gemm_shapes(graph: Graph) -> list[tuple[int, int, int, int]]:
    """(batch, M, K, N) of every product of the graph (its dims bound to the feeds): Conv as
    its im2col GEMM per group, MatMul and Gemm as they are."""
    shapes = []
    for node in graph.nodes:
        if node.op not in ("Conv", "MatMul", "Gemm") or node.domain not in ("", "ai.onnx"):
            continue
        ins = [graph.type_of(i) if i else None for i in node.inputs]
        out = graph.type_of(node.outputs[0])
        if out is None or out.shape is None or any(
                t is None or t.shape is None for t in ins[:2]):
            continue
        y = tuple(int(d) for d in out.shape)
        a = tuple(int(d) for d in ins[0].shape)  # type: ignore[union-attr]
        w = tuple(int(d) for d in ins[1].shape)  # type: ignore[union-attr]
        if node.op == "Conv":
            group = int(node.attrs.get("group", 1))
            k = int(np.prod(w[1:]))
            shapes.append((y[0] * group, w[0] // group, k, int(np.prod(y[2:]))))
        elif node.op in ("MatMul", "Gemm"):
            k = a[-1] if not (node.op == "Gemm" and node.attrs.get("transA")) else a[0]
            shapes.append((int(np.prod(y[:-2])) if len(y) > 2 else 1, y[-2], k, y[-1]))
    return shapes


def blas_floor_ms(graph: Graph, runs: int = 3) -> float:
    """Milliseconds NumPy's BLAS takes for the graph's products alone (warm operands, into
    preallocated outputs, the median of ``runs`` passes): no im2col, no memory traffic
    between ops, no other op. No runtime on this BLAS can run the model faster."""
    rng = np.random.default_rng(0)
    calls = []
    for batch, m, k, n in gemm_shapes(graph):
        a = rng.standard_normal((batch, m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        calls.append((a, b, np.empty((batch, m, n), np.float32)))
    times = []
    for _ in range(runs + 1):  # the first pass warms the operands
        start = time.perf_counter()
        for a, b, out in calls:
            np.matmul(a, b, out=out)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times[1:])


def max_diff(ours: dict[str, np.ndarray], theirs: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(a.astype(np.float64) - b)))
               for a, b in zip(ours.values(), theirs, strict=True))


def pairing(ours: Callable[[], dict[str, np.ndarray]], session: ort.InferenceSession,
            feeds: dict[str, np.ndarray], warmup: int, runs: int) -> dict[str, Any]:
    diff = max_diff(ours(), session.run(None, feeds))
    ours_ms, ort_ms, ratio = paired_ms(ours, lambda: session.run(None, feeds), warmup, runs)
    return {"ours_ms": round(ours_ms, 2), "onnxruntime_ms": round(ort_ms, 2),
            "ratio": round(ratio, 3), "max_abs_diff": diff}


def bench(name: str, opset: int, warmup: int, runs: int, profile: bool, tmp: Path
          ) -> dict[str, Any]:
    path = bench_models.export(name, opset)
    start = time.perf_counter()
    graph = load_model(path)
    load_s = time.perf_counter() - start
    feeds = feeds_for(name)
    executor = Executor(graph)
    result: dict[str, Any] = {"opset": opset, "nodes": len(graph.nodes), "load_s": round(load_s, 3)}
    result["reference"] = pairing(lambda: executor.run(feeds), ort_session(path, False), feeds,
                                  warmup, runs)
    sizes = symbol_sizes(graph.inputs, {k: v.shape for k, v in feeds.items()})
    bound = verify(bind_dims(graph, sizes), default_registry())
    floor = blas_floor_ms(bound)
    result["blas_floor"] = {"ms": round(floor, 2), "gemms": len(gemm_shapes(bound)),
                            "over_onnxruntime": round(
                                floor / result["reference"]["onnxruntime_ms"], 3)}
    compiled = compile_model(graph, CompileOptions(), tmp / f"{name}.om")
    with Model.load(compiled.path) as model:
        result["compiled"] = pairing(lambda: model.run(feeds), ort_session(path, True), feeds,
                                     warmup, runs)
        result["compiled"]["nodes"] = len(model.graph.nodes)
    result["compiled"]["first_runs_s"] = first_runs_s(compiled.path, feeds, tmp)
    if profile:
        result["ms_per_op"] = profile_ops(graph, feeds)
        with Model.load(compiled.path) as model:
            result["ms_per_op_compiled"] = profile_model_ops(model, feeds)
    return result


FIRST_RUNS = """
import json, sys, time
from gerules.runtime.model import Model
from pathlib import Path
from gerules.runtime.feeds import read_npy
feeds = {name: read_npy(Path(path), 1 << 30) for name, path in json.loads(sys.argv[2]).items()}
times = []
with Model.load(sys.argv[1]) as model:
    for _ in range(int(sys.argv[3])):
        start = time.perf_counter()
        model.run(feeds)
        times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def first_runs_s(om: Path, feeds: dict[str, np.ndarray], tmp: Path, runs: int = 3
                 ) -> list[float]:
    """The first ``runs`` runs of ``om`` in a fresh process, each timed: what a program that
    loads a model and runs it sees (with the ``jit`` extra, the second run compiles the
    loops the model uses, once per process)."""
    paths = {}
    for k, (name, value) in enumerate(feeds.items()):
        paths[name] = str(tmp / f"feed{k}.npy")
        np.save(paths[name], value, allow_pickle=False)
    argv = [sys.executable, "-c", FIRST_RUNS, str(om), json.dumps(paths), str(runs)]
    env = process_env(str(tmp / "pycache"))  # bytecode cached, as after an install
    for _ in range(2):  # the first process fills the caches and is not measured
        out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    return [round(t, 3) for t in json.loads(out.stdout.strip().splitlines()[-1])]


def startup_s(tmp: Path, runs: int) -> float:
    """Median wall time of whole ``ge-rewrite run TINY.om`` processes."""
    om = tmp / "tiny.om"
    compile_model(load_model(TINY), CompileOptions(), om)
    exe = shutil.which("ge-rewrite", path=str(Path(sys.executable).parent))
    argv = [exe] if exe else [sys.executable, "-m", "gerules.cli.main"]
    env = process_env(str(tmp / "pycache"))  # bytecode cached, as after an install
    times = []
    for k in range(runs + 1):  # the first run fills the caches and is not measured
        start = time.perf_counter()
        subprocess.run([*argv, "run", str(om)], check=True, stdout=subprocess.DEVNULL, env=env)
        if k:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure under this process's BLAS setting."""
    report: dict[str, Any] = {"machine": facts(), "models": {}}
    print(describe(report["machine"]))
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for name in args.models:
            result = bench(name, args.opset, args.warmup, args.runs, args.profile, tmp)
            report["models"][name] = result
            for kind, peer in (("reference", "no graph optimizations"),
                               ("compiled", "all optimizations")):
                r = result[kind]
                print(f"{name:12s} {kind:9s} ours {r['ours_ms']:8.1f} ms   onnxruntime "
                      f"({peer}) {r['onnxruntime_ms']:7.1f} ms   ratio {r['ratio']:5.2f}x   "
                      f"max|diff| {r['max_abs_diff']:.1e}")
            first = ", ".join(f"{t:.2f}" for t in result["compiled"]["first_runs_s"])
            print(f"{name:12s} the .om's first runs in a fresh process: {first} s (with the "
                  f"jit extra the second compiles the loops it uses)")
            f = result["blas_floor"]
            print(f"{name:12s} BLAS floor: its {f['gemms']} products alone on this BLAS "
                  f"{f['ms']:.1f} ms = {f['over_onnxruntime']:.2f}x onnxruntime's whole run "
                  "without graph optimizations")
            if args.profile:
                for key in ("ms_per_op", "ms_per_op_compiled"):
                    top = list(result[key].items())[:8]
                    print(f"    {key}: " + ", ".join(f"{op} {ms}" for op, ms in top))
        report["startup_s"] = round(startup_s(tmp, args.startup_runs), 3)
    print(f"startup: ge-rewrite run tiny.om, whole process {report['startup_s']:.2f} s")
    return report


def floor_over(result: dict[str, Any], kind: str) -> float:
    """The model's products alone on this BLAS over the onnxruntime run ``kind`` is judged
    against: no runtime on this BLAS can pass a target below it."""
    return float(result["blas_floor"]["ms"]) / float(result[kind]["onnxruntime_ms"])


def verdicts_for(report: dict[str, Any], setting: str, verdicts: Verdicts) -> None:
    for name, result in report["models"].items():
        for kind, limit in TARGETS.get(name, {}).items():
            line = verdicts.check(f"{name} {kind} / onnxruntime ({setting})",
                                  result[kind]["ratio"], limit, "x")
            floor = floor_over(result, kind)
            if floor > limit:
                line += (f" (the products alone on this BLAS take {floor:.2f}x: over the "
                         "target before any other op)")
                verdicts.lines[-1]["blas_floor_over_target"] = round(floor, 3)
            print(line)
    print(verdicts.check(f"ge-rewrite run startup ({setting})", report["startup_s"],
                         STARTUP_S, " s"))


def settings(args: argparse.Namespace) -> dict[str, str | None]:
    value = os.environ.get("OPENBLAS_CORETYPE") or args.coretype_value
    both = {f"OPENBLAS_CORETYPE={value}": value, "OPENBLAS_CORETYPE unset": None}
    if args.coretype == "both":
        return both
    return dict([list(both.items())[0 if args.coretype == "set" else 1]])


def child(args: argparse.Namespace, value: str | None, out: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if value is not None:
        env["OPENBLAS_CORETYPE"] = value
    argv = [sys.executable, __file__, "--coretype", "env", "--json", str(out),
            "--threads", str(args.threads), "--runs", str(args.runs), "--warmup",
            str(args.warmup), "--opset", str(args.opset), "--startup-runs",
            str(args.startup_runs), "--models", *args.models]
    subprocess.run([*argv, *(["--profile"] if args.profile else [])], check=True, env=env)
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "bert_base"],
                        choices=list(bench_models.MODELS))
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--startup-runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="NumPy BLAS threads")
    parser.add_argument("--profile", action="store_true", help="our time per op type")
    parser.add_argument("--coretype", choices=["both", "set", "unset", "env"], default="both",
                        help="OPENBLAS_CORETYPE: both settings (children), one, or as is")
    parser.add_argument("--coretype-value", default="Haswell",
                        help="the value to set when the environment has none")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    config = {"runs": args.runs, "warmup": args.warmup, "blas_threads": args.threads,
              "onnxruntime": ort.__version__, "ort_threads": 1}
    if args.coretype == "env":
        report = {"config": config, **measure(args)}
    else:
        verdicts = Verdicts()
        report = {"config": config, "settings": {}}
        with tempfile.TemporaryDirectory() as folder:
            for setting, value in settings(args).items():
                print(f"== {setting}")
                got = child(args, value, Path(folder) / "child.json")
                report["settings"][setting] = got
        for setting, got in report["settings"].items():
            verdicts_for(got, setting, verdicts)
        print(verdicts.summary())
        report["targets"] = verdicts.lines
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
