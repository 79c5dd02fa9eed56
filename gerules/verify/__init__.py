"""Rule verification: every rule, on random instances of its left side, gives the same values
on both sides within its declared numerical contract.

- ``verify_rule(rule, settings) -> RuleResult`` and ``verify_library(rules, settings)`` for
  compiled rules (``gerules.dsl.load_compiled``); ``Settings(examples, attempts, runs, seed,
  shrink)``, ``seed`` one seed or a tuple of them (``CI_SEEDS``: the test suite's).
- ``RuleResult.status`` is ``verified``, ``counterexample`` (``detail`` holds the shrunk
  graph, inputs and max error; ``regression`` a pytest module that replays it), ``no
  instance`` (the rule never fired on the instances tried: a failure) or ``error``.
- ``check_instance(rule, graph, feeds)``: both sides on one given instance (what a
  regression test asserts).
- Modules: ``verifier`` (the loop, the probe schedule), ``compare`` (running both sides,
  tolerances, overflow), ``shrink`` (smaller failing cases), ``regression`` (the test
  text), ``report`` (text). The instances come from ``gerules.dsl.instances`` and each is
  tried through ``gerules.dsl.trial`` (the compiled rule through the engine), which the shape
  soundness check uses too.
"""

from __future__ import annotations

from .compare import tolerance
from .verifier import (
    CI_SEEDS,
    COUNTEREXAMPLE,
    ERROR,
    NO_INSTANCE,
    VERIFIED,
    RuleResult,
    Settings,
    check_instance,
    verify_library,
    verify_rule,
)

__all__ = ["CI_SEEDS", "COUNTEREXAMPLE", "ERROR", "NO_INSTANCE", "VERIFIED", "RuleResult",
           "Settings", "check_instance", "tolerance", "verify_library", "verify_rule"]
