"""Our e-graph engine against egglog on the same workloads, end to end, in one run.

For each workload (``bench/engine_workloads.py``: ResNet-50, BERT-base encoder, arithmetic,
a 10-term associative-commutative sum) both engines build the term DAG, run the same rules
(to saturation, or the same number of iterations) and extract the best term for the same
per-op costs (ours: greedy DAG-aware; egglog: its default extractor). We print e-nodes,
iterations and seconds per phase for each, and ours / egglog for the total (wall and CPU).
Each workload runs ``--repeat`` times per engine (fewer when one run is slow); the fastest run
counts. ``--json PATH`` writes every figure.

    python bench/engine.py [--workloads resnet50,bert,math,ac10] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_workloads import LEAF_COST, OPS, WORKLOADS, Rule, Workload, topological
from machine import describe, facts  # bench/machine.py: the machine facts

from gerules.engine import (
    BackoffScheduler,
    EGraph,
    ENode,
    Guard,
    Limits,
    Rewrite,
    Runner,
    SimpleScheduler,
    extract,
    parse_pattern,
    rewrite,
)
from gerules.engine.pattern import AttrVar, PatternNode, POp, Var

Figures = dict[str, Any]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


# ------------------------------------------------------------------- ours
def _our_rule(rule: Rule) -> Rewrite:
    if rule.inverse is None:
        return rewrite(rule.name, rule.lhs, rule.rhs)
    p, q = rule.inverse
    guard = Guard(f"{p} + {q} == 0", lambda eg, root, s: s[p] + s[q] == 0)
    return rewrite(rule.name, rule.lhs, rule.rhs, conditions=[guard])


def _our_cost(egraph: EGraph, class_id: int, node: ENode) -> float:
    spec = OPS.get(node.op)
    return float(spec[2] if spec else LEAF_COST)


def _our_build(work: Workload) -> tuple[EGraph, list[int]]:
    eg = EGraph()
    ids: dict[int, int] = {}
    for term in topological(work.roots):
        ids[id(term)] = eg.add(ENode(term.op, term.attrs, tuple(ids[id(k)] for k in term.kids)))
    return eg, [ids[id(r)] for r in work.roots]


def run_ours(work: Workload) -> Figures:
    (eg, roots), build, build_cpu = _timed(lambda: _our_build(work))
    rules = [_our_rule(r) for r in work.rules]
    scheduler = SimpleScheduler() if work.simple_scheduler else BackoffScheduler()
    limits = Limits(iterations=work.iterations or 1_000, nodes=work.node_limit, seconds=600)
    report, run, run_cpu = _timed(lambda: Runner(eg, limits=limits, scheduler=scheduler,
                                                 provenance=False).run(rules))
    best, ext, ext_cpu = _timed(lambda: extract(eg, roots, _our_cost))
    return {"nodes": eg.node_count, "classes": eg.class_count,
            "iterations": len(report.iterations), "stop": report.stop_reason.value,
            "build_s": build, "saturate_s": run, "extract_s": ext, "total_s": build + run + ext,
            "cpu_s": build_cpu + run_cpu + ext_cpu, "dag_cost": best.cost}


# ----------------------------------------------------------------- egglog
_EGGLOG: dict[str, Any] = {}


def _egglog() -> dict[str, Any]:
    """egglog's names plus ``T``, an expression sort with one constructor per op in ``OPS``."""
    if _EGGLOG:
        return _EGGLOG
    import egglog

    lines = ["from __future__ import annotations", "class T(Expr):",
             f"    @method(cost={LEAF_COST})", "    @classmethod",
             "    def Leaf(cls, name: StringLike) -> T: ...",
             f"    @method(cost={LEAF_COST})", "    @classmethod",
             "    def Num(cls, v: i64Like) -> T: ..."]
    for op, (arity, attrs, cost) in OPS.items():
        params = ", ".join([f"c{i}: T" for i in range(arity)] + [f"{a}: i64Like" for a in attrs])
        lines += [f"    @method(cost={cost})", "    @classmethod",
                  f"    def {op}(cls, {params}) -> T: ..."]
    namespace = {name: getattr(egglog, name) for name in dir(egglog) if not name.startswith("_")}
    exec("\n".join(lines), namespace)  # noqa: S102 - generated from the OPS table above
    _EGGLOG.update(namespace)
    return _EGGLOG


def _eg_expr(op: str, kids: list[Any], attrs: tuple[tuple[str, Any], ...]) -> Any:
    return getattr(_egglog()["T"], op)(*kids, *(value for _, value in attrs))


def _eg_pattern(node: PatternNode, variables: dict[str, Any]) -> Any:
    names = _egglog()
    if isinstance(node, Var):
        return variables.setdefault(node.name, names["var"](node.name, names["T"]))
    assert isinstance(node, POp)
    attrs = tuple((k, variables.setdefault(v.name, names["var"](v.name, names["i64"]))
                   if isinstance(v, AttrVar) else v) for k, v in node.attrs)
    return _eg_expr(node.op, [_eg_pattern(kid, variables) for kid in node.children], attrs)


def _eg_rule(rule: Rule) -> Any:
    names, variables = _egglog(), {}
    lhs = _eg_pattern(parse_pattern(rule.lhs), variables)
    rhs = _eg_pattern(parse_pattern(rule.rhs), variables)
    if rule.inverse is None:
        return names["rewrite"](lhs).to(rhs)
    p, q = (variables[n] for n in rule.inverse)
    return names["rewrite"](lhs).to(rhs, names["eq"](p + q).to(names["i64"](0)))


def _eg_build(eg: Any, work: Workload) -> list[Any]:
    """Let-bind shared terms and roots (so DAGs stay DAGs), inline the rest."""
    order = topological(work.roots)
    users = Counter(id(kid) for term in order for kid in term.kids)
    roots = {id(r) for r in work.roots}
    refs: dict[int, Any] = {}
    for i, term in enumerate(order):
        expr = _eg_expr(term.op, [refs[id(k)] for k in term.kids], term.attrs)
        shared = users[id(term)] > 1 or id(term) in roots
        refs[id(term)] = eg.let(f"v{i}", expr) if shared else expr
    return [refs[id(r)] for r in work.roots]


def run_egglog(work: Workload) -> Figures:
    names = _egglog()
    eg = names["EGraph"]()
    roots, build, build_cpu = _timed(lambda: _eg_build(eg, work))
    rules = names["ruleset"](*[_eg_rule(r) for r in work.rules])
    schedule = rules * work.iterations if work.iterations else rules.saturate()
    report, run, run_cpu = _timed(lambda: eg.run(schedule))
    costs, ext, ext_cpu = _timed(lambda: [eg.extract(r, include_cost=True)[1] for r in roots])
    nodes = sum(size for _, size in eg.all_function_sizes())
    return {"nodes": nodes, "iterations": len(report.iterations), "build_s": build,
            "saturate_s": run, "extract_s": ext, "total_s": build + run + ext,
            "cpu_s": build_cpu + run_cpu + ext_cpu, "tree_cost": sum(costs)}


# ------------------------------------------------------------------ driver
def best_of(run: Callable[[Workload], Figures], work: Workload, repeat: int) -> Figures:
    """The fastest of up to ``repeat`` runs (stop repeating once 20 s were spent)."""
    best: Figures | None = None
    spent = 0.0
    for _ in range(repeat):
        figures = run(work)
        spent += figures["total_s"]
        if best is None or figures["total_s"] < best["total_s"]:
            best = figures
        if spent > 20:
            break
    assert best is not None
    return best


ROW = "{:<9} {:<7} {:>8} {:>6} {:>9} {:>10} {:>9} {:>9} {:>9}"


def _row(name: str, engine: str, f: Figures) -> str:
    return ROW.format(name, engine, f["nodes"], f["iterations"], f"{f['build_s']:.3f}",
                      f"{f['saturate_s']:.3f}", f"{f['extract_s']:.3f}", f"{f['total_s']:.3f}",
                      f"{f['cpu_s']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        egglog_version = metadata.version("egglog")
    except metadata.PackageNotFoundError:
        egglog_version = None
        print("egglog is not installed (pip install 'gerules[bench]'): ours only")
    machine = facts()
    print(describe(machine))
    print(ROW.format("workload", "engine", "e-nodes", "iters", "build s", "saturate s",
                     "extract s", "total s", "cpu s"))
    results: dict[str, Any] = {}
    for name in args.workloads.split(","):
        work = WORKLOADS[name]()
        ours = best_of(run_ours, work, args.repeat)
        print(_row(name, "ours", ours))
        entry: dict[str, Any] = {"ours": ours}
        if egglog_version:
            peer = best_of(run_egglog, work, args.repeat)
            print(_row(name, "egglog", peer))
            entry.update(egglog=peer, ratio_total=ours["total_s"] / peer["total_s"],
                         ratio_cpu=ours["cpu_s"] / peer["cpu_s"])
            print(f"{'':<9} ours / egglog: {entry['ratio_total']:.2f}x wall, "
                  f"{entry['ratio_cpu']:.2f}x cpu")
        results[name] = entry
    if args.json:
        meta = {"python": platform.python_version(), "arch": platform.machine(),
                "machine": machine, "egglog": egglog_version, "repeat": args.repeat}
        args.json.write_text(json.dumps({"meta": meta, "workloads": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
