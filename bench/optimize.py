"""Optimizer benchmark: our optimizer against onnxruntime's offline optimizer and onnxsim.

For each model (ONNX exports from ``bench/models.py``, batch fixed to 1): our compile time,
node counts before/after for ``--target npu`` and ``--target onnx``, the estimated latency
before/after (the NPU cost model, an estimate), the max output difference against the source
model on random inputs (our runtime), and in the same run the node counts and times of
onnxruntime's offline optimizer (basic and extended levels, saved model) and of onnxsim when it
is installed. Prints a table; ``--json PATH`` writes the figures.

    python bench/optimize.py [--models resnet50 bert_base] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gerules.cli.feeds import random_feeds  # noqa: E402
from gerules.compiler import fix_input_shapes  # noqa: E402
from gerules.ir.verify import verify  # noqa: E402
from gerules.onnx_io import load_model  # noqa: E402
from gerules.opt.optimize import OptimizeOptions, optimize, rule_library  # noqa: E402
from gerules.runtime.executor import run_graph  # noqa: E402

MODELS = ("resnet50", "mobilenetv2", "bert_base", "gpt2_small")


def model_file(name: str, opset: int) -> Path:
    import models  # bench/models.py (needs torch)

    return models.export(name, opset)


def ours(path: Path, target: str, level: str, dynamic: bool = False) -> dict[str, Any]:
    graph = load_model(path)
    fixed, _ = fix_input_shapes(graph, {}, keep_batch=dynamic)
    fixed = verify(fixed)
    start = time.perf_counter()
    out, report = optimize(fixed, OptimizeOptions(opt_level=level, target=target))
    seconds = time.perf_counter() - start
    shapes = {v.name: tuple(2 if isinstance(d, str) else d for d in v.shape or ())
              for v in fixed.inputs}  # a dynamic batch runs at batch 2
    feeds = random_feeds(fixed.inputs, shapes, 0, 1 << 30)
    want, got = run_graph(fixed, feeds), run_graph(out, feeds)
    diff = max(float(np.max(np.abs(got[k].astype(np.float64) - want[k]))) for k in want)
    extra: dict[str, Any] = {}
    if target == "onnx":  # the onnx target must run in onnxruntime with the same outputs
        extra["onnxruntime_max_abs_diff"] = _ort_diff(out, feeds, want)
    return {**extra, "seconds": round(seconds, 3), "nodes_before": report.nodes_before,
            "nodes_after": report.nodes_after,
            "est_us_before": round(report.estimate_before.total_us, 1),
            "est_us_after": round(report.estimate_after.total_us, 1),
            "max_abs_diff": diff, "stop_reason": report.stop_reason,
            "ops_after": report.ops_after}


def _ort_diff(graph: Any, feeds: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    import onnxruntime as ort

    from gerules.onnx_io import to_model_proto

    session = ort.InferenceSession(to_model_proto(graph).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, feeds), strict=True))
    return max(float(np.max(np.abs(got[k].astype(np.float64) - want[k]))) for k in want)


def ort_offline(path: Path, level: str) -> dict[str, Any]:
    import onnxruntime as ort

    levels = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "opt.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = levels[level]
        so.optimized_model_filepath = str(out)
        so.intra_op_num_threads = 1
        start = time.perf_counter()
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        seconds = time.perf_counter() - start
        nodes = len(onnx.load(str(out), load_external_data=False).graph.node)
    return {"seconds": round(seconds, 3), "nodes_after": nodes}


def onnxsim_run(path: Path) -> dict[str, Any] | None:
    try:
        from onnxsim import simplify
    except ImportError:
        return None
    model = onnx.load(str(path))
    shapes = {i.name: [d.dim_value if d.dim_value > 0 else 1 for d in
                       i.type.tensor_type.shape.dim] for i in model.graph.input}
    start = time.perf_counter()
    simplified, _ = simplify(model, overwrite_input_shapes=shapes)
    return {"seconds": round(time.perf_counter() - start, 3),
            "nodes_after": len(simplified.graph.node)}


def bench(name: str, opset: int, level: str) -> dict[str, Any]:
    path = model_file(name, opset)
    row: dict[str, Any] = {"model": name, "opset": opset,
                           "file_nodes": len(onnx.load(str(path),
                                                       load_external_data=False).graph.node)}
    rule_library()  # compile the rules once, outside the timed runs
    row["npu"] = ours(path, "npu", level)
    row["onnx"] = ours(path, "onnx", level)
    row["npu_dynamic_batch"] = ours(path, "npu", level, dynamic=True)
    row["ort_basic"] = ort_offline(path, "basic")
    row["ort_extended"] = ort_offline(path, "extended")
    row["onnxsim"] = onnxsim_run(path)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'model':<12}{'file':>6}{'npu':>6}{'dyn':>6}{'onnx':>6}{'ort-b':>7}{'ort-x':>7}"
            f"{'sim':>6}"
            f"{'ours s':>8}{'ort-x s':>8}{'sim s':>7}{'est us':>16}{'max diff':>10}"
            f"{'onnx@ort':>10}")
    lines = [head]
    for r in rows:
        sim = r["onnxsim"] or {"nodes_after": "-", "seconds": "-"}
        est = f"{r['npu']['est_us_before']:.0f}->{r['npu']['est_us_after']:.0f}"
        lines.append(
            f"{r['model']:<12}{r['file_nodes']:>6}{r['npu']['nodes_after']:>6}"
            f"{r['npu_dynamic_batch']['nodes_after']:>6}"
            f"{r['onnx']['nodes_after']:>6}{r['ort_basic']['nodes_after']:>7}"
            f"{r['ort_extended']['nodes_after']:>7}{sim['nodes_after']:>6}"
            f"{r['npu']['seconds']:>8}{r['ort_extended']['seconds']:>8}{sim['seconds']:>7}"
            f"{est:>16}{r['npu']['max_abs_diff']:>10.1e}"
            f"{r['onnx']['onnxruntime_max_abs_diff']:>10.1e}")
    lines.append("npu/onnx: our node counts per target (dyn: npu with the batch dim left "
                 "dynamic); ort-b/ort-x: onnxruntime basic/extended; "
                 "sim: onnxsim; est us: NPU cost model estimate (not a measurement); max diff: npu "
                 "graph vs source in our runtime; onnx@ort: onnx-target graph in onnxruntime "
                 "vs source")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--opt-level", default="O2")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    rows = [bench(m, args.opset, args.opt_level) for m in args.models]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"opt_level": args.opt_level, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
