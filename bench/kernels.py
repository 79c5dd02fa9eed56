"""Our conv and pooling kernels against onnxruntime, layer by layer.

The stack is every convolution of ResNet-50 at 224x224, batch 1 (53 layers: stem, the
bottlenecks' 1x1 / 3x3 / 1x1 and the downsampling 1x1s), plus MobileNetV2's depthwise 3x3
layers, the stem's 3x3/2 max-pool and BERT-base's row kernels (LayerNormalization, Softmax,
Erf). Each layer runs as one node: ours as a runtime step runs it (the registry's
``kernel_out`` into the step's output buffer, one ``Call`` kept across runs, so with the
``jit`` extra its compiled loops run from the second call; ops without a ``kernel_out``
through their kernel), onnxruntime as a one-node session
(graph optimizations disabled, ``--threads`` intra-op threads). We report the median of
``--runs`` per layer after ``--warmup`` runs, the sums per group and ours / onnxruntime.
NumPy's BLAS gets the same ``--threads`` (default 1). ``--json PATH`` writes the figures.

    python bench/kernels.py [--runs 5] [--threads 1] [--json out.json]
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnxruntime as ort
from machine import describe, facts  # bench/machine.py: the machine facts
from onnx import TensorProto, helper

from gerules.ir.ops.api import evaluate
from gerules.ir.registry import default_registry


@dataclass(frozen=True)
class Layer:
    group: str
    name: str
    op: str
    x: tuple[int, ...]
    w: tuple[int, ...] | None
    attrs: dict[str, Any] = field(default_factory=dict)


def resnet50_convs() -> list[Layer]:
    """The 53 convolutions of ResNet-50 (224x224, batch 1), in network order."""
    layers = [Layer("resnet50", "stem", "Conv", (1, 3, 224, 224), (64, 3, 7, 7),
                    {"strides": [2, 2], "pads": [3, 3, 3, 3]})]
    cin, size = 64, 56
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2),
                                                     (512, 3, 2)]):
        for b in range(blocks):
            s = stride if b == 0 else 1
            tag = f"l{stage + 1}.{b}"
            layers.append(Layer("resnet50", f"{tag}.conv1", "Conv", (1, cin, size, size),
                                (width, cin, 1, 1)))
            layers.append(Layer("resnet50", f"{tag}.conv2", "Conv", (1, width, size, size),
                                (width, width, 3, 3), {"strides": [s, s], "pads": [1] * 4}))
            out = size // s
            layers.append(Layer("resnet50", f"{tag}.conv3", "Conv", (1, width, out, out),
                                (4 * width, width, 1, 1)))
            if b == 0:
                layers.append(Layer("resnet50", f"{tag}.down", "Conv", (1, cin, size, size),
                                    (4 * width, cin, 1, 1), {"strides": [s, s]}))
            cin, size = 4 * width, out
    return layers


def mobilenet_depthwise() -> list[Layer]:
    """MobileNetV2's depthwise 3x3 convolutions (expanded channels, stride, input size)."""
    specs = [(32, 1, 112), (96, 2, 112), (144, 1, 56), (144, 2, 56), (192, 1, 28),
             (192, 1, 28), (192, 2, 28), (384, 1, 14), (384, 1, 14), (384, 1, 14),
             (384, 1, 14), (576, 1, 14), (576, 1, 14), (576, 2, 14), (960, 1, 7),
             (960, 1, 7), (960, 1, 7)]
    return [Layer("mobilenetv2-dw", f"dw{i}", "Conv", (1, c, n, n), (c, 1, 3, 3),
                  {"group": c, "strides": [s, s], "pads": [1] * 4})
            for i, (c, s, n) in enumerate(specs)]


def bert_rows() -> list[Layer]:
    """BERT-base's row kernels at sequence 128, batch 1: LayerNormalization over the hidden
    size (with its scale), the attention Softmax and the GELU's Erf."""
    return [Layer("bert-rows", "layernorm", "LayerNormalization", (1, 128, 768), (768,)),
            Layer("bert-rows", "softmax", "Softmax", (1, 12, 128, 128), None),
            Layer("bert-rows", "erf", "Erf", (1, 128, 3072), None)]


def pools() -> list[Layer]:
    return [Layer("pool", "resnet50.maxpool", "MaxPool", (1, 64, 112, 112), None,
                  {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4})]


def median_ms(fn: Callable[[], object], warmup: int, runs: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def ort_session(layer: Layer, threads: int) -> ort.InferenceSession:
    names = ["x", "w"] if layer.w is not None else ["x"]
    node = helper.make_node(layer.op, names, ["y"], **layer.attrs)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, layer.x)]
    if layer.w is not None:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, layer.w))
    graph = helper.make_graph([node], layer.name, inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


def as_step(layer: Layer, ins: list[np.ndarray | None]) -> Callable[[], np.ndarray]:
    """The layer as the runtime runs it: one ``Call`` for every run and, for an op with a
    ``kernel_out``, the output written into one buffer (floating-point errors ignored, as
    the runtimes set them for a run)."""
    schema = default_registry().get(layer.op, "", 17)
    assert schema is not None
    call = schema.call(dict(layer.attrs), 1)
    (shaped,) = evaluate(layer.op, ins, layer.attrs)
    out = np.empty_like(shaped)
    into = schema.kernel_out

    def run() -> np.ndarray:
        with np.errstate(all="ignore"):
            if into is None:
                return np.asarray(schema.kernel(list(ins), call)[0])
            into(list(ins), call, [out])
            return out

    return run


def measure(layer: Layer, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any]:
    x = rng.standard_normal(layer.x).astype(np.float32)
    feeds = {"x": x}
    ins: list[np.ndarray | None] = [x]
    if layer.w is not None:
        w = (rng.standard_normal(layer.w) / np.sqrt(np.prod(layer.w[1:]))).astype(np.float32)
        feeds["w"] = w
        ins.append(w)
    sess = ort_session(layer, args.threads)
    step = as_step(layer, ins)
    ours = median_ms(step, args.warmup, args.runs)
    theirs = median_ms(lambda: sess.run(None, feeds), args.warmup, args.runs)
    y = step()
    diff = float(np.max(np.abs(y - sess.run(None, feeds)[0])))
    return {"group": layer.group, "layer": layer.name, "ours_ms": round(ours, 3),
            "onnxruntime_ms": round(theirs, 3), "ratio": round(ours / theirs, 2),
            "max_abs_diff": diff}


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for group in dict.fromkeys(r["group"] for r in rows):
        ours = sum(r["ours_ms"] for r in rows if r["group"] == group)
        theirs = sum(r["onnxruntime_ms"] for r in rows if r["group"] == group)
        out[group] = {"layers": sum(1 for r in rows if r["group"] == group),
                      "ours_ms": round(ours, 2), "onnxruntime_ms": round(theirs, 2),
                      "ratio": round(ours / theirs, 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--verbose", action="store_true", help="print every layer")
    args = parser.parse_args(argv)
    machine = facts()
    print(describe(machine))
    rng = np.random.default_rng(0)
    rows = [measure(layer, args, rng)
            for layer in resnet50_convs() + mobilenet_depthwise() + pools() + bert_rows()]
    if args.verbose:
        for r in rows:
            print(f"{r['layer']:18s} ours {r['ours_ms']:8.2f} ms  onnxruntime "
                  f"{r['onnxruntime_ms']:8.2f} ms  x{r['ratio']:.2f}")
    summary = summarize(rows)
    for group, s in summary.items():
        print(f"{group:16s} {s['layers']:3.0f} layers  ours {s['ours_ms']:8.1f} ms  "
              f"onnxruntime {s['onnxruntime_ms']:8.1f} ms  ours/onnxruntime {s['ratio']:.2f}")
    print(f"max |ours - onnxruntime| = {max(r['max_abs_diff'] for r in rows):.2e}  "
          f"(threads={args.threads}, median of {args.runs})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "runs": args.runs, "summary": summary,
                       "layers": rows, "machine": machine}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
