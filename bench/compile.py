"""Compile time of whole ``ge-rewrite compile`` processes against onnxsim and onnxruntime.

For each model (default: ResNet-50, BERT-base and GPT-2 from ``bench/models.py``, exported
once into ``bench/.cache``) ``--runs`` rounds (default 5), each round one whole process of
each tool in turn, so background load hits all of them alike:

- ours: ``ge-rewrite compile MODEL --output TMP`` with default options (the batch dim bound to
  1, as the warning says);
- onnxsim: ``onnxsim.simplify`` with the batch bound to 1, saved, in a fresh Python process;
- onnxruntime: its offline optimizer (``ORT_ENABLE_EXTENDED``, ``optimized_model_filepath``),
  in a fresh Python process.

Every process gets Python's bytecode cache (``machine.process_env``: as after an install,
whatever ``PYTHONDONTWRITEBYTECODE`` says here), filled by one unmeasured run of each tool.
Reported: the median wall time of each (and its CPU time, user + system, which a loaded
machine disturbs much less), the median of the per-round ratios ours / peer, the
peak resident memory of each process (``os.wait4``) against the model file's size, and one
more run of ours with ``--report`` whose phase times (``phases_s``: load, shapes, optimize,
precision, ...) break the time down; the rest is the wall time not inside a phase.
``--base REF`` adds the same command from an earlier tree (``git archive REF``, first on
``PYTHONPATH`` and run from its own directory, what it imports checked first) to the rounds:
what a change (such as the NPU data layout) costs in compile time and memory, paired against
the tree without it.
``--growth`` adds the series BERT 2/6/12/24 layers and ResNet-18/50/101 (median of
``--growth-runs``) with a least-squares line ``seconds = a + b * layers``.

Targets (issue 19), printed as PASS/FAIL lines: ResNet-50 <= 1.0 s, BERT-base <= 2.0 s,
GPT-2 <= 2.5 s; peak memory <= 1.5x the file for models over 100 MB. The machine facts
(load, CPU, BLAS) are printed and written with the figures.

    python bench/compile.py [--models resnet50 bert_base] [--runs 5] [--no-peers] [--base main]
                            [--growth] [--json out.json]

Needs the ``bench`` extra for the peers (a missing peer is reported as such) and the ``torch``
extra only to export a model that is not in the cache yet.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import Verdicts, describe, facts, process_env  # noqa: E402
from mutation import check_imports, scratch_copy  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"
DEFAULT = ("resnet50", "bert_base", "gpt2_small")
TARGET_S = {"resnet50": 1.0, "bert_base": 2.0, "gpt2_small": 2.5}
PEAK_RATIO, PEAK_OVER = 1.5, 100 * 10**6  # peak memory / file size, for files over 100 MB
GROWTH = {"bert": {"bert_L2": 2, "bert_L6": 6, "bert_base": 12, "bert_L24": 24},
          "resnet": {"resnet18": 18, "resnet50": 50, "resnet101": 101}}

ONNXSIM = """
import sys, onnx
from onnxsim import simplify
model = onnx.load(sys.argv[1])
shapes = {i.name: [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
          for i in model.graph.input}
onnx.save(simplify(model, overwrite_input_shapes=shapes)[0], sys.argv[2])
"""
ORT_OFFLINE = """
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = sys.argv[2]
so.intra_op_num_threads = 1
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"""


def model_path(name: str) -> Path:
    """The cached export of ``name``; a missing one is exported in a child process.

    Not in this process: Linux carries a process's peak RSS across fork and exec, so a bench
    process grown by a torch export would report that peak for every compile it starts."""
    path = CACHE / f"{name}-opset17.onnx"
    if not path.exists():
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import models; "
                "models.export(sys.argv[2], 17)")
        subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), name],
                       check=True)
    return path


def ours_command(model: Path, out: Path, *extra: str) -> list[str]:
    exe = shutil.which("ge-rewrite", path=str(Path(sys.executable).parent))
    head = [exe] if exe else [sys.executable, "-m", "gerules.cli.main"]
    return [*head, "compile", str(model), "--output", str(out), *extra]


def peers() -> dict[str, str]:
    found = {}
    for name, module, code in (("onnxsim", "onnxsim", ONNXSIM),
                               ("onnxruntime", "onnxruntime", ORT_OFFLINE)):
        # Found, not imported: Linux carries this process's peak RSS into every child it
        # starts (see model_path), and importing onnxsim here made each compile's peak 300 MiB.
        if importlib.util.find_spec(module) is None:
            print(f"note: {name} is not installed (pip install -e '.[bench]'); not measured")
            continue
        found[name] = code
    return found


ENV: dict[str, str] = {}  # the children's environment (set in main)


def base_command(repo: Path, model: Path, out: Path) -> list[str]:
    """``ge-rewrite compile`` of the tree unpacked at ``repo`` (``PYTHONPATH`` set by
    ``run_process`` for a command that starts with ``BASE_MARK``)."""
    return [BASE_MARK, str(repo), sys.executable, "-m", "gerules.cli.main", "compile",
            str(model), "--output", str(out)]


BASE_MARK = "--with-pythonpath"


def run_process(argv: list[str]) -> tuple[float, int, float]:
    """Wall seconds, peak resident bytes and CPU seconds (user + system, all threads) of one
    process (which must succeed). On a loaded machine the CPU time moves much less than the
    wall time, so both are reported."""
    env = dict(ENV or os.environ)
    cwd = None
    if argv[0] == BASE_MARK:  # run from the earlier tree: ``python -m`` puts the working
        cwd = env["PYTHONPATH"] = argv[1]  # directory first on the path, so from the bench's
        argv = argv[2:]  # (the checkout) it would import the current tree
        env["PYTHONPYCACHEPREFIX"] = env.get("PYTHONPYCACHEPREFIX", "") + "-base"
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=cwd)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def measure(name: str, runs: int, peer_code: dict[str, str], tmp: Path,
            base: Path | None = None) -> dict[str, Any]:
    model = model_path(name)
    tools: dict[str, list[str]] = {"ours": ours_command(model, tmp / f"{name}")}
    if base is not None:
        tools["base"] = base_command(base, model, tmp / f"{name}-base")
    for peer, code in peer_code.items():
        tools[peer] = [sys.executable, "-c", code, str(model), str(tmp / f"{name}.{peer}.onnx")]
    times: dict[str, list[float]] = {t: [] for t in tools}
    cpu: dict[str, list[float]] = {t: [] for t in tools}
    peaks: dict[str, int] = {t: 0 for t in tools}
    for argv in tools.values():  # fills the bytecode cache and the page cache; not measured
        run_process(argv)
    for _ in range(runs):
        for tool, argv in tools.items():
            seconds, peak, cpu_s = run_process(argv)
            times[tool].append(seconds)
            cpu[tool].append(cpu_s)
            peaks[tool] = max(peaks[tool], peak)
    size = model.stat().st_size
    row: dict[str, Any] = {"file_bytes": size, "runs": runs}
    for tool in tools:
        row[tool] = {"median_s": round(statistics.median(times[tool]), 3),
                     "times_s": [round(t, 3) for t in times[tool]],
                     "cpu_median_s": round(statistics.median(cpu[tool]), 3),
                     "peak_bytes": peaks[tool], "peak_over_file": round(peaks[tool] / size, 2)}
        if tool != "ours":
            row[tool]["ours_over_peer"] = round(statistics.median(
                a / b for a, b in zip(times["ours"], times[tool], strict=True)), 3)
    row["phases_s"] = breakdown(model, tmp / f"{name}-phases")
    return row


def breakdown(model: Path, out: Path) -> dict[str, float]:
    """The compile's own phase times (``--report``) and the rest of the process's time."""
    report = out.with_suffix(".json")
    seconds, _, _ = run_process(ours_command(model, out, "--report", str(report)))
    phases = json.loads(report.read_text())["phases_s"]
    phases["rest (interpreter, summary, report)"] = seconds - sum(phases.values())
    phases["total"] = seconds
    return {k: round(v, 3) for k, v in phases.items()}


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``seconds = a + b * layers``."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def growth(runs: int, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for family, members in GROWTH.items():
        points = []
        for name, layers in members.items():
            model = model_path(name)
            run_process(ours_command(model, tmp / name))  # caches; not measured
            secs = [run_process(ours_command(model, tmp / name))[0] for _ in range(runs)]
            points.append((layers, statistics.median(secs)))
        a, b = fit(points)
        out[family] = {"points": [{"layers": x, "median_s": round(y, 3)} for x, y in points],
                       "fixed_s": round(a, 3), "per_layer_s": round(b, 4)}
    return out


def print_row(name: str, row: dict[str, Any]) -> None:
    ours = row["ours"]
    line = (f"{name:11s} ours {ours['median_s']:6.2f} s (cpu {ours['cpu_median_s']:.2f} s)  peak "
            f"{ours['peak_bytes'] / 2**20:5.0f} MiB ({ours['peak_over_file']:.2f}x file)")
    for peer in ("base", "onnxsim", "onnxruntime"):
        if peer in row:
            line += (f" | {peer} {row[peer]['median_s']:6.2f} s (cpu "
                     f"{row[peer]['cpu_median_s']:.2f} s), ours/{peer} "
                     f"{row[peer]['ours_over_peer']:.2f}x")
            if peer == "base":
                line += f" peak {row[peer]['peak_over_file']:.2f}x file"
    print(line)
    phases = {k: v for k, v in row["phases_s"].items() if k != "total"}
    print("    phases (s): " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT))
    ap.add_argument("--runs", type=int, default=5, help="rounds per model (median)")
    ap.add_argument("--no-peers", action="store_true", help="time ours only")
    ap.add_argument("--base", metavar="REF", help="also time the compile of this earlier tree "
                    "(a git ref, e.g. main) in the same rounds")
    ap.add_argument("--growth", action="store_true", help="the BERT and ResNet depth series")
    ap.add_argument("--growth-runs", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    before = facts()
    print(describe(before))
    peer_code = {} if args.no_peers else peers()
    verdicts = Verdicts()
    report: dict[str, Any] = {"machine_before": before, "models": {}}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        ENV.update(process_env(str(tmp / "pycache")))
        base = None
        if args.base:
            (tmp / "base").mkdir()
            base = scratch_copy(tmp / "base", args.base)
            check_imports(base)  # the base runs import that tree, not this one
            report["base"] = args.base
        for name in args.models:
            row = measure(name, args.runs, peer_code, tmp, base)
            report["models"][name] = row
            print_row(name, row)
        if args.growth:
            report["growth"] = growth(args.growth_runs, tmp)
            for family, g in report["growth"].items():
                pts = ", ".join(f"{p['layers']}: {p['median_s']:.2f} s" for p in g["points"])
                print(f"growth {family}: {pts}; fit {g['fixed_s']:.2f} s + "
                      f"{g['per_layer_s']:.4f} s/layer")
    for name, row in report["models"].items():
        if name in TARGET_S:
            print(verdicts.check(f"compile {name} (whole process, median of {args.runs})",
                                 row["ours"]["median_s"], TARGET_S[name], " s"))
        if row["file_bytes"] > PEAK_OVER:
            print(verdicts.check(f"peak memory {name} / file size",
                                 row["ours"]["peak_over_file"], PEAK_RATIO, "x"))
    print(verdicts.summary())
    report["machine_after"] = after = facts()
    report["targets"] = verdicts.lines
    print(describe(after))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
