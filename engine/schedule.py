"""Schedules: named rulesets composed with ``Seq``, ``Repeat`` and ``Saturate``.

Semantics (what ``Runner.run`` does with each step; the runner's limits apply throughout):
- ``Ruleset(name, rules)`` as a step runs *one* iteration (search all, apply all, rebuild) of its
  rules. It is saturated when that iteration changed nothing and the scheduler may stop.
- ``Seq(a, b, ...)`` runs the steps in order; saturated when every step was.
- ``Repeat(n, a, b, ...)`` runs ``Seq(a, b, ...)`` up to ``n`` times, stopping early once a pass
  is saturated.
- ``Saturate(a, b, ..., max_iters=None)`` runs ``Seq(a, b, ...)`` until a pass is saturated (or
  ``max_iters`` passes ran, which leaves it unsaturated).

Invariants: steps are immutable; a rule name is unique within one schedule (the runner checks).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .rewrite import Rewrite


class Ruleset:
    """A named group of rewrites."""

    __slots__ = ("name", "rules")

    def __init__(self, name: str, rules: Iterable[Rewrite]) -> None:
        self.name = name
        self.rules: tuple[Rewrite, ...] = tuple(rules)

    def __repr__(self) -> str:
        return f"Ruleset({self.name!r}, {len(self.rules)} rules)"


class Seq:
    __slots__ = ("steps",)

    def __init__(self, *steps: Step) -> None:
        self.steps: tuple[Step, ...] = steps

    def __repr__(self) -> str:
        return f"Seq{self.steps!r}"


class Repeat:
    __slots__ = ("times", "body")

    def __init__(self, times: int, *steps: Step) -> None:
        if times < 0:
            raise ValueError(f"Repeat needs a count >= 0, got {times}")
        self.times = times
        self.body = Seq(*steps)

    def __repr__(self) -> str:
        return f"Repeat({self.times}, {self.body!r})"


class Saturate:
    __slots__ = ("body", "max_iters")

    def __init__(self, *steps: Step, max_iters: int | None = None) -> None:
        self.body = Seq(*steps)
        self.max_iters = max_iters

    def __repr__(self) -> str:
        return f"Saturate({self.body!r}, max_iters={self.max_iters})"


Step = Union[Ruleset, Seq, Repeat, Saturate]  # noqa: UP007 - a runtime alias used by isinstance


def rulesets(step: Step) -> Iterator[Ruleset]:
    """Every ruleset a schedule mentions, in order (repeats included)."""
    if isinstance(step, Ruleset):
        yield step
    elif isinstance(step, Seq):
        for sub in step.steps:
            yield from rulesets(sub)
    else:
        yield from rulesets(step.body)
