"""Precision modes, atc's mixed-precision list JSON and keep_dtype files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gerules.errors import UsageError
from gerules.ir.composite import CompositeOp
from gerules.ir.graph import Graph, Node
from gerules.ir.registry import Port
from gerules.precision import PrecisionOptions, parse_keep_dtype, parse_mixlist, read_mixlist
from gerules.precision.policy import DEFAULT_BLACK, MixList, check_mode, members


def node(op: str, domain: str = "", **attrs: object) -> Node:
    return Node(op, ("x",), ("y",), attrs, name=f"{op}_0", domain=domain)


def test_default_lists_follow_the_issue() -> None:
    mix = MixList()
    for op in ("Softmax", "LayerNormalization", "ReduceMean", "ReduceSum", "Exp", "Log", "Pow"):
        assert mix.category(node(op)) == "black", op
    assert mix.category(node("Conv")) == "white"
    assert mix.category(node("Reshape")) == "gray"


def test_fused_ops_count_as_what_they_replace() -> None:
    assert members(node("Attention", "ge")) >= {"Softmax", "MatMul"}
    assert MixList().category(node("Attention", "ge")) == "black"
    assert MixList().category(node("FusedConv", "ge", activation="Relu")) == "white"
    body = CompositeOp("my", "ExpMul", (Port("x"), Port("y")), ("m",), (),
                       (Node("Exp", ("x",), ("e",)), Node("Mul", ("e", "y"), ("m",))))
    graph = Graph((), (), (), functions=(body,))
    expr = node("ExpMul", "my")
    assert members(expr, graph) == {"Mul", "Exp"} and MixList().category(expr, graph) == "black"


def test_mixlist_moves_ops_between_lists() -> None:
    changes = parse_mixlist(json.dumps({
        "black-list": {"to-remove": ["Softmax"], "to-add": ["Conv"]},
        "white-list": {"to-add": ["Exp"]},
        "gray-list": {"to-add": ["Relu"], "to-remove": ["Reshape"]},
    }))
    mix = MixList().apply(changes)
    assert mix.category(node("Softmax")) == "gray"  # black to-remove: to the gray list
    assert mix.category(node("Conv")) == "black"
    assert mix.category(node("Exp")) == "white"
    assert mix.category(node("Relu")) == "gray"
    assert mix.category(node("Reshape")) == "white"  # gray to-remove: to the white list
    assert "Softmax" in DEFAULT_BLACK  # the defaults themselves are untouched


@pytest.mark.parametrize("text, message", [
    ("{", "1:2: not valid JSON"),
    ("[]", "expected an object"),
    ('{"blacklist": {}}', "unknown list 'blacklist' (did you mean black-list?)"),
    ('{"black-list": {"to-ad": []}}', "unknown key 'to-ad'"),
    ('{"black-list": {"to-add": "Softmax"}}', "must be a list of op type names"),
])
def test_bad_mixlist_names_the_place(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_mixlist(text, "mix.json")


def test_mixlist_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"missing\.json: no such file$"):
        read_mixlist(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops")
    with pytest.raises(UsageError, match=f"{bad}:2:3"):
        read_mixlist(bad)


def test_keep_dtype_names_and_op_types() -> None:
    keep = parse_keep_dtype("conv1\n# a comment\nOpType::Softmax  \n\nfc # trailing\n")
    assert keep.names == {"conv1", "fc"} and keep.op_types == {"Softmax"}
    assert keep.pins(Node("Relu", ("a",), ("b",), name="conv1"))
    assert keep.pins(Node("Softmax", ("a",), ("b",), name="other"))
    assert not keep.pins(Node("Relu", ("a",), ("b",), name="other"))
    with pytest.raises(UsageError, match="k.txt:2: 'OpType::' needs"):
        parse_keep_dtype("a\nOpType::\n", "k.txt")


def test_modes_are_checked() -> None:
    with pytest.raises(UsageError, match="did you mean force_fp16"):
        check_mode("force_fp61")
    with pytest.raises(UsageError, match="only applies with --precision_mode=allow_mix"):
        PrecisionOptions("force_fp16", parse_mixlist("{}")).check()
