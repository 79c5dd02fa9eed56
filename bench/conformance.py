"""ONNX node conformance over every case the installed onnx generates, and kernels against
onnxruntime on fresh instances of those cases.

    python bench/conformance.py [--json PATH] [--seeds N]

Prints passed / failed / excluded / unsupported over all node cases with each unsupported op
and its case count (``gerules.testing.conformance``), then the onnxruntime oracle sweep
(``gerules.testing.oracle``: every template of every op at ``--seeds`` seeds) by status.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from machine import describe, facts  # bench/machine.py: the machine facts

from gerules.testing import conformance, oracle


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--seeds", type=int, default=1)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    s = conformance.summary()
    conf_s = time.perf_counter() - start
    c = s.counts
    print(f"node cases: {s.total}; passed {c['passed']} ({s.pass_rate:.1%}), failed "
          f"{c['failed']}, excluded {c['excluded']}, unsupported {c['unsupported']} "
          f"({conf_s:.1f} s)")
    print("unsupported ops: " + ", ".join(f"{op} ({n})" for op, n in s.missing.items()))
    start = time.perf_counter()
    verdicts = []
    for ts in oracle.templates().values():
        verdicts += [oracle.check(t, seed) for t in ts for seed in range(args.seeds)]
    sweep = oracle.summary(verdicts)
    print(f"onnxruntime oracle: {len(verdicts)} instances of {len(oracle.templates())} ops: "
          + ", ".join(f"{k} {v}" for k, v in sweep["counts"].items())
          + f" ({time.perf_counter() - start:.1f} s)")
    for status in ("differ", "ours failed"):
        if status in sweep["ops"]:
            print(f"  {status}: {', '.join(sweep['ops'][status])}")
    machine = facts()
    print(describe(machine))
    if args.json:
        args.json.write_text(json.dumps({"conformance": {"total": s.total, **c,
                                                         "missing": s.missing},
                                         "oracle": sweep, "machine": machine},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
