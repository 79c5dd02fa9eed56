"""The one record of a conversion's figures, which every view reads.

``compile_model`` builds the record once, from the graphs it produced, and stores it in the
``.om``'s REPORT section under ``"figures"``; the terminal summary, the HTML report, atc's
``--mode=6`` and ``ge-rewrite inspect`` all read that record, so they cannot disagree.

Record (plain JSON data)::

    {"soc": str, "label": str,                      # the cost model and its "estimate" label
     "nodes":       {"source": n, "optimized": n, "final": n},
     "estimate_us": {"source": us, "optimized": us, "final": us},
     "ops":         {"source": {op: count}, "final": {op: count}},
     "by_op_us":    {"source": {op: us}, "final": {op: us}},
     "nodes_us":    [[node, op, us], ...],          # the final graph's most expensive nodes
     "memory":      {variant: MemoryFigures.to_json()},
     "precision":   {"mode", "check", "status", "note", "outputs": [...]},
     "pipeline":    {"method", "soc", "link", "balance", "transfer_bytes", "stages": [...],
                     "schedule": {...}, "stage_of": [...]},   # only for a pipelined model
     "layout":      {"tensors": {name: format}, "by_format": {"activations", "weights"},
                     "transdata": {"naive", "final", "implied"},
                     "padding_bytes": {"activations", "weights"}, "transfer_us"}}
                                                    # the final graph's data formats
                                                    # (cost.layout.layout_figures)

Invariants:
- ``source`` is the graph after input shapes were fixed (what the user's model computes),
  ``optimized`` after the rule library, ``final`` the graph written (after precision: Casts
  included). Every latency is an estimate of the same cost model on the same profile.
- ``precision.status`` is ``unchanged`` (nothing changed dtype), ``measured`` (``outputs``
  holds the measured errors) or ``not measured`` (``note`` says why).
- Importing this module is cheap: it reads dicts only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TOP_NODES = 20  # the most expensive nodes kept in the record


@dataclass(frozen=True, slots=True)
class Headline:
    """The figures every view shows first."""

    nodes_source: int
    nodes_final: int
    us_source: float
    us_optimized: float
    us_final: float
    label: str

    @property
    def speedup(self) -> float:
        return self.us_source / self.us_final if self.us_final > 0 else 0.0


def record(estimates: Mapping[str, Any], ops: Mapping[str, Mapping[str, int]],
           memory: Mapping[str, Mapping[str, Any]], precision: Mapping[str, Any],
           pipeline: Mapping[str, Any] | None = None,
           layout: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record from ``GraphEstimate``s of the three graphs (keys ``source``, ``optimized``,
    ``final``), the source and final op counts, memory figures per variant and precision."""
    final = estimates["final"]
    top = sorted(final.nodes, key=lambda kv: -kv[1].us)[:TOP_NODES]
    return {
        "soc": final.soc, "label": final.label,
        "nodes": {k: len(e.nodes) for k, e in estimates.items()},
        "estimate_us": {k: round(e.total_us, 3) for k, e in estimates.items()},
        "ops": {"source": dict(ops["source"]), "final": dict(ops["final"])},
        "by_op_us": {k: {op: round(us, 3) for op, us in estimates[k].by_op.items()}
                     for k in ("source", "final")},
        "nodes_us": [[name, est.op, round(est.us, 3), est.bound] for name, est in top],
        "memory": {k: dict(v) for k, v in memory.items()},
        "precision": dict(precision),
        **({"pipeline": dict(pipeline)} if pipeline is not None else {}),
        **({"layout": dict(layout)} if layout is not None else {}),
    }


def headline(figures: Mapping[str, Any]) -> Headline:
    nodes, us = figures.get("nodes", {}), figures.get("estimate_us", {})
    return Headline(int(nodes.get("source", 0)), int(nodes.get("final", 0)),
                    float(us.get("source", 0.0)), float(us.get("optimized", 0.0)),
                    float(us.get("final", 0.0)), str(figures.get("label", "")))


def layout_line(figures: Mapping[str, Any]) -> str | None:
    """One line on the data formats: TransData nodes before and after moving and cancelling
    them, the formats held, the padding bytes and the estimated transfer time (None when the
    record has no layout entry, or a tampered one)."""
    lay = figures.get("layout")
    if not isinstance(lay, Mapping):
        return None
    try:
        td, pad = lay["transdata"], lay["padding_bytes"]
        held = {**lay["by_format"]["activations"]}
        for fmt, n in lay["by_format"]["weights"].items():
            held[fmt] = held.get(fmt, 0) + n
        shown = ", ".join(f"{fmt} {n}" for fmt, n in sorted(held.items(), key=lambda kv: -kv[1])
                          if fmt not in ("ND", "NCHW"))
        implied = f" (+{int(td['implied'])} implied by plain cube ops)" if td["implied"] else ""
        return (f"layout: TransData {int(td['naive'])} (a pair around every cube op) -> "
                f"{int(td['final'])}{implied}; tensors in {shown or 'plain formats only'}; "
                f"padding {(int(pad['activations']) + int(pad['weights'])) / 2**20:.2f} MiB "
                f"({int(pad['weights']) / 2**20:.2f} in weights); format transfers "
                f"{float(lay['transfer_us']):.1f} us")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def of_report(report: Mapping[str, Any]) -> Mapping[str, Any]:
    """The record inside a conversion report (``{}`` for reports written before it existed)."""
    figures = report.get("figures")
    return figures if isinstance(figures, Mapping) else {}


def top_reasons(rules: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, int]]:
    """(rule, guard reason, count) of every guard that stopped a match, most frequent first
    (from ``OptimizeReport.rules``; pattern literals that differ are no match, not listed)."""
    rows = [(rule, reason, int(n)) for rule, stats in rules.items()
            for reason, n in stats.get("rejected", {}).items()]
    return sorted(rows, key=lambda r: (-r[2], r[0], r[1]))


CAST_WARN = 0.10  # Casts costing more than this fraction of the estimate get a warning


def cast_warning(figures: Mapping[str, Any], fraction: float = CAST_WARN) -> str | None:
    """A warning when the graph written spends more than ``fraction`` of its estimated time
    in Cast nodes (float16 gains eaten by conversions), else None."""
    us = float(figures.get("by_op_us", {}).get("final", {}).get("Cast", 0.0))
    total = float(figures.get("estimate_us", {}).get("final", 0.0))
    if total <= 0 or us <= fraction * total:
        return None
    count = int(figures.get("ops", {}).get("final", {}).get("Cast", 0))
    return (f"{count} Casts take {us:.1f} us, {100 * us / total:.0f}% of the estimate (over "
            f"{100 * fraction:.0f}%): the dtype changes eat part of the float16 gain; "
            "force_fp16, or a mixed-precision list that keeps neighbours together, needs fewer")


def pipeline_summary(pipe: Any) -> dict[str, Any] | None:
    """A pipelined model's stages and schedule estimate, without the per-event timeline
    (``None`` when there is none, or when a tampered report holds something else)."""
    if not pipeline_shaped(pipe):
        return None
    keys = ("nodes", "compute_us", "transfer_us", "us", "transfer_bytes", "weights_bytes",
            "arena_bytes", "activation_bytes")
    schedule = {k: v for k, v in pipe.get("schedule", {}).items() if k != "events"}
    return {"method": pipe.get("method"), "link": pipe.get("link"),
            "balance": pipe.get("balance"), "transfer_bytes": pipe.get("transfer_bytes"),
            "stages": [{"stage": s.get("stage"), **{k: s.get(k) for k in keys}}
                       for s in pipe.get("stages", [])],
            "schedule": schedule}


def pipeline_shaped(pipe: Any) -> bool:
    """The record's ``pipeline`` has the types these views read (the REPORT section is
    checked against its checksum, not against a schema)."""
    numbers = ("nodes", "compute_us", "transfer_us", "transfer_bytes", "weights_bytes")
    return (isinstance(pipe, dict) and isinstance(pipe.get("stages"), list)
            and isinstance(pipe.get("link", {}), dict)
            and isinstance(pipe.get("schedule", {}), dict)
            and isinstance(pipe.get("balance", 0), int | float)
            and all(isinstance(st, dict) and all(isinstance(st.get(k), int | float)
                                                 for k in numbers)
                    and isinstance(st.get("arena_bytes", 0), int)
                    for st in pipe["stages"]))
