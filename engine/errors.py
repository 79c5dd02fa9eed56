"""The engine's error types.

Invariants:
- The engine imports nothing from ``gerules``, so these are not ``GeError``s: the optimizer and
  the rule compiler catch ``EngineError`` and re-raise it with a place (rule file, node) as one of
  the project's own error types.
- ``str(error)`` is one line that names what went wrong (the rule, the classes, both data).
- ``AnalysisConflict`` is raised *by analysis code* (an IR-supplied ``join``); the e-graph turns
  it into ``UnsoundRewrite`` naming the union's reason (the rule that caused it).
"""

from __future__ import annotations

from typing import Any


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class PatternError(EngineError):
    """A pattern or applier that cannot be compiled (clashing names, unbound variables)."""


class AnalysisConflict(EngineError):
    """Two analysis data cannot be joined (e.g. two different shapes); raised by ``join``."""


class UnsoundRewrite(EngineError):
    """A union joined classes whose analysis data conflict: the rule named is unsound."""

    def __init__(self, rule: str, analysis: str, left: Any, right: Any, detail: str = "") -> None:
        self.rule = rule
        self.analysis = analysis
        self.left = left
        self.right = right
        name = rule or "<no reason given>"
        text = f"rule '{name}' is unsound: it makes two classes equal whose {analysis} differ: "
        text += f"{left!r} vs {right!r}"
        super().__init__(f"{text} ({detail})" if detail else text)


class InvariantError(EngineError):
    """``EGraph.check_invariants`` found a broken invariant (an engine bug, not bad input)."""


class ExtractionError(EngineError):
    """No finite-cost acyclic term exists for a requested root."""
