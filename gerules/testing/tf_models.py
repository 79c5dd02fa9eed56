"""Small TensorFlow models built in code for the TensorFlow frontend's tests (needs the
``tensorflow`` extra; run through ``gerules.frontends.isolate.run_isolated`` so the calling
process never imports TensorFlow; with ``sandbox=False``, since it writes into ``folder``).

``build({"kinds", "folder", "seed"}, output)`` builds each Keras model with random weights
(BatchNormalization statistics too), writes it as a frozen GraphDef (``<kind>.pb``, input
node ``input``) and as a SavedModel folder (``<kind>_saved``, signature input ``input``),
runs TensorFlow itself on a seeded random input and writes JSON to ``output``: per kind the
paths, the input and TensorFlow's output (as nested lists), the output node's name and the
name of the first Relu node.

Kinds: ``cnn`` (Conv/BN/ReLU/pool/Dense), ``resnet`` (conv-BN-ReLU stem, two residual
blocks, one with a strided projection, global pooling, Dense, softmax), ``transformer`` (one
encoder block: multi-head attention, residual + LayerNorm, tanh-GELU feed-forward), ``igamma``
(an op tf2onnx cannot convert, ``Igamma``, named ``special``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

SHAPES = {"cnn": (2, 16, 16, 3), "resnet": (2, 16, 16, 3), "transformer": (2, 8, 16),
          "igamma": (2, 4)}


def _randomize(model: Any, rng: np.random.Generator) -> None:
    """Random weights everywhere, and BatchNorm statistics far from the identity."""
    for layer in model.layers:
        weights = layer.get_weights()
        if not weights:
            continue
        if type(layer).__name__ == "BatchNormalization":
            c = weights[0].shape
            layer.set_weights([rng.uniform(0.5, 1.5, c), rng.normal(0, 0.3, c),
                               rng.normal(0, 0.5, c), rng.uniform(0.5, 2.0, c)])
        else:
            layer.set_weights([rng.normal(0, 0.3, w.shape).astype(np.float32)
                               for w in weights])


def _model(kind: str) -> Any:
    import keras
    from keras import layers as L

    x = keras.Input(SHAPES[kind][1:], batch_size=None, name="input")
    if kind == "cnn":
        y = L.Conv2D(8, 3, padding="same")(x)
        y = L.ReLU()(L.BatchNormalization()(y))
        y = L.MaxPooling2D(2)(y)
        y = L.Dense(10)(L.Flatten()(y))
    elif kind == "resnet":
        def conv_bn(t: Any, filters: int, stride: int = 1, relu: bool = True) -> Any:
            t = L.BatchNormalization()(L.Conv2D(filters, 3, stride, padding="same",
                                                use_bias=False)(t))
            return L.ReLU()(t) if relu else t

        y = conv_bn(x, 8)
        y = L.ReLU()(L.Add()([y, conv_bn(conv_bn(y, 8), 8, relu=False)]))
        shortcut = L.BatchNormalization()(L.Conv2D(16, 1, 2, use_bias=False)(y))
        y = L.ReLU()(L.Add()([shortcut, conv_bn(conv_bn(y, 16, 2), 16, relu=False)]))
        y = L.Dense(10, activation="softmax")(L.GlobalAveragePooling2D()(y))
    else:
        attn = L.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)
        h = L.LayerNormalization(epsilon=1e-5)(L.Add()([x, attn]))
        def gelu(t: Any) -> Any:  # the tanh form (tf2onnx has no Erfc for the exact one)
            return keras.activations.gelu(t, approximate=True)

        ff = L.Dense(16)(L.Dense(32, activation=gelu)(h))
        y = L.LayerNormalization(epsilon=1e-5)(L.Add()([h, ff]))
    return keras.Model(x, y)


def build(request: Mapping[str, Any], output: Path) -> None:
    """The isolated entry point (see the module docstring)."""
    import tensorflow as tf

    folder = Path(request["folder"])
    seed = int(request.get("seed", 0))
    tf.random.set_seed(seed)
    rng = np.random.default_rng(seed)
    output.write_text(json.dumps({kind: _build(kind, folder, rng) for kind in request["kinds"]}))


def _build(kind: str, folder: Path, rng: np.random.Generator) -> dict[str, Any]:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    spec = tf.TensorSpec((None, *SHAPES[kind][1:]), tf.float32, name="input")
    module = tf.Module()
    if kind == "igamma":
        def call(x: Any) -> Any:
            return tf.math.igamma(tf.abs(x) + 1.0, tf.abs(x), name="special") * 2.0
    else:
        model = module.model = _model(kind)  # the SavedModel tracks its variables
        _randomize(model, rng)

        def call(x: Any) -> Any:
            return model(x, training=False)
    function = tf.function(lambda input: call(input))
    frozen = convert_variables_to_constants_v2(function.get_concrete_function(spec))
    pb = folder / f"{kind}.pb"
    pb.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    module.serve = tf.function(lambda input: {"output": call(input)}, input_signature=[spec])
    saved = folder / f"{kind}_saved"
    tf.saved_model.save(module, str(saved), signatures=module.serve)
    x = rng.standard_normal(SHAPES[kind]).astype(np.float32)
    y = np.asarray(frozen(tf.constant(x))[0])
    relus = [n.name for n in frozen.graph.as_graph_def().node if n.op == "Relu"]
    return {"pb": str(pb), "saved_model": str(saved), "input": x.tolist(),
            "output": y.tolist(), "output_node": frozen.outputs[0].name.split(":")[0],
            "first_relu": relus[0] if relus else None}
