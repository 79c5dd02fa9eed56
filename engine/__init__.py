"""The e-graph engine (installed as ``gerules.engine``); imports nothing from ``gerules``.

egg's structure, one job per module: ``unionfind``, ``enode``, ``egraph`` (hashcons, classes,
op index, deferred rebuild), ``analysis`` (make/merge/modify plug-ins: shape, constant),
``pattern`` (the pattern language), ``machine`` (patterns compiled to search code),
``multipattern`` (several roots joined on shared classes),
``rewrite`` (searcher, conditions, applier), ``schedule`` and ``scheduler`` (rulesets,
Seq/Repeat/Saturate, backoff), ``runner`` and ``report`` (limits, stop reasons, per-rule counts,
provenance), ``extract`` and ``ilp`` (DAG-aware extraction), ``explain`` (proof forest),
``sexpr`` (a small text syntax for patterns and terms), ``pause`` (GC pausing),
``invariants`` (what ``EGraph.check_invariants`` verifies).

Type-check with ``mypy --strict``: ``cd /work/main && /root/venv/bin/mypy -p gerules.engine``
(the installed package maps ``gerules.engine`` to this folder; ``tests/engine/test_typing.py``
runs exactly that).
"""

from __future__ import annotations

from .analysis import Analysis, AnalysisSet, ConstantAnalysis, ShapeAnalysis
from .egraph import EClass, EGraph
from .enode import Attrs, ENode, enode, make_attrs
from .errors import (
    AnalysisConflict,
    EngineError,
    ExtractionError,
    InvariantError,
    PatternError,
    UnsoundRewrite,
)
from .explain import Explanation, Step
from .extract import CostFunction, Extraction, ast_size, extract
from .machine import Pattern
from .multipattern import MultiPattern
from .pattern import UNSET, WILDCARD, AttrVar, Layout, PatternNode, POp, Subst, Unset, Var, Wildcard
from .report import Application, Iteration, Limits, Report, RuleStats, StopReason
from .rewrite import Guard, Let, PatternApplier, Reject, Rewrite, birewrite, rewrite
from .runner import Runner
from .schedule import Repeat, Ruleset, Saturate, Seq
from .scheduler import BackoffScheduler, Scheduler, SimpleScheduler
from .sexpr import add_term, parse_pattern

__all__ = [
    "UNSET", "Unset", "WILDCARD", "Analysis", "AnalysisConflict", "AnalysisSet", "Application",
    "AttrVar", "Attrs", "BackoffScheduler", "ConstantAnalysis", "CostFunction", "EClass",
    "EGraph", "ENode", "EngineError", "Explanation", "Extraction", "ExtractionError", "Guard",
    "InvariantError", "Iteration", "Layout", "Let", "Limits", "MultiPattern", "POp", "Pattern",
    "PatternApplier", "PatternError", "PatternNode", "Reject", "Repeat", "Report", "Rewrite",
    "RuleStats", "Ruleset", "Runner", "Saturate", "Scheduler", "Seq", "ShapeAnalysis",
    "SimpleScheduler", "Step", "StopReason", "Subst", "UnsoundRewrite", "Var", "Wildcard",
    "add_term", "ast_size", "birewrite", "enode", "extract", "make_attrs", "parse_pattern",
    "rewrite",
]
