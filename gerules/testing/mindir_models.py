"""A small MindIR model written with our own ``mind_ir`` message classes, laid out as
MindSpore 2.x exports one (scoped names, ``Load`` of parameters with a UMonad, an old-style
``Conv2D`` primitive with attributes, new-style ``BatchNorm`` / ``MatMul`` / ``BiasAdd`` taking
theirs as ``Constant`` inputs, ``TupleGetItem``, ``MakeTuple`` / ``UpdateState`` / ``Depend``).

It needs no MindSpore, so the reader's tests and fuzzers have a seed everywhere.
``tiny_mindir()`` returns the bytes and the weights by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontends.mindir_values import BOOL, FLOAT, INT64, STRING, TUPLE, UMONAD, proto

SCOPE = "1_Net_construct_2:"


def _attr(a: Any, name: str, value: Any) -> None:
    a.name = name
    if isinstance(value, bool):
        a.type, a.i = BOOL, int(value)
    elif isinstance(value, int):
        a.type, a.i = INT64, value
    elif isinstance(value, float):
        a.type, a.f = FLOAT, value
    elif isinstance(value, str):
        a.type, a.s = STRING, value.encode()
    elif isinstance(value, tuple):
        a.type = TUPLE
        for v in value:
            item = a.values.add(type=INT64)
            item.ints.append(v)
    else:  # None: MindSpore's state token
        a.type = UMONAD


def tiny_mindir(seed: int = 0) -> tuple[bytes, dict[str, np.ndarray]]:
    """``x [1,3,6,6] -> Conv2D 3x3 pad 1 -> BatchNorm -> ReLU -> Flatten -> MatMul^T + bias``."""
    classes = proto()
    rng = np.random.default_rng(seed)
    weights = {"conv.weight": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
               "bn.gamma": rng.uniform(0.5, 1.5, 4).astype(np.float32),
               "bn.beta": rng.standard_normal(4).astype(np.float32),
               "bn.mean": rng.standard_normal(4).astype(np.float32),
               "bn.var": rng.uniform(0.5, 1.5, 4).astype(np.float32),
               "fc.weight": rng.standard_normal((5, 144)).astype(np.float32),
               "fc.bias": rng.standard_normal(5).astype(np.float32)}
    m = classes["ModelProto"](ir_version="1.1", producer_name="MindSpore",
                              mind_ir_version=3, little_endian=True)
    g = m.graph
    g.name = f"{SCOPE}graph"
    x = g.input.add(name=f"{SCOPE}x")
    x.tensor.add(dims=[1, 3, 6, 6], data_type=FLOAT)
    for name, array in weights.items():
        g.parameter.add(name=f"{SCOPE}{name}", dims=list(array.shape), data_type=FLOAT,
                        raw_data=array.tobytes())

    def prim(name: str, op: str, kind: int = 2, **attrs: Any) -> str:
        p = m.primitives.add(name=name, op_type=op, prim_type=kind)
        for key, value in attrs.items():
            _attr(p.attribute.add(), key, value)
        return f"REF::{name}"

    def const(name: str, value: Any) -> str:
        node = g.node.add(name=name, op_type="Constant", output=[name])
        _attr(node.attribute.add(), "value", value)
        return name

    def node(name: str, op: str, *inputs: str) -> str:
        out = f"{SCOPE}{name}"
        g.node.add(name=out, op_type=op, input=list(inputs), output=[out])
        return out

    load = prim("Load:1", "Load", 1)
    monad = const("ValueNode_1", None)
    loaded = {k: node(f"load_{k}", load, f"{SCOPE}{k}", monad) for k in weights}
    conv = node("conv", prim("Conv2D:2", "Conv2D", 1, kernel_size=(3, 3), pad_mode="pad",
                             pad_list=(1, 1, 1, 1), stride=(1, 1, 1, 1),
                             dilation=(1, 1, 1, 1), group=1, format="NCHW"),
                f"{SCOPE}x", loaded["conv.weight"])
    zero, false = const("ValueNode_2", 0), const("ValueNode_3", False)
    bn = node("bn", prim("BatchNorm:3", "BatchNorm"), conv, loaded["bn.gamma"],
              loaded["bn.beta"], loaded["bn.mean"], loaded["bn.var"], false,
              const("ValueNode_4", 1e-5), const("ValueNode_5", 0.1), zero)
    y = node("bn_out", prim("TupleGetItem:4", "TupleGetItem", 1), bn, zero)
    y = node("relu", prim("ReLU:5", "ReLU"), y)
    y = node("flat", prim("Flatten:6", "Flatten", 1), y)
    y = node("matmul", prim("MatMul:7", "MatMul"), y, loaded["fc.weight"], false,
             const("ValueNode_6", True))
    y = node("bias", prim("BiasAdd:8", "BiasAdd"), y, loaded["fc.bias"], zero)
    state = node("tuple", prim("MakeTuple:9", "MakeTuple", 1), *loaded.values())
    state = node("state", prim("UpdateState:10", "UpdateState", 1), monad, state)
    out = node("out", prim("Depend:11", "Depend", 1), y, state)
    g.output.add(name=out).tensor.add(dims=[1, 5], data_type=FLOAT)
    return m.SerializeToString(), weights
