"""The runner: equality saturation by iterations of search-all, apply-all, rebuild.

Invariants:
- Each iteration searches every allowed rule on the rebuilt e-graph (read-only), then applies
  the kept matches rule by rule, then rebuilds; only the public e-graph API is used.
- Limits (``Limits``: iterations, e-nodes, seconds) are checked before each iteration, between
  rules, and every 1,024 applications; a hit stops the run after a rebuild, so the e-graph is
  always clean and extractable afterwards. ``Report.stop_reason`` says why the run ended.
- Incremental search: after a rule's matches were *all* applied at clock tick ``t``, its next
  search only visits roots within ``height - 1`` parent steps of a class changed after ``t``,
  and for a pure rule (no conditions, pattern applier) keeps only matches that use an e-node
  stamped after ``t`` (semi-naive). That is sound because a match depends only on the classes
  under its root (see ``pattern``), conditions only on those classes' nodes and data (which
  stamp the class when they change), and re-applying an old match changes nothing. Rules built
  with ``incremental=False`` are always searched everywhere.
- Saturated means: an iteration changed nothing and the scheduler agreed to stop.
- Errors raised by conditions, appliers or analyses (``UnsoundRewrite``) propagate unchanged,
  without a rebuild (the e-graph is then to be discarded).
- Python's cyclic garbage collector is paused during a run and restored afterwards.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .errors import EngineError
from .pattern import Match
from .pause import gc_paused
from .report import Application, Iteration, Limits, Report, RuleStats, StopReason
from .rewrite import Rewrite
from .schedule import Repeat, Ruleset, Saturate, Seq, Step, rulesets
from .scheduler import BackoffScheduler, Scheduler

if TYPE_CHECKING:
    from .egraph import EGraph

log = logging.getLogger(__name__)


_CHUNK = 1024  # matches applied between two time-limit checks


class _Stop(Exception):
    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class Runner:
    """Runs schedules (or a plain list of rewrites, saturated) on one e-graph."""

    def __init__(
        self,
        egraph: EGraph,
        *,
        limits: Limits | None = None,
        scheduler: Scheduler | None = None,
        provenance: bool = True,
    ) -> None:
        self.egraph = egraph
        self.limits = limits or Limits()
        self.scheduler: Scheduler = scheduler if scheduler is not None else BackoffScheduler()
        self.provenance = provenance
        self._searched: dict[str, int] = {}
        self._start = 0.0
        self._iterations: list[Iteration] = []
        self._stats: dict[str, RuleStats] = {}
        self._applications: list[Application] = []

    # -------------------------------------------------------------------- run
    def run(self, schedule: Step | Iterable[Rewrite]) -> Report:
        """Execute ``schedule``; a list of rewrites means ``Saturate(Ruleset("rules", list))``."""
        step = schedule if isinstance(schedule, Ruleset | Seq | Repeat | Saturate) else \
            Saturate(Ruleset("rules", schedule))
        self._check_names(step)
        self._start = time.perf_counter()
        self._iterations, self._stats, self._applications = [], {}, []
        self.egraph.rebuild()
        try:
            with gc_paused():
                saturated = self._exec(step)
            reason = StopReason.SATURATED if saturated else StopReason.SCHEDULE_DONE
        except _Stop as stop:
            reason = stop.reason
        log.info("run stopped: %s after %d iterations", reason.value, len(self._iterations))
        return Report(reason, self._iterations, self._stats, self._applications,
                      time.perf_counter() - self._start, self.egraph.node_count,
                      self.egraph.class_count)

    @staticmethod
    def _check_names(step: Step) -> None:
        seen: dict[str, Rewrite] = {}
        for ruleset in rulesets(step):
            for rule in ruleset.rules:
                if seen.setdefault(rule.name, rule) is not rule:
                    raise EngineError(f"two different rules are named '{rule.name}'")

    def _exec(self, step: Step) -> bool:
        if isinstance(step, Ruleset):
            return self._iterate(step)
        if isinstance(step, Seq):
            return all([self._exec(sub) for sub in step.steps])
        if isinstance(step, Repeat):
            return any(self._exec(step.body) for _ in range(step.times)) or step.times == 0
        passes = 0
        while not self._exec(step.body):
            passes += 1
            if step.max_iters is not None and passes >= step.max_iters:
                return False
        return True

    # ------------------------------------------------------------- iteration
    def _check_limits(self) -> None:
        if len(self._iterations) >= self.limits.iterations:
            raise _Stop(StopReason.ITERATION_LIMIT)
        if self.egraph.node_count > self.limits.nodes:
            raise _Stop(StopReason.NODE_LIMIT)
        self._check_time()

    def _check_time(self) -> None:
        if time.perf_counter() - self._start > self.limits.seconds:
            raise _Stop(StopReason.TIME_LIMIT)

    def _iterate(self, ruleset: Ruleset) -> bool:
        """One iteration of ``ruleset``; True when it changed nothing and may stop."""
        self._check_limits()
        egraph, index = self.egraph, len(self._iterations)
        version, seen = egraph.version, egraph.tick()
        start = time.perf_counter()
        found, banned = self._search_all(ruleset.rules, index, seen)
        searched = time.perf_counter()
        applied: dict[str, int] = {}
        try:
            self._apply_all(found, index, seen, applied)
        except _Stop:  # a limit: finish the iteration so the e-graph stays usable
            self._close(ruleset, found, banned, applied, version, (start, searched))
            raise
        changed = self._close(ruleset, found, banned, applied, version, (start, searched))
        return not changed and self.scheduler.can_stop(index)

    def _close(
        self, ruleset: Ruleset, found: list[tuple[Rewrite, list[Match]]], banned: list[str],
        applied: dict[str, int], version: int, times: tuple[float, float],
    ) -> bool:
        """Rebuild and record the iteration; True when it changed the e-graph."""
        egraph, applied_at = self.egraph, time.perf_counter()
        egraph.rebuild()
        changed = egraph.version != version
        self._iterations.append(Iteration(
            len(self._iterations), ruleset.name, egraph.node_count, egraph.class_count,
            {rule.name: len(m) for rule, m in found}, applied, tuple(banned),
            times[1] - times[0], applied_at - times[1], time.perf_counter() - applied_at,
            changed))
        return changed

    def _stats_for(self, rule: Rewrite) -> RuleStats:
        stats = self._stats.get(rule.name)
        if stats is None:
            stats = self._stats[rule.name] = RuleStats(rule.name)
        return stats

    def _search_all(
        self, rules: Iterable[Rewrite], index: int, seen: int
    ) -> tuple[list[tuple[Rewrite, list[Match]]], list[str]]:
        found: list[tuple[Rewrite, list[Match]]] = []
        banned: list[str] = []
        cache: dict[tuple[int, int], set[int] | None] = {}
        for rule in rules:
            stats = self._stats_for(rule)
            if not self.scheduler.allow(index, rule.name):
                banned.append(rule.name)
                continue
            start = time.perf_counter()
            since = self._searched.get(rule.name, -1) if rule.pure and rule.incremental else -1
            matches = rule.search(self.egraph, self._candidates(rule, cache), since)
            stats.search_seconds += time.perf_counter() - start
            stats.searches += 1
            if not self.scheduler.accept(index, rule.name, len(matches)):
                stats.bans += 1
                banned.append(rule.name)
                continue
            stats.matches += len(matches)
            found.append((rule, matches))
            self._check_time()
        return found, banned

    def _apply_all(
        self, found: list[tuple[Rewrite, list[Match]]], index: int, seen: int,
        applied: dict[str, int],
    ) -> None:
        for rule, matches in found:
            stats, start = self._stats_for(rule), time.perf_counter()
            count = applied[rule.name] = self._apply_rule(rule, matches, index, stats)
            stats.applied += count
            stats.apply_seconds += time.perf_counter() - start
            self._searched[rule.name] = seen
            if self.egraph.node_count > self.limits.nodes:
                raise _Stop(StopReason.NODE_LIMIT)
            self._check_time()

    def _apply_rule(self, rule: Rewrite, matches: list[Match], index: int,
                    stats: RuleStats) -> int:
        def record(match: Match, before: int) -> None:
            self._record(rule, index, match, before)

        recorder = record if self.provenance else None
        count = 0
        for start in range(0, len(matches), _CHUNK):
            chunk = matches[start:start + _CHUNK]
            missed = sum(stats.misses.values())
            count += rule.apply_all(self.egraph, chunk, recorder, stats.rejected, stats.misses,
                                    stats.roots)
            stats.matches -= sum(stats.misses.values()) - missed
            self._check_time()
        return count

    def _record(self, rule: Rewrite, index: int, match: Match, before: int) -> None:
        layout = rule.layout
        classes = tuple((name, int(match[layout.slots[name]])) for name in layout.classes)
        nodes = tuple((name, match[slot]) for name, slot in layout.nodes.items())
        added = tuple(range(before, self.egraph.id_count))
        self._applications.append(Application(rule.name, index, match[0], classes, nodes, added))

    # ------------------------------------------------------- incremental search
    def _candidates(
        self, rule: Rewrite, cache: dict[tuple[int, int], set[int] | None]
    ) -> set[int] | None:
        """Roots worth searching for ``rule`` (``None``: all of them)."""
        last = self._searched.get(rule.name)
        if last is None or not rule.incremental:
            return None
        key = (last, rule.pattern.height)
        if key not in cache:
            cache[key] = self._affected(self.egraph.changed_since(last), key[1] - 1)
        return cache[key]

    def _affected(self, changed: list[int], levels: int) -> set[int] | None:
        """``changed`` and its ancestors up to ``levels`` parent steps; ``None`` when large."""
        egraph, budget = self.egraph, egraph_budget(self.egraph.class_count)
        result, frontier = set(changed), changed
        for _ in range(levels):
            if len(result) > budget:
                return None
            step = {egraph.find(pid) for cid in frontier for _, pid in egraph.parents(cid)}
            frontier = list(step - result)
            result.update(frontier)
        return None if len(result) > budget else result


def egraph_budget(class_count: int) -> int:
    """Above this many candidate roots, searching everything is cheaper than filtering."""
    return class_count // 2
