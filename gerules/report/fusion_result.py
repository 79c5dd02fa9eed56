"""atc's ``fusion_result.json``: per graph, per fusion pass, how often it matched and took effect.

atc (GE's fusion engine) writes this file after every conversion and atc users' scripts read
it; ``ge-rewrite compile`` writes it next to the ``.om`` with atc's own field names::

    {"session_and_graph_id_0_0": {
        "graph_fusion": {"ConvBatchnormFusionPass": {"effect_times": "53", "match_times": "53"}},
        "ub_fusion": {"TbeConvReluFusionPass": {"effect_times": "33", "match_times": "33",
                                                "repository_hit_times": "0"}}}}

Invariants:
- A pass is one of atc's names where we implement the same fusion
  (``opt.switches.ATC_NAMES``; several of our rules add up under it, and one variant of a
  rule over an op class, such as ``fuse_conv_activation[Act=Relu]``, counts alone), else
  our rule name. ``match_times`` is the rule's
  real matches (a pattern literal that differs is no match), ``effect_times`` the applications
  the graph written still shows (``kept``); counts are strings, as atc writes them.
- UB fusion (atc's fusion of a kernel with the elementwise ops after it) holds the ``Tbe*``
  passes and our ``fuse_elementwise`` rules; everything else is graph fusion.
- Like atc, passes switched off, and passes that never matched, are left out; one graph per
  conversion, so one ``session_and_graph_id_0_0`` entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..opt.switches import ATC_NAMES

GRAPH = "session_and_graph_id_0_0"
UB_RULESETS = frozenset({"fuse_elementwise"})


def _atc_pass(rule: str, ruleset: str) -> str:
    base = rule.split("/")[0]
    for name, ours in ATC_NAMES.items():
        if base in ours or ruleset in ours:
            return name
    return base


def _variants(rules: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each rule's variants where atc names one of them, else the rule."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    named = {n for ours in ATC_NAMES.values() for n in ours}
    for rule, stats in rules.items():
        variants = stats.get("variants") or {}
        if any(v in named for v in variants):
            out += [(v, {**s, "ruleset": stats.get("ruleset", "")})
                    for v, s in variants.items()]
        else:
            out.append((rule, stats))
    return out


def fusion_result(rules: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The file's content from ``OptimizeReport.rules`` (see the module invariants)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for rule, stats in sorted(_variants(rules)):
        if not stats.get("matches"):
            continue
        name = _atc_pass(rule, str(stats.get("ruleset", "")))
        kind = ("ub_fusion" if name.startswith("Tbe") or stats.get("ruleset") in UB_RULESETS
                else "graph_fusion")
        total = counts.setdefault((kind, name), [0, 0])
        total[0] += int(stats["matches"])
        total[1] += int(stats.get("kept", 0))
    graph: dict[str, dict[str, dict[str, str]]] = {"graph_fusion": {}, "ub_fusion": {}}
    for (kind, name), (matched, effect) in sorted(counts.items()):
        entry = {"effect_times": str(effect), "match_times": str(matched)}
        if kind == "ub_fusion":
            entry["repository_hit_times"] = "0"
        graph[kind][name] = entry
    return {GRAPH: graph}
