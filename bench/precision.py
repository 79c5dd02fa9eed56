"""Precision modes on real architectures: estimated saving against measured error.

For each model (default ResNet-50 and BERT-base from ``bench/.cache``, batch 1) and each mode
(default ``force_fp16``, ``allow_mix_precision``, ``allow_fp32_to_fp16``): optimize at O2 for
``--soc`` (default Ascend310P3), apply the mode, and report in one run

- ``est. us``: the cost model's estimate of the float32 graph and of the converted one, and
  their ratio (an *estimate*, never a measurement);
- ``weights``: bytes of the float32 weights and after conversion;
- ``casts``: Cast nodes in the converted graph; ``kept``: float nodes left in float32;
- ``max rel``: the *measured* output error, ``max |fp16 - fp32| / max |fp32|`` over all outputs,
  both graphs run by the reference executor on the same random inputs;
- ``s``: the time of the precision pass (casts, simplify rules, estimate) alone.

    python bench/precision.py [--models resnet50 bert_base] [--modes force_fp16 ...]
                              [--soc Ascend310P3] [--json out.json]

Needs the ``torch`` extra only to export a model that is not in the cache yet.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from gerules.compiler import fix_input_shapes
from gerules.ir.verify import verify
from gerules.onnx_io import load_model
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.precision import PrecisionOptions, apply_precision, measure_error

CACHE = Path(__file__).resolve().parent / ".cache"
MODES = ("force_fp16", "allow_mix_precision", "allow_fp32_to_fp16")


def _path(name: str) -> Path:
    path = CACHE / f"{name}-opset17.onnx"
    if not path.is_file():
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from models import export  # needs torch

        export(name, 17)
    return path


def run_model(name: str, modes: list[str], soc: str) -> list[dict[str, Any]]:
    graph, _ = fix_input_shapes(load_model(_path(name)), {}, keep_batch=False)
    graph, _ = optimize(verify(graph), OptimizeOptions(soc_version=soc))
    rows = []
    for mode in modes:
        start = time.perf_counter()
        out, report = apply_precision(graph, PrecisionOptions(mode), soc=soc)
        seconds = time.perf_counter() - start
        errors = measure_error(graph, out)
        est, conv = report.estimate, report.conversion
        rows.append({
            "model": name, "mode": mode, "est_us_fp32": est["estimated_us_before"],
            "est_us": est["estimated_us_after"],
            "est_ratio": est["estimated_us_before"] / est["estimated_us_after"],
            "weights_fp32": est["weights_bytes_before"], "weights": est["weights_bytes_after"],
            "casts": report.casts_after_rules, "kept": len(conv.kept) if conv else 0,
            "max_rel": max(e.max_rel for e in errors), "max_abs": max(e.max_abs for e in errors),
            "finite": all(e.finite for e in errors), "seconds": seconds})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "bert_base"])
    parser.add_argument("--modes", nargs="+", default=list(MODES))
    parser.add_argument("--soc", default="Ascend310P3")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    print(f"{'model':<10}{'mode':<22}{'est. us fp32':>13}{'est. us':>10}{'ratio':>7}"
          f"{'weights MiB':>13}{'casts':>7}{'kept':>6}{'max rel':>10}{'s':>6}")
    rows = []
    for name in args.models:
        for r in run_model(name, args.modes, args.soc):
            rows.append(r)
            print(f"{r['model']:<10}{r['mode']:<22}{r['est_us_fp32']:>13.1f}{r['est_us']:>10.1f}"
                  f"{r['est_ratio']:>6.2f}x{r['weights_fp32'] / 2**20:>6.1f}->"
                  f"{r['weights'] / 2**20:<6.1f}{r['casts']:>7}{r['kept']:>6}"
                  f"{r['max_rel']:>10.2e}{r['seconds']:>6.1f}")
    print(f"(est.: {args.soc} cost model estimate; max rel: measured on random inputs)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
