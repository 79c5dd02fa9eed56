"""Mutated MindIR files through the MindIR reader: only ``GeError``s naming their place. The
seed is the hand-written MindIR laid out as MindSpore exports it (no MindSpore needed);
mutations change fields of the parsed model or raw bytes."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import pytest
from fuzz_seeds import FUZZ, check
from hypothesis import given
from hypothesis import strategies as st

from gerules.frontends.mindir_values import proto
from gerules.testing import fuzz
from gerules.testing.mindir_models import tiny_mindir
from gerules.testing.mutate import mutate_bytes, mutate_message
from gerules.testing.sandbox import Sandbox
from gerules.testing.strategies import DrawChooser


@cache
def seed() -> bytes:
    return tiny_mindir()[0]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(fuzz.mindir_target, timeout=30, memory=2 << 30) as box:
        yield box


def test_the_seed_converts_and_runs(sandbox: Sandbox) -> None:
    outcome = sandbox.run(seed())
    assert outcome.kind == "ok", outcome.describe()


@FUZZ
@given(st.data())
def test_mutations(sandbox: Sandbox, data: st.DataObject) -> None:
    chooser = DrawChooser(data.draw)
    if data.draw(st.booleans()):
        model = proto()["ModelProto"].FromString(seed())
        case = mutate_message(model, chooser).SerializeToString()
    else:
        case = mutate_bytes(seed(), chooser)
    check(sandbox.run(case), case, "mindir")
