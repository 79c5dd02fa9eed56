"""``verify`` of a graph it returned before gives that graph back without checking again."""

from __future__ import annotations

import pytest

from gerules.ir import verify as verify_module
from gerules.ir.registry import Registry, default_registry
from gerules.ir.verify import verify
from gerules.onnx_io import load_model
from gerules.testing.models import cnn


def test_a_verified_graph_is_not_inferred_again(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = load_model(cnn().model.SerializeToString())
    calls: list[int] = []
    real = verify_module.infer_graph
    monkeypatch.setattr(verify_module, "infer_graph",
                        lambda g, r: calls.append(1) or real(g, r))  # type: ignore[func-returns-value]
    assert verify(graph) is graph and calls == []
    unverified = graph.replace(value_info={})
    again = verify(unverified)
    assert again is not unverified and calls == [1]
    other = Registry(list(default_registry()))  # another registry checks anew
    verify(again, other)
    assert calls == [1, 1]
