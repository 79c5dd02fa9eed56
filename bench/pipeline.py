"""Pipeline parallelism: BERT-base and ResNet-50 cut into 2 and 4 stages by each partitioner,
estimated and measured, in one run.

For every model, stage count K and partitioner (depth, memory, cost) the script compiles the
model at batch 1 with ``--partitions K --partition_by METHOD`` (memory: ``--device_memory``
set to 1.25x the single device's weights + arena + inputs divided by K, raised by 25 % until
K stages fit; the limit used is printed) and reports:

- estimated (the cost model and the SoC profile's link): stage balance (slowest / mean
  stage), bytes crossing the cuts per micro-batch, and the GPipe pipeline's throughput over
  ``--micro_batches`` micro-batches against one device running them back to back;
- measured on this machine: the throughput of the same micro-batches through the K stages
  as Ray actors on a local Ray cluster (``ray.init``: this machine's CPUs) against the
  single-process run of the same ``.om`` (``Model.run`` one micro-batch after another), each
  with ``--blas_threads`` BLAS threads (default 1: one core stands for one device; the
  actors take the caller's count, which keeps the results equal bit for bit),
  runs alternating over ``--rounds`` rounds (medians), and whether every output is equal bit
  for bit (it must be).

    python bench/pipeline.py [--models bert_base resnet50] [--stages 2 4]
                             [--methods depth memory cost] [--micro_batches 8] [--rounds 3]
                             [--soc Ascend910] [--json out.json]

Needs the ``distributed`` extra (Ray) for the measured columns and the ``torch`` extra to
export a model that is not in ``bench/.cache`` yet. Timings depend on the machine's load,
which is printed with the BLAS facts; on a 2-core machine K actors share 2 cores, so the
measured gain is bounded by 2x whatever K is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models  # noqa: E402 - bench/models.py, beside this script
from machine import describe, facts  # noqa: E402 - bench/machine.py: the machine facts

from gerules.compiler import CompileOptions, compile_model  # noqa: E402
from gerules.errors import ResourceLimit  # noqa: E402
from gerules.onnx_io import load_model  # noqa: E402
from gerules.runtime.model import Model  # noqa: E402
from gerules.runtime.pipeline import PipelineModel  # noqa: E402

SHAPES = {"bert_base": {"input_ids": (1, 128), "attention_mask": (1, 128)},
          "resnet50": {"input": (1, 3, 224, 224)}}


def micro_batches(name: str, count: int) -> list[dict[str, np.ndarray]]:
    names = models.MODELS[name][2]
    return [{n: t.numpy() for n, t in zip(names, models.example_inputs(name, seed), strict=True)}
            for seed in range(count)]


def throughput(fns: dict[str, Callable[[], object]], count: int, rounds: int
               ) -> dict[str, float]:
    """Micro-batches per second of each (median over rounds; runs alternate)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    return {k: count / statistics.median(v) for k, v in times.items()}


def compile_one(graph: object, name: str, k: int, method: str, limit: int | None,
                soc: str, m: int, out: Path) -> tuple[dict[str, object], int | None]:
    while True:
        opts = CompileOptions(input_shape=SHAPES[name], soc_version=soc, partitions=k,
                              partition_by=method, device_memory=limit, micro_batches=m)
        try:
            result = compile_model(graph, opts, out)  # type: ignore[arg-type]
            return result.report["figures"]["pipeline"], limit
        except ResourceLimit:
            if limit is None:
                raise
            limit = int(limit * 1.25)


def one_device_bytes(graph: object, name: str, soc: str, out: Path) -> int:
    result = compile_model(graph, CompileOptions(input_shape=SHAPES[name],  # type: ignore[arg-type]
                                                 soc_version=soc), out)
    f = result.report["figures"]["memory"]["default"]
    return int(f["weights"] + f["arena"] + f["inputs"])


def bench_model(name: str, stages: Sequence[int], methods: Sequence[str], m: int,
                rounds: int, soc: str, ray_on: bool, tmp: Path) -> list[dict[str, object]]:
    graph = load_model(models.export(name))
    batches = micro_batches(name, m)
    whole = one_device_bytes(graph, name, soc, tmp / f"{name}.om")
    rows = []
    for k in stages:
        for method in methods:
            path = tmp / f"{name}-{k}-{method}.om"
            limit = int(whole * 1.25 / k) if method == "memory" else None
            pipe, limit = compile_one(graph, name, k, method, limit, soc, m, path)
            sch = pipe["schedule"]
            row: dict[str, object] = {
                "model": name, "stages": k, "method": method, "device_memory": limit,
                "balance": pipe["balance"], "transfer_bytes": pipe["transfer_bytes"],
                "stage_us": [s["us"] for s in pipe["stages"]],
                "est_throughput": sch["throughput_per_s"],
                "est_single": sch["single_device_throughput_per_s"],
                "est_speedup": sch["speedup"], "bubble": sch["bubble"]}
            if ray_on:
                row.update(measure(path, k, batches, rounds))
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def measure(path: Path, k: int, batches: list[dict[str, np.ndarray]], rounds: int
            ) -> dict[str, object]:
    with Model.load(path) as single, PipelineModel.load(path, devices=k, backend="ray") as p:
        want = [single.run(b) for b in batches]
        got = p.run_many(batches)
        equal = all(a[n].tobytes() == b[n].tobytes() for a, b in zip(want, got, strict=True)
                    for n in a)
        rate = throughput({"single": lambda: [single.run(b) for b in batches],
                           "ray": lambda: p.run_many(batches)}, len(batches), rounds)
    return {"measured_single": round(rate["single"], 3), "measured_ray": round(rate["ray"], 3),
            "measured_speedup": round(rate["ray"] / rate["single"], 3), "bit_equal": equal}


def _line(r: dict[str, object]) -> str:
    text = (f"{r['model']:9s} K={r['stages']} {r['method']:6s} balance {r['balance']:.2f}  "
            f"cut {float(r['transfer_bytes']) / (1 << 20):6.2f} MiB/mb  est. "
            f"{r['est_throughput']:8.0f}/s vs {r['est_single']:7.0f}/s ({r['est_speedup']:.2f}x)")
    if "measured_ray" in r:
        text += (f"  measured Ray {r['measured_ray']:6.2f}/s vs single {r['measured_single']:6.2f}"
                 f"/s ({r['measured_speedup']:.2f}x) equal: {'yes' if r['bit_equal'] else 'NO'}")
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["bert_base", "resnet50"], choices=SHAPES)
    p.add_argument("--stages", nargs="+", type=int, default=[2, 4])
    p.add_argument("--methods", nargs="+", default=["depth", "memory", "cost"])
    p.add_argument("--micro_batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--soc", default="Ascend910")
    p.add_argument("--blas_threads", type=int, default=1,
                   help="BLAS threads of the single-process run and of every stage actor "
                   "(equal, so results stay equal bit for bit; default 1: a device is a core)")
    p.add_argument("--no_ray", action="store_true", help="estimates only")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.blas_threads, user_api="blas")
    ray_on = not args.no_ray
    if ray_on:
        import ray

        ray.init(num_cpus=os.cpu_count(), object_store_memory=2 << 30, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    report: dict[str, object] = {"machine_before": facts(), "config": vars(args) | {
        "json": str(args.json) if args.json else None}, "rows": []}
    try:
        with tempfile.TemporaryDirectory(prefix="gerules-pipeline-") as tmp:
            for name in args.models:
                report["rows"] += bench_model(name, args.stages, args.methods,  # type: ignore[operator]
                                              args.micro_batches, args.rounds, args.soc,
                                              ray_on, Path(tmp))
    finally:
        if ray_on:
            ray.shutdown()
    report["machine_after"] = facts()
    print(describe(report["machine_before"]))  # type: ignore[arg-type]
    print(f"load after: {report['machine_after']['load_avg_1_5_15']}")  # type: ignore[index]
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
