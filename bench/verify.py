"""How long `ge-rewrite rules verify` takes on the shipped library, against an earlier tree.

    python bench/verify.py [--base REF] [--rounds 5] [--json PATH]

Runs the whole command (a fresh process, as a user runs it) in paired rounds: the working
tree's and ``REF``'s (default ``main``; unpacked with ``git archive`` into a scratch folder
and put first on ``PYTHONPATH``), alternating so both see the same load; the medians and
their ratio are the figures. Then, in this process, the working tree's verifier on the
library at the defaults and with CI's seeds (``gerules.verify.CI_SEEDS``): rules, instances
compared, attempts, seconds, and the slowest rules. Prints the machine facts (the machine is
shared: timings move with its load).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe, facts, process_env
from mutation import ROOT, scratch_copy

VERIFY = ("import sys; from gerules.cli.main import main; "
          "sys.exit(main(['rules', 'verify']))")


def timed_run(repo: Path, cache: str) -> tuple[float, str]:
    """Seconds of one ``rules verify`` process with ``repo`` first on the path, and its
    last line (``rules verified: K / N``)."""
    env = {**process_env(cache), "PYTHONPATH": str(repo)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", VERIFY], cwd=repo, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = proc.stdout.strip().splitlines()
    return seconds, lines[-1] if lines else proc.stderr.strip()[-200:]


def in_process() -> dict[str, object]:
    from gerules.dsl import load_compiled
    from gerules.verify import CI_SEEDS, Settings, verify_library

    rules = load_compiled()
    out: dict[str, object] = {}
    for label, settings in (("defaults", Settings()),
                            ("ci", Settings(examples=8, seed=CI_SEEDS))):
        start = time.perf_counter()
        results = verify_library(rules, settings)
        seconds = time.perf_counter() - start
        slow = sorted(results, key=lambda r: -r.seconds)[:5]
        out[label] = {"rules": len(results), "verified": sum(r.ok for r in results),
                      "instances": sum(r.examples for r in results),
                      "attempts": sum(r.attempts for r in results),
                      "seconds": round(seconds, 2),
                      "slowest": [(r.name, round(r.seconds, 2)) for r in slow]}
        print(f"{label}: {out[label]['verified']} / {len(results)} rules verified on "
              f"{out[label]['instances']} instances ({out[label]['attempts']} attempts) in "
              f"{seconds:.2f} s; slowest: "
              + ", ".join(f"{n} {s:.2f} s" for n, s in out[label]["slowest"]))  # type: ignore[attr-defined]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="the tree to compare with (a git ref)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    print(describe(facts()))
    times: dict[str, list[float]] = {"base": [], "this": []}
    last: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="gerules-verify-bench-") as tmp:
        base = scratch_copy(Path(tmp), args.base)
        for name, repo in (("base", base), ("this", ROOT)):  # warm the bytecode caches
            timed_run(repo, f"{tmp}/cache-{name}")
        for _ in range(args.rounds):
            for name, repo in (("base", base), ("this", ROOT)):
                seconds, last[name] = timed_run(repo, f"{tmp}/cache-{name}")
                times[name].append(seconds)
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, label in (("base", args.base), ("this", "working tree")):
        print(f"ge-rewrite rules verify ({label}): median {medians[name]:.2f} s over "
              f"{args.rounds} rounds ({', '.join(f'{t:.2f}' for t in times[name])}); "
              f"{last[name]}")
    ratio = medians["this"] / medians["base"]
    print(f"ratio working tree / {args.base}: {ratio:.2f}")
    inside = in_process()
    print(describe(facts()))
    if args.json:
        args.json.write_text(json.dumps({"base": args.base, "seconds": times,
                                         "medians": medians, "ratio": ratio, "last": last,
                                         "in_process": inside, "machine": facts()},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
