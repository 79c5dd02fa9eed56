"""Kernels against a second oracle: every registered op run by our kernel and by onnxruntime.

Instances come from the ONNX node suite (``conformance.node_cases``): each single-node case
of an op is a template that fixes a valid combination of attributes, dtypes and ranks. From a
template and a seed, ``draw`` makes a fresh instance:

- float data inputs get new random values (normal, scaled by the template's own magnitude);
  integer and bool inputs, and float parameters (scales, roi, Range's bounds, quantization
  scales: ``PARAM_PORTS``), keep the template's values, so indices, axes and shapes stay
  valid;
- an op with the ``elementwise`` trait whose inputs all have one shape also gets a new shape
  of the same rank (sides 1 to 5), so broadcasting-free kernels see shapes nobody wrote down.

``check`` runs the instance through our kernel (``run_graph`` on the single node) and through
onnxruntime (all graph optimizations off) and compares: floats within ``rtol``/``atol``
scaled to the dtype (float16 and bfloat16 looser), integers and bools exactly, NaN matching
NaN. An op onnxruntime cannot run at the template's opset is reported as having no oracle,
never as passing; a case in ``DISPUTED`` (onnxruntime departs from the ONNX spec there, and
the node suite's expected output agrees with us) is reported as disputed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import onnx

from ..ir.registry import ELEMENTWISE, default_registry
from .conformance import EXCLUDED, as_array, missing_ops, node_cases, rule_exclusion

TOLERANCE = {"float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2), "float64": (1e-7, 1e-9)}
DEFAULT_TOLERANCE = (1e-4, 1e-5)
# Templates whose values the oracle cannot reproduce: random ops, and ops whose result is an
# arbitrary choice among equals (argsort ties) or depends on the training mode's mask.
NO_ORACLE_OPS = frozenset({"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform",
                           "RandomUniformLike", "Multinomial"})


_QK_BIAS = ("onnxruntime's qk_matmul_output in mode 2 leaves out the causal mask; the ONNX "
            "reference and the node suite's expected output include it")
_ALIGN = ("onnxruntime's downsampling Resize with align_corners differs from the ONNX "
          "reference; the node suite's expected output agrees with ours")
DISPUTED: dict[str, str] = {
    "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal": _QK_BIAS,
    "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal": _QK_BIAS,
    "test_resize_downsample_scales_cubic_align_corners": _ALIGN,
    "test_resize_downsample_scales_linear_align_corners": _ALIGN,
    "test_maxunpool_export_with_output_shape": (
        "onnxruntime places MaxUnpool's indices in the given output_shape's layout; the ONNX "
        "reference and the node suite read them in the natural unpooled shape, as we do"),
}
PARAM_PORTS = frozenset({"scales", "roi", "sizes", "ratio", "start", "limit", "delta",
                         "depth", "y_scale", "x_scale", "cos_cache", "sin_cache"})


@dataclass(frozen=True)
class Template:
    """One single-node node-suite case: the op's model and its input arrays."""

    op: str
    name: str
    model: onnx.ModelProto
    inputs: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Verdict:
    """``status``: "agree", "differ", "disputed", "ours failed" or "no oracle" (with the
    reason)."""

    op: str
    case: str
    seed: int
    status: str
    detail: str = ""


@cache
def templates() -> dict[str, tuple[Template, ...]]:
    """Single-node cases of every registered ai.onnx op, by op (sorted by case name)."""
    out: dict[str, list[Template]] = {}
    for case in node_cases():
        g = case.model.graph
        if len(g.node) != 1 or "_expanded" in case.name or missing_ops(case.model):
            continue
        op = g.node[0].op_type
        if op in NO_ORACLE_OPS or g.node[0].domain not in ("", "ai.onnx"):
            continue
        if rule_exclusion(case.model) is not None or case.name in EXCLUDED:
            continue
        inputs = tuple(as_array(x) for x in case.data_sets[0][0])
        out.setdefault(op, []).append(Template(op, case.name, case.model, inputs))
    return {op: tuple(sorted(ts, key=lambda t: t.name)) for op, ts in sorted(out.items())}


def _new_values(x: np.ndarray, port: str, rng: np.random.Generator) -> np.ndarray:
    if x.dtype.kind not in "fV" or port in PARAM_PORTS:
        return x
    if x.dtype.name not in ("float16", "float32", "float64", "bfloat16"):
        return x  # float8 / float4 inputs keep their exactly representable values
    scale = float(np.nanmax(np.abs(x.astype(np.float64)), initial=0)) if x.size else 1.0
    scale = scale if np.isfinite(scale) and scale > 0 else 1.0
    return np.asarray(rng.standard_normal(x.shape) * scale).astype(x.dtype)


def draw(t: Template, seed: int) -> tuple[onnx.ModelProto, tuple[np.ndarray, ...]]:
    """A fresh instance of ``t``: new float values, and a new shape for elementwise ops."""
    rng = np.random.default_rng(seed)
    model, inputs = t.model, t.inputs
    schema = default_registry().get(t.op)
    shapes = {x.shape for x in inputs}
    if schema.has(ELEMENTWISE) and len(shapes) == 1 and inputs and inputs[0].ndim:
        new = tuple(int(d) for d in rng.integers(1, 6, size=inputs[0].ndim))
        inputs = tuple(_resize(x, new, rng) for x in inputs)
        model = _with_shapes(model, new)
    names = [p.name for p in schema.inputs]
    names += [names[-1] if names else ""] * (len(inputs) - len(names))  # variadic tail
    return model, tuple(_new_values(x, port, rng) for x, port in zip(inputs, names,
                                                                      strict=False))


def _resize(x: np.ndarray, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    flat = x.reshape(-1)
    if flat.size == 0:
        return np.zeros(shape, x.dtype)
    return flat[rng.integers(0, flat.size, size=int(np.prod(shape)))].reshape(shape)


def _with_shapes(model: onnx.ModelProto, shape: tuple[int, ...]) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for v in [*m.graph.input, *m.graph.output]:
        dims = v.type.tensor_type.shape.dim
        for d, n in zip(dims, shape, strict=False):
            d.Clear()
            d.dim_value = n
    return m


def _opset(model: onnx.ModelProto) -> int:
    version: int = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    return version


def _at_opset(model: onnx.ModelProto, version: int) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = version
    m.ir_version = min(m.ir_version, 10)
    return m


def _tolerance(dtype: np.dtype) -> tuple[float, float]:
    return TOLERANCE.get(dtype.name, DEFAULT_TOLERANCE)


def compare(ours: np.ndarray, theirs: np.ndarray) -> str | None:
    """Why two outputs differ, or ``None`` when they agree."""
    if ours.dtype.name.startswith("float8") and theirs.dtype == np.uint8:
        ours = ours.view(np.uint8)  # onnxruntime hands float8 back as its bit patterns
    if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
        return f"ours {ours.dtype}{list(ours.shape)}, onnxruntime {theirs.dtype}" \
               f"{list(theirs.shape)}"
    if ours.dtype.kind not in "fV":
        return None if np.array_equal(ours, theirs) else "integer values differ"
    a, b = ours.astype(np.float64), theirs.astype(np.float64)
    rtol, atol = _tolerance(ours.dtype)
    finite = np.abs(b[np.isfinite(b)])
    scale = max(float(finite.max(initial=0)), 1.0)
    bad = ~(np.isclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True))
    if bad.any():
        worst = float(np.nanmax(np.abs(a - b)[bad]))
        return f"{int(bad.sum())} of {a.size} values differ (max abs error {worst:.3g})"
    return None


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``model`` run once by onnxruntime (CPU, one thread, graph optimizations off)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return [np.asarray(x) for x in session.run(None, feeds)]


def check(t: Template, seed: int) -> Verdict:
    """Our kernel and onnxruntime on one drawn instance of ``t``."""
    from ..onnx_io import load_model
    from ..runtime.executor import run_graph

    model, inputs = draw(t, seed)
    feeds = {v.name: x for v, x in zip(model.graph.input, inputs, strict=True)}
    try:
        theirs = run_onnxruntime(model, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime lacks the op, type or opset
        try:  # the oldest opset at which our registry gives the op the same meaning
            theirs = run_onnxruntime(_at_opset(model, default_registry().get(
                t.op, "", _opset(model)).since_version), feeds)
        except Exception:  # noqa: BLE001
            return Verdict(t.op, t.name, seed, "no oracle", " ".join(str(e).split())[:200])
    try:
        with np.errstate(all="ignore"):
            graph = load_model(model.SerializeToString())
            got = run_graph(graph, feeds)
    except Exception as e:  # noqa: BLE001 - reported as a finding
        return Verdict(t.op, t.name, seed, "ours failed", f"{type(e).__name__}: {e}"[:300])
    for v, want in zip(model.graph.output, theirs, strict=True):
        problem = compare(np.asarray(got[v.name]), want)
        if problem:
            status = "disputed" if t.name in DISPUTED else "differ"
            return Verdict(t.op, t.name, seed, status, f"output '{v.name}': {problem}")
    return Verdict(t.op, t.name, seed, "agree")


def sweep(seeds: tuple[int, ...], ops: tuple[str, ...] | None = None,
          per_op: int = 3) -> Iterator[Verdict]:
    """Up to ``per_op`` templates of each op (spread over its cases), each at every seed."""
    for op, ts in templates().items():
        if ops is not None and op not in ops:
            continue
        step = max(1, len(ts) // per_op)
        for t in ts[::step][:per_op]:
            for seed in seeds:
                yield check(t, seed)


def summary(verdicts: list[Verdict]) -> dict[str, Any]:
    """Counts by status and the ops in each non-agreeing status."""
    by: dict[str, set[str]] = {}
    for v in verdicts:
        by.setdefault(v.status, set()).add(v.op)
    return {"counts": {s: sum(v.status == s for v in verdicts) for s in sorted(by)},
            "ops": {s: sorted(ops) for s, ops in sorted(by.items())}}
