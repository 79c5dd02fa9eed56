"""The shipped schemas as data: coverage, versions, units, traits, FLOPs, docs."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.errors import ModelError
from gerules.ir.graph import TensorType
from gerules.ir.ops import all_schemas
from gerules.ir.registry import (
    COMMUTATIVE,
    ELEMENTWISE,
    INPLACE,
    NONDETERMINISTIC,
    SHAPE_OP,
    default_registry,
)

REG = default_registry()

# Every op torch's exporter emits (opsets 17 and 18) for ResNet-50, MobileNetV2, BERT-base,
# GPT-2, ViT-B and a small sequence model, per the issue; Gelu needs opset 20.
EXPORTER_OPS = """Conv ConvTranspose BatchNormalization Relu Clip LeakyRelu Sigmoid Tanh Erf
HardSigmoid HardSwish Softmax LogSoftmax MaxPool AveragePool GlobalAveragePool Add Sub Mul
Div Pow Sqrt Exp Log Neg Abs Reciprocal Min Max MatMul Gemm Einsum Flatten Reshape Transpose
Concat Split Slice Gather GatherElements Unsqueeze Squeeze Shape Size Constant
ConstantOfShape Cast CastLike Where Equal Less Greater Not And Expand Tile Range ReduceMean
ReduceSum ReduceMax LayerNormalization Identity Dropout Pad Resize Trilu CumSum ArgMax
TopK""".split()
CHEAP_OPS = """Softplus Selu Elu Floor Ceil Round Sign Sin Cos Or Xor LessOrEqual GreaterOrEqual
ReduceMin ReduceProd ReduceL2 Mod IsNaN IsInf NonZero ScatterND GatherND DepthToSpace
SpaceToDepth InstanceNormalization PRelu GlobalMaxPool Hardmax OneHot Sum Mean BitShift
MatMulInteger""".split()
GE_OPS = ["FusedConv", "FusedMatMul", "Attention", "MultiHeadAttention", "AddLayerNorm",
          "Gelu"]  # with kernels of their own

CUBE = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "MatMulInteger", "FusedConv",
        "FusedMatMul", "Attention", "MultiHeadAttention", "FlexAttention", "ConvInteger",
        "QLinearConv", "QLinearMatMul", "DeformConv"}
SCALAR = {"Shape", "Size", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Range",
          "ConstantOfShape", "Constant", "Identity", "Dropout", "EyeLike", "HannWindow",
          "HammingWindow", "BlackmanWindow", "MelWeightMatrix", "NonMaxSuppression", "If",
          "Loop", "Scan"}


def f32(*dims: int) -> TensorType:
    return TensorType("float32", tuple(dims))


@pytest.mark.parametrize("op", EXPORTER_OPS + CHEAP_OPS)
@pytest.mark.parametrize("opset", [17, 18])
def test_exporter_ops_exist_at_opsets_17_and_18(op: str, opset: int) -> None:
    assert REG.get(op, "", opset).op == op


def test_mish_needs_opset_18() -> None:
    with pytest.raises(ModelError, match="needs opset 18 or newer"):
        REG.get("Mish", "", 17)


def test_gelu_needs_opset_20_but_ge_gelu_does_not() -> None:
    with pytest.raises(ModelError, match="needs opset 20 or newer"):
        REG.get("Gelu", "", 18)
    assert REG.get("Gelu", "", 20).since_version == 20
    assert REG.get("Gelu", "ge", 1).domain == "ge"


@pytest.mark.parametrize("op", GE_OPS)
def test_ge_ops_exist_at_version_1(op: str) -> None:
    assert REG.get(op, "ge", 1).since_version == 1


@pytest.mark.parametrize(("op", "opset", "since"), [
    ("Softmax", 12, 1), ("Softmax", 13, 13), ("LogSoftmax", 11, 1), ("LogSoftmax", 17, 13),
    ("Clip", 10, 6), ("Clip", 11, 11), ("Split", 12, 2), ("Split", 17, 13), ("Split", 18, 18),
    ("Squeeze", 12, 1), ("Squeeze", 13, 13), ("Unsqueeze", 17, 13), ("ReduceSum", 12, 1),
    ("ReduceSum", 13, 13), ("ReduceMean", 17, 1), ("ReduceMean", 18, 18), ("ReduceMax", 17, 1),
    ("ReduceMax", 18, 18), ("Pad", 10, 2), ("Pad", 18, 11), ("TopK", 9, 1), ("TopK", 11, 10),
    ("BatchNormalization", 7, 6), ("BatchNormalization", 13, 9),
    ("BatchNormalization", 15, 14), ("Slice", 9, 1), ("Dropout", 6, 6),
    ("Slice", 10, 10), ("Resize", 10, 10), ("Resize", 18, 11), ("Dropout", 9, 7),
    ("Dropout", 11, 10), ("Dropout", 13, 12), ("BitShift", 27, 11), ("BitShift", 28, 28),
])
def test_a_model_opset_picks_the_newest_schema_not_after_it(op: str, opset: int,
                                                            since: int) -> None:
    assert REG.get(op, "", opset).since_version == since


def test_each_schema_is_registered_once_and_documented() -> None:
    keys = [(s.domain, s.op, s.since_version) for s in all_schemas()]
    assert len(keys) == len(set(keys))
    undocumented = [k for k, s in zip(keys, all_schemas(), strict=True) if len(s.doc) < 16]
    assert not undocumented


def test_units_follow_the_npu_split() -> None:
    for s in REG:
        want = "cube" if s.op in CUBE else "scalar" if s.op in SCALAR else "vector"
        assert s.unit == want, f"{s.qualified_op} v{s.since_version}: {s.unit}"


def test_gather_and_concat_of_shape_vectors_run_on_the_scalar_unit() -> None:
    gather, concat = REG.get("Gather"), REG.get("Concat")
    shape_vec = TensorType("int64", (4,))
    assert gather.unit_for([shape_vec, TensorType("int64", ())],
                           [TensorType("int64", ())]) == "scalar"
    assert concat.unit_for([shape_vec, shape_vec], [TensorType("int64", (8,))]) == "scalar"
    table = TensorType("float32", (30522, 768))
    assert gather.unit_for([table, TensorType("int64", (1, 128))],
                           [TensorType("float32", (1, 128, 768))]) == "vector"
    assert REG.get("Relu").unit_for([f32(2)], [f32(2)]) == "vector"


@pytest.mark.parametrize(("op", "trait"), [
    ("Add", COMMUTATIVE), ("Mul", COMMUTATIVE), ("Min", COMMUTATIVE), ("Max", COMMUTATIVE),
    ("Equal", COMMUTATIVE), ("And", COMMUTATIVE), ("Or", COMMUTATIVE), ("Xor", COMMUTATIVE),
    ("Sum", COMMUTATIVE), ("Relu", ELEMENTWISE), ("Relu", INPLACE), ("Add", INPLACE),
    ("Sigmoid", ELEMENTWISE), ("Where", ELEMENTWISE), ("Cast", ELEMENTWISE),
    ("Transpose", SHAPE_OP), ("Reshape", SHAPE_OP), ("Concat", SHAPE_OP), ("Slice", SHAPE_OP),
    ("Gather", SHAPE_OP), ("Expand", SHAPE_OP), ("Identity", SHAPE_OP),
])
def test_traits(op: str, trait: str) -> None:
    assert REG.get(op).has(trait)


@pytest.mark.parametrize(("op", "trait"), [
    ("Sub", COMMUTATIVE), ("Div", COMMUTATIVE), ("Less", COMMUTATIVE), ("Pow", COMMUTATIVE),
    ("Less", INPLACE), ("Cast", INPLACE), ("Conv", ELEMENTWISE), ("Softmax", ELEMENTWISE),
    ("Relu", SHAPE_OP),
])
def test_traits_not_claimed(op: str, trait: str) -> None:
    assert not REG.get(op).has(trait)


def test_no_shipped_op_is_nondeterministic() -> None:
    assert not [s.op for s in REG if s.has(NONDETERMINISTIC)]


def test_shape_and_size_fold_from_types() -> None:
    for op in ("Shape", "Size"):
        s = REG.get(op)
        assert s.fold_types is not None
        (value,) = s.fold_types([f32(2, 3)], s.call({}))  # type: ignore[misc]
        assert value.tolist() == ([2, 3] if op == "Shape" else 6)


def _flops(op: str, ins: list[TensorType], outs: list[TensorType], domain: str = "",
           **attrs: object) -> int:
    s = REG.get(op, domain)
    assert s.flops is not None, op
    return s.flops(ins, outs, s.call(attrs))


def test_flops_are_two_per_mac_for_cube_ops() -> None:
    assert _flops("MatMul", [f32(8, 12, 128, 64), f32(8, 12, 64, 128)],
                  [f32(8, 12, 128, 128)]) == 2 * 8 * 12 * 128 * 128 * 64
    assert _flops("Gemm", [f32(4, 16), f32(32, 16), f32(32)], [f32(4, 32)],
                  transB=1) == 2 * 4 * 32 * 16 + 2 * 4 * 32
    assert _flops("Conv", [f32(1, 32, 56, 56), f32(64, 16, 3, 3)], [f32(1, 64, 56, 56)],
                  group=2) == 2 * 64 * 56 * 56 * 16 * 9
    assert _flops("Einsum", [f32(2, 3, 4), f32(2, 4, 5)], [f32(2, 3, 5)],
                  equation="bij,bjk->bik") == 2 * 2 * 3 * 4 * 5


def test_flops_of_transcendental_ops_exceed_cheap_ones() -> None:
    x = [f32(1000)]
    assert _flops("Exp", x, x) > _flops("Relu", x, x) == 1000
    assert _flops("Erf", x, x) >= 4000 and _flops("Sigmoid", x, x) >= 4000
    assert _flops("Softmax", x, x) >= 4000


def test_every_schema_resolves_its_defaults() -> None:
    """Schemas whose attributes are all optional build a Call from no attributes."""
    for s in REG:
        if any(a.required for a in s.attrs.values()):
            continue
        call = s.call({})
        for name, spec in s.attrs.items():
            if spec.default is not None:
                assert name in call.attrs


def test_kernels_do_not_write_their_inputs() -> None:
    """A few in-place-tempting kernels leave read-only inputs alone."""
    from gerules.ir.ops.api import evaluate

    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    x.setflags(write=False)
    for op, extra in [("Relu", []), ("Softmax", []), ("CumSum", [np.array(1)]),
                      ("ScatterND", [np.array([[0]]), np.ones((1, 4), np.float32)])]:
        evaluate(op, [x, *extra])
    assert x[0, 0] == -5
