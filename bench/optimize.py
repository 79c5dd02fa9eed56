"""Optimizer benchmark: our node counts against every peer's, in the same run.

For each model (ONNX exports from ``bench/models.py``, batch fixed to 1): our optimize time,
node counts before/after for ``--target npu`` and ``--target onnx``, the estimated latency
before/after (the NPU cost model, an estimate), the max output difference against the source
model on random inputs (our runtime), and in the same run the node counts and times of
onnxruntime's offline optimizer (basic and extended levels, saved model), onnxruntime's
transformers optimizer (BERT, GPT-2, ViT), onnxsim and onnxslim when installed (the ``bench``
extra). ``onnx@ort`` runs the ``--target onnx`` graph in onnxruntime (all optimizations, 1
thread) against the source model, paired runs: its max difference and the latency ratio
(below 1: our rewrite made onnxruntime faster). The ``--target onnx`` count is of what
onnxruntime runs: a composite op (``ge.AddRelu``: an op the rule library defines by its body)
is written as an ONNX function, which onnxruntime inlines, so each call counts as its body's
nodes (the JSON keeps ``nodes_after`` with calls as one and ``function_calls``).

Targets (issue 19), printed as PASS/FAIL lines for ResNet-50, MobileNetV2, BERT-base and
GPT-2: ``--target onnx`` at most min(onnxsim, onnxslim, onnxruntime basic) nodes and
``--target npu`` at most min(onnxruntime extended, transformers optimizer). The ViT and the
Llama-style decoder are reported without targets. ``--json PATH`` writes the figures with
the machine facts.

    python bench/optimize.py [--models resnet50 bert_base] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import Verdicts, describe, facts  # noqa: E402

from gerules.compiler import fix_input_shapes  # noqa: E402
from gerules.ir.composite import inlined_size  # noqa: E402
from gerules.ir.verify import verify  # noqa: E402
from gerules.onnx_io import load_model  # noqa: E402
from gerules.opt.optimize import OptimizeOptions, optimize, rule_library  # noqa: E402
from gerules.runtime.executor import run_graph  # noqa: E402
from gerules.runtime.feeds import random_feeds  # noqa: E402

MODELS = ("resnet50", "mobilenetv2", "bert_base", "gpt2_small", "vit_b16", "llama_small")
TARGETED = ("resnet50", "mobilenetv2", "bert_base", "gpt2_small")
# model -> (the transformers optimizer's model_type, num_heads, hidden_size); 0 = detect
TRANSFORMER_TYPE = {"bert_base": ("bert", 0, 0), "gpt2_small": ("gpt2", 12, 768),
                    "vit_b16": ("vit", 12, 768)}
ORT_TIMING_RUNS = 10


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
        extra.update(_ort_check(path, out, feeds, want))
        # composite ops are written as ONNX functions, which onnxruntime inlines: count
        # what it runs, so a call never counts as one node against a peer's two
        extra["nodes_inlined"] = inlined_size(out.nodes, out.functions)
        extra["function_calls"] = sum(1 for n in out.nodes if n.domain)
    return {**extra, "seconds": round(seconds, 3), "nodes_before": report.nodes_before,
            "nodes_after": report.nodes_after,
            "est_us_before": round(report.estimate_before.total_us, 1),
            "est_us_after": round(report.estimate_after.total_us, 1),
            "max_abs_diff": diff, "stop_reason": report.stop_reason,
            "ops_after": report.ops_after}


def _ort_check(source: Path, graph: Any, feeds: dict[str, np.ndarray],
               want: dict[str, np.ndarray]) -> dict[str, Any]:
    """The onnx-target graph in onnxruntime: its difference, and its latency over the
    source model's (both with all of onnxruntime's optimizations, 1 thread, paired runs)."""
    import onnxruntime as ort

    from gerules.onnx_io import to_model_proto

    def session(model: str | bytes) -> Any:
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])

    ours, theirs = session(to_model_proto(graph).SerializeToString()), session(str(source))
    names = [o.name for o in ours.get_outputs()]
    got = dict(zip(names, ours.run(None, feeds), strict=True))
    diff = max(float(np.max(np.abs(got[k].astype(np.float64) - want[k]))) for k in want)
    ratios = []
    for _ in range(ORT_TIMING_RUNS):
        pair = []
        for s in (ours, theirs):
            start = time.perf_counter()
            s.run(None, feeds)
            pair.append(time.perf_counter() - start)
        ratios.append(pair[0] / pair[1])
    return {"onnxruntime_max_abs_diff": diff,
            "onnxruntime_latency_ratio": round(statistics.median(ratios[1:]), 3)}


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


def onnxslim_run(path: Path) -> dict[str, Any] | None:
    try:
        import onnxslim
    except ImportError:
        return None
    model = onnx.load(str(path))
    shapes = [f"{i.name}:" + ",".join(str(d.dim_value if d.dim_value > 0 else 1) for d in
                                      i.type.tensor_type.shape.dim) for i in model.graph.input]
    start = time.perf_counter()
    slimmed = onnxslim.slim(model, input_shapes=shapes)
    return {"seconds": round(time.perf_counter() - start, 3),
            "nodes_after": len(slimmed.graph.node)}


def transformers_run(name: str, path: Path) -> dict[str, Any] | None:
    """onnxruntime's transformers optimizer (its Python fusions after the basic level)."""
    if name not in TRANSFORMER_TYPE:
        return None
    from onnxruntime.transformers.optimizer import optimize_model

    kind, heads, hidden = TRANSFORMER_TYPE[name]
    start = time.perf_counter()
    model = optimize_model(str(path), model_type=kind, num_heads=heads, hidden_size=hidden)
    return {"seconds": round(time.perf_counter() - start, 3),
            "nodes_after": len(model.model.graph.node)}


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
    row["onnxslim"] = onnxslim_run(path)
    row["ort_transformers"] = transformers_run(name, path)
    return row


def _nodes(entry: dict[str, Any] | None) -> int | None:
    return None if entry is None else int(entry["nodes_after"])


def check_targets(rows: list[dict[str, Any]], verdicts: Verdicts) -> None:
    for r in rows:
        if r["model"] not in TARGETED:
            continue
        peers = {"onnx": ("onnxsim", "onnxslim", "ort_basic"),
                 "npu": ("ort_extended", "ort_transformers")}
        for target, names in peers.items():
            counts = {n: _nodes(r[n]) for n in names if _nodes(r[n]) is not None}
            best = min(counts.values())
            which = "/".join(n for n, c in counts.items() if c == best)
            ours = r[target].get("nodes_inlined", r[target]["nodes_after"])
            print(verdicts.check(f"{r['model']} --target {target} nodes vs best peer ({which})",
                                 ours, best))


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'model':<12}{'file':>6}{'npu':>6}{'dyn':>6}{'onnx':>6}{'ort-b':>7}{'ort-x':>7}"
            f"{'ort-tx':>7}{'sim':>6}{'slim':>6}"
            f"{'ours s':>8}{'ort-x s':>8}{'sim s':>7}{'est us':>16}{'max diff':>10}"
            f"{'onnx@ort':>10}{'ort time':>9}")
    lines = [head]
    for r in rows:
        sim = r["onnxsim"] or {"nodes_after": "-", "seconds": "-"}
        slim = r["onnxslim"] or {"nodes_after": "-"}
        tx = r["ort_transformers"] or {"nodes_after": "-"}
        est = f"{r['npu']['est_us_before']:.0f}->{r['npu']['est_us_after']:.0f}"
        lines.append(
            f"{r['model']:<12}{r['file_nodes']:>6}{r['npu']['nodes_after']:>6}"
            f"{r['npu_dynamic_batch']['nodes_after']:>6}"
            f"{r['onnx']['nodes_inlined']:>6}{r['ort_basic']['nodes_after']:>7}"
            f"{r['ort_extended']['nodes_after']:>7}{tx['nodes_after']:>7}"
            f"{sim['nodes_after']:>6}{slim['nodes_after']:>6}"
            f"{r['npu']['seconds']:>8}{r['ort_extended']['seconds']:>8}{sim['seconds']:>7}"
            f"{est:>16}{r['npu']['max_abs_diff']:>10.1e}"
            f"{r['onnx']['onnxruntime_max_abs_diff']:>10.1e}"
            f"{r['onnx']['onnxruntime_latency_ratio']:>8.2f}x")
    lines.append("npu/onnx: our node counts per target (dyn: npu with the batch dim left "
                 "dynamic; onnx: with the calls of composite ops, ONNX functions that "
                 "onnxruntime inlines, counted as their bodies); ort-b/ort-x: onnxruntime "
                 "basic/extended; ort-tx: onnxruntime "
                 "transformers optimizer; sim: onnxsim; slim: onnxslim; est us: NPU cost model "
                 "estimate (not a measurement); max diff: npu graph vs source in our runtime; "
                 "onnx@ort: onnx-target graph in onnxruntime vs source; ort time: its "
                 "onnxruntime latency over the source's")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--opt-level", default="O2")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    machine = facts()
    print(describe(machine))
    rows = [bench(m, args.opset, args.opt_level) for m in args.models]
    print(table(rows))
    verdicts = Verdicts()
    check_targets(rows, verdicts)
    print(verdicts.summary())
    if args.json:
        args.json.write_text(json.dumps({"opt_level": args.opt_level, "machine": machine,
                                         "rows": rows, "targets": verdicts.lines}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
