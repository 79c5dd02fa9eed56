"""Build a small CNN by hand with gerules' Python API, compile it to a .om and run it.

    python examples/build_cnn.py [--output DIR]

The graph: conv-bn-relu, max-pool, conv-bn-relu, global average pool, a linear classifier and
softmax, with seeded random weights. It is validated, compiled for an Ascend310-like NPU (the
optimizer folds the batch norms into the convolutions and fuses the ReLUs), and the compiled
.om is checked against the reference executor running the graph as built.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import gerules as ge


def conv_bn_relu(g: ge.GraphBuilder, x: ge.Tensor, name: str, cin: int, cout: int,
                 rng: np.random.Generator) -> ge.Tensor:
    """3x3 convolution (same padding), inference batch norm and ReLU."""
    w = g.const((rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (cin * 9)))
                .astype(np.float32), name=f"{name}.weight")
    y = g.ops.Conv(x, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1], name=name)
    scale, bias, mean = (g.const(rng.uniform(0.5, 1.5, cout).astype(np.float32),
                                 name=f"{name}.bn.{p}") for p in ("scale", "bias", "mean"))
    var = g.const(rng.uniform(0.5, 1.5, cout).astype(np.float32), name=f"{name}.bn.var")
    y = g.ops.BatchNormalization(y, scale, bias, mean, var, epsilon=1e-5, name=f"{name}.bn")
    return g.ops.Relu(y, name=f"{name}.relu")


def build(batch: int, classes: int = 10, seed: int = 0) -> ge.GraphBuilder:
    rng = np.random.default_rng(seed)
    g = ge.GraphBuilder("hand_cnn")
    x = g.input("image", [batch, 3, 32, 32], "float32")
    y = conv_bn_relu(g, x, "conv1", 3, 16, rng)
    y = g.ops.MaxPool(y, kernel_shape=[2, 2], strides=[2, 2], name="pool1")
    y = conv_bn_relu(g, y, "conv2", 16, 32, rng)
    y = g.ops.Flatten(g.ops.GlobalAveragePool(y, name="gap"), axis=1, name="flatten")
    w = g.const((rng.standard_normal((32, classes)) * 0.1).astype(np.float32), name="fc.w")
    b = g.const(np.zeros(classes, np.float32), name="fc.b")
    logits = g.op("Gemm", y, w, b, name="fc")
    g.output(g.ops.Softmax(logits, axis=-1, name="probs"))
    return g


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, help="folder for hand_cnn.om (default: temp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gerules-example-") as tmp:
        compile_and_run(args.output or Path(tmp))


def compile_and_run(folder: Path) -> None:
    g = build(batch=4)
    g.validate()  # raises a GeError naming the node if anything is wrong
    print(f"built {g.name}: {len(g.nodes)} nodes, output {g.outputs[0]}")

    options = ge.CompileOptions(opt_level="O2", soc_version="Ascend310")
    path = ge.compile(g, options, output=folder / "hand_cnn")
    print(f"compiled to {path} ({path.stat().st_size} bytes)")

    image = np.random.default_rng(1).standard_normal((4, 3, 32, 32)).astype(np.float32)
    with ge.Session(path) as session, ge.Session(g, executor="reference") as reference:
        print("compiled graph:", ", ".join(f"{op} x{n}" for op, n in
                                           session.graph.op_counts().items()))
        got = session.run({"image": image})["probs"]
        want = reference.run({"image": image})["probs"]
    print(f"max |om - reference| = {float(np.abs(got - want).max()):.2e}")
    print("predicted classes:", got.argmax(axis=1).tolist())


if __name__ == "__main__":
    main()
