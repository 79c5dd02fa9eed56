"""Mutated .om files through inspect and run: only ``OmError``/``GeError``, never another
exception, a hang or unbounded memory. Structure-aware cases re-pack the file with valid
checksums so the mutation reaches the MODEL_DEF decoder and the runtime."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_seeds import FUZZ, check, om_seeds
from hypothesis import given
from hypothesis import strategies as st

from gerules.testing import fuzz
from gerules.testing.mutate import mutate_bytes, mutate_om
from gerules.testing.sandbox import Sandbox
from gerules.testing.strategies import DrawChooser


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(fuzz.om_target, timeout=30, memory=2 << 30) as box:
        yield box


def test_the_seeds_inspect_and_run(sandbox: Sandbox) -> None:
    for data in om_seeds():
        outcome = sandbox.run(data)
        assert outcome.kind == "ok", outcome.describe()


@FUZZ
@given(st.data())
def test_byte_mutations(sandbox: Sandbox, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(om_seeds()))
    case = mutate_bytes(seed, DrawChooser(data.draw), om_seeds())
    outcome = sandbox.run(case)
    check(outcome, case, "om")
    # checksums catch every byte change (a splice may rebuild a whole seed, which is fine)
    assert outcome.kind == "error" or case in om_seeds()


@FUZZ
@given(st.data())
def test_model_def_mutations_with_valid_checksums(sandbox: Sandbox, data: st.DataObject
                                                  ) -> None:
    seed = data.draw(st.sampled_from(om_seeds()))
    case = mutate_om(seed, DrawChooser(data.draw))
    check(sandbox.run(case), case, "om")
