"""Small real architectures built with ``onnx.helper`` (no torch), with seeded random weights.

Used by the differential tests (our runtime against onnxruntime), the optimizer's tests and
examples. Importable without pytest or hypothesis.

Invariants:
- Every builder is a pure function of its arguments: the same arguments give byte-identical
  models; ``ModelCase.feeds(seed)`` is a pure function of the seed.
- Models pass ``onnx.checker.check_model(full_check=True)`` and use ai.onnx ops only, with
  node and tensor names as an exporter would write them (``conv1``, ``layer0.attn.q``...).
- Weights are scaled (He init, BatchNorm near identity) so activations stay O(1) and a
  relative tolerance of 1e-4 is meaningful.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FeedsFn = Callable[[int], dict[str, np.ndarray]]


@dataclass(frozen=True, slots=True)
class ModelCase:
    """A model and a way to make valid inputs for it."""

    name: str
    model: onnx.ModelProto
    feeds: FeedsFn


class _Builder:
    """Accumulates nodes and initializers; ``op`` returns the new node's output name."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, name: str, shape: Sequence[int], fan_in: int) -> str:
        w = self.rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)
        return self.const(name, w.astype(np.float32))

    def small(self, name: str, shape: Sequence[int], scale: float = 0.1) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op: str, inputs: Sequence[str], name: str, outputs: int = 1,
           **attrs: Any) -> str:
        outs = [name] if outputs == 1 else [f"{name}:{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs[0]

    def model(self, name: str, inputs: list[onnx.ValueInfoProto],
              outputs: list[onnx.ValueInfoProto], opset: int) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="gerules.testing")
        model.ir_version = 8
        return model


def _conv_bn_relu(b: _Builder, x: str, name: str, cin: int, cout: int, k: int = 3,
                  stride: int = 1, relu: bool = True) -> str:
    w = b.weight(f"{name}.weight", (cout, cin, k, k), cin * k * k)
    bias = b.small(f"{name}.bias", (cout,))
    y = b.op("Conv", [x, w, bias], name, kernel_shape=[k, k], pads=[k // 2] * 4,
             strides=[stride, stride])
    y = _batchnorm(b, y, f"{name}.bn", cout)
    return b.op("Relu", [y], f"{name}.relu") if relu else y


def _batchnorm(b: _Builder, x: str, name: str, c: int) -> str:
    scale = b.const(f"{name}.weight", (1 + 0.1 * b.rng.standard_normal(c)).astype(np.float32))
    bias = b.small(f"{name}.bias", (c,))
    mean = b.small(f"{name}.running_mean", (c,))
    var = b.const(f"{name}.running_var", b.rng.uniform(0.5, 1.5, c).astype(np.float32))
    return b.op("BatchNormalization", [x, scale, bias, mean, var], name, epsilon=1e-5)


def _image_feeds(name: str, shape: tuple[int, ...]) -> FeedsFn:
    def feeds(seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {name: rng.standard_normal(shape).astype(np.float32)}

    return feeds


def cnn(seed: int = 0, batch: int = 2, size: int = 16, classes: int = 10) -> ModelCase:
    """Conv-BN-ReLU x2 with max and average pooling, Flatten and a Gemm head."""
    b = _Builder(seed)
    y = _conv_bn_relu(b, "input", "conv1", 3, 8)
    y = b.op("MaxPool", [y], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    y = _conv_bn_relu(b, y, "conv2", 8, 16)
    y = b.op("AveragePool", [y], "pool2", kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("Flatten", [y], "flatten", axis=1)
    feat = 16 * (size // 4) ** 2
    w = b.weight("fc.weight", (classes, feat), feat)
    b.op("Gemm", [y, w, b.small("fc.bias", (classes,))], "logits", transB=1)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                            ["N", 3, size, size])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])]
    return ModelCase("cnn", b.model("cnn", inputs, outputs, 17),
                     _image_feeds("input", (batch, 3, size, size)))


def residual_block(seed: int = 0, batch: int = 2, channels: int = 16, size: int = 8
                   ) -> ModelCase:
    """A ResNet basic block: relu(x + bn(conv(relu(bn(conv(x)))))), then a global pool."""
    b = _Builder(seed)
    y = _conv_bn_relu(b, "x", "block.conv1", channels, channels)
    y = _conv_bn_relu(b, y, "block.conv2", channels, channels, relu=False)
    y = b.op("Add", ["x", y], "block.add")
    y = b.op("Relu", [y], "block.relu")
    b.op("GlobalAveragePool", [y], "pooled")
    shape: list[str | int] = ["N", channels, size, size]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    outputs = [helper.make_tensor_value_info("block.relu", TensorProto.FLOAT, shape),
               helper.make_tensor_value_info("pooled", TensorProto.FLOAT,
                                             ["N", channels, 1, 1])]
    return ModelCase("residual_block", b.model("residual_block", inputs, outputs, 17),
                     _image_feeds("x", (batch, channels, size, size)))


def _basic_block(b: _Builder, x: str, name: str, cin: int, cout: int, stride: int) -> str:
    y = _conv_bn_relu(b, x, f"{name}.conv1", cin, cout, stride=stride)
    y = _conv_bn_relu(b, y, f"{name}.conv2", cout, cout, relu=False)
    if stride != 1 or cin != cout:
        x = _conv_bn_relu(b, x, f"{name}.down", cin, cout, k=1, stride=stride, relu=False)
    return b.op("Relu", [b.op("Add", [y, x], f"{name}.add")], f"{name}.relu")


def tiny_resnet(seed: int = 0, batch: int = 1, size: int = 32, classes: int = 10
                ) -> ModelCase:
    """A small ResNet (the bundled example): a Conv-BN-ReLU stem, four basic blocks (two
    with a strided 1x1 downsample branch), global average pooling and a Gemm classifier."""
    b = _Builder(seed)
    y = _conv_bn_relu(b, "image", "stem", 3, 16)
    y = b.op("MaxPool", [y], "stem.pool", kernel_shape=[2, 2], strides=[2, 2])
    for i, (cin, cout, stride) in enumerate([(16, 16, 1), (16, 32, 2), (32, 32, 1),
                                             (32, 64, 2)]):
        y = _basic_block(b, y, f"layer{i}", cin, cout, stride)
    y = b.op("GlobalAveragePool", [y], "pool")
    y = b.op("Flatten", [y], "flatten", axis=1)
    w = b.weight("fc.weight", (classes, 64), 64)
    b.op("Gemm", [y, w, b.small("fc.bias", (classes,))], "logits", transB=1)
    inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                            ["N", 3, size, size])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])]
    return ModelCase("tiny_resnet", b.model("tiny_resnet", inputs, outputs, 17),
                     _image_feeds("image", (batch, 3, size, size)))


def _reduce_mean(b: _Builder, x: str, name: str, opset: int) -> str:
    if opset >= 18:
        axes = b.const(f"{name}.axes", np.array([-1], dtype=np.int64))
        return b.op("ReduceMean", [x, axes], name, keepdims=1)
    return b.op("ReduceMean", [x], name, axes=[-1], keepdims=1)


def _layernorm(b: _Builder, x: str, name: str, hidden: int, opset: int, fused: bool) -> str:
    """LayerNormalization, or the subgraph torch's exporter writes for it."""
    gamma = b.const(f"{name}.weight", (1 + 0.1 * b.rng.standard_normal(hidden))
                    .astype(np.float32))
    beta = b.small(f"{name}.bias", (hidden,))
    if fused:
        return b.op("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=1e-5)
    mean = _reduce_mean(b, x, f"{name}.mean", opset)
    d = b.op("Sub", [x, mean], f"{name}.sub")
    sq = b.op("Pow", [d, b.const(f"{name}.two", np.array(2.0, np.float32))], f"{name}.pow")
    var = _reduce_mean(b, sq, f"{name}.var", opset)
    eps = b.const(f"{name}.eps", np.array(1e-5, np.float32))
    std = b.op("Sqrt", [b.op("Add", [var, eps], f"{name}.add_eps")], f"{name}.sqrt")
    y = b.op("Div", [d, std], f"{name}.div")
    return b.op("Add", [b.op("Mul", [y, gamma], f"{name}.scale"), beta], f"{name}.shift")


def _linear(b: _Builder, x: str, name: str, cin: int, cout: int) -> str:
    w = b.weight(f"{name}.weight", (cin, cout), cin)
    y = b.op("MatMul", [x, w], f"{name}.matmul")
    return b.op("Add", [y, b.small(f"{name}.bias", (cout,))], name)


def _gelu_erf(b: _Builder, x: str, name: str) -> str:
    """gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2))), as torch's exporter writes it."""
    y = b.op("Div", [x, b.const(f"{name}.sqrt2", np.array(math.sqrt(2), np.float32))],
             f"{name}.div")
    y = b.op("Erf", [y], f"{name}.erf")
    y = b.op("Add", [y, b.const(f"{name}.one", np.array(1.0, np.float32))], f"{name}.add")
    y = b.op("Mul", [x, y], f"{name}.mul")
    return b.op("Mul", [y, b.const(f"{name}.half", np.array(0.5, np.float32))], name)


def _dims_of(b: _Builder, x: str, name: str) -> tuple[str, str]:
    """(batch, seq) of ``x`` as 1-element int64 tensors: Shape -> Gather -> Unsqueeze."""
    shape = b.op("Shape", [x], f"{name}.shape")
    zero = b.const(f"{name}.axis0", np.array([0], np.int64))
    out = []
    for k, dim in enumerate(("batch", "seq")):
        index = b.const(f"{name}.idx{k}", np.array(k, np.int64))
        scalar = b.op("Gather", [shape, index], f"{name}.{dim}", axis=0)
        out.append(b.op("Unsqueeze", [scalar, zero], f"{name}.{dim}_1d"))
    return out[0], out[1]


def _split_heads(b: _Builder, x: str, name: str, dims: tuple[str, str], heads: int,
                 head_dim: int, perm: Sequence[int]) -> str:
    tail = b.const(f"{name}.heads", np.array([heads, head_dim], np.int64))
    shape = b.op("Concat", [dims[0], dims[1], tail], f"{name}.new_shape", axis=0)
    y = b.op("Reshape", [x, shape], f"{name}.reshape")
    return b.op("Transpose", [y], f"{name}.transpose", perm=list(perm))


def _attention(b: _Builder, x: str, mask: str, name: str, hidden: int, heads: int) -> str:
    d = hidden // heads
    dims = _dims_of(b, x, name)
    q = _split_heads(b, _linear(b, x, f"{name}.q", hidden, hidden), f"{name}.q", dims,
                     heads, d, (0, 2, 1, 3))
    k = _split_heads(b, _linear(b, x, f"{name}.k", hidden, hidden), f"{name}.k", dims,
                     heads, d, (0, 2, 3, 1))
    v = _split_heads(b, _linear(b, x, f"{name}.v", hidden, hidden), f"{name}.v", dims,
                     heads, d, (0, 2, 1, 3))
    scores = b.op("MatMul", [q, k], f"{name}.scores")
    scale = b.const(f"{name}.scale", np.array(math.sqrt(d), np.float32))
    scores = b.op("Add", [b.op("Div", [scores, scale], f"{name}.scaled"), mask],
                  f"{name}.masked")
    probs = b.op("Softmax", [scores], f"{name}.softmax", axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v], f"{name}.context")],
               f"{name}.context_t", perm=[0, 2, 1, 3])
    width = b.const(f"{name}.hidden", np.array([hidden], np.int64))
    shape = b.op("Concat", [dims[0], dims[1], width], f"{name}.merged_shape", axis=0)
    ctx = b.op("Reshape", [ctx, shape], f"{name}.merge")
    return _linear(b, ctx, f"{name}.out", hidden, hidden)


def _encoder_layer(b: _Builder, x: str, mask: str, name: str, hidden: int, heads: int,
                   opset: int, fused_ln: bool) -> str:
    a = _attention(b, x, mask, f"{name}.attn", hidden, heads)
    x = _layernorm(b, b.op("Add", [x, a], f"{name}.attn_residual"), f"{name}.ln1", hidden,
                   opset, fused_ln)
    h = _gelu_erf(b, _linear(b, x, f"{name}.ffn.up", hidden, 4 * hidden), f"{name}.ffn.gelu")
    h = _linear(b, h, f"{name}.ffn.down", 4 * hidden, hidden)
    return _layernorm(b, b.op("Add", [x, h], f"{name}.ffn_residual"), f"{name}.ln2", hidden,
                      opset, fused_ln)


def _extended_mask(b: _Builder, mask: str) -> str:
    """[N,S] 0/1 int64 -> [N,1,1,S] float32 with 0 where attended and -10000 where masked."""
    axes = b.const("mask.axes", np.array([1, 2], np.int64))
    m = b.op("Cast", [b.op("Unsqueeze", [mask, axes], "mask.unsqueeze")], "mask.cast",
             to=TensorProto.FLOAT)
    inv = b.op("Sub", [b.const("mask.one", np.array(1.0, np.float32)), m], "mask.invert")
    return b.op("Mul", [inv, b.const("mask.neg", np.array(-10000.0, np.float32))],
                "mask.extended")


def _embeddings(b: _Builder, ids: str, vocab: int, max_len: int, hidden: int, opset: int
                ) -> str:
    words = b.op("Gather", [b.small("embeddings.word", (vocab, hidden), 1.0), ids],
                 "embeddings.word_lookup", axis=0)
    seq = _dims_of(b, ids, "embeddings")[1]
    seq = b.op("Squeeze", [seq, b.const("embeddings.sq_axis", np.array([0], np.int64))],
               "embeddings.seq_scalar")
    start = b.const("embeddings.start", np.array(0, np.int64))
    step = b.const("embeddings.step", np.array(1, np.int64))
    positions = b.op("Range", [start, seq, step], "embeddings.positions")
    pos = b.op("Gather", [b.small("embeddings.position", (max_len, hidden), 1.0), positions],
               "embeddings.position_lookup", axis=0)
    x = b.op("Add", [words, pos], "embeddings.add")
    return _layernorm(b, x, "embeddings.ln", hidden, opset, fused=False)


def transformer_encoder(seed: int = 0, *, layers: int = 2, hidden: int = 32, heads: int = 4,
                        vocab: int = 50, seq: int = 8, batch: int = 2, opset: int = 17
                        ) -> ModelCase:
    """A BERT-style encoder: embeddings, ``layers`` post-LN layers, a tanh pooler.

    Even layers use the LayerNormalization op, odd layers and the embeddings the
    ReduceMean/Sub/Pow/Sqrt/Div subgraph; the attention mask is [N,S] int64 (1 = attend).
    """
    b = _Builder(seed)
    x = _embeddings(b, "input_ids", vocab, 4 * seq, hidden, opset)
    mask = _extended_mask(b, "attention_mask")
    for i in range(layers):
        x = _encoder_layer(b, x, mask, f"layer{i}", hidden, heads, opset, fused_ln=i % 2 == 0)
    x = b.op("Identity", [x], "last_hidden_state")
    cls = b.op("Gather", [x, b.const("pooler.index", np.array(0, np.int64))], "pooler.cls",
               axis=1)
    w = b.weight("pooler.weight", (hidden, hidden), hidden)
    dense = b.op("Gemm", [cls, w, b.small("pooler.bias", (hidden,))], "pooler.dense", transB=1)
    b.op("Tanh", [dense], "pooler_output")
    ints = TensorProto.INT64
    inputs = [helper.make_tensor_value_info(n, ints, ["batch", "seq"])
              for n in ("input_ids", "attention_mask")]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch", "seq", hidden]),
               helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT,
                                             ["batch", hidden])]
    model = b.model("transformer_encoder", inputs, outputs, opset)
    return ModelCase("transformer_encoder", model, _token_feeds(vocab, batch, seq))


def _token_feeds(vocab: int, batch: int, seq: int) -> FeedsFn:
    def feeds(seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        ids = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
        lengths = rng.integers(1, seq + 1, size=batch)
        lengths[0] = seq  # one full row, the others padded
        mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
        return {"input_ids": ids, "attention_mask": mask}

    return feeds


# Every builder by name, for parametrized tests and examples.
MODELS: dict[str, Callable[[], ModelCase]] = {
    "cnn": cnn,
    "residual_block": residual_block,
    "transformer_encoder": transformer_encoder,
    "tiny_resnet": tiny_resnet,
}


def control_flow(seed: int = 0, rows: int = 2, cols: int = 3, trips: int = 3) -> ModelCase:
    """If, Loop and Scan reading enclosing values, the way exporters write them:
    ``y = If(sum(x) > 0, x * w, x - w)`` (both branches read x and w from outside),
    ``z, zs = Loop(trips, acc += y)`` (the body reads y from outside) and a Scan running sum
    with a Relu over the rows of ``z``."""
    rng = np.random.default_rng(seed)
    f32, shape = TensorProto.FLOAT, [rows, cols]

    def info(name: str, dtype: int, dims: list[int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, dtype, dims)

    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["then_y"])], "then", [],
                             [info("then_y", f32, shape)])
    other = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["else_y"])], "else", [],
                              [info("else_y", f32, shape)])
    loop = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "y"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["acc_seen"])], "loop_body",
        [info("i", TensorProto.INT64, []), info("cond_in", TensorProto.BOOL, []),
         info("acc_in", f32, shape)],
        [info("cond_out", TensorProto.BOOL, []), info("acc_out", f32, shape),
         info("acc_seen", f32, shape)])
    scan = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_out"]),
         helper.make_node("Relu", ["s_out"], ["r"])], "scan_body",
        [info("s_in", f32, [cols]), info("row", f32, [cols])],
        [info("s_out", f32, [cols]), info("r", f32, [cols])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other,
                              name="branch"),
             helper.make_node("Loop", ["trips", "true", "acc0"], ["z", "zs"], body=loop,
                              name="accumulate"),
             helper.make_node("Scan", ["init", "z"], ["final", "rs"], body=scan,
                              num_scan_inputs=1, name="running_sum")]
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(trips, np.int64), "trips"),
             numpy_helper.from_array(np.array(True), "true"),
             numpy_helper.from_array(np.zeros(shape, np.float32), "acc0"),
             numpy_helper.from_array(np.zeros(cols, np.float32), "init")]
    graph = helper.make_graph(
        nodes, "control_flow", [info("x", f32, shape)],
        [info("z", f32, shape), info("zs", f32, [trips, *shape]), info("final", f32, [cols]),
         info("rs", f32, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ModelCase("control_flow", model, _image_feeds("x", (rows, cols)))
