"""What a run did: stop reason, per-iteration figures, per-rule counts, provenance.

Invariants:
- ``Report`` is plain data (no e-graph references): counts, seconds, class ids and e-nodes.
- Per rule: ``matches`` counts matches searched and kept (not discarded by a ban) minus the
  ``misses`` (refusals that are part of matching, ``Reject.miss``: a pattern literal that is not
  the one asked for), ``applied`` those whose application changed the e-graph, ``rejected`` maps
  each condition's reason to how many matches it refused ("matched but not applied: <reason>").
  A match found again in a later iteration counts again in ``matches``; ``roots`` holds the
  class ids the real matches were rooted at (canonicalise them to count distinct places).
- ``applications`` holds one ``Application`` per match that changed the e-graph (when provenance
  is on): the rule, the iteration, the matched root, the classes and e-nodes the pattern bound,
  and the ids of the e-nodes the application added (``egraph.id_node(i)`` gives each).
- ``to_dict`` is JSON-serialisable; ``summary`` is a short human text (the CLI prints it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .enode import ENode


class StopReason(Enum):
    SATURATED = "saturated"
    ITERATION_LIMIT = "iteration limit"
    NODE_LIMIT = "node limit"
    TIME_LIMIT = "time limit"
    SCHEDULE_DONE = "schedule done"


@dataclass(frozen=True, slots=True)
class Limits:
    """egg's defaults: 30 iterations, 10,000 e-nodes, 5 seconds."""

    iterations: int = 30
    nodes: int = 10_000
    seconds: float = 5.0


@dataclass(slots=True)
class RuleStats:
    name: str
    searches: int = 0
    matches: int = 0
    applied: int = 0
    bans: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    misses: Counter[str] = field(default_factory=Counter)
    roots: set[int] = field(default_factory=set)  # root class of every real match, as found
    search_seconds: float = 0.0
    apply_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"searches": self.searches, "matches": self.matches, "applied": self.applied,
                "bans": self.bans, "rejected": dict(self.rejected), "misses": dict(self.misses),
                "search_seconds": self.search_seconds, "apply_seconds": self.apply_seconds}


@dataclass(frozen=True, slots=True)
class Iteration:
    index: int
    ruleset: str
    nodes: int
    classes: int
    matches: dict[str, int]
    applied: dict[str, int]
    banned: tuple[str, ...]
    search_seconds: float
    apply_seconds: float
    rebuild_seconds: float
    changed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "ruleset": self.ruleset, "nodes": self.nodes,
                "classes": self.classes, "matches": self.matches, "applied": self.applied,
                "banned": list(self.banned), "search_seconds": self.search_seconds,
                "apply_seconds": self.apply_seconds, "rebuild_seconds": self.rebuild_seconds,
                "changed": self.changed}


@dataclass(frozen=True, slots=True)
class Application:
    """One productive rule application (provenance)."""

    rule: str
    iteration: int
    root: int
    classes: tuple[tuple[str, int], ...]
    nodes: tuple[tuple[str, ENode], ...]
    added: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "iteration": self.iteration, "root": self.root,
                "classes": dict(self.classes), "nodes": {k: str(n) for k, n in self.nodes},
                "added": list(self.added)}


@dataclass(slots=True)
class Report:
    stop_reason: StopReason
    iterations: list[Iteration]
    rules: dict[str, RuleStats]
    applications: list[Application]
    seconds: float
    nodes: int
    classes: int

    def rejected(self) -> dict[str, Counter[str]]:
        """Rule -> reason -> count, for rules that matched but were (sometimes) not applied."""
        return {name: stats.rejected for name, stats in self.rules.items() if stats.rejected}

    def to_dict(self) -> dict[str, Any]:
        return {"stop_reason": self.stop_reason.value, "seconds": self.seconds,
                "nodes": self.nodes, "classes": self.classes,
                "iterations": [it.to_dict() for it in self.iterations],
                "rules": {name: stats.to_dict() for name, stats in self.rules.items()},
                "applications": [app.to_dict() for app in self.applications]}

    def summary(self) -> str:
        lines = [f"stopped: {self.stop_reason.value} after {len(self.iterations)} iterations, "
                 f"{self.seconds:.3f} s, {self.nodes} e-nodes in {self.classes} classes"]
        for name, stats in self.rules.items():
            lines.append(f"  {name}: {stats.matches} matches, {stats.applied} applied"
                         + (f", banned {stats.bans}x" if stats.bans else ""))
            for reason, count in stats.rejected.most_common():
                lines.append(f"    matched but not applied ({count}x): {reason}")
        return "\n".join(lines)
