"""atc's flags on ``ge-rewrite compile``: each changes what it should, bad values are one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gerules.cli.main import main
from gerules.om.reader import OmFile
from gerules.onnx_io import load_model
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.models import cnn

SHAPE = "--input_shape=input:2,3,16,16"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("atc")
    onnx.save(cnn().model, path / "cnn.onnx")
    model = cnn().model
    model.graph.node.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax"))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("probs", TensorProto.FLOAT,
                                                            ["N", 10]))
    onnx.save(model, path / "classifier.onnx")
    return path


def _compile(folder: Path, name: str, *argv: str, model: str = "cnn.onnx") -> Path:
    out = folder / name
    code = main(["compile", f"--model={folder / model}", f"--output={out}", SHAPE, *argv])
    assert code == 0
    return Path(f"{out}.om")


def _om_graph(path: Path):  # noqa: ANN202 - a Graph
    with OmFile(path) as om:
        return om.contents.variants[0].graph


def _feeds() -> dict[str, np.ndarray]:
    return cnn().feeds(3)


def _dtypes(graph, op: str) -> set[str]:  # noqa: ANN001
    return {graph.type_of(n.outputs[0]).dtype for n in graph.nodes if n.qualified_op == op}


def test_atc_command_line_without_a_subcommand(folder: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    argv = [f"--model={folder / 'cnn.onnx'}", "--framework=5", f"--output={folder / 'top'}",
            "--soc_version=Ascend310", SHAPE, "--log=error"]
    assert main(argv) == 0
    assert "ge.FusedConv" in capsys.readouterr().out
    with OmFile(folder / "top.om") as om:
        assert om.contents.command_line.startswith("ge-rewrite --model=")
        assert om.contents.soc_version == "Ascend310"
        assert om.contents.variants[0].graph.inputs[0].shape == (2, 3, 16, 16)  # input_shape


def test_force_fp16_om_is_within_1e_2_of_float32(folder: Path) -> None:
    om = _compile(folder, "fp16", "--precision_mode=force_fp16")
    assert _dtypes(_om_graph(om), "ge.FusedConv") == {"float16"}
    want = run_graph(load_model(folder / "cnn.onnx"), _feeds())["logits"]
    with Model.load(om) as m:
        got = m.run(_feeds())["logits"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * float(np.abs(want).max()))


def test_mix_precision_keeps_softmax_in_float32(folder: Path) -> None:
    om = _compile(folder, "mix", "--precision_mode=allow_mix_precision",
                  model="classifier.onnx")
    graph = _om_graph(om)
    assert _dtypes(graph, "Softmax") == {"float32"}
    assert _dtypes(graph, "ge.FusedConv") == {"float16"}
    mixlist = folder / "mix.json"
    mixlist.write_text(json.dumps({"white-list": {"to-add": ["Softmax"]}}))
    om = _compile(folder, "mix2", "--precision_mode=allow_mix_precision",
                  f"--modify_mixlist={mixlist}", model="classifier.onnx")
    assert _dtypes(_om_graph(om), "Softmax") == {"float16"}


def test_keep_dtype_pins_a_node(folder: Path) -> None:
    keep = folder / "keep.cfg"
    keep.write_text("# stays float32\nconv1\n")
    om = _compile(folder, "keep", "--precision_mode=force_fp16", f"--keep_dtype={keep}")
    fused = {n.name: _om_graph(om).type_of(n.outputs[0]).dtype
             for n in _om_graph(om).nodes if n.op == "FusedConv"}
    assert sorted(fused.values()) == ["float16", "float32"]


def test_out_nodes_become_the_outputs(folder: Path) -> None:
    om = _compile(folder, "outs", "--out_nodes=conv1.relu:0;logits:0")
    reference = run_graph(load_model(folder / "cnn.onnx"), _feeds())
    with Model.load(om) as m:
        assert [o.name for o in m.outputs] == ["conv1.relu", "logits"]
        got = m.run(_feeds())
    np.testing.assert_allclose(got["logits"], reference["logits"], rtol=1e-4, atol=1e-5)
    assert got["conv1.relu"].shape == (2, 8, 16, 16)
    om = _compile(folder, "outs1", "--out_nodes=pool1:0")  # the rest of the graph is dropped
    assert "Gemm" not in _om_graph(om).op_counts()


def test_input_format_is_recorded(folder: Path) -> None:
    om = _compile(folder, "fmt", "--input_format=nchw")
    with OmFile(om) as f:
        assert f.contents.compile_options["input_format"] == "NCHW"


@pytest.mark.parametrize("switch", [
    {"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "off", "fuse_conv": "off",
                                "batchnorm_to_mul_add": "off"}}},
    "ConvBatchnormFusionPass:off\nfuse_conv:off  # no conv fusions\nbatchnorm_to_mul_add:off\n",
])
def test_fusion_switch_off_keeps_batchnorm(folder: Path, switch: object) -> None:
    path = folder / "switch.cfg"
    path.write_text(json.dumps(switch) if isinstance(switch, dict) else str(switch))
    om = _compile(folder, "switch", f"--fusion_switch_file={path}")
    assert _om_graph(om).op_counts()["BatchNormalization"] == 2
    om = _compile(folder, "noswitch")
    assert "BatchNormalization" not in _om_graph(om).op_counts()


@pytest.mark.parametrize("argv, message", [
    (["--framework=7"], "(0 = Caffe, 1 = MindSpore MindIR, 3 = TensorFlow"),
    (["--weight=net.caffemodel"], "--weight is the Caffe .caffemodel; it needs --framework=0"),
    (["--framework=9"], "--framework: unknown value '9'"),
    (["--insert_op_conf=aipp.cfg"], "--insert_op_conf is an atc flag ge-rewrite does not "
                                    "support: AIPP"),
    (["--dynamic_image_size", "224,224"], "--dynamic_image_size needs the dims that vary as -1"),
    (["--precision_mode=force_fp61"], "did you mean force_fp16"),
    (["--modify_mixlist=mix.json", "--precision_mode=force_fp16"], "only applies with"),
    (["--input_format=NCWH"], "--input_format: unknown format 'NCWH'"),
    (["--out_nodes=conv1"], "expected NODE:INDEX in 'conv1'"),
    (["--out_nodes=conv9:0"], "no node is called 'conv9' (did you mean conv"),
    (["--out_nodes=logits:1"], "node 'logits' (Gemm) has 1 output(s)"),
    (["--keep_dtype=keep_bad.cfg", "--precision_mode=force_fp16"],
     "keep_bad.cfg:2: no node of the model is called 'nope'"),
    (["--enable_single_stream=maybe"], "expected true or false"),
    (["--mode=5"], "--mode=5 (pbtxt to JSON) is not supported"),
    (["--mode=2"], "--mode: unknown value '2'"),
    (["--report=r.txt"], "give a .html file"),
])
def test_bad_flag_values_are_one_line(folder: Path, argv: list[str], message: str,
                                      capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    (folder / "mix.json").write_text("{}")
    (folder / "keep_bad.cfg").write_text("conv1\nnope\n")
    try:
        code = main(["compile", "cnn.onnx", "--output=bad", SHAPE, *argv])
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (folder / "bad.om").exists()


def test_nhwc_needs_a_4d_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "m.onnx")
    code = main(["compile", str(tmp_path / "m.onnx"), f"--output={tmp_path / 'm'}",
                 "--input_format=NHWC"])
    assert code == 2 and "--input_format=NHWC needs a 4-D input" in capsys.readouterr().err


def test_the_user_guide_names_every_unsupported_flag_and_mode() -> None:
    from gerules.cli.atc import UNSUPPORTED
    from gerules.precision import MODES

    guide = (Path(__file__).resolve().parents[2] / "docs" / "CONVERTING.md").read_text()
    missing = [flag for flag in [*UNSUPPORTED, *(f"`{m}`" for m in MODES)]
               if flag not in guide]
    assert not missing, f"docs/CONVERTING.md does not mention {missing}"


@pytest.mark.parametrize("argv, routed", [
    (["--model=m.onnx", "--output=m"], ["compile", "--model=m.onnx", "--output=m"]),
    (["--log", "info", "--mode=6", "--om=m.om"],
     ["--log", "info", "compile", "--mode=6", "--om=m.om"]),
    (["--debug", "--framework=5"], ["--debug", "compile", "--framework=5"]),
    (["compile", "--model=m.onnx"], ["compile", "--model=m.onnx"]),
    (["run", "m.om"], ["run", "m.om"]),
    (["--help"], ["--help"]),
])
def test_atc_command_lines_route_to_compile(argv: list[str], routed: list[str]) -> None:
    from gerules.cli.atc import route

    assert route(argv) == routed
