"""How often the optimizer's property suite exercises fusions: the share of motif graphs
(``gerules.testing.random_motif_graph``) in which at least one fusion fires, per level.

    python bench/fusion_rate.py [--seeds N] [--json PATH]

Prints, for O1, O2 and O3, the fire rate over seeds 0..N-1 and the fused ops produced, with
the machine's load.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from machine import describe, facts  # bench/machine.py: the machine facts

from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.testing import random_motif_graph


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    graphs = [random_motif_graph(s) for s in range(args.seeds)]
    result = {}
    for level in ("O1", "O2", "O3"):
        start = time.perf_counter()
        fired, fused = 0, Counter[str]()
        for g in graphs:
            out, report = optimize(g, OptimizeOptions(opt_level=level))
            fired += bool(report.fusions)
            fused.update(n.qualified_op for n in out.nodes if n.domain == "ge")
        seconds = time.perf_counter() - start
        result[level] = {"fired": fired, "graphs": len(graphs), "fused_ops": dict(fused),
                         "seconds": round(seconds, 1)}
        print(f"{level}: fusions fired in {fired} / {len(graphs)} motif graphs "
              f"({fired / len(graphs):.0%}); fused ops {dict(fused.most_common())}; "
              f"{seconds:.1f} s")
    machine = facts()
    print(describe(machine))
    if args.json:
        args.json.write_text(json.dumps({**result, "machine": machine}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
