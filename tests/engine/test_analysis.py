"""Analyses: shape+dtype with unsound-rule detection, constant folding with a byte cap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gerules.engine import (
    AnalysisConflict,
    ConstantAnalysis,
    EGraph,
    EngineError,
    ENode,
    Runner,
    ShapeAnalysis,
    UnsoundRewrite,
    add_term,
    rewrite,
)

Shape = tuple[int, ...] | None


def infer(eg: EGraph, node: ENode) -> Shape:
    """A toy IR: leaves carry ``shape``; MatMul (m,k)x(k,n); Relu keeps; others unknown."""
    if node.op == "MatMul":
        a, b = (eg.data(c, "shape") for c in node.children)
        return None if a is None or b is None else (a[0], b[1])
    if node.op == "Relu":
        return eg.data(node.children[0], "shape")  # type: ignore[no-any-return]
    if node.op == "Const":
        return tuple(node.get("value").array.shape)
    return node.get("shape")  # type: ignore[no-any-return]


def join(a: Shape, b: Shape) -> Shape:
    if a is None or b is None:
        return b if a is None else a
    if a != b:
        raise AnalysisConflict(f"{a} vs {b}")
    return a


def test_unsound_rule_is_named_with_both_shapes() -> None:
    eg = EGraph([ShapeAnalysis(infer, join)])
    add_term(eg, "(MatMul (In :shape [2 3]) (In :shape [3 4]))")
    swap = rewrite("matmul_commutes", "(MatMul ?a ?b)", "(MatMul ?b ?a)")
    with pytest.raises(UnsoundRewrite) as caught:
        Runner(eg).run([swap])
    err = caught.value
    assert err.rule == "matmul_commutes" and err.analysis == "shape"
    assert {err.left, err.right} == {(2, 4), (3, 3)}
    assert "rule 'matmul_commutes' is unsound" in str(err) and "\n" not in str(err)


def test_sound_rule_keeps_shapes_and_refines_unknowns() -> None:
    eg = EGraph([ShapeAnalysis(infer, join)])
    root = add_term(eg, "(Relu (Relu (In :shape [5 6])))")
    unknown = add_term(eg, "(Opaque)")
    assert eg.data(unknown, "shape") is None
    Runner(eg).run([rewrite("relu_idem", "(Relu (Relu ?x))", "(Relu ?x)")])
    assert eg.data(root, "shape") == (5, 6)
    eg.union(unknown, root, "trust")
    eg.rebuild()
    assert eg.data(unknown, "shape") == (5, 6)


def test_congruence_union_carries_the_reason_of_its_cause() -> None:
    eg = EGraph([ShapeAnalysis(infer, join)])
    fx, fy = add_term(eg, "(f x)"), add_term(eg, "(f y)")
    eg.union(fx, add_term(eg, "(In :shape [1])"), "setup_a")
    eg.union(fy, add_term(eg, "(In :shape [2])"), "setup_b")
    eg.rebuild()
    eg.union(add_term(eg, "x"), add_term(eg, "y"), "merge_leaves")
    with pytest.raises(UnsoundRewrite, match="'merge_leaves'"):
        eg.rebuild()


class Tensor:
    """A hashable-by-content array wrapper, as the IR side would supply."""

    def __init__(self, array: Any) -> None:
        self.array = np.asarray(array)
        self.array.setflags(write=False)
        self._key = (self.array.dtype.str, self.array.shape, self.array.tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tensor) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Tensor({self.array.tolist()})"


def evaluate(eg: EGraph, node: ENode) -> Any:
    if node.op == "Const":
        return node.get("value").array
    if node.op in ("Add", "Mul"):
        args = [eg.data(c, "const") for c in node.children]
        if any(a is None for a in args):
            return None
        return args[0] + args[1] if node.op == "Add" else args[0] * args[1]
    return None


def const_node(value: Any) -> ENode:
    return ENode("Const", (("value", Tensor(value)),), ())


def folding(max_bytes: int = 64) -> ConstantAnalysis:
    return ConstantAnalysis(evaluate, const_node, lambda v: int(v.nbytes), max_bytes=max_bytes)


def test_constant_folding_adds_a_constant_node() -> None:
    eg = EGraph([folding()])
    one, two = eg.add(const_node([1.0, 2.0])), eg.add(const_node([3.0, 4.0]))
    total = eg.add(ENode("Add", (), (one, two)))
    eg.rebuild()
    consts = [n for n in eg.nodes(total) if n.op == "Const"]
    assert len(consts) == 1 and consts[0].get("value") == Tensor([4.0, 6.0])
    eg.check_invariants()
    created = {eg.id_node(i).op: i for i in range(eg.id_count) if eg.id_node(i).op != "Const"}
    folded = next(i for i in range(eg.id_count) if eg.id_node(i) == consts[0])
    assert eg.explain(created["Add"], folded).rules() == ["analysis:const"]


def test_constant_folding_respects_the_byte_cap() -> None:
    eg = EGraph([folding(max_bytes=64)])
    big = eg.add(const_node(np.ones(16)))  # 128 bytes: kept, it is already a constant
    assert eg.data(big, "const") is not None
    total = eg.add(ENode("Add", (), (big, big)))
    eg.rebuild()
    assert eg.data(total, "const") is None
    assert [n.op for n in eg.nodes(total)] == ["Add"]


def test_array_data_merge_without_elementwise_comparison() -> None:
    eg = EGraph([folding()])
    a = eg.add(ENode("Add", (), (eg.add(const_node([1.0, 1.0])), eg.add(const_node([1.0, 1.0])))))
    b = eg.add(ENode("Mul", (), (eg.add(const_node([2.0, 2.0])), eg.add(const_node([1.0, 1.0])))))
    eg.union(a, b, "same value")  # both classes hold array data: merging must not call ==
    eg.rebuild()
    assert eg.find(a) == eg.find(b)
    assert np.array_equal(eg.data(a, "const"), [2.0, 2.0])


def test_two_analyses_on_one_egraph() -> None:
    def shape(eg: EGraph, node: ENode) -> Shape:
        return infer(eg, node) if node.op != "Add" else eg.data(node.children[0], "shape")

    eg = EGraph([ShapeAnalysis(shape, join), folding()])
    c = eg.add(const_node([[1.0, 2.0]]))
    total = eg.add(ENode("Add", (), (c, c)))
    eg.rebuild()
    assert eg.data(total, "shape") == (1, 2)
    assert np.array_equal(eg.data(total, "const"), [[2.0, 4.0]])
    assert eg.analysis_names() == ["shape", "const"]
    with pytest.raises(EngineError, match="no analysis named None"):
        eg.data(total)
    with pytest.raises(EngineError, match="no analysis named 'rank'"):
        eg.data(total, "rank")
    with pytest.raises(EngineError, match="must differ"):
        EGraph([folding(), folding()])
