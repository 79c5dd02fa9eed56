"""Fuzzing throughput and outcomes: our loaders against onnx's own on the same mutants.

For ``--cases`` mutants of the shipped test models (bit flips, truncations, splices and
structure-aware protobuf mutations, as ``tests/fuzz`` makes them), each run once:

- ``ours``: ``gerules.testing.fuzz.onnx_target`` in a ``Sandbox`` (load with every check, run
  with the reference executor, compile to ``.om``, load and run that), 30 s and 2 GiB per case;
- ``onnx``: the peer, ``onnx.load_model_from_string`` then ``onnx.checker.check_model(
  full_check=True)`` (a checker, not a runtime: it does less work per case);

and prints cases per second for both and the ratio, and how many cases each accepted, refused
with its own error types, or crashed (any other exception; for onnx: anything but
``onnx.checker.ValidationError``, ``onnx.shape_inference.InferenceError`` and
``google.protobuf.message.DecodeError``). Then the same for ``.om`` mutants (MODEL_DEF mutated
as JSON and re-packed with valid checksums; no peer) and mutated rule files (the peer: Lark's
parser alone on the same text).

    python bench/fuzz.py [--cases 2000] [--seed 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from gerules.build import build_om
from gerules.onnx_io import load_model
from gerules.testing import fuzz, models
from gerules.testing.bad_models import good_model
from gerules.testing.graphgen import RngChooser
from gerules.testing.mutate import mutate_bytes, mutate_message, mutate_om, mutate_text
from gerules.testing.sandbox import Sandbox

ONNX_ERRORS = (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, DecodeError)
RULE_TOKENS = ["rule", "ruleset", "where", "let", "=>", "(", ")", "{", "}", ",", "as",
               "Conv", "MatMul", "x", "_", "1", "0.5", "@exact", "const(w)", "\n"]


def onnx_cases(n: int, seed: int) -> list[bytes]:
    seeds = [good_model(), models.cnn().model, models.residual_block().model,
             models.transformer_encoder(layers=1).model]
    raw = [m.SerializeToString() for m in seeds]
    out = []
    for k in range(n):
        c = RngChooser(seed * 1_000_003 + k)
        if k % 2:
            out.append(mutate_message(seeds[k % len(seeds)], c, 5).SerializeToString())
        else:
            out.append(mutate_bytes(raw[k % len(raw)], c, raw, 6))
    return out


def om_cases(n: int, seed: int) -> list[bytes]:
    with tempfile.TemporaryDirectory() as folder:
        graph = load_model(models.cnn().model.SerializeToString())
        path = build_om(graph, Path(folder) / "m.om", dims=[{"N": 1}]).path
        data = path.read_bytes()
    return [mutate_om(data, RngChooser(seed * 1_000_003 + k)) for k in range(n)]


def rule_cases(n: int, seed: int) -> list[str]:
    folder = Path(__file__).resolve().parents[1] / "rules"
    texts = [p.read_text().replace('include "ops.ger"', "")
             for p in sorted(folder.glob("*.ger")) if p.name != "pipeline.ger"]
    return [mutate_text(texts[k % len(texts)], RngChooser(seed * 1_000_003 + k), RULE_TOKENS)
            for k in range(n)]


def ours(target: Callable[[Any], object], cases: list[Any]) -> dict[str, Any]:
    kinds: Counter[str] = Counter()
    with Sandbox(target, timeout=30, memory=2 << 30) as box:
        start = time.perf_counter()
        for case in cases:
            kinds[box.run(case).kind] += 1
        seconds = time.perf_counter() - start
    return {"cases_per_s": len(cases) / seconds, "outcomes": dict(kinds)}


def peer(check: Callable[[Any], object], cases: list[Any],
         errors: tuple[type[BaseException], ...]) -> dict[str, Any]:
    kinds: Counter[str] = Counter()
    start = time.perf_counter()
    for case in cases:
        try:
            check(case)
            kinds["ok"] += 1
        except errors:
            kinds["error"] += 1
        except Exception:  # noqa: BLE001 - what we count
            kinds["crash"] += 1
    return {"cases_per_s": len(cases) / (time.perf_counter() - start), "outcomes": dict(kinds)}


def onnx_check(data: bytes) -> None:
    onnx.checker.check_model(onnx.load_model_from_string(data), full_check=True)


def lark_parse(text: str) -> None:
    from gerules.dsl.parser import parse_text

    parse_text(text, "fuzz.ger")


def row(name: str, mine: dict[str, Any], other: dict[str, Any] | None) -> str:
    ratio = f"{mine['cases_per_s'] / other['cases_per_s']:.2f}x" if other else "-"
    peer_rate = f"{other['cases_per_s']:9.0f}" if other else "        -"
    return (f"{name:<6}{mine['cases_per_s']:9.0f}{peer_rate}{ratio:>9}   ours {mine['outcomes']}"
            + (f"   peer {other['outcomes']}" if other else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # "symbolic dim set to 1" per mutant is noise here
    from gerules.dsl import RuleError

    results = {}
    onnx_in = onnx_cases(args.cases, args.seed)
    results["onnx"] = {"ours": ours(fuzz.onnx_target, onnx_in),
                       "peer": peer(onnx_check, onnx_in, ONNX_ERRORS)}
    results["om"] = {"ours": ours(fuzz.om_target, om_cases(args.cases, args.seed)),
                     "peer": None}
    rules_in = rule_cases(args.cases, args.seed)
    results["rules"] = {"ours": ours(fuzz.rules_target, rules_in),
                        "peer": peer(lark_parse, rules_in, (RuleError,))}
    print(f"{'input':<6}{'ours/s':>9}{'peer/s':>9}{'ratio':>9}   outcomes ({args.cases} cases)")
    for name, r in results.items():
        print(row(name, r["ours"], r["peer"]))
    if args.json:
        args.json.write_text(json.dumps({"cases": args.cases, "seed": args.seed,
                                         "results": results}, indent=1))


if __name__ == "__main__":
    main()
