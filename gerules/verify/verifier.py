"""Verify compiled rules on random instances: both sides compute the same within the contract.

For each rewrite of a rule (two for ``<=>``) and each seed, up to ``attempts`` random
instances of its left side are built (``dsl.instances``), small ones first; the compiled rule
is applied to each through the engine (``dsl.trial``); where it fires, both sides run with
the reference executor on ``runs`` random inputs and are compared (``compare``) within the
rule's contract. The search stops at ``examples`` instances where the rule fired, or at the
first counterexample, which is shrunk (``shrink``) and written as a regression test
(``regression``).

Attempts cycle through ``SCHEDULE``: typical draws and the probes of ``dsl.instances``
(``shape``: distinct dims and telling permutations; ``layout``: tied dims and constants laid
along one axis; ``values``: zeros, range ends and magnitudes that overflow float16, in
constants and inputs alike; ``guards``: variables at and just past the edges of the guards),
each in float32, float16 or float64.

Invariants:
- A result is a function of the rule and the seeds: reruns reproduce counterexamples.
- ``verified`` needs at least one instance where the rule fired, both sides ran and some
  finite output was compared, and none that failed. An instance whose left side cannot run,
  or whose outputs are all infinite or NaN, is a failed attempt to instantiate, never a
  pass; a rule with none is ``no instance`` (a failure, listing why attempts failed).
- An exception while verifying is ``error``, never hidden.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ..dsl.builtins import DTYPE_NAMES
from ..dsl.compile import CompiledRule, CompiledRules
from ..dsl.contract import Contract
from ..dsl.instances import (
    GUARDS,
    LAYOUT,
    NO_TYPING,
    SHAPE,
    VALUES,
    Draw,
    Instance,
    Search,
    values,
)
from ..dsl.program import Direction
from ..dsl.trial import apply_rewrite
from ..engine import Rewrite
from ..ir import formats
from ..ir.composite import with_uses
from ..ir.graph import Graph
from ..ir.registry import Registry
from .compare import Comparison, Feeds, sides
from .regression import regression_test
from .report import counterexample_text, no_instance_text
from .shrink import Case, shrink

log = logging.getLogger(__name__)

VERIFIED, COUNTEREXAMPLE, NO_INSTANCE, ERROR = ("verified", "counterexample", "no instance",
                                                "error")
MIN_EXAMPLES = 2  # instances per variant of a rule over an op class
# (probe, float dtype, theme) per attempt, in turn: every probe in float32 and float16
# within ten attempts; the values probe three times: large magnitudes in float16 (where
# they overflow), zeros (zero epsilons, sums that cancel) in float16, both mixed.
SCHEDULE = (("", "float32", ""), (SHAPE, "float32", ""), (VALUES, "float16", "big"),
            (GUARDS, "float32", ""), (LAYOUT, "float32", ""), (VALUES, "float16", "zero"),
            (SHAPE, "float64", ""), (VALUES, "float32", ""), (GUARDS, "float16", ""),
            (LAYOUT, "float16", ""))
SHORT = {v: k for k, v in DTYPE_NAMES.items()}  # float32 -> f32
SHOWN_VALUES = 8  # constants shown by value in an @example template
VACUOUS = "every output compared was infinite or NaN"
CI_SEEDS = (0, 1, 2)  # the seeds the test suite verifies the shipped library with


@dataclass(frozen=True)
class Settings:
    examples: int = 10  # instances where the rule fired, per rewrite and seed
    attempts: int = 0  # instances tried per rewrite and seed (0: max(120, 25 * examples))
    runs: int = 2  # random inputs per instance
    seed: int | tuple[int, ...] = 0  # one seed, or a list of them (each a full search)
    shrink: bool = True  # shrink a counterexample and write its regression test

    @property
    def budget(self) -> int:
        return self.attempts or max(120, 25 * self.examples)

    @property
    def seeds(self) -> tuple[int, ...]:
        return (self.seed,) if isinstance(self.seed, int) else tuple(self.seed)


@dataclass
class RuleResult:
    """The verdict on one rule."""

    name: str
    where: str  # file:line
    contract: Contract
    status: str = VERIFIED
    examples: int = 0
    attempts: int = 0
    detail: str = ""  # the counterexample, the missing instance's reasons, or the error
    rejections: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    regression: str = ""  # a counterexample as a pytest module (``regression``)

    @property
    def ok(self) -> bool:
        return self.status == VERIFIED

    def line(self) -> str:
        head = f"{self.where}: rule {self.name} ({self.contract.tags}): {self.status}"
        if self.ok:
            return f"{head} on {self.examples} instance(s)"
        return head


def verify_rule(rule: CompiledRule, settings: Settings = Settings(),
                registry: Registry | None = None) -> RuleResult:
    """Verify every rewrite of ``rule`` with every seed; the first failure decides. A rule
    over an op class or with opset variants shares ``settings.examples`` among its variants
    (at least ``MIN_EXAMPLES`` each), so one rule costs about as much as one rule."""
    registry = registry or rule.registry
    start = time.perf_counter()
    result = RuleResult(rule.name, f"{rule.span.file}:{rule.span.line}", rule.contract)
    variants = len({d.name.split("/")[0] for d in rule.directions})
    each = dataclasses.replace(settings, examples=max(MIN_EXAMPLES,
                                                      -(-settings.examples // variants)))
    for rewrite, direction in zip(rule.rewrites, rule.directions, strict=True):
        try:
            _verify_direction(rule, rewrite, direction, each, registry, result)
        except Exception as e:  # noqa: BLE001 - a crash in the verifier is a reported failure
            log.debug("verifying %s failed", rule.name, exc_info=True)
            result.status, result.detail = ERROR, f"{type(e).__name__}: {e}"
        if not result.ok:
            if len(rule.rewrites) > 1:  # say which direction or variant failed
                result.detail = f"({_which(direction.name, rule.name)}) " + result.detail
            break
    result.seconds = time.perf_counter() - start
    return result


def _which(rewrite: str, rule: str) -> str:
    """``rule[F=Relu]/rev`` -> ``F=Relu, right to left``."""
    parts = [rewrite[len(rule):].split("/")[0].strip("[]")]
    if rewrite.endswith("/rev"):
        parts.append("right to left")
    return ", ".join(p for p in parts if p) or "left to right"


def verify_library(rules: CompiledRules | Sequence[CompiledRule],
                   settings: Settings = Settings(), registry: Registry | None = None
                   ) -> list[RuleResult]:
    items = rules.rules if isinstance(rules, CompiledRules) else rules
    return [verify_rule(r, settings, registry) for r in items]


# ----------------------------------------------------------------------------- the search


def _verify_direction(rule: CompiledRule, rewrite: Rewrite, direction: Direction,
                      settings: Settings, registry: Registry, result: RuleResult) -> None:
    search = Search(direction, registry, rule.resolved.examples)
    hinted = sorted(search.hints.dtypes)
    blockers: Counter[str] = Counter()
    last: Instance | None = None
    fired = 0
    for seed in settings.seeds:
        found_here = 0
        for attempt in range(settings.budget):
            draw = partial(_draw, seed, attempt, hinted)
            found = search.find(draw, attempt)
            result.attempts += 1
            instance = last = found.instance or last
            if found.instance is None:
                result.rejections[NO_TYPING] += 1
                blockers[NO_TYPING] += 1
                continue
            assert instance is not None
            applied = apply_rewrite(instance.graph, rewrite, registry)
            rng = np.random.default_rng([seed, attempt, 1])
            if applied.error:  # (inputs only to give the shrinker their shapes)
                _fail(result, rule, rewrite, registry, Case(instance.graph, _feeds(
                    instance, rng)), Comparison(applied.error), seed, settings.shrink, True)
                return
            if not applied.fired:
                result.rejections[applied.reason] += 1
                blockers[found.blocker or applied.reason] += 1
                continue
            assert applied.graph is not None
            failed, why = _runs(rule.contract, instance, applied.graph, rng, settings.runs,
                                draw())
            if failed is not None:
                _fail(result, rule, rewrite, registry, failed, why, seed, settings.shrink)
                return
            if why.skipped or not why.finite:
                reason = why.skipped or VACUOUS
                result.rejections[reason] += 1
                blockers[reason] += 1
                continue
            found_here += 1
            result.examples += 1
            if found_here >= settings.examples:
                break
        fired += found_here
    if not fired:
        result.status = NO_INSTANCE
        result.detail = no_instance_text(settings.budget * len(settings.seeds), blockers,
                                         _template(last, direction))


def _draw(seed: int, attempt: int, hinted: Sequence[str] = ()) -> Draw:
    """Attempt ``attempt``'s choices: small dims first; the probe and float type of
    ``SCHEDULE``, a dtype the guards name (``dtype(x) == f16``) in three attempts out of
    four instead when they do not name the scheduled one."""
    rng = np.random.default_rng([seed, attempt])
    probe, dtype, theme = SCHEDULE[attempt % len(SCHEDULE)]
    if hinted and attempt % 4 and dtype not in hinted:
        dtype = hinted[attempt % len(hinted)]
    return Draw(rng, dtype, size=2 + (attempt // 8) % 4, probe=probe, theme=theme)


def _runs(contract: Contract, instance: Instance, rhs: Graph, rng: np.random.Generator,
          runs: int, draw: Draw) -> tuple[Case | None, Comparison]:
    """``runs`` inputs (edge values in a ``values`` probe) through both sides: the failing
    case and its comparison, or ``None`` and what the runs showed (finite elements
    compared, or why none were)."""
    finite, skipped = False, ""
    for _ in range(runs):
        feeds = _feeds(instance, rng, draw.probe == VALUES, draw.theme)
        c = sides(contract, instance.graph, rhs, feeds)
        if c.problem:
            return Case(instance.graph, feeds), c
        skipped = skipped or c.skipped
        finite = finite or c.finite
    return None, Comparison(finite=finite, skipped="" if finite else skipped)


def _feeds(instance: Instance, rng: np.random.Generator, edge: bool = False,
           theme: str = "") -> dict[str, np.ndarray]:
    """Inputs drawn as the instance's were: N(0, 1), or the positive range a sampler names;
    ``edge`` mixes in zeros, range ends and large magnitudes (``instances.values``); an
    input held in a blocked format is fed in it (padding zeros)."""
    feeds = {}
    for v in instance.graph.inputs:
        shape = tuple(int(d) for d in v.shape or ())
        lo, hi = instance.samplers.get(v.name) or (None, None)
        drawn = values(rng, shape, v.dtype, lo, hi, edge=edge, theme=theme)
        feeds[v.name] = formats.to_format(drawn, v.type.format)  # a blocked input: physical
    return feeds


# ----------------------------------------------------------------------------- failures


def _fail(result: RuleResult, rule: CompiledRule, rewrite: Rewrite, registry: Registry,
          case: Case, why: Comparison, seed: int, shrinking: bool = True,
          typing: bool = False) -> None:
    """Record a counterexample: shrunk (``Settings.shrink``), shown, written as a test.
    ``typing``: the right side is not a graph of the left side's type (no input needed)."""
    kept = 0
    if shrinking:
        case, kept = shrink(case, partial(_still_fails, rule.contract, rewrite, registry,
                                          typing), registry, values=not typing)
    rhs, why = _again(rule.contract, rewrite, registry, case, why, typing)
    result.status = COUNTEREXAMPLE
    result.detail = counterexample_text(case.graph, rhs, why.problem, why.mismatch,
                                        dict(case.feeds), why.tolerance, why.note)
    if kept:
        result.detail += f"\n  (shrunk in {kept} step(s); seed {seed})"
    result.regression = regression_test(rule, rewrite.name, case.graph, case.feeds,
                                        f"seed {seed}")


def _still_fails(contract: Contract, rewrite: Rewrite, registry: Registry, typing: bool,
                 case: Case) -> bool:
    """``case`` fails as the original did: the right side is not a graph of the left
    side's type (``typing``), or the sides differ or the right one does not run."""
    applied = apply_rewrite(case.graph, rewrite, registry)
    if typing:
        return bool(applied.error)
    if not applied.fired or applied.graph is None:
        return False
    return bool(sides(contract, case.graph, applied.graph, case.feeds).problem)


def _again(contract: Contract, rewrite: Rewrite, registry: Registry, case: Case,
           why: Comparison, typing: bool) -> tuple[Graph | None, Comparison]:
    """The right side and the comparison of the (shrunk) case."""
    applied = apply_rewrite(case.graph, rewrite, registry)
    if applied.error or applied.graph is None:
        return None, Comparison(applied.error or why.problem)
    if typing:
        return applied.graph, why
    again = sides(contract, case.graph, applied.graph, case.feeds)
    return applied.graph, again if again.problem else why


def check_instance(rule: CompiledRule, graph: Graph, feeds: Feeds | Sequence[Feeds],
                   rewrite: str | None = None) -> RuleResult:
    """Both sides of ``rule`` on one instance: ``graph`` is its left side (its outputs the
    pattern's roots, in order), ``feeds`` one input or several. ``counterexample`` when the
    sides differ, ``verified`` when the rule fired and they agree, ``no instance`` when the
    rule does not fire on it (the reason in ``detail``). What a regression test asserts."""
    name = rewrite or rule.rewrites[0].name
    (compiled,) = [r for r in rule.rewrites if r.name == name]
    bodies = [s.body for n in graph.nodes if n.domain and (s := rule.registry.get(
        n.op, n.domain, graph.opset.get(n.domain, 1))) is not None and s.body is not None]
    if bodies and not graph.functions:
        graph = graph.replace(functions=with_uses(bodies))
    result = RuleResult(rule.name, f"{rule.span.file}:{rule.span.line}", rule.contract)
    applied = apply_rewrite(graph, compiled, rule.registry)
    if applied.error:
        result.status = COUNTEREXAMPLE
        result.detail = counterexample_text(graph, None, applied.error, None, {}, None)
        return result
    if not applied.fired or applied.graph is None:
        result.status, result.detail = NO_INSTANCE, applied.reason
        return result
    for one in ([feeds] if isinstance(feeds, Mapping) else list(feeds)):
        c = sides(rule.contract, graph, applied.graph, one)
        if c.problem:
            result.status = COUNTEREXAMPLE
            result.detail = counterexample_text(graph, applied.graph, c.problem, c.mismatch,
                                                dict(one), c.tolerance, c.note)
            return result
    result.examples = 1
    return result


# ----------------------------------------------------------------------------- templates


def _template(instance: Instance | None, direction: Direction) -> str:
    """``@example(...)`` with the variables' types and values in ``instance``: a template
    for the author to edit into values that pass."""
    if instance is None:
        return ""
    leaves = set(direction.names.tensors) - {b for b, _ in direction.names.nodes}
    items = []
    for name, o in instance.tensors.items():
        if name not in leaves or o.type is None or o.value is None:
            continue
        if o.const and o.value.size <= SHOWN_VALUES:
            items.append(f"{name} = {_literal(o.value)}")
        else:
            dims = ", ".join(str(d) for d in o.type.shape or ())
            items.append(f"{name}: {SHORT.get(o.type.dtype, o.type.dtype)}[{dims}]")
    items += [f"{k} = {_literal(v)}" for k, v in instance.attrs.items()
              if k in direction.names.attrs and not isinstance(v, str)]
    return f"@example({', '.join(items)})" if items else ""


def _literal(value: object) -> str:
    array = np.asarray(value)
    return str(array.tolist()).replace("'", "") if array.ndim else str(array.item())


