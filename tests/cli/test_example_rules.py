"""The rule files of ``examples/rules/`` through the CLI, each on a small torch-exported model
it is written for: verified by ``rules verify --rules``, fired by ``optimize --rules``, and the
optimized model (its own ops written as ONNX functions) computing what the exported one does
in onnxruntime. ``rms_norm.ger`` (an op defined in .ger) has its own, deeper test in
``test_user_ops.py``; together they cover every file of the folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from gerules.cli.main import main

from .test_user_ops import SKIP, export, onnxruntime_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rules"


def quick_gelu_mlp(torch: Any) -> Any:
    """A CLIP-style MLP: QuickGELU between two Linear layers."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

        def forward(self, x: Any) -> Any:
            h = self.fc1(x)
            return self.fc2(h * torch.sigmoid(1.702 * h))

    return Block()


def small_cnn(torch: Any) -> Any:
    """Conv, an increasing activation, MaxPool: twice."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Tanh(), nn.MaxPool2d(2), nn.Conv2d(4, 4, 3),
                         nn.Sigmoid(), nn.MaxPool2d(2))


def three_projections(torch: Any) -> Any:
    """Query, key and value projections of one input into an attention."""

    class QKV(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(16, 8, bias=False) for _ in range(3))

        def forward(self, x: Any) -> Any:
            scores = self.q(x) @ self.k(x).transpose(1, 2)
            return torch.softmax(scores, -1) @ self.v(x)

    return QKV()


def concat_read_apart(torch: Any) -> Any:
    """Features concatenated, then sliced apart again (``h[..., :d]``, ``h[..., d:]``)."""

    class Apart(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            h = torch.cat([torch.relu(x), torch.tanh(x)], dim=-1)
            d = x.shape[-1]
            return h[..., :d] * h[..., d:]

    return Apart()


def ops_of(path: Path) -> list[str]:
    return [n.op_type for n in onnx.load(path).graph.node]


CASES: dict[str, tuple[Callable[[Any], Any], tuple[int, ...], str, Callable[[Path], bool]]] = {
    # file: (model, input shape, the rule that must fire, what the optimized model shows)
    "quick_gelu.ger": (quick_gelu_mlp, (2, 4, 16), "fuse_quick_gelu",
                       lambda out: "QuickGelu" in ops_of(out) and "Sigmoid" not in ops_of(out)
                       and [f.name for f in onnx.load(out).functions] == ["QuickGelu"]),
    "pool_activation.ger": (small_cnn, (1, 3, 16, 16), "max_pool_before_activation",
                            lambda out: ops_of(out) == ["Conv", "MaxPool", "Tanh", "Conv",
                                                        "MaxPool", "Sigmoid"]),
    "horizontal.ger": (three_projections, (2, 5, 16), "fuse_three_projections",
                       lambda out: ops_of(out).count("MatMul") == 3 and "Split" in ops_of(out)),
    "slices.ger": (concat_read_apart, (2, 5, 8), "slice_second_part_of_concat",
                   lambda out: sorted(ops_of(out)) == ["Mul", "Relu", "Tanh"]),
}


def test_every_example_file_is_tested() -> None:
    assert {p.name for p in EXAMPLES.glob("*.ger")} == {*CASES, "rms_norm.ger"}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_an_example_rule_file_verifies_fires_and_agrees_with_onnxruntime(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch", reason=SKIP)
    make, shape, rule, shows = CASES[name]
    path = EXAMPLES / name
    assert main(["rules", "verify", "--rules", str(path), "--examples", "4"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("rules verified: ")
    torch.manual_seed(0)
    model = export(torch, make(torch), shape, tmp_path / "m.onnx", 17)
    out = tmp_path / "out.onnx"
    assert main(["optimize", str(model), "--rules", str(path), "-o", str(out)]) == 0
    table = capsys.readouterr().out
    kept = [line.split() for line in table.splitlines() if line.startswith(rule + " ")]
    assert kept and int(kept[0][-1]) > 0, table  # the rule's rewrite is in the result
    assert shows(out), ops_of(out)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(onnxruntime_run(out, x), onnxruntime_run(model, x),
                               rtol=1e-5, atol=1e-5)
