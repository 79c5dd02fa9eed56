"""Parse, check and compile a `.ger` rules folder; time each stage against the 0.5 s budget.

Stages (each run on fresh parses; the best of ``--repeat`` runs is the figure, as ``timeit``
does, because other processes on a shared machine only ever add time; the median is shown
beside it): parse (Lark LALR + AST), check (names, ops, arity, attributes, scoping: the
resolved program), compile (engine rewrites), soundness (instances of each left side run
through the compiled rewrite, types compared). The one-time process cost (imports, grammar
tables, op registry) is reported apart. The peer is egglog's Rust front end parsing and
type-checking a program with as many rewrites of the same size (ops per rule), in the same
run. Last, per file, the rules written once that stand for several (op classes, opset
variants).

    python bench/rules.py [PATH] [--repeat 5] [--json out.json]

PATH defaults to the shipped ``rules/`` folder, or ``tests/dsl/good`` while that is empty.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 0.5


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def startup() -> float:
    """Imports, the grammar's LALR tables and the op registry: paid once per process."""
    def load() -> None:
        from gerules.dsl import compile_library  # noqa: F401
        from gerules.dsl.parser import lark_parser
        from gerules.ir.registry import default_registry

        lark_parser()
        default_registry()

    return timed(load)[0]


def default_path() -> Path:
    shipped = ROOT / "rules"
    if any(shipped.rglob("*.ger")):
        return shipped
    return ROOT / "tests" / "dsl" / "good"


def one_run(path: Path) -> dict[str, float]:
    from gerules.dsl import build_library, compile_library, parse_library
    from gerules.dsl.check import resolve_library
    from gerules.dsl.errors import raise_errors
    from gerules.dsl.loader import _parse

    _parse.cache_clear()  # parse cold, as a new process does
    t_parse, lib = timed(lambda: parse_library([path]))
    raise_errors(list(lib.errors))
    t_check, (program, errors) = timed(lambda: resolve_library(lib))
    raise_errors(errors)
    t_compile, _ = timed(lambda: compile_library(program))
    t_full, built = timed(lambda: build_library(lib, soundness=True))
    raise_errors(built.errors)
    return {"parse": t_parse, "check": t_check,
            "soundness": max(0.0, t_full - t_check - t_compile), "compile": t_compile,
            "rules": len(lib.rules), "files": len(lib.files), "ops_per_rule": ops_per_rule(lib)}


def _copies(n: int) -> str:
    return f"{n} cop{'y' if n == 1 else 'ies'}"


def written_once(path: Path) -> list[tuple[str, int, int]]:
    """Per file: the rules written, and the rules they stand for (one per op of an op class
    and per opset form: each would be a copy without op classes and opset variants)."""
    from gerules.dsl import build_library, parse_library

    built = build_library(parse_library([path]), soundness=False)
    per_file: dict[str, list[int]] = {}
    for rule in built.program.rules:
        counts = per_file.setdefault(rule.span.file, [0, 0])
        counts[0] += 1
        counts[1] += len({d.name.split("/")[0] for d in rule.directions})
    return [(f, w, v) for f, (w, v) in sorted(per_file.items())]


def ops_per_rule(lib: Any) -> float:
    from gerules.dsl import ast
    from gerules.dsl.walk import children

    def count(e: ast.Expr) -> int:
        return int(isinstance(e, ast.OpCall)) + sum(count(c) for c in children(e))

    rules = lib.rules
    return sum(count(r.lhs) + count(r.rhs) for r in rules) / max(len(rules), 1)


def egglog_program(rules: int, ops: float) -> str:
    """``rules`` rewrites with about ``ops`` operators each (left + right), with a guard."""
    depth = max(1, round(ops) - 1)
    lines = ["(datatype T (Leaf i64) (Relu T) (Add T T) (Mul T T) (Fused T T))"]
    for i in range(rules):
        lhs = "(Add a b0)"
        for k in range(1, depth):
            lhs = f"(Add {lhs} b{k})" if k % 2 else f"(Relu {lhs})"
        lines.append(f"(rewrite {lhs} (Fused a (Leaf {i})) :when ((= a a)) :ruleset r{i % 8})")
    rulesets = "\n".join(f"(ruleset r{k})" for k in range(8))
    return rulesets + "\n" + "\n".join(lines)


def egglog_seconds(rules: int, ops: float, repeat: int) -> float | None:
    try:
        from egglog import bindings
    except ImportError:
        return None
    text = egglog_program(rules, ops)

    def run() -> None:
        eg = bindings.EGraph()
        eg.run_program(*eg.parse_program(text))

    return min(timed(run)[0] for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    path = args.path or default_path()
    cold = startup()
    runs = [one_run(path) for _ in range(args.repeat)]
    stages = ("parse", "check", "soundness", "compile")
    median = {s: statistics.median(r[s] for r in runs) for s in stages}
    best = {s: min(r[s] for r in runs) for s in stages}
    totals = [r["parse"] + r["check"] + r["soundness"] for r in runs]
    total, total_median = min(totals), statistics.median(totals)
    n, ops = runs[0]["rules"], runs[0]["ops_per_rule"]
    peer = egglog_seconds(int(n), ops, args.repeat)
    print(f"rules: {path} ({runs[0]['files']:.0f} files, {n:.0f} rules, {ops:.1f} ops/rule)")
    from machine import describe, facts  # bench/machine.py: the machine facts

    machine = facts()
    print(describe(machine))
    print(f"startup (imports, grammar, registry; once per process): {cold * 1e3:7.1f} ms")
    for s in stages:
        print(f"{s:>10}: {best[s] * 1e3:7.1f} ms  ({best[s] * 1e3 / max(n, 1):.2f} ms/rule; "
              f"median {median[s] * 1e3:.1f} ms)")
    print(f"parse + check + soundness: {total * 1e3:.1f} ms (median {total_median * 1e3:.1f}) "
          f"= {total / BUDGET_S:.2f} x the {BUDGET_S * 1e3:.0f} ms budget")
    if peer is not None:
        print(f"egglog (Rust) parse + typecheck of {n:.0f} size-matched rewrites: "
              f"{peer * 1e3:.1f} ms; ours / egglog = {total / peer:.0f}x")
    once = written_once(path)
    print("rules written once instead of copied (op classes, opset variants):")
    for file, written, stands in once:
        if stands > written:
            print(f"  {file}: {written} rules written stand for {stands} "
                  f"({_copies(stands - written)} not written)")
    saved = sum(v - w for _, w, v in once)
    print(f"  library: {sum(w for _, w, _ in once)} rules written stand for "
          f"{sum(v for _, _, v in once)} ({_copies(saved)} not written)")
    if args.json:
        figures = {"path": str(path), "rules": n, "ops_per_rule": ops, "startup_s": cold,
                   **{f"{s}_s": best[s] for s in stages},
                   **{f"{s}_median_s": median[s] for s in stages}, "total_s": total,
                   "total_median_s": total_median, "budget_ratio": total / BUDGET_S,
                   "egglog_s": peer, "machine": machine,
                   "written_once": {f: {"written": w, "stands_for": v} for f, w, v in once}}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if total < BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
