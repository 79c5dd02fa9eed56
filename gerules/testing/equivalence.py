"""Compare two graphs on the same inputs with the reference executor.

``assert_equivalent(g1, g2)`` runs both graphs on the same feeds (given, or drawn at random
from a seed) and raises ``AssertionError`` with a readable report when an output differs by
more than ``atol + rtol * |expected|`` (``numpy.isclose``'s rule, ``g1`` being the expected
side). ``compare`` is the same check on one pair of arrays and returns a ``Mismatch``.

Invariants:
- ``g1`` is the reference: relative errors are measured against its outputs.
- NaN matches NaN and an infinity matches the same infinity; anything else against NaN or
  Inf is a mismatch (an optimization that turns a NaN into a number is not equivalent).
- A dtype or shape difference is a mismatch whatever the tolerances.
- Outputs are paired by name when both graphs have the same output names, by position
  otherwise (the report shows both names); different output counts fail at once.
- Importable without pytest or hypothesis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..ir.graph import Graph
from ..ir.registry import Registry
from ..runtime.executor import Executor
from .graphgen import random_feeds

Feeds = Mapping[str, np.ndarray]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Why two arrays are not close: a one-line ``reason`` and the error figures."""

    reason: str
    max_abs: float = 0.0
    max_rel: float = 0.0
    count: int = 0
    index: tuple[int, ...] = ()
    expected: float = 0.0
    got: float = 0.0

    def describe(self) -> str:
        if not self.count:
            return self.reason
        return (f"{self.reason}: {self.count} element(s) differ; max abs error "
                f"{self.max_abs:.3g}, max rel error {self.max_rel:.3g}; worst at "
                f"{list(self.index)}: expected {self.expected!r}, got {self.got!r}")


def compare(expected: np.ndarray, got: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6
            ) -> Mismatch | None:
    """``None`` when ``got`` matches ``expected`` within the tolerances, else the mismatch."""
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.dtype != got.dtype:
        return Mismatch(f"dtype {got.dtype.name}, expected {expected.dtype.name}")
    if expected.shape != got.shape:
        return Mismatch(f"shape {list(got.shape)}, expected {list(expected.shape)}")
    if expected.dtype.kind not in "fc":
        bad = expected != got
        return _mismatch("values differ", expected, got, bad) if bad.any() else None
    with np.errstate(all="ignore"):
        e, g = expected.astype(np.float64), got.astype(np.float64)
        same_special = (np.isnan(e) & np.isnan(g)) | (np.isinf(e) & (e == g))
        close = np.abs(g - e) <= atol + rtol * np.abs(e)
    bad = ~(same_special | (close & np.isfinite(e) & np.isfinite(g)))
    return _mismatch("not close", expected, got, bad) if bad.any() else None


def _mismatch(reason: str, expected: np.ndarray, got: np.ndarray, bad: np.ndarray) -> Mismatch:
    with np.errstate(all="ignore"):
        e, g = expected.astype(np.float64), got.astype(np.float64)
        err = np.where(bad, np.abs(g - e), 0.0)
        err = np.where(np.isnan(err), np.inf, err)
        rel = np.where(np.abs(e) > 0, err / np.abs(e), np.where(err > 0, np.inf, 0.0))
        rel = np.where(np.isnan(rel), np.inf, rel)  # an infinity against an infinity
    flat = int(np.argmax(err)) if err.size else 0
    index = tuple(int(i) for i in np.unravel_index(flat, bad.shape)) if bad.ndim else ()
    return Mismatch(reason, float(err.max()), float(np.nanmax(np.where(bad, rel, 0.0))),
                    int(bad.sum()), index, e[index].item(), g[index].item())


def assert_equivalent(g1: Graph, g2: Graph, feeds: Feeds | Sequence[Feeds] | None = None, *,
                      rtol: float = 1e-5, atol: float = 1e-6, runs: int = 3, seed: int = 0,
                      registry: Registry | None = None) -> None:
    """Raise ``AssertionError`` (with a report) unless ``g2`` computes what ``g1`` computes.

    ``feeds``: one mapping, a list of mappings (one run each), or ``None`` for ``runs``
    random draws (``random_feeds`` with seeds ``seed``, ``seed + 1``...; each run binds the
    symbolic dims afresh).
    """
    pairs = _pair_outputs(g1, g2)
    first, second = Executor(g1, registry), Executor(g2, registry)
    for k, run_feeds in enumerate(_feed_sets(g1, feeds, runs, seed)):
        with np.errstate(all="ignore"):
            want, got = first.run(run_feeds), second.run(run_feeds)
        for name1, name2 in pairs:
            mismatch = compare(want[name1], got[name2], rtol, atol)
            if mismatch is not None:
                raise AssertionError(_report(g1, g2, name1, name2, mismatch, k, run_feeds,
                                             rtol, atol))


def _feed_sets(graph: Graph, feeds: Feeds | Sequence[Feeds] | None, runs: int,
               seed: int) -> list[Feeds]:
    if feeds is None:
        return [random_feeds(graph, np.random.default_rng(seed + k)) for k in range(runs)]
    if isinstance(feeds, Mapping):
        return [feeds]
    return list(feeds)


def _pair_outputs(g1: Graph, g2: Graph) -> list[tuple[str, str]]:
    n1, n2 = g1.output_names, g2.output_names
    if len(n1) != len(n2):
        raise AssertionError(f"graphs are not equivalent: {len(n1)} outputs {list(n1)} vs "
                             f"{len(n2)} outputs {list(n2)}")
    if set(n1) == set(n2):
        return [(n, n) for n in n1]
    return list(zip(n1, n2, strict=True))


def _report(g1: Graph, g2: Graph, name1: str, name2: str, m: Mismatch, run: int,
            feeds: Feeds, rtol: float, atol: float) -> str:
    label = name1 if name1 == name2 else f"{name1} (second graph: {name2})"
    shapes = ", ".join(f"{k}{list(np.shape(v))}" for k, v in feeds.items())
    return "\n".join([
        f"graphs are not equivalent: output '{label}' {m.describe()}",
        f"  tolerance: rtol={rtol:g}, atol={atol:g}; run {run} with inputs {shapes}",
        f"  first graph:  {summary(g1)}",
        f"  second graph: {summary(g2)}",
    ])


def summary(graph: Graph, limit: int = 12) -> str:
    """``5 nodes: Conv, Relu x2, ...`` for a report line."""
    counts = graph.op_counts()
    parts = [op if n == 1 else f"{op} x{n}" for op, n in counts.items()]
    more = f", ... ({len(parts) - limit} more)" if len(parts) > limit else ""
    return f"{len(graph.nodes)} nodes: {', '.join(parts[:limit]) or '(none)'}{more}"
