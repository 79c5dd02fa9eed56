"""Both sides of a rule on one input: run them, compare their outputs within the contract.

Tolerances (``tolerance``): ``@exact`` allows float rounding only: ``rtol`` of 1e-2 / 1e-4 /
1e-9 for float16 / float32 / float64 and the same fraction of the output's largest magnitude
as ``atol``. That is about 1,000 ulps of float32 (2^-23 = 1.2e-7): enough for the
reassociations exact rules perform (folding a BatchNorm's scale into the weights of a
convolution that sums hundreds of products, a GELU subgraph computed as one op), and orders of
magnitude below what a wrong constant, a dropped epsilon or swapped operands cause on the
instances drawn (epsilons up to 0.5, variances down to 0.01). ``@approx(rtol, atol)`` allows
the stated tolerance, never less than the rounding above. Integer and bool outputs must be
equal.

Rounding is judged against the exact value: where two finite outputs differ by more than
the tolerance and the left side made no infinity, the left side is run again in float64
(``widened``: inputs, constants and Cast targets), and an element whose right side is no
farther from that value than the left side is (plus the tolerance) counts as equal. A right
side that rounds less, such as a fused op computing float16 in float32 where a large mask
absorbed the scores, is not wrong; one that computes something else is.

Overflow is a value: an infinity or NaN on one side must be the same on the other
(``testing.compare``), so ``Div(Mul(x, c), c) => x`` fails in float16 where ``x * c``
overflows. Two allowances:

- the edge of the range: an output one side overflows to an infinity while the other holds a
  finite value of the same sign above ``1 / EDGE_OF_RANGE`` of the dtype's largest value
  counts as equal (folding a scale into weights moves where an overflow happens by that
  scale; in float16 that edge is 4094, far above what ``x * 1000`` needs to overflow);
- ``@exact(overflow = "avoided")``: where the left side overflows (the first node that
  makes a non-finite value from finite inputs makes an infinity) the run is not compared:
  the right side, a fused op that keeps float32 statistics, may stay finite there. A NaN
  made first (the square root of a negative number, 0 / 0) is no overflow: compared.

Formats: an output held in a blocked data format (a layout rule's ``ge.TransData(x)
{dst_format = "NC1HWC0"}``) is compared through the TransData kernel, as its logical values
(``logical``): its padding is no value (an elementwise op computes anything there), so a rule
that changes formats is checked on what it keeps, never on padding bytes.

Invariants:
- ``run`` raises nothing: a side that cannot run is a ``Run`` with its error.
- A run that compared no finite element (every output infinite or NaN on the left) proves
  nothing: ``Comparison.finite`` is then false and the verifier does not count it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..dsl.contract import Contract
from ..errors import GeError
from ..ir import formats
from ..ir.attrs import Attrs
from ..ir.graph import Graph, TensorType, Value
from ..ir.verify import verify
from ..ir.weights import arrays, materialize
from ..runtime.executor import Executor
from ..testing.equivalence import Mismatch, compare

EXACT_RTOL = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}
EDGE_OF_RANGE = 16.0
Feeds = Mapping[str, np.ndarray]


def tolerance(contract: Contract, dtype: str, expected: np.ndarray) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing outputs of ``dtype`` (see the module docstring)."""
    base = EXACT_RTOL.get(dtype, 0.0)
    finite = np.abs(expected[np.isfinite(expected)]) if expected.dtype.kind == "f" else []
    scale = max(1.0, float(np.max(finite))) if len(finite) else 1.0
    if contract.exact:
        return base, base * scale
    return max(contract.rtol, base), max(contract.atol, base * scale)


@dataclass(frozen=True)
class Run:
    """One side run on one input: its outputs, or why it could not run."""

    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class Comparison:
    """Both sides on one input. ``problem`` is empty when they agree."""

    problem: str = ""  # "the two sides differ", "the right side does not run: .."
    mismatch: Mismatch | None = None
    tolerance: tuple[float, float] | None = None
    finite: bool = False  # some finite output element was compared
    skipped: str = ""  # why the run was not compared (the left side cannot run, overflows)
    note: str = ""  # where the left side overflows, when it does


def logical(graph: Graph, name: str, value: np.ndarray) -> np.ndarray:
    """An output's elements: a tensor held in a blocked format read back through the
    TransData kernel (its padding is no value, so it is never compared)."""
    t = graph.type_of(name)
    if t is None or t.format == formats.ND or t.shape is None:
        return value
    return formats.transfer(value, t.format, formats.ND,
                            formats.bind(t.shape, t.dtype, t.format, value.shape))


def run(graph: Graph, feeds: Feeds) -> Run:
    try:
        with np.errstate(all="ignore"):
            return Run(Executor(graph).run(feeds))
    except GeError as e:
        return Run(error=str(e))


def sides(contract: Contract, lhs: Graph, rhs: Graph, feeds: Feeds) -> Comparison:
    """Run both sides on ``feeds`` and compare every output within ``contract``."""
    want = run(lhs, feeds)
    if want.error:
        return Comparison(skipped=f"the left side does not run: {want.error}")
    got = run(rhs, feeds)
    if got.error:
        return Comparison(f"the right side does not run: {got.error}")
    finite = False
    for name in lhs.output_names:
        expected = logical(lhs, name, np.asarray(want.outputs[name]))
        actual = logical(rhs, name, np.asarray(got.outputs[name]))
        finite = finite or expected.dtype.kind != "f" or bool(np.isfinite(expected).any())
        tol = tolerance(contract, expected.dtype.name, expected)
        mismatch = _mismatch(expected, actual, tol)
        if mismatch is None:
            continue
        where, infinite = first_overflow(lhs, feeds)
        if infinite and contract.overflow == "avoided":
            return Comparison(skipped=f"the left side overflows: {where}")
        if not infinite and _rounds_less(lhs, feeds, name, expected, actual, tol):
            continue
        note = f"the left side first makes an infinity or NaN at {where}" if where else ""
        which = f" in output {name}" if len(lhs.outputs) > 1 else ""
        return Comparison(f"the two sides differ{which}", mismatch, tol, finite, note=note)
    return Comparison(finite=finite)


def _mismatch(expected: np.ndarray, got: np.ndarray, tol: tuple[float, float]
              ) -> Mismatch | None:
    mismatch = compare(expected, got, *tol)
    if mismatch is None or expected.dtype != got.dtype or expected.dtype.kind != "f" or (
            expected.shape != got.shape):
        return mismatch
    edge = at_range_edge(expected, got) | at_range_edge(got, expected)
    if not edge.any():
        return mismatch
    return compare(expected, np.where(edge, expected, got), *tol)


def _rounds_less(lhs: Graph, feeds: Feeds, name: str, expected: np.ndarray,
                 got: np.ndarray, tol: tuple[float, float]) -> bool:
    """True when every element of ``got`` that ``expected`` does not match is no farther
    from the left side's float64 value than ``expected`` is, plus the tolerance."""
    if expected.dtype.kind != "f" or expected.dtype == np.float64 or (
            expected.shape != got.shape):
        return False
    wide = widened(lhs, feeds)
    if wide is None:
        return False
    exact = run(*wide)
    if exact.error or name not in exact.outputs:
        return False
    e = np.asarray(logical(wide[0], name, np.asarray(exact.outputs[name])), np.float64)
    with np.errstate(all="ignore"):
        want, have = expected.astype(np.float64), got.astype(np.float64)
        same = (want == have) | (np.isnan(want) & np.isnan(have))
        closer = np.abs(have - e) <= np.abs(want - e) + tol[1] + tol[0] * np.abs(e)
    return bool(np.all(same | (closer & np.isfinite(have))))


WIDE = {"float16": 10, "float32": 1, "bfloat16": 16}  # ONNX element type codes


def widened(graph: Graph, feeds: Feeds) -> tuple[Graph, Feeds] | None:
    """``graph`` and ``feeds`` with float16 and float32 made float64 (inputs, constants,
    Cast targets): the left side in nearly exact arithmetic; ``None`` if it does not
    type. A deferred constant is computed to be widened."""
    def wide(a: np.ndarray) -> np.ndarray:
        return a.astype(np.float64) if a.dtype.name in WIDE else a

    def wider_type(t: TensorType) -> TensorType:
        return TensorType("float64", t.shape, t.format) if t.dtype in WIDE else t

    inputs = tuple(Value(v.name, wider_type(v.type)) for v in graph.inputs)
    nodes = tuple(n.with_(attrs=Attrs({**n.attrs, "to": 11})) if n.op == "Cast" and
                  n.attrs.get("to") in WIDE.values() else n for n in graph.nodes)
    outputs = tuple(Value(v.name, TensorType(
        "float64" if v.dtype in WIDE else v.dtype, None)) for v in graph.outputs)
    try:
        wider = verify(graph.replace(inputs=inputs, nodes=nodes, outputs=outputs,
                                     initializers={k: wide(materialize(a)) for k, a in
                                                   graph.initializers.items()},
                                     value_info={k: Value(k, wider_type(v.type)) for k, v
                                                 in graph.held_weights().items()}))
    except GeError:
        return None
    return wider, {k: wide(np.asarray(a)) for k, a in feeds.items()}


def at_range_edge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where ``a`` overflowed to an infinity and ``b`` is finite, of the same sign and above
    ``1 / EDGE_OF_RANGE`` of the dtype's largest value."""
    top = float(np.finfo(a.dtype).max) / EDGE_OF_RANGE
    with np.errstate(all="ignore"):
        edge = np.isinf(a) & np.isfinite(b) & (np.abs(b) >= top) & (np.sign(a) == np.sign(b))
    return np.asarray(edge)


def first_overflow(graph: Graph, feeds: Feeds) -> tuple[str, bool]:
    """The first node of ``graph`` that makes an infinity or NaN from finite inputs (as
    ``%t2 = Pow(%t1, %2)``, or ``""``), and whether it made an infinity (an overflow, or a
    division by zero) rather than only NaNs."""
    names = [o for n in graph.nodes for o in n.outputs if o and graph.type_of(o) is not None]
    every = graph.replace(outputs=tuple(Value(o, graph.type_of(o)) for o in names))  # type: ignore[arg-type]
    values = run(every, feeds)
    if values.error:
        return "", False
    known = {**arrays(graph.initializers), **feeds, **values.outputs}
    for node in graph.nodes:
        inputs = [known.get(i) for i in node.inputs if i]
        if not all(_finite(v) for v in inputs):
            continue
        bad = [o for o in node.outputs if o and not _finite(known.get(o))]
        if bad:
            args = ", ".join(i or "none" for i in node.inputs)
            infinite = any(bool(np.isinf(np.asarray(known[o])).any()) for o in bad)
            return f"{bad[0]} = {node.qualified_op}({args})", infinite
    return "", False


def _finite(value: np.ndarray | None) -> bool:
    if value is None:
        return True
    array = np.asarray(value)
    return array.dtype.kind != "f" or bool(np.isfinite(array).all())
