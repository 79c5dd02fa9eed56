"""Mutated ONNX files through load -> run -> compile -> run the .om: only our own errors,
never another exception, a hang (30 s per case) or more than 2 GiB of extra memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_seeds import FUZZ, check, onnx_seeds
from hypothesis import given
from hypothesis import strategies as st

from gerules.testing import fuzz
from gerules.testing.mutate import mutate_bytes, mutate_message, splice
from gerules.testing.sandbox import Sandbox
from gerules.testing.strategies import DrawChooser


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(fuzz.onnx_target, timeout=30, memory=2 << 30) as box:
        yield box


def test_the_seeds_load_run_and_compile(sandbox: Sandbox) -> None:
    for model in onnx_seeds():
        outcome = sandbox.run(model.SerializeToString())
        assert outcome.kind == "ok", outcome.describe()


@FUZZ
@given(st.data())
def test_byte_mutations(sandbox: Sandbox, data: st.DataObject) -> None:
    corpus = [m.SerializeToString() for m in onnx_seeds()]
    seed = data.draw(st.sampled_from(corpus))
    case = mutate_bytes(seed, DrawChooser(data.draw), corpus, max_steps=6)
    check(sandbox.run(case), case, "onnx")


@FUZZ
@given(st.data())
def test_structure_aware_mutations(sandbox: Sandbox, data: st.DataObject) -> None:
    """Fields set to edge values, repeated elements dropped or duplicated, messages cleared."""
    model = data.draw(st.sampled_from(onnx_seeds()))
    case = mutate_message(model, DrawChooser(data.draw), max_steps=5).SerializeToString()
    check(sandbox.run(case), case, "onnx")


@FUZZ
@given(st.data())
def test_splices_and_merged_messages(sandbox: Sandbox, data: st.DataObject) -> None:
    """A prefix of one model and a suffix of another, or two models back to back (protobuf
    merges them: repeated fields concatenate, so names collide)."""
    a, b = (data.draw(st.sampled_from(onnx_seeds())).SerializeToString() for _ in range(2))
    case = a + b if data.draw(st.booleans()) else splice(a, b, DrawChooser(data.draw))
    check(sandbox.run(case), case, "onnx")
