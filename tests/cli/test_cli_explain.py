"""``ge-rewrite explain``: the fusions with their rule chains, and the guards that refused."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from gerules.cli.main import main
from gerules.testing.models import residual_block


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "block.onnx"
    onnx.save(residual_block().model, path)
    return path


def test_explain_names_rules_chains_and_replaced_nodes(model: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(model)]) == 0
    out = capsys.readouterr().out
    assert "2 fusion(s) at O2 for npu" in out
    assert "fold_conv_bn -> fuse_conv_add_relu" in out
    assert "block.add (Add)" in out and "block.conv2.bn (BatchNormalization)" in out
    assert "matched but not applied:" in out
    assert "pattern constant" not in out  # x * 2 is no match for x * 1, not a rejection
    assert "  fuse_conv_add_relu: 1 / 1 / 1" in out
    assert not list(model.parent.glob("*.om"))  # nothing is written


def test_explain_filters_by_node_and_rule(model: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(model), "--node", "conv1"]) == 0
    out = capsys.readouterr().out
    assert "1 fusion(s)" in out and "block.conv1.relu" in out and "block.add" not in out
    assert main(["explain", str(model), "--rule", "fuse_add_relu"]) == 0
    out = capsys.readouterr().out
    assert "0 fusion(s)" in out and "fuse_add_relu" in out and "mul_one" not in out


def test_explain_with_the_rule_switched_off(model: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    switch = tmp_path / "off.txt"
    switch.write_text("fuse_conv_add_relu:off\n")
    assert main(["explain", str(model), "--fusion_switch_file", str(switch)]) == 0
    assert "fuse_conv_add_relu" not in capsys.readouterr().out.split("matched but")[0]
