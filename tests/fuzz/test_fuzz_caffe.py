"""Mutated Caffe nets and weights through the Caffe frontend: only ``GeError``s naming their
place, never another exception, a hang or unbounded memory. The mutations are
structure-aware (fields of the parsed NetParameter changed, dropped or duplicated, then
written back as text or binary) or raw bytes of the .caffemodel."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import pytest
from fuzz_seeds import FUZZ, check
from hypothesis import given
from hypothesis import strategies as st

from gerules.testing import fuzz
from gerules.testing.caffe import CaffeNet, lenet, resnet, vgg
from gerules.testing.mutate import mutate_bytes, mutate_message
from gerules.testing.sandbox import Sandbox
from gerules.testing.strategies import DrawChooser


@cache
def nets() -> tuple[CaffeNet, ...]:
    return (lenet(), vgg(), resnet())


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(fuzz.caffe_target, timeout=30, memory=2 << 30) as box:
        yield box


def _case(net: CaffeNet, text: str | None = None, weights: bytes | None = None) -> bytes:
    return fuzz.caffe_case((net.text() if text is None else text).encode("utf-8"),
                           net.weights.SerializeToString() if weights is None else weights)


def test_the_seeds_convert_and_run(sandbox: Sandbox) -> None:
    for net in nets():
        outcome = sandbox.run(_case(net))
        assert outcome.kind == "ok", outcome.describe()


@FUZZ
@given(st.data())
def test_net_mutations(sandbox: Sandbox, data: st.DataObject) -> None:
    from google.protobuf import text_format

    net = data.draw(st.sampled_from(nets()))
    mutated = mutate_message(net.net, DrawChooser(data.draw))
    case = _case(net, text=text_format.MessageToString(mutated))
    check(sandbox.run(case), case, "caffe")


@FUZZ
@given(st.data())
def test_weight_mutations(sandbox: Sandbox, data: st.DataObject) -> None:
    net = data.draw(st.sampled_from(nets()[1:]))  # LeNet's 431k weights make each step slow
    chooser = DrawChooser(data.draw)
    if data.draw(st.booleans()):
        weights = mutate_message(net.weights, chooser).SerializeToString()
    else:
        weights = mutate_bytes(net.weights.SerializeToString(), chooser)
    case = _case(net, weights=weights)
    check(sandbox.run(case), case, "caffe")
