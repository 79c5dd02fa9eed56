"""``ge-rewrite inspect NAME.om``: print a .om file as JSON (like atc ``--mode=1``).

Invariants: the file passes every loader check first (a bad file is a one-line error, exit 1);
stdout gets one JSON object with the header, the section table, MODEL_DEF and REPORT, and
nothing else, so it pipes into ``jq``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..om.describe import describe
from ..om.reader import OmFile
from . import options


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("inspect", help="print a .om offline model as JSON",
                       description="Check a .om file and print its header, sections, model "
                                   "definition and report as JSON (atc --mode=1).")
    p.add_argument("model", type=Path, help="compiled model (.om)")
    p.add_argument("--compact", action="store_true", help="one line instead of indented JSON")
    options.add_budget_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with OmFile(args.model, budgets=options.budgets(args)) as om:
        doc = describe(om)
    print(json.dumps(doc, indent=None if args.compact else 1, ensure_ascii=False))
    return 0
