"""The conversion article's atc command line runs as written (ge-rewrite for atc), and each of
its flags and the flags around it does what it says: implementation modes, memory reuse,
buffer optimization, AI core count, small channel, SoC names without a profile of their own."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from gerules.cli.main import main
from gerules.om.reader import OmFile
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.models import cnn, transformer_encoder

SWITCH_CFG = """# atc's fusion switch file, NAME:off a line
V100RequantFusionPass:off
ConvToFullyConnectionFusionPass:off
TbeConvReluFusionPass:off
"""


def test_the_articles_command_line_runs_as_written(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    onnx.save(cnn(size=224, batch=1).model, tmp_path / "model.onnx")
    (tmp_path / "fusion_switch.cfg").write_text(SWITCH_CFG)
    argv = f"""--model={tmp_path}/model.onnx --output={tmp_path}/output_model --framework=5
        --input_shape=input:1,3,224,224 --input_format=NCHW --soc_version=Ascend910
        --precision_mode=allow_fp32_to_fp16 --op_select_implmode=high_performance
        --fusion_switch_file={tmp_path}/fusion_switch.cfg --enable_small_channel=1
        --log=INFO""".split()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "output_model.om").is_file()
    assert (tmp_path / "fusion_result.json").is_file()
    assert "no effect yet" not in out  # the small-channel first conv is real now
    with OmFile(tmp_path / "output_model.om") as om:
        options = om.contents.compile_options
        assert options["enable_small_channel"] is True
        assert options["op_select_implmode"] == "high_performance"
        assert "fuse_conv_activation[Act=Relu]" in options["fusion_switch_off"]  # TbeConvRelu
        assert any("read(s) C0 = 4 blocks" in n for n in om.report()["notes"])


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("implmode") / "encoder.onnx"
    onnx.save(transformer_encoder().model, path)
    return path


def _compile(model: Path, out: Path, *flags: str) -> dict:
    assert main(["compile", str(model), f"--output={out}", "--quiet",
                 "--input_shape=input_ids:2,8;attention_mask:2,8", f"--report={out}.json",
                 *flags]) == 0
    return json.loads(Path(f"{out}.json").read_text())


def test_implmode_picks_fast_forms_and_names_them(encoder: Path, tmp_path: Path) -> None:
    exact = _compile(encoder, tmp_path / "exact")
    fast = _compile(encoder, tmp_path / "fast", "--op_select_implmode=high_performance")
    assert exact["implmode"]["changed"] == []
    changed = fast["implmode"]["changed"]
    assert len(changed) == 2 and {c["to"] for c in changed} == {"tanh"}
    assert fast["figures"]["estimate_us"]["final"] <= exact["figures"]["estimate_us"]["final"]
    feeds = transformer_encoder().feeds(0)
    with Model.load(tmp_path / "exact.om") as a, Model.load(tmp_path / "fast.om") as b:
        want, got = a.run(feeds), b.run(feeds)
    diff = np.max(np.abs(want["last_hidden_state"] - got["last_hidden_state"]))
    assert 0 < diff < 1e-2  # a different kernel, within GELU tanh's bound
    limited = _compile(encoder, tmp_path / "limited", "--op_select_implmode=high_performance",
                       "--optypelist_for_implmode=Gelu")
    assert len(limited["implmode"]["changed"]) == 2


@pytest.mark.parametrize(("flags", "message"), [
    (["--op_select_implmode=fastest"], "--op_select_implmode: unknown mode 'fastest'"),
    (["--op_select_implmode=high_performance", "--optypelist_for_implmode=Softmax"],
     "no op type 'Softmax' has two forms"),
    (["--aicore_num=64"], "--aicore_num: 64 is outside 1..32"),
    (["--buffer_optimize=l3_optimize"], "--buffer_optimize: unknown value 'l3_optimize'"),
    (["--disable_reuse_memory=yes"], "--disable_reuse_memory: expected 0 or 1"),
])
def test_bad_values_are_usage_errors(encoder: Path, tmp_path: Path, flags: list[str],
                                     message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(encoder), f"--output={tmp_path / 'x'}", *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.om").exists()


def test_disable_reuse_memory_plans_every_tensor_apart(tmp_path: Path) -> None:
    model = tmp_path / "cnn.onnx"
    onnx.save(cnn().model, model)
    out = tmp_path / "noreuse"
    assert main(["compile", str(model), f"--output={out}", "--input_shape=input:2,3,16,16",
                 "--disable_reuse_memory=1", "--quiet"]) == 0
    feeds = cnn().feeds(0)
    with Model.load(f"{out}.om") as m:
        figures = m.figures[0]
        assert figures is not None and figures.arena == figures.no_reuse > figures.lower_bound
        got = m.run(feeds)["logits"]
    from gerules.onnx_io import load_model

    want = run_graph(load_model(model), feeds)["logits"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_aicore_num_scales_the_profile_and_soc_names_without_a_profile(
        encoder: Path, tmp_path: Path) -> None:
    full = _compile(encoder, tmp_path / "full", "--soc_version=Ascend910B4")
    fewer = _compile(encoder, tmp_path / "fewer", "--soc_version=Ascend910B4", "--aicore_num=6")
    assert full["figures"]["soc"] == "Ascend910B4"
    assert "estimated with the Ascend910B profile" in full["notes"][0]
    assert fewer["soc_profile"]["ai_cores"] == 6 and "6 of 24 AI cores" in fewer["notes"][0]
    assert fewer["figures"]["estimate_us"]["source"] > full["figures"]["estimate_us"]["source"]
    edge = _compile(encoder, tmp_path / "edge", "--soc_version=Ascend310B1")
    assert "Ascend310 profile" in edge["notes"][0]


def test_buffer_optimize_is_accepted_and_said_to_change_nothing(encoder: Path,
                                                                tmp_path: Path) -> None:
    plain = _compile(encoder, tmp_path / "plain")
    tuned = _compile(encoder, tmp_path / "tuned", "--buffer_optimize=l2_optimize")
    assert any("--buffer_optimize=l2_optimize: no effect" in n for n in tuned["notes"])
    assert tuned["figures"]["memory"] == plain["figures"]["memory"]
    assert tuned["figures"]["estimate_us"] == plain["figures"]["estimate_us"]


def test_the_fast_gelu_counts_fewer_operations() -> None:
    """The cost model counts fewer operations for the tanh form; GELU is memory-bound on the
    shipped profiles, so the estimated time changes only where compute dominates."""
    from gerules.cost import NpuCostModel
    from gerules.ir.graph import TensorType
    from gerules.ir.registry import default_registry

    schema = default_registry().get("Gelu", "ge", 17)
    t = TensorType("float32", (8, 1024))
    model = NpuCostModel("Ascend910")
    flops = {mode: model.estimate(schema, [t], [t],
                                  schema.call({"approximate": mode}, 1, "g")).flops
             for mode in ("none", "tanh")}
    assert flops["tanh"] < flops["none"]
