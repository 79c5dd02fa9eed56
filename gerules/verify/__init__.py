"""Rule verification: every rule, on random instances of its left side, gives the same values
on both sides within its declared numerical contract.

- ``verify_rule(rule, settings) -> RuleResult`` and ``verify_library(rules, settings)`` for
  compiled rules (``gerules.dsl.load_compiled``); ``Settings(examples, attempts, runs, seed)``.
- ``RuleResult.status`` is ``verified``, ``counterexample`` (``detail`` holds the minimal graph,
  shapes, inputs and max error), ``no instance`` (the rule never fired on the instances tried:
  a failure) or ``error``.
- Modules: ``verifier`` (the loop, tolerances), ``report`` (text). The instances come from
  ``gerules.dsl.instances`` and each is tried through ``gerules.dsl.trial`` (the compiled rule
  through the engine), which the shape soundness check uses too.
"""

from __future__ import annotations

from .verifier import (
    COUNTEREXAMPLE,
    ERROR,
    NO_INSTANCE,
    VERIFIED,
    RuleResult,
    Settings,
    tolerance,
    verify_library,
    verify_rule,
)

__all__ = ["COUNTEREXAMPLE", "ERROR", "NO_INSTANCE", "VERIFIED", "RuleResult", "Settings",
           "tolerance", "verify_library", "verify_rule"]
