"""Reusable test material for users and for our own suites.

- ``assert_equivalent(g1, g2, feeds=None, *, rtol, atol, runs, seed)``: run two graphs with
  the reference executor and raise ``AssertionError`` with a report when they differ;
  ``compare(expected, got, rtol, atol) -> Mismatch | None`` for one pair of arrays.
- ``random_graph(seed, **options)`` and ``random_feeds(graph, seed)``: random verified graphs
  and their inputs from a NumPy seed (no hypothesis needed); ``random_motif_graph(seed)``
  draws only the motifs the rules fuse.
- Hypothesis strategies (need the ``hypothesis`` package; imported on first use):
  ``dtypes``, ``shapes``, ``broadcastable_shapes``, ``tensors``, ``graphs``, ``feeds``,
  ``graphs_with_feeds`` (see ``gerules.testing.strategies``).
- ``Sandbox``: run a function on fuzzed input in a forked worker with a time and memory
  budget (``gerules.testing.sandbox``); ``gerules.testing.mutate`` holds the mutators and
  ``gerules.testing.fuzz`` the targets (what ``ge-rewrite`` does with an ONNX, ``.om`` or
  ``.ger`` file, as one function of its bytes).
- ``models`` (small real architectures) and ``bad_models`` (the bad-file catalogue).

Invariant: importing this package needs neither pytest nor hypothesis.
"""

from __future__ import annotations

from typing import Any

from ..ir.graph import Graph
from .equivalence import Mismatch, assert_equivalent, compare
from .graphgen import GraphOptions, RngChooser, build_graph, random_feeds

_STRATEGIES = ("broadcastable_shapes", "dtypes", "feeds", "graphs", "graphs_with_feeds",
               "motif_graphs", "shapes", "tensors")

__all__ = ["GraphOptions", "Mismatch", "Sandbox", "assert_equivalent", "compare",
           "random_feeds", "random_graph", "random_motif_graph", *_STRATEGIES]


def random_graph(seed: int = 0, **options: Any) -> Graph:
    """A random verified graph from a NumPy seed; ``options`` are ``GraphOptions`` fields."""
    return build_graph(RngChooser(seed), GraphOptions(**options))


def random_motif_graph(seed: int = 0, **overrides: Any) -> Graph:
    """A random graph of fusible motifs (``motifs.motif_options``) from a NumPy seed."""
    from .motifs import motif_options

    return build_graph(RngChooser(seed), motif_options(**overrides))


def __getattr__(name: str) -> Any:
    if name in _STRATEGIES:
        try:
            from . import strategies
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(f"gerules.testing.{name} needs hypothesis "
                              "(pip install hypothesis)") from e
        return getattr(strategies, name)
    if name == "Sandbox":
        from .sandbox import Sandbox

        return Sandbox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
