"""Shape and dtype soundness: do both sides of a rule give the same type?

The check looks for a witness with the verifier's own machinery: instances of each
direction's left side (``instances.Search``: a few fixed seeds, small dims first, author
examples first, guards that fail solved where they can be), the compiled
rewrite applied to each through the engine (``trial``: the optimizer's searcher, guards and
right-side builder), and the right side's type compared with the left side's.

Invariants:
- An error is reported only with a witness: an instance on which every guard held and the
  rule fired, yet the two sides' dtypes, ranks or known dims differ. The message names both
  types and the variables' types.
- Anything inconclusive (no instance built, a guard that rejects, the pattern not matching)
  is silently skipped: this check finds mistakes, the verifier (``gerules.verify``) proves
  rules numerically and reports a rule it cannot instantiate.
- The work per direction is bounded (``ATTEMPTS`` instances, stopping after ``ENOUGH`` that
  fired; the first ones are ``shape`` probes, the most telling) and deterministic (seeded
  draws), so checking a library stays fast and repeatable.
"""

from __future__ import annotations

import logging
from functools import partial

import numpy as np

from ..engine import Rewrite
from ..ir.graph import Graph
from ..ir.registry import Registry
from .errors import RuleError
from .instances import SHAPE, Draw, Search
from .program import ResolvedRule
from .trial import apply_rewrite

log = logging.getLogger(__name__)

ATTEMPTS = 10  # instances tried per direction
ENOUGH = 3  # instances that fired and agreed: stop looking
MIN_ATTEMPTS = 3  # instances tried per variant of a rule over an op class
SEED = 7


def check_soundness(rule: ResolvedRule, rewrites: tuple[Rewrite, ...], registry: Registry
                    ) -> list[RuleError]:
    """``[error]`` when a witness shows the sides differ in type, else ``[]``. A rule over an
    op class or with opset variants shares one rule's budget among its variants (at least
    ``MIN_ATTEMPTS`` each)."""
    variants = len({d.name.split("/")[0] for d in rule.directions})
    attempts = max(MIN_ATTEMPTS, -(-ATTEMPTS // variants))
    enough = max(1, -(-ENOUGH // variants))
    for direction, rewrite in zip(rule.directions, rewrites, strict=True):
        try:
            message = _witness(Search(direction, registry, rule.examples), rewrite, registry,
                               attempts, enough)
        except Exception as e:  # noqa: BLE001 - a best-effort check never fails a rule file
            log.warning("soundness check of rule '%s' stopped: %s: %s", rule.name,
                        type(e).__name__, e)
            return []
        if message:
            return [RuleError(f"rule is shape-unsound: {message}", rule.name_span)]
    return []


def _witness(search: Search, rewrite: Rewrite, registry: Registry, attempts: int,
             enough: int) -> str | None:
    direction = search.direction
    fired = 0
    for attempt in range(attempts):
        instance = search.find(partial(_draw, attempt), attempt, verified=False).instance
        if instance is None:
            continue
        applied = apply_rewrite(instance.graph, rewrite, registry, graphs=False)
        if applied.error:
            back = " (right to left)" if direction.name.endswith("/rev") else ""
            return f"{applied.error}{back} (when {_inputs(instance.graph)})"
        fired += applied.fired
        if fired >= enough:
            break
    return None


def _draw(attempt: int) -> Draw:
    return Draw(np.random.default_rng([SEED, attempt]), "float32", size=2 + attempt % 3,
                probe=SHAPE if attempt < 2 or attempt % 2 == 0 else "")


def _inputs(graph: Graph) -> str:
    """The named variables' types (inputs and constants), at most four."""
    typed = [(v.name, str(v.type)) for v in graph.inputs]
    typed += [(k, f"{a.dtype.name}[{','.join(str(d) for d in a.shape)}]")
              for k, a in graph.initializers.items()]
    shown = [f"{k}: {t}" for k, t in typed if not k.startswith("%")][:4]
    return ", ".join(shown) or "constants only"
