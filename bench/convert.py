"""Conversion time, phase by phase, against onnxruntime building an optimized session.

    python bench/convert.py [--model bert_base resnet50] [--json figures.json]

For each model (exported by ``bench/models.py`` into ``bench/.cache``, needs the torch extra)
two conversions run through ``ge-rewrite`` itself, in this process:
- the dynamic-batch export with ``--dynamic_batch_size=1,8`` (the shapes as exported);
- BERT-base also as torch exports it without dynamic axes (batch 1 baked into its Reshape
  targets), first without and then with ``--fix_batch_dims``: the first must fail in the shapes
  phase, naming the fix, the second convert.
The peer is onnxruntime creating an ``InferenceSession`` with extended graph optimizations that
writes its optimized model (its "conversion"), in the same process. Printed: every phase of
ours, the total, onnxruntime's time and the ratio, and the machine facts that qualify a time
(BLAS library via threadpoolctl when installed, ``OPENBLAS_CORETYPE``, the load average).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import models  # noqa: E402 - bench/models.py, beside this script
from machine import describe, facts  # noqa: E402 - bench/machine.py: the machine facts

from gerules.cli.main import main as ge_rewrite  # noqa: E402

SHAPES = {"bert_base": "input_ids:-1,128;attention_mask:-1,128", "resnet50": "input:-1,3,224,224"}


def static_export(name: str) -> Path:
    """``name`` exported at batch 1 without dynamic axes, as a plain torch.onnx.export does."""
    import torch

    path = models.CACHE / f"{name}-static-opset17.onnx"
    if path.exists():
        return path
    _, _, inputs, outputs = models.MODELS[name]
    with torch.no_grad():
        torch.onnx.export(models.build(name), models.example_inputs(name), str(path),
                          dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.PRESERVE, input_names=inputs,
                          output_names=outputs)
    return path


def convert(model: Path, shape: str, folder: Path, *extra: str) -> dict[str, object]:
    out = folder / model.stem
    argv = [f"--model={model}", "--framework=5", f"--output={out}", f"--input_shape={shape}",
            "--dynamic_batch_size=1,8", f"--report={out}.json", *extra]
    err = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = ge_rewrite(argv)
    seconds = time.perf_counter() - start
    result: dict[str, object] = {"argv": ["ge-rewrite", *argv], "exit": code,
                                 "seconds": round(seconds, 2)}
    if code == 0:
        report = json.loads(Path(f"{out}.json").read_text())
        result["phases_s"] = report["phases_s"]
        result["nodes"] = report["figures"]["nodes"]
        result["fixed"] = len(report["shapes"]["fix_batch_dims"])
    else:
        result["error"] = err.getvalue().strip()[:300]
    return result


def peer(model: Path, folder: Path) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(folder / f"{model.stem}.ort.onnx")
    start = time.perf_counter()
    ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=["bert_base"], choices=sorted(SHAPES))
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    figures: dict[str, object] = {"machine_before": facts(), "models": {}}
    with tempfile.TemporaryDirectory(prefix="gerules-convert-") as tmp:
        folder = Path(tmp)
        for name in args.model:
            path = models.export(name)
            row: dict[str, object] = {"dynamic": convert(path, SHAPES[name], folder),
                                      "onnxruntime_s": round(peer(path, folder), 2)}
            if name == "bert_base":
                static = static_export(name)
                row["static"] = convert(static, SHAPES[name], folder)
                row["static_fixed"] = convert(static, SHAPES[name], folder, "--fix_batch_dims")
            figures["models"][name] = row  # type: ignore[index]
            print(f"{name}: ours {row['dynamic']['seconds']} s "  # type: ignore[index]
                  f"(phases {row['dynamic'].get('phases_s')}), onnxruntime session with "  # type: ignore[union-attr]
                  f"extended optimizations {row['onnxruntime_s']} s, ratio "
                  f"{row['dynamic']['seconds'] / max(row['onnxruntime_s'], 1e-9):.2f}x")  # type: ignore[index,operator]
            for key in ("static", "static_fixed"):
                if key in row:
                    r = row[key]
                    print(f"  {key}: exit {r['exit']} in {r['seconds']} s: "  # type: ignore[index]
                          f"{r.get('error') or r.get('phases_s')}")  # type: ignore[union-attr]
    figures["machine_after"] = facts()
    print(describe(figures["machine_before"]))  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
