"""Graphs the API tests share: a tiny CNN built with the public API, and its input."""

from __future__ import annotations

import numpy as np

import gerules as ge


def tiny_cnn(batch: int | str = "N", seed: int = 0) -> ge.GraphBuilder:
    """conv-relu, conv-bn-relu, global average pool, flatten: fusable, quick to compile."""
    rng = np.random.default_rng(seed)
    g = ge.GraphBuilder("tiny_cnn")
    x = g.input("x", [batch, 3, 8, 8])
    w1 = g.const(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), name="w1")
    y = g.ops.Relu(g.ops.Conv(x, w1, pads=[1, 1, 1, 1], name="conv1"), name="relu1")
    w2 = g.const(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), name="w2")
    y = g.ops.Conv(y, w2, name="conv2")
    stats = [g.const(rng.uniform(0.5, 1.5, 4).astype(np.float32)) for _ in range(4)]
    y = g.ops.Relu(g.ops.BatchNormalization(y, *stats, name="bn2"), name="relu2")
    g.output(g.ops.Flatten(g.ops.GlobalAveragePool(y), name="features"))
    return g


def image(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 3, 8, 8)).astype(np.float32)
