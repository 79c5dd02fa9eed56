"""Mutators: deterministic for a seed, they change their input, and ``.om`` mutations keep a
valid container so they reach the decoder."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from gerules.build import build_om
from gerules.errors import OmError
from gerules.om.format import Kind
from gerules.om.reader import OmFile
from gerules.testing import random_graph
from gerules.testing.bad_models import good_model
from gerules.testing.graphgen import RngChooser
from gerules.testing.mutate import (
    mutate_bytes,
    mutate_json,
    mutate_message,
    mutate_om,
    mutate_text,
    om_sections,
    pack_om,
)


@pytest.fixture(scope="module")
def om_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("om") / "m.om"
    return build_om(random_graph(1, max_nodes=5), path).path.read_bytes()


def test_byte_mutations_are_seeded_and_change_the_input() -> None:
    data = good_model().SerializeToString()
    a = [mutate_bytes(data, RngChooser(s), [b"\x00" * 10]) for s in range(50)]
    b = [mutate_bytes(data, RngChooser(s), [b"\x00" * 10]) for s in range(50)]
    assert a == b
    assert sum(m != data for m in a) >= 45
    assert len({len(m) for m in a}) > 5  # deletions, insertions, truncations, splices
    assert mutate_bytes(b"", RngChooser(0)) != b""


def test_message_mutations_keep_a_model_proto() -> None:
    model = good_model()
    changed = 0
    for seed in range(40):
        out = mutate_message(model, RngChooser(seed))
        assert isinstance(out, onnx.ModelProto)
        onnx.ModelProto.FromString(out.SerializeToString())  # always serializable
        changed += out != model
    assert model == good_model()  # the original is never touched
    assert changed >= 30


def test_om_mutations_keep_the_container_valid(om_bytes: bytes) -> None:
    kinds = [k for k, _ in om_sections(om_bytes)]
    assert pack_om(om_sections(om_bytes)) == om_bytes
    reached = 0
    for seed in range(30):
        out = mutate_om(om_bytes, RngChooser(seed))
        assert [k for k, _ in om_sections(out)] == kinds  # checksums and layout still valid
        reached += dict(om_sections(out))[Kind.MODEL_DEF] != dict(om_sections(om_bytes))[
            Kind.MODEL_DEF]
    assert reached >= 15


def test_om_mutation_of_garbage_falls_back_to_bytes() -> None:
    out = mutate_om(b"not an om file", RngChooser(0))
    assert isinstance(out, bytes)


def test_mutated_model_def_is_refused_by_the_decoder(om_bytes: bytes, tmp_path: Path) -> None:
    bodies = om_sections(om_bytes)
    bodies[0] = (Kind.MODEL_DEF, b'{"graph": 1}')
    path = tmp_path / "x.om"
    path.write_bytes(pack_om(bodies))
    with pytest.raises(OmError, match="MODEL_DEF"):
        OmFile(path)


def test_json_and_text_mutations() -> None:
    doc = {"a": [1, 2, {"b": "c"}], "d": 1.5}
    outs = [mutate_json(doc, RngChooser(s)) for s in range(30)]
    assert doc == {"a": [1, 2, {"b": "c"}], "d": 1.5}
    assert sum(o != doc for o in outs) >= 25
    text = "rule r: Relu(Relu(x)) => Relu(x)\n"
    texts = {mutate_text(text, RngChooser(s), ["=>", "Conv"]) for s in range(30)}
    assert len(texts) > 20
