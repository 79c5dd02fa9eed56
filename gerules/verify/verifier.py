"""Verify compiled rules on random instances: both sides compute the same within the contract.

For each rewrite of a rule (two for ``<=>``), up to ``attempts`` random instances of its left
side are built (``instances``), small ones first; the compiled rule is applied to each through
the engine (``apply``); where it fires, both sides run with the reference executor on
``runs`` random inputs and are compared (``testing.compare``) within the tolerance of the
rule's contract. The search stops at ``examples`` instances where the rule fired, or at the
first counterexample.

Tolerances (``tolerance``): ``@exact`` allows float rounding only: ``rtol`` of 1e-2 / 1e-4 /
1e-9 for float16 / float32 / float64 and the same fraction of the output's largest magnitude
as ``atol``. That is about 1,000 ulps of float32 (2^-23 = 1.2e-7): enough for the
reassociations exact rules perform (folding a BatchNorm's scale into the weights of a
convolution that sums hundreds of products, a GELU subgraph computed as one op), and orders of
magnitude below what a wrong constant, a dropped epsilon or swapped operands cause on the
instances drawn (epsilons up to 0.5, variances down to 0.01). ``@approx(rtol, atol)`` allows
the stated tolerance, never less than the rounding above. Integer and bool outputs must be
equal.

Invariants:
- A result is a function of the rule and ``seed``: reruns reproduce counterexamples.
- ``verified`` needs at least one instance where the rule fired and none that failed; a rule
  that never fires is ``no instance`` (a failure, listing the guards that rejected most); an
  exception while verifying is ``error``, never hidden.
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
from ..dsl.instances import NO_TYPING, Draw, Instance, Sampler, Search
from ..dsl.program import Direction
from ..dsl.trial import apply_rewrite
from ..engine import Rewrite
from ..errors import GeError
from ..ir import formats
from ..ir.graph import Graph
from ..ir.registry import Registry
from ..runtime.executor import Executor
from ..testing.equivalence import Mismatch, compare
from .report import counterexample_text, no_instance_text

log = logging.getLogger(__name__)

VERIFIED, COUNTEREXAMPLE, NO_INSTANCE, ERROR = ("verified", "counterexample", "no instance",
                                                "error")
MIN_EXAMPLES = 2  # instances per variant of a rule over an op class
EXACT_RTOL = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}
DTYPES = ("float32", "float32", "float32", "float16", "float64")
SHORT = {v: k for k, v in DTYPE_NAMES.items()}  # float32 -> f32
SHOWN_VALUES = 8  # constants shown by value in an @example template


@dataclass(frozen=True)
class Settings:
    examples: int = 10  # instances where the rule fired, per rewrite
    attempts: int = 0  # instances tried per rewrite (0: max(120, 25 * examples))
    runs: int = 2  # random inputs per instance
    seed: int = 0

    @property
    def budget(self) -> int:
        return self.attempts or max(120, 25 * self.examples)


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

    @property
    def ok(self) -> bool:
        return self.status == VERIFIED

    def line(self) -> str:
        head = f"{self.where}: rule {self.name} ({self.contract.tags}): {self.status}"
        if self.ok:
            return f"{head} on {self.examples} instance(s)"
        return head


def tolerance(contract: Contract, dtype: str, expected: np.ndarray) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing outputs of ``dtype`` (see the module docstring)."""
    base = EXACT_RTOL.get(dtype, 0.0)
    finite = np.abs(expected[np.isfinite(expected)]) if expected.dtype.kind == "f" else []
    scale = max(1.0, float(np.max(finite))) if len(finite) else 1.0
    if contract.exact:
        return base, base * scale
    return max(contract.rtol, base), max(contract.atol, base * scale)


def verify_rule(rule: CompiledRule, settings: Settings = Settings(),
                registry: Registry | None = None) -> RuleResult:
    """Verify every rewrite of ``rule``; the first failing direction decides. A rule over an
    op class or with opset variants shares ``settings.examples`` among its variants (at
    least ``MIN_EXAMPLES`` each), so one rule costs about as much as one rule."""
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


def _verify_direction(rule: CompiledRule, rewrite: Rewrite, direction: Direction,
                      settings: Settings, registry: Registry, result: RuleResult) -> None:
    search = Search(direction, registry, rule.resolved.examples)
    fired = 0
    hinted = sorted(search.hints.dtypes)
    blockers: Counter[str] = Counter()
    last: Instance | None = None
    for attempt in range(settings.budget):
        found = search.find(partial(_draw, settings.seed, attempt, hinted), attempt)
        result.attempts += 1
        instance = last = found.instance or last
        if found.instance is None:
            result.rejections[NO_TYPING] += 1
            blockers[NO_TYPING] += 1
            continue
        assert instance is not None
        applied = apply_rewrite(instance.graph, rewrite, registry)
        if applied.error:
            return _fail(result, instance.graph, None, applied.error, None, {}, None)
        if not applied.fired:
            result.rejections[applied.reason] += 1
            blockers[found.blocker or applied.reason] += 1
            continue
        assert applied.graph is not None
        rng = np.random.default_rng([settings.seed, attempt, 1])
        if not _compare(rule, instance, applied.graph, rng, settings, result):
            return None
        fired += 1
        result.examples += 1
        if fired >= settings.examples:
            break
    if not fired:
        result.status = NO_INSTANCE
        result.detail = no_instance_text(settings.budget, blockers, _template(last, direction))
    return None


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


def _draw(seed: int, attempt: int, hinted: Sequence[str] = ()) -> Draw:
    """Attempt ``attempt``'s choices: small dims first; float32 mostly, float16 and float64
    too; a dtype the guards name (``dtype(x) == f16``) in three attempts out of four; every
    third attempt an ``edge`` draw (distinct dims, telling permutations and literals)."""
    rng = np.random.default_rng([seed, attempt])
    dtype = DTYPES[attempt % len(DTYPES)]
    if hinted and attempt % 4:
        dtype = hinted[attempt % len(hinted)]
    return Draw(rng, dtype, size=2 + (attempt // 8) % 4, edge=attempt % 3 == 2)


def _feeds(instance: Instance, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feeds = {}
    for v in instance.graph.inputs:
        shape = tuple(int(d) for d in v.shape or ())
        sampler: Sampler = instance.samplers.get(v.name)
        values = rng.standard_normal(shape) if sampler is None else rng.uniform(*sampler, shape)
        feeds[v.name] = formats.to_format(np.asarray(values).astype(v.dtype), v.type.format)
    return feeds


def logical(graph: Graph, name: str, value: np.ndarray) -> np.ndarray:
    """An output's elements: a tensor held in a blocked format read back through the
    TransData kernel (its padding is no value, so it is never compared)."""
    t = graph.type_of(name)
    if t is None or t.format == formats.ND or t.shape is None:
        return value
    return formats.transfer(value, t.format, formats.ND,
                            formats.bind(t.shape, t.dtype, t.format, value.shape))


def _compare(rule: CompiledRule, instance: Instance, rhs: Graph, rng: np.random.Generator,
             settings: Settings, result: RuleResult) -> bool:
    lhs = instance.graph
    for _ in range(settings.runs):
        feeds = _feeds(instance, rng)
        try:
            with np.errstate(all="ignore"):
                want = Executor(lhs).run(feeds)
        except GeError as e:
            result.rejections[f"the left side does not run: {e}"] += 1
            return True
        try:
            with np.errstate(all="ignore"):
                got = Executor(rhs).run(feeds)
        except GeError as e:
            _fail(result, lhs, rhs, f"the right side does not run: {e}", None, feeds, None)
            return False
        for name in lhs.output_names:
            expected = logical(lhs, name, np.asarray(want[name]))
            tol = tolerance(rule.contract, expected.dtype.name, expected)
            mismatch = compare(expected, logical(rhs, name, np.asarray(got[name])), *tol)
            if mismatch is not None:
                _fail(result, lhs, rhs, "the two sides differ", mismatch, feeds, tol)
                return False
    return True


def _fail(result: RuleResult, lhs: Graph, rhs: Graph | None, problem: str,
          mismatch: Mismatch | None, feeds: Mapping[str, np.ndarray],
          tol: tuple[float, float] | None) -> None:
    result.status = COUNTEREXAMPLE
    result.detail = counterexample_text(lhs, rhs, problem, mismatch, dict(feeds), tol)
