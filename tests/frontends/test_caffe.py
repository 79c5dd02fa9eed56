"""Caffe input: nets built in code, converted, compared with a NumPy reference of Caffe's
semantics (``caffe_reference``) and with onnxruntime on the converted graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from caffe_reference import forward

from gerules.cli.main import main
from gerules.errors import GeError, ModelError, ResourceLimit, UsageError
from gerules.frontends import caffe
from gerules.onnx_io import to_model_proto
from gerules.runtime.executor import run_graph
from gerules.runtime.model import Model
from gerules.testing.caffe import CaffeNet, lenet, resnet, vgg

NETS = {"lenet": lenet, "vgg": vgg, "resnet": resnet}


def _feeds(graph, seed: int = 0) -> dict[str, np.ndarray]:  # noqa: ANN001
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs}


def _reference(net: CaffeNet, feeds: dict[str, np.ndarray], outputs: list[str]
               ) -> dict[str, np.ndarray]:
    blobs = forward(net.net, net.blobs, feeds)
    return {name: blobs[name] for name in outputs}


def _close(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=2e-4, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("kind", sorted(NETS))
def test_nets_match_caffe_semantics_and_onnxruntime(kind: str, tmp_path: Path) -> None:
    net = NETS[kind]()
    graph = caffe.convert(*net.write(tmp_path))
    feeds = _feeds(graph)
    want = _reference(net, feeds, graph.output_names)
    _close(run_graph(graph, feeds), want)
    session = ort.InferenceSession(to_model_proto(graph).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    got = dict(zip(graph.output_names, session.run(graph.output_names, feeds), strict=True))
    _close(got, want)


def test_vgg_shapes_follow_caffe_rounding(tmp_path: Path) -> None:
    graph = caffe.convert(*vgg().write(tmp_path))
    shape = {v.name: v.shape for v in graph.value_info.values()}
    assert shape["pool1"] == (1, 8, 7, 7)  # ceil((14 - 3) / 2) + 1; floor would give 6
    assert shape["conv2"] == (1, 6, 7, 3)
    # ceil((7 + 4 - 3) / 3) + 1 = 4 and ceil((3 + 4 - 3) / 3) + 1 = 3, but each last window
    # would start in the end padding ((4 - 1) * 3 >= 7 + 2, (3 - 1) * 3 >= 3 + 2): dropped
    assert shape["pool2"] == (1, 6, 3, 2)
    assert shape["floor"] == (1, 5, 2, 1)  # round_mode FLOOR on 6 x 4 (CEIL: 3 x 2)
    assert [v.name for v in graph.outputs] == ["b", "fc", "prob"]


def test_in_place_layers_become_ssa(tmp_path: Path) -> None:
    graph = caffe.convert(*resnet().write(tmp_path))
    writers = {n.name: n.outputs[0] for n in graph.nodes}
    assert writers["conv1"] == "conv1@conv1"
    assert writers["conv1_bn"] == "conv1@conv1_bn"
    assert writers["conv1_relu"] == "conv1"  # the last write keeps the blob's name
    assert graph.output_names == ("prob",)
    assert graph.op_counts()["BatchNormalization"] == 12  # BatchNorm and Scale, 6 each


def test_batch_norm_with_batch_statistics(tmp_path: Path) -> None:
    net = resnet(use_global_stats=False)
    graph = caffe.convert(*net.write(tmp_path))
    feeds = _feeds(graph)
    _close(run_graph(graph, feeds), _reference(net, feeds, ["prob"]))


def test_resnet_through_the_atc_command_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    net = resnet()
    prototxt, weights = net.write(tmp_path)
    out = tmp_path / "resnet"
    assert main([f"--model={prototxt}", "--framework=0", f"--weight={weights}",
                 f"--output={out}", "--soc_version=Ascend310", "--input_shape=data:-1,3,16,16",
                 "--dynamic_batch_size=1,2", f"--report={tmp_path / 'r.json'}"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["framework"] == "caffe" and report["source"] == str(prototxt)
    assert "BatchNormalization" not in report["figures"]["ops"]["final"]  # folded into the convs
    x = np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32)
    want = _reference(net, {"data": x}, ["prob"])
    _close(Model.load(f"{out}.om").run({"data": x}), want)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", f"{out}.om", f"--input=data={tmp_path / 'x.npy'}",
                 f"--output-dir={tmp_path / 'got'}"]) == 0
    assert "prob" in capsys.readouterr().out
    _close({"prob": np.load(tmp_path / "got" / "prob.npy")}, want)
    assert main(["--mode=6", f"--om={out}.om"]) == 0
    assert "source framework: caffe" in capsys.readouterr().out


def test_precheck_names_unsupported_layers(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    net = lenet()
    text = net.text().replace('type: "ReLU"', 'type: "Relu"') + (
        'layer { name: "norm" type: "LRN" bottom: "pool2" top: "norm" '
        'lrn_param { local_size: 5 alpha: 0.0001 } }\n')
    prototxt, weights = net.write(tmp_path)
    prototxt.write_text(text)
    report = tmp_path / "check.json"
    code = main([f"--model={prototxt}", "--framework=0", f"--weight={weights}", "--mode=3",
                 f"--check_report={report}"])
    assert code == 1
    result = json.loads(report.read_text())
    assert result["framework"] == "caffe" and result["result"] == "failed"
    bad = {n["name"]: n["reason"] for n in result["nodes"] if n["result"] != "supported"}
    assert set(bad) == {"relu1", "norm"}
    assert "did you mean ReLU" in bad["relu1"]
    assert result["summary"]["unsupported_op_types"] == ["LRN", "Relu"]
    assert "layer 'norm' (LRN)" in capsys.readouterr().out
    with pytest.raises(ModelError, match=r"node 'relu1' \(Relu\): layer type 'Relu' is not "
                       r"supported \(did you mean ReLU\?\) \(1 more"):
        caffe.convert(prototxt, weights)


def test_precheck_marks_the_layer_that_fails(tmp_path: Path) -> None:
    net = lenet()
    prototxt, weights = net.write(tmp_path)
    net.weights.layer[0].blobs[0].data.pop()  # conv1's weights lose one value
    weights.write_bytes(net.weights.SerializeToString())
    report = tmp_path / "check.json"
    assert main([f"--model={prototxt}", "--framework=0", f"--weight={weights}", "--mode=3",
                 f"--check_report={report}"]) == 1
    result = json.loads(report.read_text())
    failed = [n for n in result["nodes"] if n["result"] == "failed"]
    assert [n["name"] for n in failed] == ["conv1"]
    assert "weight blob" in failed[0]["reason"] or "holds 499" in failed[0]["reason"]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace("num_output: 20", "num_outputs: 20"),
     r"lenet\.prototxt:\d+:\d+: .*has no field named \"num_outputs\""),
    (lambda t: t + "layer {", r"lenet\.prototxt:\d+:\d+: "),
    (lambda t: t.replace('bottom: "pool1"', 'bottom: "nope"', 1),
     r"node 'conv2' \(Convolution\): bottom 'nope' is not produced"),
    (lambda t: t.replace("kernel_size: 5", "kernel_size: 50", 1),
     r"node 'conv1'"),
])
def test_bad_nets_name_the_place(tmp_path: Path, edit, message: str) -> None:  # noqa: ANN001
    prototxt, weights = lenet().write(tmp_path)
    prototxt.write_text(edit(prototxt.read_text()))
    with pytest.raises(GeError, match=message):
        caffe.convert(prototxt, weights)


def test_bad_files_are_refused(tmp_path: Path) -> None:
    prototxt, weights = lenet().write(tmp_path)
    with pytest.raises(ModelError, match="not UTF-8 text"):
        caffe.convert(weights, weights)
    with pytest.raises(ModelError, match="corrupt or truncated"):
        caffe.convert(prototxt, prototxt)
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ModelError, match="lenet.caffemodel.*corrupt or truncated"):
        caffe.convert(prototxt, weights)
    with pytest.raises(ModelError, match="is a folder"):
        caffe.convert(tmp_path)
    with pytest.raises(ModelError, match="weight blob 0 .* is missing"):
        caffe.convert(prototxt)
    with pytest.raises(ResourceLimit, match="at most 10 bytes"):
        from gerules.frontends.files import read_capped
        read_capped(prototxt, 10)


@pytest.mark.parametrize("values", [[], [1.0, 2.0]])
def test_a_moving_average_factor_of_other_than_one_value_is_refused(
        tmp_path: Path, values: list[float]) -> None:
    """BatchNorm's third blob holds one value; an empty one (a fuzzed weight file) was an
    IndexError, a traceback instead of the layer's name."""
    net = resnet()
    layer = next(x for x in net.weights.layer if x.type == "BatchNorm")
    factor = layer.blobs[2]
    del factor.data[:]
    factor.data.extend(values)
    del factor.shape.dim[:]
    factor.shape.dim.append(len(values))
    prototxt, weights = net.write(tmp_path)
    with pytest.raises(ModelError, match=rf"node '{layer.name}'.*weight blob 2 "
                       rf"\(moving-average factor\) has {len(values)} values"):
        caffe.convert(prototxt, weights)


def test_v1_prototxt_and_missing_input_shapes(tmp_path: Path) -> None:
    path = tmp_path / "v1.prototxt"
    path.write_text('layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv" }')
    with pytest.raises(ModelError, match="V1 'layers' format"):
        caffe.convert(path)
    n = CaffeNet("data").layer("data", "Data", [], ["data", "label"],
                               data_param={"batch_size": 4, "source": "lmdb"})
    n.layer("prob", "Softmax", ["data"], ["prob"])
    prototxt, _ = n.write(tmp_path)
    with pytest.raises(UsageError, match=r"--input_shape \"data:N,C,H,W\""):
        caffe.convert(prototxt)
    graph = caffe.convert(prototxt, None, {"data": [-1, 3, 2, 2]})
    assert graph.inputs[0].shape == ("batch", 3, 2, 2) and graph.output_names == ("prob",)


def test_dummy_data_with_a_legacy_shape(tmp_path: Path) -> None:
    """DummyData's legacy num/channels/height/width: each list's first value serves every
    top past its length; a list left empty is refused by name (it was an IndexError)."""
    n = CaffeNet("dummy").layer("data", "DummyData", [], ["a", "b"], dummy_data_param={
        "num": [2, 2], "channels": [3], "height": [4], "width": [5]})
    n.layer("sum", "Eltwise", ["a", "b"], ["sum"])
    prototxt, _ = n.write(tmp_path)
    graph = caffe.convert(prototxt)
    assert [v.shape for v in graph.inputs] == [(2, 3, 4, 5), (2, 3, 4, 5)]
    n = CaffeNet("dummy").layer("data", "DummyData", [], ["a"],
                                dummy_data_param={"num": [2]})
    prototxt, _ = n.write(tmp_path)
    with pytest.raises(ModelError, match="node 'data' .*needs num, channels, height and width"):
        caffe.convert(prototxt)


def test_weights_from_a_v1_caffemodel(tmp_path: Path) -> None:
    net = lenet()
    prototxt, weights = net.write(tmp_path)
    old = caffe.proto()["NetParameter"](name="lenet")
    for layer in net.weights.layer:  # the same blobs in the deprecated V1 'layers' field
        v1 = old.layers.add(name=layer.name)
        for blob in layer.blobs:
            legacy = v1.blobs.add()
            dims = [*([1] * (4 - len(blob.shape.dim))), *blob.shape.dim]
            legacy.num, legacy.channels, legacy.height, legacy.width = dims
            legacy.data.extend(blob.data)
    weights.write_bytes(old.SerializeToString())
    graph = caffe.convert(prototxt, weights)
    feeds = _feeds(graph)
    _close(run_graph(graph, feeds), _reference(net, feeds, ["prob"]))


def test_train_phase_layers_are_dropped(tmp_path: Path) -> None:
    net = lenet()
    text = net.text() + ('layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" '
                         'bottom: "label" top: "loss" include { phase: TRAIN } }\n')
    prototxt, weights = net.write(tmp_path)
    prototxt.write_text(text)
    assert caffe.convert(prototxt, weights).output_names == ("prob",)


def test_parse_model_reads_caffe(tmp_path: Path) -> None:
    import gerules as ge

    prototxt, weights = lenet().write(tmp_path)
    graph = ge.parse_model(prototxt, "data:-1,1,28,28", weight=weights)
    assert graph.inputs[0].shape == ("batch", 1, 28, 28) and graph.output_names == ("prob",)
