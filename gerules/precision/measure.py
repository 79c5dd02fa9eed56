"""Measured output error of a precision change: both graphs on the same random inputs.

``check_precision(reference, graph, gears, level)`` is what a conversion runs
(``--check_precision``): ``off`` measures nothing; ``quick`` (the default) one draw at the
first gear, only when the two runs together need at most ``QUICK_GFLOP`` of work by the cost
model's count (else it says so and how to ask for it); ``full`` every gear, ``FULL_SEEDS`` draws
each, whatever it costs (the largest error of all draws is kept).

Invariants:
- Inputs are a pure function of the seed and the graph inputs: floats ~ N(0, 1), integers
  and bools 0 or 1 (valid as attention masks and as indices), symbolic dims bound by ``dims``
  (else 1).
- ``max_rel`` is ``max |got - want| / max |want|`` per output (relative to the output's largest
  magnitude, so values near zero do not blow it up); both figures are measured, not estimated.
- Non-float outputs are compared as numbers (``max_abs`` is the largest difference).
- A NaN or Inf where the reference is finite makes both figures infinite (``null`` in JSON)
  and ``finite`` false.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.dims import bind_dims
from ..ir.graph import Graph, Value
from ..ir.registry import Registry
from ..ir.verify import verify
from ..runtime.executor import run_graph

INT_HIGH = 2
CHECKS = ("off", "quick", "full")
DEFAULT_CHECK = "quick"
QUICK_GFLOP = 20.0  # both runs together; ResNet-50 at 224x224 fits, BERT-base at 128 does not
FULL_SEEDS = (0, 1, 2)


@dataclass(frozen=True, slots=True)
class OutputError:
    name: str
    max_abs: float
    max_rel: float
    finite: bool  # no NaN or Inf where the reference has none

    def to_json(self) -> dict[str, Any]:
        return {"output": self.name, "max_abs": _number(self.max_abs),
                "max_rel": _number(self.max_rel), "finite": self.finite}


def _number(x: float) -> float | None:
    return float(f"{x:.3g}") if np.isfinite(x) else None


def random_inputs(inputs: tuple[Value, ...], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in inputs:
        shape = tuple(d if isinstance(d, int) else 1 for d in v.shape or ())
        if v.dtype.startswith("float"):
            feeds[v.name] = rng.standard_normal(shape).astype(v.dtype)
        elif v.dtype == "bool":
            feeds[v.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[v.name] = rng.integers(0, INT_HIGH, shape).astype(v.dtype)
    return feeds


def compare(want: np.ndarray, got: np.ndarray, name: str) -> OutputError:
    a, b = np.asarray(want, dtype=np.float64), np.asarray(got, dtype=np.float64)
    finite = bool(np.all(np.isfinite(b) | ~np.isfinite(a)))
    both = np.isfinite(a) & np.isfinite(b)
    if not finite:
        return OutputError(name, float("inf"), float("inf"), False)
    diff = float(np.max(np.abs(a - b)[both], initial=0.0))
    scale = float(np.max(np.abs(a[both]), initial=0.0))
    return OutputError(name, diff, diff / scale if scale > 0 else diff, True)


def measure_error(reference: Graph, graph: Graph, *, dims: Mapping[str, int] | None = None,
                  seed: int = 0, registry: Registry | None = None) -> list[OutputError]:
    """Run both graphs (same inputs and outputs) on one random draw and compare outputs."""
    if dims:
        reference = verify(bind_dims(reference, dims), registry)
        graph = verify(bind_dims(graph, dims), registry)
    feeds = random_inputs(reference.inputs, seed)
    want = run_graph(reference, feeds, registry)
    got = run_graph(graph, feeds, registry)
    return [compare(want[name], got[name], name) for name in reference.output_names]


def check_precision(reference: Graph, graph: Graph, gears: Sequence[Mapping[str, int]],
                    level: str, *, flops: int = 0, registry: Registry | None = None
                    ) -> dict[str, Any]:
    """The record's ``precision`` entry for a changed graph (see the module docstring).

    ``flops`` is the cost model's count for one run of ``graph`` (both graphs do the same
    work); ``gears`` are the compiled dims (``[{}]`` for a static model).
    """
    out: dict[str, Any] = {"check": level, "status": "not measured", "outputs": []}
    if level == "off":
        out["note"] = "not measured (--check_precision=off)"
        return out
    gflop = 2 * flops / 1e9
    if level == "quick" and gflop > QUICK_GFLOP:
        out["note"] = (f"not measured: the two runs need {gflop:.0f} GFLOP, over the quick "
                       f"check's {QUICK_GFLOP:.0f}; --check_precision=full measures it")
        return out
    seeds = FULL_SEEDS if level == "full" else FULL_SEEDS[:1]
    chosen = list(gears) if level == "full" else list(gears)[:1]
    reference, graph = reference.materialized(), graph.materialized()
    worst: dict[str, OutputError] = {}
    for dims in chosen or [{}]:
        for seed in seeds:
            for e in measure_error(reference, graph, dims=dims, seed=seed, registry=registry):
                if e.name not in worst or _worse(e, worst[e.name]):
                    worst[e.name] = e
    names = ", ".join(_gear_name(d) for d in chosen or [{}])
    out.update(status="measured", outputs=[worst[n].to_json() for n in worst],
               note=f"measured on {len(seeds)} random draw(s) at {names}: floats N(0,1), "
                    "integers and bools 0 or 1")
    return out


def _worse(a: OutputError, b: OutputError) -> bool:
    return (not a.finite and b.finite) or a.max_rel > b.max_rel


def _gear_name(dims: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items())) or "the static shapes"
