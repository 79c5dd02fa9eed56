"""Rule schedulers: which rules the runner searches each iteration, and when it may stop.

Invariants:
- The runner asks ``allow(iteration, rule)`` before searching a rule, ``accept(iteration, rule,
  matches)`` after (False discards the matches: the rule is banned now), and ``can_stop`` when an
  iteration changed nothing (False: keep going, e.g. because rules are still banned).
- ``BackoffScheduler`` is egg's: a rule whose match count exceeds ``match_limit << times_banned``
  is banned for ``ban_length << times_banned`` iterations (both double per ban); when the e-graph
  stops changing while rules are banned, the bans are shortened so that the soonest one ends now.
- Schedulers hold only their own counters; any object with these three methods plugs in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Scheduler(Protocol):
    def allow(self, iteration: int, rule: str) -> bool: ...

    def accept(self, iteration: int, rule: str, matches: int) -> bool: ...

    def can_stop(self, iteration: int) -> bool: ...


class SimpleScheduler:
    """Every rule, every iteration, every match."""

    def allow(self, iteration: int, rule: str) -> bool:
        return True

    def accept(self, iteration: int, rule: str, matches: int) -> bool:
        return True

    def can_stop(self, iteration: int) -> bool:
        return True


@dataclass(slots=True)
class RuleBackoff:
    """One rule's backoff state."""

    match_limit: int
    ban_length: int
    times_banned: int = 0
    banned_until: int = 0


class BackoffScheduler:
    """egg's ``BackoffScheduler`` (defaults: 1,000 matches, 5 iterations)."""

    def __init__(self, match_limit: int = 1_000, ban_length: int = 5) -> None:
        self.match_limit = match_limit
        self.ban_length = ban_length
        self.rules: dict[str, RuleBackoff] = {}

    def configure(self, rule: str, *, match_limit: int | None = None,
                  ban_length: int | None = None) -> None:
        """Per-rule limits (e.g. a huge ``match_limit`` to never ban a cheap rule)."""
        state = self._state(rule)
        state.match_limit = state.match_limit if match_limit is None else match_limit
        state.ban_length = state.ban_length if ban_length is None else ban_length

    def _state(self, rule: str) -> RuleBackoff:
        state = self.rules.get(rule)
        if state is None:
            state = self.rules[rule] = RuleBackoff(self.match_limit, self.ban_length)
        return state

    def allow(self, iteration: int, rule: str) -> bool:
        return iteration >= self._state(rule).banned_until

    def accept(self, iteration: int, rule: str, matches: int) -> bool:
        state = self._state(rule)
        if matches <= state.match_limit << state.times_banned:
            return True
        state.banned_until = iteration + (state.ban_length << state.times_banned)
        state.times_banned += 1
        return False

    def can_stop(self, iteration: int) -> bool:
        banned = [s for s in self.rules.values() if s.banned_until > iteration]
        if not banned:
            return True
        delta = min(s.banned_until for s in banned) - iteration
        for state in banned:
            state.banned_until -= delta
        return False
