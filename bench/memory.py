"""Memory plans of real architectures: our planner against a plain greedy-by-size planner.

For each model (default: ResNet-50, MobileNetV2, BERT-base and GPT-2 from ``bench/models.py``,
exported once into ``bench/.cache``, batch 1): load it, fix the batch, and report in one run

- ``no reuse``: every activation its own 64-byte aligned block;
- ``file bound``: the most bytes alive at once in the file's node order without aliases, the
  best any planner without in-place reuse can do in that order;
- ``greedy``: a plain greedy-by-size planner (largest first, best-fit gap, file order, no
  in-place), written here independently of ``gerules.memory`` as the peer;
- ``ours``: ``gerules.memory.plan_memory`` (in-place and view aliases, memory-aware order,
  two offset strategies), with its own ``bound`` (most bytes alive in its order with aliases);
- ``ours/greedy``: the ratio against the peer; ``weights``; planning time; the ``.om`` load
  time of ``Model.load`` (best of ``--loads``, including every check and the SHA-256 of
  the weights).

Targets (issue 6): ours never above the file bound; below it on at least two models; a
ResNet-50 ``.om`` loads in under 0.2 s.

    python bench/memory.py [--models resnet50 bert_base] [--json out.json] [--streams 2]

Needs the ``torch`` extra only to export a model that is not in the cache yet.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe, facts  # bench/machine.py: the machine facts

from gerules.build import bind_dims, build_om
from gerules.ir.graph import Graph
from gerules.ir.verify import verify
from gerules.memory import analyze, plan_memory
from gerules.onnx_io import load_model
from gerules.runtime.model import Model

CACHE = Path(__file__).resolve().parent / ".cache"
DEFAULT = ("resnet50", "mobilenetv2", "bert_base", "gpt2_small")
MIB = float(1 << 20)


def model_path(name: str) -> Path:
    path = CACHE / f"{name}-opset17.onnx"
    if path.exists():
        return path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import models as bench_models  # noqa: PLC0415  (torch only when exporting)

    return bench_models.export(name, 17)  # type: ignore[no-any-return]


def plain_greedy_by_size(graph: Graph, align: int = 64) -> int:
    """The peer: file order, no aliases, largest tensor first into the best-fitting gap."""
    live = analyze(graph, range(len(graph.nodes)), align)
    blocks = sorted(((t.size, t.first, t.last) for t in live.tensors if t.size),
                    key=lambda b: -b[0])
    placed: list[tuple[int, int, int, int]] = []  # offset, size, first, last
    for size, first, last in blocks:
        busy = sorted((o, o + s) for o, s, f, la in placed if f <= last and first <= la)
        best, best_gap, top = -1, -1, 0
        for lo, hi in busy:
            if lo - top >= size and (best < 0 or lo - top < best_gap):
                best, best_gap = top, lo - top
            top = max(top, hi)
        placed.append((top if best < 0 else best, size, first, last))
    return max((o + s for o, s, _, _ in placed), default=0)


def measure(name: str, streams: int, loads: int, folder: Path) -> dict[str, Any]:
    graph = load_model(model_path(name))
    dims = {d: 1 for v in graph.inputs for d in v.shape or () if isinstance(d, str)}
    static = verify(bind_dims(graph, dims))
    start = time.perf_counter()
    plan = plan_memory(static, streams=streams)
    plan_s = time.perf_counter() - start
    f = plan.figures
    assert f is not None
    path = build_om(graph, folder / f"{name}.om", dims=[dims], streams=streams).path
    load_s = min(_load_time(path) for _ in range(loads))
    greedy = plain_greedy_by_size(static)
    return {"model": name, "nodes": len(graph.nodes), "no_reuse": f.no_reuse,
            "file_bound": f.file_order_bound, "greedy": greedy, "ours": f.arena,
            "ours_bound": f.lower_bound, "ratio": f.arena / greedy, "weights": f.weights,
            "inplace": f.inplace, "views": f.views, "strategy": f.strategy, "order": f.order,
            "streams": streams, "plan_s": plan_s, "om_bytes": path.stat().st_size,
            "load_s": load_s}


def _load_time(path: Path) -> float:
    start = time.perf_counter()
    Model.load(path).close()
    return time.perf_counter() - start


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'model':<12}{'nodes':>6}{'no reuse':>10}{'file bound':>11}{'greedy':>9}"
            f"{'ours':>9}{'bound':>9}{'ours/greedy':>12}{'weights':>9}{'plan s':>8}"
            f"{'load s':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['model']:<12}{r['nodes']:>6}{r['no_reuse'] / MIB:>10.1f}"
            f"{r['file_bound'] / MIB:>11.2f}{r['greedy'] / MIB:>9.2f}{r['ours'] / MIB:>9.2f}"
            f"{r['ours_bound'] / MIB:>9.2f}{r['ratio']:>12.3f}{r['weights'] / MIB:>9.1f}"
            f"{r['plan_s']:>8.2f}{r['load_s']:>8.3f}")
    lines.append("(MiB; batch 1; 'bound' = most bytes alive at once in our order with in-place "
                 "and views)")
    return "\n".join(lines)


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    above = [r["model"] for r in rows if r["ours"] > r["file_bound"]]
    below = [r["model"] for r in rows if r["ours"] < r["file_bound"]]
    out = [f"ours above the file bound on: {', '.join(above) or 'none'}",
           f"ours below the file bound on: {', '.join(below) or 'none'} ({len(below)} model(s))"]
    for r in rows:
        if r["model"] == "resnet50":
            ok = "under" if r["load_s"] < 0.2 else "OVER"
            out.append(f"ResNet-50 .om load: {r['load_s']:.3f} s ({ok} 0.2 s)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT))
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--loads", type=int, default=3, help="load timings, best one kept")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    machine = facts()
    print(describe(machine))
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(name, args.streams, args.loads, Path(tmp)) for name in args.models]
    print(table(rows))
    for line in verdicts(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "verdicts": verdicts(rows),
                                         "machine": machine}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
