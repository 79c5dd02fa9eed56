"""Small MindSpore nets exported to MindIR, for the MindIR frontend's tests (needs the
``mindspore`` extra; run through ``gerules.frontends.isolate.run_isolated``, so the calling
process never imports MindSpore; with ``sandbox=False``, since it writes into ``folder``).

``build({"kinds", "folder", "seed"}, output)`` builds each net with random weights (and
BatchNorm statistics), exports ``<kind>.mindir`` in inference mode, runs MindSpore itself on
a seeded random input and writes JSON to ``output``: per kind the path, the input and
MindSpore's output (nested lists).

Kinds: ``cnn`` (Conv2d/BatchNorm2d/ReLU/Flatten/Dense), ``resnet`` (a stem with bias and
``valid`` padding, max pooling, two residual blocks with ``pad``/``same`` convolutions and a
strided 1x1 projection, average pooling, mean over H and W, Dense, then softmax * sigmoid -
tanh).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

SHAPES = {"cnn": (2, 3, 8, 8), "resnet": (2, 3, 18, 18)}


def _nets() -> dict[str, Any]:
    from mindspore import nn, ops

    class Block(nn.Cell):  # type: ignore[misc]
        def __init__(self, c: int, stride: int) -> None:
            super().__init__()
            cin = c if stride == 1 else c // 2
            self.c1 = nn.Conv2d(cin, c, 3, stride, pad_mode="pad", padding=1, has_bias=False)
            self.b1 = nn.BatchNorm2d(c)
            self.c2 = nn.Conv2d(c, c, 3, 1, pad_mode="same")
            self.b2 = nn.BatchNorm2d(c)
            self.proj = nn.Conv2d(cin, c, 1, stride, has_bias=False) if stride != 1 else None
            self.relu = nn.ReLU()

        def construct(self, x: Any) -> Any:
            y = self.b2(self.c2(self.relu(self.b1(self.c1(x)))))
            return self.relu(y + (self.proj(x) if self.proj is not None else x))

    class ResNet(nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, pad_mode="valid", has_bias=True)
            self.pool = nn.MaxPool2d(2, 2)
            self.b1, self.b2 = Block(8, 1), Block(16, 2)
            self.avg = nn.AvgPool2d(2, 2)
            self.fc = nn.Dense(16, 10)
            self.softmax, self.sig = nn.Softmax(), nn.Sigmoid()

        def construct(self, x: Any) -> Any:
            y = self.b2(self.b1(self.pool(ops.relu(self.stem(x)))))
            y = self.fc(ops.mean(self.avg(y), (2, 3)))
            return self.softmax(y) * self.sig(y) - ops.tanh(y)

    cnn = nn.SequentialCell([nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                             nn.Dense(8 * 8 * 8, 10)])
    return {"cnn": cnn, "resnet": ResNet()}


def build(request: Mapping[str, Any], output: Path) -> None:
    """The isolated entry point (see the module docstring)."""
    import mindspore as ms

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    folder = Path(request["folder"])
    rng = np.random.default_rng(int(request.get("seed", 0)))
    nets = _nets()
    result = {}
    for kind in request["kinds"]:
        net = nets[kind]
        for name, p in net.parameters_and_names():
            low = 0.5 if "variance" in name or "gamma" in name else -0.5
            p.set_data(ms.Tensor(rng.uniform(low, low + 1.0, p.shape).astype(np.float32)))
        net.set_train(False)
        x = rng.standard_normal(SHAPES[kind]).astype(np.float32)
        path = folder / kind
        ms.export(net, ms.Tensor(x), file_name=str(path), file_format="MINDIR")
        y = net(ms.Tensor(x)).asnumpy()
        result[kind] = {"mindir": f"{path}.mindir", "input": x.tolist(), "output": y.tolist()}
    output.write_text(json.dumps(result))
