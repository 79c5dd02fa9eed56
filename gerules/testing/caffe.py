"""Caffe nets built in code: a ``.prototxt`` and its ``.caffemodel``, for tests and examples.

``CaffeNet`` collects layers (parameters as plain dicts, in Caffe's field names, enums by
name) and their weight blobs; ``write(folder)`` writes the text net and the binary weights
the way Caffe does (weights in a separate NetParameter, matched by layer name). Weights are
drawn from a seeded generator, so a net is the same every time.

``lenet()``, ``vgg()`` and ``resnet()`` are the nets the frontend's tests and fuzzers use:
together they hold every layer type and parameter spelling the frontend converts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import json_format, text_format

from ..frontends.caffe import proto


class CaffeNet:
    """A Caffe net under construction (see the module docstring)."""

    def __init__(self, name: str = "net", seed: int = 0) -> None:
        net_type = proto()["NetParameter"]
        self.net = net_type(name=name)
        self.weights = net_type(name=name)
        self.blobs: dict[str, list[np.ndarray]] = {}
        self.rng = np.random.default_rng(seed)

    def input(self, name: str, shape: Sequence[int]) -> CaffeNet:
        """An Input layer with one top."""
        return self.layer(name, "Input", (), (name,),
                          input_param={"shape": [{"dim": list(shape)}]})

    def layer(self, name: str, kind: str, bottom: Sequence[str], top: Sequence[str],
              blobs: Sequence[np.ndarray] = (), **params: Mapping[str, Any]) -> CaffeNet:
        """A layer; ``params`` are its ``*_param`` messages as dicts."""
        layer = self.net.layer.add(name=name, type=kind)
        layer.bottom.extend(bottom)
        layer.top.extend(top)
        for key, fields in params.items():
            json_format.ParseDict(dict(fields), getattr(layer, key))
        if blobs:
            arrays = [np.asarray(b, np.float32) for b in blobs]
            self.blobs[name] = arrays
            stored = self.weights.layer.add(name=name, type=kind)
            for array in arrays:
                blob = stored.blobs.add()
                blob.shape.dim.extend(array.shape)
                blob.data.extend(array.ravel())
        return self

    def normal(self, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def positive(self, *shape: int) -> np.ndarray:
        return self.rng.uniform(0.5, 1.5, shape).astype(np.float32)

    def text(self) -> str:
        text: str = text_format.MessageToString(self.net)  # protobuf ships no type hints
        return text

    def write(self, folder: str | Path, stem: str | None = None) -> tuple[Path, Path]:
        """Write ``<stem>.prototxt`` and ``<stem>.caffemodel``; returns both paths."""
        stem = stem or self.net.name
        net_path = Path(folder) / f"{stem}.prototxt"
        weight_path = Path(folder) / f"{stem}.caffemodel"
        net_path.write_text(self.text(), encoding="utf-8")
        weight_path.write_bytes(self.weights.SerializeToString())
        return net_path, weight_path


# ----------------------------------------------------------------------------- nets


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
