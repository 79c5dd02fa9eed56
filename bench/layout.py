"""Data layout (NC1HWC0 / FRACTAL_Z / FRACTAL_NZ, TransData placed in the e-graph): what it
does to ResNet-50, MobileNetV2, an EfficientNet-B0-style net and BERT-base, in one run.

For every model the script compiles the exported model at batch 1 twice, with the NPU layout
(the default for a .om) and without it (``CompileOptions(layout=False)``: the layout rulesets
off, a plain graph), and reports:

- TransData nodes: the naive count (a pair around every cube op: one per non-constant data
  input and per output, GE's layout before it moves and cancels transfers) against the
  ones left after optimization, and where those are (``interior``: with a convolution both
  before and after them; 0 means the network runs in one format from its first convolution
  to its last, transfers only at its input and output ends, GE's result for a CNN);
- padding bytes the blocked formats add (activations, weights);
- estimated latency (the NPU cost model, ``--soc``) with layout, and without it: the plain
  graph priced with the transfers its cube ops imply (the naive layout), and the time in
  format transfers;
- compile time with and without layout (whole ``compile_model`` calls, alternating, median
  of ``--rounds``; wall and CPU time);
- our runtime: the two ``.om`` files run on this CPU (median of ``--runs`` runs each,
  alternating: what the conversions inside the NumPy kernels cost), and the largest
  difference of the layout ``.om``'s outputs from onnxruntime's.

Targets (PASS/FAIL): ResNet-50, MobileNetV2 and the EfficientNet-style net keep transfers only
at the ends (0 interior); every model's layout estimate is below its naive one; the outputs
match onnxruntime (relative 1e-4).

    python bench/layout.py [--models resnet50 mobilenetv2 efficientnet bert_base]
                           [--soc Ascend310P3] [--rounds 3] [--runs 5] [--json out.json]

Needs the ``torch`` extra to export a model not yet in ``bench/.cache``. Timings depend on the
machine's load, printed with the BLAS facts.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models  # noqa: E402 - bench/models.py, beside this script
from machine import Verdicts, describe, facts  # noqa: E402

from gerules.compiler import CompileOptions, compile_model  # noqa: E402
from gerules.cost import NpuCostModel  # noqa: E402
from gerules.cost.layout import layout_figures  # noqa: E402
from gerules.ir.graph import Graph  # noqa: E402
from gerules.onnx_io import load_model  # noqa: E402
from gerules.runtime.model import Model  # noqa: E402

IMAGE = {"input": (1, 3, 224, 224)}
SHAPES = {"resnet50": IMAGE, "mobilenetv2": IMAGE, "efficientnet": IMAGE,
          "bert_base": {"input_ids": (1, 128), "attention_mask": (1, 128)}}
CNNS = ("resnet50", "mobilenetv2", "efficientnet")
CONVS = frozenset({"ge.FusedConv", "Conv"})


def interior_transfers(graph: Graph) -> int:
    """TransData nodes with a convolution both upstream and downstream of them (0: the
    transfers lie before the first convolution and after the last)."""
    after: set[str] = set()  # tensors some convolution computed, directly or not
    for node in graph.nodes:
        if node.qualified_op in CONVS or any(i in after for i in node.present_inputs()):
            after.update(node.outputs)
    before: set[str] = set()  # tensors some convolution reads, directly or not
    for node in reversed(graph.nodes):
        if node.qualified_op in CONVS or any(o in before for o in node.outputs):
            before.update(node.present_inputs())
    return sum(1 for n in graph.nodes if n.qualified_op == "ge.TransData"
               and n.inputs[0] in after and n.outputs[0] in before)


def compile_twice(graph: Graph, name: str, soc: str, rounds: int, tmp: Path
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both compiles (layout on and off), alternating, with their times."""
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    results: dict[bool, Any] = {}
    for r in range(rounds):
        for layout in (True, False):
            opts = CompileOptions(input_shape=SHAPES[name], soc_version=soc, layout=layout)
            wall, cpu = time.perf_counter(), time.process_time()
            results[layout] = compile_model(graph, opts, tmp / f"{name}-{int(layout)}-{r}.om")
            times[layout].append((time.perf_counter() - wall, time.process_time() - cpu))
    return ({"result": results[True], "times": times[True]},
            {"result": results[False], "times": times[False]})


def run_times(paths: dict[str, Path], feeds: dict[str, np.ndarray], runs: int
              ) -> tuple[dict[str, float], dict[str, dict[str, np.ndarray]]]:
    """Median seconds per run of each .om (runs alternate), and the outputs."""
    loaded = {k: Model.load(p) for k, p in paths.items()}
    try:
        outs = {k: m.run(feeds) for k, m in loaded.items()}  # warm: arenas, BLAS
        times: dict[str, list[float]] = {k: [] for k in loaded}
        for _ in range(runs):
            for k, m in loaded.items():
                start = time.perf_counter()
                m.run(feeds)
                times[k].append(time.perf_counter() - start)
        return {k: statistics.median(v) for k, v in times.items()}, outs
    finally:
        for m in loaded.values():
            m.close()


def onnxruntime_outputs(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds),
                    strict=True))


def bench_model(name: str, soc: str, rounds: int, runs: int, tmp: Path) -> dict[str, Any]:
    path = models.export(name)
    graph = load_model(path)
    on, off = compile_twice(graph, name, soc, rounds, tmp)
    final_on, final_off = on["result"].graph, off["result"].graph
    model = NpuCostModel(soc)  # prices the transfers a plain cube op implies
    est_on, est_off = model.graph(final_on), model.graph(final_off)
    lay = layout_figures(final_on, est_on)
    naive = layout_figures(final_off, est_off)
    inputs = models.example_inputs(name)
    feeds = {n: t.numpy() for n, t in zip(models.MODELS[name][2], inputs, strict=True)}
    run_s, outs = run_times({"layout": on["result"].path, "plain": off["result"].path}, feeds,
                            runs)
    theirs = onnxruntime_outputs(path, feeds)
    err = max(float(np.abs(outs["layout"][k] - theirs[k]).max()
                    / max(1.0, float(np.abs(theirs[k]).max()))) for k in theirs)
    med = {k: (statistics.median(t for t, _ in v["times"]), statistics.median(c for _, c in
                                                                               v["times"]))
           for k, v in (("layout", on), ("plain", off))}
    row = {"model": name, "nodes": len(final_on.nodes),
           "transdata_naive": naive["transdata"]["implied"],
           "transdata_final": lay["transdata"]["final"],
           "transdata_implied": lay["transdata"]["implied"],
           "transdata_interior": interior_transfers(final_on),
           "formats": lay["by_format"],
           "padding_bytes": lay["padding_bytes"],
           "est_us_layout": round(est_on.total_us, 2), "est_us_naive": round(est_off.total_us, 2),
           "transfer_us_layout": lay["transfer_us"], "transfer_us_naive": naive["transfer_us"],
           "compile_s": {k: round(v[0], 3) for k, v in med.items()},
           "compile_cpu_s": {k: round(v[1], 3) for k, v in med.items()},
           "run_ms": {k: round(1e3 * v, 2) for k, v in run_s.items()},
           "max_rel_diff_onnxruntime": err}
    if name == "bert_base":
        norms = [n for n in final_on.nodes if n.qualified_op == "ge.AddLayerNorm"]
        row["add_layer_norm_in_nz"] = sum(
            1 for n in norms if final_on.type_of(n.outputs[0]).format == "FRACTAL_NZ")
        row["add_layer_norm"] = len(norms)
    print(_line(row), flush=True)
    return row


def _line(r: dict[str, Any]) -> str:
    pad = r["padding_bytes"]
    text = (f"{r['model']:13s} TransData {r['transdata_naive']:4d} naive -> "
            f"{r['transdata_final']:3d} ({r['transdata_interior']} interior)  padding "
            f"{pad['activations'] / 2**20:6.2f} + {pad['weights'] / 2**20:5.2f} MiB  est. "
            f"{r['est_us_layout']:8.1f} us vs {r['est_us_naive']:8.1f} naive "
            f"({r['est_us_naive'] / r['est_us_layout']:.2f}x; transfers "
            f"{r['transfer_us_layout']:.1f} vs {r['transfer_us_naive']:.1f} us)  compile "
            f"{r['compile_s']['layout']:.2f} vs {r['compile_s']['plain']:.2f} s (CPU "
            f"{r['compile_cpu_s']['layout']:.2f} vs {r['compile_cpu_s']['plain']:.2f})  run "
            f"{r['run_ms']['layout']:.1f} vs {r['run_ms']['plain']:.1f} ms  "
            f"vs onnxruntime {r['max_rel_diff_onnxruntime']:.1e}")
    if "add_layer_norm" in r:
        text += f"  AddLayerNorm in NZ {r['add_layer_norm_in_nz']}/{r['add_layer_norm']}"
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(SHAPES), choices=SHAPES)
    p.add_argument("--soc", default="Ascend310P3")
    p.add_argument("--rounds", type=int, default=3, help="compiles per setting (medians)")
    p.add_argument("--runs", type=int, default=5, help="runs of each .om (medians)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    report: dict[str, Any] = {"machine_before": facts(), "config": vars(args) | {
        "json": str(args.json) if args.json else None}, "rows": []}
    with tempfile.TemporaryDirectory(prefix="gerules-layout-") as tmp:
        for name in args.models:
            report["rows"].append(bench_model(name, args.soc, args.rounds, args.runs,
                                              Path(tmp)))
    report["machine_after"] = facts()
    verdicts = Verdicts()
    for r in report["rows"]:
        if r["model"] in CNNS:
            verdicts.check(f"{r['model']}: TransData only at the ends (interior ones)",
                           r["transdata_interior"], 0)
        verdicts.check(f"{r['model']}: estimate with layout over the naive one",
                       round(r["est_us_layout"] / r["est_us_naive"], 3), 1.0)
        verdicts.check(f"{r['model']}: outputs vs onnxruntime (max relative difference)",
                       r["max_rel_diff_onnxruntime"], 1e-4)
    report["verdicts"] = verdicts.lines
    print("\n".join(f"{'PASS' if v['pass'] else 'FAIL'} {v['target']}: {v['value']:g} <= "
                    f"{v['limit']:g}" for v in verdicts.lines))
    print(verdicts.summary())
    print(describe(report["machine_before"]))
    print(f"load after: {report['machine_after']['load_avg_1_5_15']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
