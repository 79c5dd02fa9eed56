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
from gerules.testing.caffe import CaffeNet


def lenet() -> CaffeNet:
    n = CaffeNet("lenet", seed=1).input("data", [2, 1, 28, 28])
    n.layer("conv1", "Convolution", ["data"], ["conv1"], [n.normal(20, 1, 5, 5, scale=0.2),
                                                          n.normal(20)],
            convolution_param={"num_output": 20, "kernel_size": [5], "stride": [1]})
    n.layer("pool1", "Pooling", ["conv1"], ["pool1"],
            pooling_param={"pool": "MAX", "kernel_size": 2, "stride": 2})
    n.layer("conv2", "Convolution", ["pool1"], ["conv2"], [n.normal(50, 20, 5, 5, scale=0.05),
                                                           n.normal(50)],
            convolution_param={"num_output": 50, "kernel_size": [5]})
    n.layer("pool2", "Pooling", ["conv2"], ["pool2"],
            pooling_param={"pool": "MAX", "kernel_size": 2, "stride": 2})
    n.layer("ip1", "InnerProduct", ["pool2"], ["ip1"], [n.normal(500, 800, scale=0.03),
                                                        n.normal(500)],
            inner_product_param={"num_output": 500})
    n.layer("relu1", "ReLU", ["ip1"], ["ip1"])
    n.layer("ip2", "InnerProduct", ["ip1"], ["ip2"], [n.normal(10, 500, scale=0.05),
                                                      n.normal(10)],
            inner_product_param={"num_output": 10})
    n.layer("prob", "Softmax", ["ip2"], ["prob"])
    return n


def vgg() -> CaffeNet:
    """Two VGG blocks and the rest of the layer list: ceil-mode pools (plain and padded AVE),
    grouped and dilated convolutions in every spelling, deconvolution, concat, slice."""
    n = CaffeNet("vgg", seed=2).input("data", [1, 3, 14, 14])
    n.layer("conv1_1", "Convolution", ["data"], ["conv1_1"], [n.normal(8, 3, 3, 3, scale=0.3),
                                                              n.normal(8)],
            convolution_param={"num_output": 8, "kernel_size": [3], "pad": [1]})
    n.layer("relu1_1", "ReLU", ["conv1_1"], ["conv1_1"])
    n.layer("conv1_2", "Convolution", ["conv1_1"], ["conv1_2"], [n.normal(8, 2, 3, 3, scale=0.3)],
            convolution_param={"num_output": 8, "kernel_h": 3, "kernel_w": 3, "pad_h": 2,
                               "pad_w": 2, "group": 4, "dilation": [2], "bias_term": False})
    n.layer("relu1_2", "ReLU", ["conv1_2"], ["conv1_2"], relu_param={"negative_slope": 0.1})
    n.layer("pool1", "Pooling", ["conv1_2"], ["pool1"],  # 14 -> ceil(11 / 2) + 1 = 7
            pooling_param={"pool": "MAX", "kernel_size": 3, "stride": 2})
    n.layer("conv2", "Convolution", ["pool1"], ["conv2"], [n.normal(6, 8, 3, 2, scale=0.3),
                                                           n.normal(6)],
            convolution_param={"num_output": 6, "kernel_size": [3, 2], "stride": [1, 2],
                               "pad": [1, 0]})
    n.layer("prelu2", "PReLU", ["conv2"], ["conv2"], [n.normal(6, scale=0.2)])
    n.layer("pool2", "Pooling", ["conv2"], ["pool2"],  # the last window starts in the pad
            pooling_param={"pool": "AVE", "kernel_size": 3, "stride": 3, "pad": 2})
    n.layer("up", "Deconvolution", ["pool2"], ["up"], [n.normal(6, 3, 4, 4, scale=0.3),
                                                       n.normal(6)],
            convolution_param={"num_output": 6, "kernel_size": [4], "stride": [2], "pad": [1],
                               "group": 2})
    n.layer("sig", "Sigmoid", ["up"], ["sig"])
    n.layer("tanh", "TanH", ["up"], ["tanh"])
    n.layer("prod", "Eltwise", ["sig", "tanh"], ["prod"], eltwise_param={"operation": "PROD"})
    n.layer("max", "Eltwise", ["sig", "prod"], ["max"], eltwise_param={"operation": "MAX"})
    n.layer("cat", "Concat", ["prod", "max"], ["cat"], concat_param={"axis": 1})
    n.layer("slice", "Slice", ["cat"], ["a", "b", "c"], slice_param={"slice_point": [2, 7]})
    n.layer("floor", "Pooling", ["c"], ["floor"],
            pooling_param={"pool": "AVE", "kernel_size": 3, "stride": 2, "round_mode": "FLOOR"})
    n.layer("flat", "Flatten", ["floor"], ["flat"])
    n.layer("drop", "Dropout", ["flat"], ["flat"], dropout_param={"dropout_ratio": 0.3})
    n.layer("fc", "InnerProduct", ["flat"], ["fc"], [n.normal(10, 5, scale=0.3)],
            inner_product_param={"num_output": 5, "transpose": True, "bias_term": False})
    n.layer("shape", "Reshape", ["a"], ["shape"],
            reshape_param={"shape": {"dim": [0, -1, 2]}, "axis": 1})
    n.layer("softmax", "Softmax", ["shape"], ["prob"], softmax_param={"axis": 2})
    return n


def resnet(use_global_stats: bool | None = None) -> CaffeNet:
    """A ResNet-style net: conv-BN-Scale-ReLU in place, two residual blocks (one with a
    projection), Eltwise SUM with coefficients, global average pooling, fc, softmax."""
    n = CaffeNet("resnet", seed=3).input("data", [2, 3, 16, 16])
    bn = {} if use_global_stats is None else {"use_global_stats": use_global_stats}

    def conv_bn(name: str, bottom: str, cin: int, cout: int, k: int, stride: int,
                relu: bool = True) -> str:
        n.layer(name, "Convolution", [bottom], [name], [n.normal(cout, cin, k, k, scale=0.3)],
                convolution_param={"num_output": cout, "kernel_size": [k], "pad": [k // 2],
                                   "stride": [stride], "bias_term": False})
        factor = np.array([999.98], np.float32)  # Caffe's moving-average scale factor
        n.layer(f"{name}_bn", "BatchNorm", [name], [name],
                [n.normal(cout) * factor, n.positive(cout) * factor, factor],
                batch_norm_param={"eps": 1e-5, **bn})
        n.layer(f"{name}_scale", "Scale", [name], [name], [n.positive(cout), n.normal(cout)],
                scale_param={"bias_term": True})
        if relu:
            n.layer(f"{name}_relu", "ReLU", [name], [name])
        return name

    x = conv_bn("conv1", "data", 3, 8, 3, 1)
    n.layer("pool1", "Pooling", [x], ["pool1"],
            pooling_param={"pool": "MAX", "kernel_size": 3, "stride": 2, "pad": 1})
    a = conv_bn("res2a_branch2a", "pool1", 8, 8, 3, 1)
    b = conv_bn("res2a_branch2b", a, 8, 8, 3, 1, relu=False)
    n.layer("res2a", "Eltwise", ["pool1", b], ["res2a"])
    n.layer("res2a_relu", "ReLU", ["res2a"], ["res2a"])
    p = conv_bn("res3a_branch1", "res2a", 8, 16, 1, 2, relu=False)
    a = conv_bn("res3a_branch2a", "res2a", 8, 16, 3, 2)
    b = conv_bn("res3a_branch2b", a, 16, 16, 3, 1, relu=False)
    n.layer("res3a", "Eltwise", [p, b], ["res3a"],
            eltwise_param={"operation": "SUM", "coeff": [1.0, 0.5]})
    n.layer("res3a_relu", "ReLU", ["res3a"], ["res3a"])
    n.layer("pool5", "Pooling", ["res3a"], ["pool5"],
            pooling_param={"pool": "AVE", "global_pooling": True})
    n.layer("fc", "InnerProduct", ["pool5"], ["fc"], [n.normal(10, 16, scale=0.3), n.normal(10)],
            inner_product_param={"num_output": 10})
    n.layer("prob", "Softmax", ["fc"], ["prob"])
    return n


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
    assert "BatchNormalization" not in report["final"]["ops"]  # folded into the convolutions
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
