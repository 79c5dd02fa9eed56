"""The NumPy kernels in float16: long sums and products accumulate in float32.

Each op runs on the same values in float32 and in float16; the float16 result must be within
a few float16 roundings of the float32 one. Accumulating a 20 000-element sum in float16 is
off by far more (CumSum was, before it widened like the others).
"""

from __future__ import annotations

import numpy as np
import pytest

from gerules.ir.graph import Graph, Node, Value
from gerules.ir.verify import verify
from gerules.runtime.executor import run_graph

RNG = np.random.default_rng(0)


def _run(op: str, inputs: list[np.ndarray], attrs: dict[str, object],
         consts: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    values = tuple(Value.of(f"x{k}", dtype if a.dtype.kind == "f" else a.dtype.name, a.shape)
                   for k, a in enumerate(inputs))
    names = (*(v.name for v in values), *consts)
    node = Node(op, names, ("y",), attrs, name="n")
    graph = verify(Graph((node,), values, (Value.of("y", dtype, None),), initializers=consts,
                         opset={"": 18}))
    feeds = {v.name: a.astype(dtype) if a.dtype.kind == "f" else a
             for v, a in zip(values, inputs, strict=True)}
    return run_graph(graph, feeds)["y"]


def _u(*shape: int) -> np.ndarray:
    return RNG.random(shape).astype(np.float32)


CASES = {
    "ReduceSum": ("ReduceSum", [_u(4, 20000)], {"keepdims": 0}, {"axes": np.array([1])}),
    "ReduceMean": ("ReduceMean", [_u(4, 20000)], {"keepdims": 0}, {"axes": np.array([1])}),
    "ReduceL2": ("ReduceL2", [_u(4, 20000)], {"keepdims": 0}, {"axes": np.array([1])}),
    "ReduceLogSumExp": ("ReduceLogSumExp", [_u(4, 20000)], {"keepdims": 0},
                        {"axes": np.array([1])}),
    "CumSum": ("CumSum", [_u(20000)], {}, {"axis": np.array(0)}),
    "CumSum reverse exclusive": ("CumSum", [_u(20000)], {"reverse": 1, "exclusive": 1},
                                 {"axis": np.array(0)}),
    "MatMul": ("MatMul", [_u(8, 4096), _u(4096, 8)], {}, {}),
    "Gemm": ("Gemm", [_u(8, 4096), _u(4096, 8)], {}, {}),
    "Einsum": ("Einsum", [_u(8, 4096), _u(4096, 8)], {"equation": "ij,jk->ik"}, {}),
    "Conv": ("Conv", [_u(1, 512, 8, 8), _u(4, 512, 3, 3)], {}, {}),
    "ConvTranspose": ("ConvTranspose", [_u(1, 512, 8, 8), _u(512, 4, 3, 3)], {}, {}),
    "AveragePool": ("AveragePool", [_u(1, 2, 64, 64)], {"kernel_shape": [32, 32]}, {}),
    "GlobalAveragePool": ("GlobalAveragePool", [_u(1, 2, 128, 128)], {}, {}),
    "Softmax": ("Softmax", [_u(2, 8000) * 4], {}, {}),
    "LogSoftmax": ("LogSoftmax", [_u(2, 8000) * 4], {}, {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_float16_kernels_accumulate_wide(case: str) -> None:
    op, inputs, attrs, consts = CASES[case]
    rounded = [a.astype(np.float16).astype(np.float32) for a in inputs]  # same values in both
    want = _run(op, rounded, attrs, consts, "float32").astype(np.float64)
    got = _run(op, rounded, attrs, consts, "float16")
    assert got.dtype == np.float16
    rel = np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want))
    assert rel < 2e-3, f"{case}: float16 result off by {rel:.2e} relative"
