"""Decorators -> a rule's numerical contract (what the verifier holds the rule to).

``@exact``: both sides are equal in exact arithmetic; the verifier allows only the rounding
of the dtype (float reassociation, folded constants). ``@approx(rtol=.., atol=..)``: the right
side approximates the left (tanh GELU for erf GELU) within the stated tolerances. A rule
without a decorator is ``@exact``. Overflow is part of the value: where the left side
overflows its dtype the right side must too, unless the contract says
``overflow = "avoided"`` (``@exact(overflow = "avoided")``: a fused op that keeps float32
statistics stays finite where the float16 subgraph it replaces overflows).

Invariants:
- ``check_decorators`` reports every decorator mistake; ``contract_of`` assumes a rule that
  passed it (it never raises for a checked rule).
- ``Contract.tags`` renders the contract as the rule text would (``@approx(rtol=0.001)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.registry import suggest
from . import ast
from .errors import RuleError

DECORATORS = {"exact": ("overflow",), "approx": ("rtol", "atol", "overflow"), "replace": (),
              "example": ()}
MARKERS = ("replace", "example")  # decorators that are not part of the numerical contract
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-8
OVERFLOW = ("kept", "avoided")  # the right side overflows where the left does / may not


@dataclass(frozen=True, slots=True)
class Contract:
    exact: bool = True
    rtol: float = 0.0
    atol: float = 0.0
    overflow: str = "kept"  # one of OVERFLOW

    @property
    def tags(self) -> str:
        more = [] if self.overflow == "kept" else [f'overflow="{self.overflow}"']
        if self.exact:
            return f"@exact({', '.join(more)})" if more else "@exact"
        return f"@approx({', '.join([f'rtol={self.rtol:g}', f'atol={self.atol:g}', *more])})"


def _number(expr: ast.Expr) -> float | None:
    if isinstance(expr, ast.Num):
        return float(expr.value)
    return None


def check_decorators(rule: ast.Rule) -> list[RuleError]:
    errors: list[RuleError] = []
    seen: set[str] = set()
    for d in rule.decorators:
        if d.name not in DECORATORS:
            msg = f"unknown decorator @{d.name}{suggest(d.name, DECORATORS)}"
            errors.append(RuleError(msg + "; rules take @exact or @approx(rtol=.., atol=..), "
                                          "@replace and @example(x: f32[2, 3])", d.span))
            continue
        if d.name == "example":
            continue  # its arguments are the rule's variables: checked with the rule
        if d.name in seen and d.name in MARKERS:
            errors.append(RuleError(f"@{d.name} is given twice", d.span))
        elif d.name not in MARKERS and seen & {"exact", "approx"}:
            errors.append(RuleError("a rule has one numerical contract: @exact or @approx",
                                    d.span))
        seen.add(d.name)
        errors.extend(_check_args(d))
    return errors


def _check_args(d: ast.Decorator) -> list[RuleError]:
    allowed = DECORATORS[d.name]
    if d.typed:
        return [RuleError(f"@{d.name} takes no typed arguments", d.typed[0].span)]
    if d.args:
        return [RuleError(f"@{d.name} takes keyword arguments only "
                          f"({', '.join(f'{a}=' for a in allowed) or 'none'})", d.args[0].span)]
    errors = []
    for k in d.kwargs:
        if k.name not in allowed:
            hint = suggest(k.name, allowed)
            errors.append(RuleError(f"@{d.name} has no argument '{k.name}'{hint}", k.span))
        elif k.name == "overflow":
            if not isinstance(k.value, ast.Str) or k.value.value not in OVERFLOW:
                errors.append(RuleError(f"overflow is one of {', '.join(map(repr, OVERFLOW))}"
                                        f" (\"avoided\": the right side may stay finite "
                                        "where the left side overflows)", k.value.span))
        elif (v := _number(k.value)) is None or v < 0:
            errors.append(RuleError(f"{k.name} must be a number >= 0", k.value.span))
    if d.name == "approx" and not {k.name for k in d.kwargs} & {"rtol", "atol"}:
        errors.append(RuleError("@approx needs a tolerance: @approx(rtol=1e-3) or atol=..",
                                d.span))
    return errors


def replaces(rule: ast.Rule) -> bool:
    """True when the rule is marked ``@replace``: it replaces a rule of the same name."""
    return any(d.name == "replace" for d in rule.decorators)


def contract_of(rule: ast.Rule) -> Contract:
    """The rule's contract (``@exact`` when it has no decorator)."""
    for d in rule.decorators:
        overflow = next((k.value.value for k in d.kwargs if k.name == "overflow"
                         and isinstance(k.value, ast.Str)), "kept")
        if d.name == "exact":
            return Contract(overflow=overflow)
        if d.name == "approx":
            values = {k.name: _number(k.value) or 0.0 for k in d.kwargs
                      if k.name != "overflow"}
            return Contract(False, values.get("rtol", DEFAULT_RTOL if "atol" not in values
                                              else 0.0), values.get("atol", 0.0), overflow)
    return Contract()
