"""Precision modes, the mixed-precision lists and the files that change them (atc's formats).

Modes (atc's ``--precision_mode`` names):
- ``must_keep_origin_dtype`` (our default): nothing changes dtype. atc defaults to
  ``force_fp16``; we do not, so nothing silently loses precision (the report says what
  float16 would save instead).
- ``force_fp16``: every float32 op computes in float16; ``force_fp32``: every float16 op
  computes in float32.
- ``allow_fp32_to_fp16``: ops on the cube unit (Conv, MatMul, Gemm and their fusions, which an
  NPU runs fastest in float16) compute in float16; vector and scalar ops keep float32; data
  movement ops follow their input.
- ``allow_mix_precision``: the *black list* keeps float32, the *gray list* follows its input,
  every other float op computes in float16.

Invariants:
- Ops are named as in ``Node.qualified_op`` (``Softmax``, ``ge.FusedConv``). A fused op
  counts as every ai.onnx op it stands for (``members``): it is black when one of them is.
- ``MixList.apply`` implements atc's ``--modify_mixlist`` JSON: ``black-list``/``white-list``/
  ``gray-list`` each with ``to-add`` and ``to-remove``; ``to-add`` moves an op onto that list,
  ``to-remove`` moves it to the gray list (from gray: to the white list).
- ``--keep_dtype`` files hold one node name per line, or ``OpType::Name`` for every node of
  an op type; ``#`` starts a comment. Pinned nodes keep their original dtype in every mode.
- Every malformed file is a ``UsageError`` naming the file and line or key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..fileio import parse_json, read_input_text
from ..ir.graph import Graph, Node
from ..ir.registry import suggest

KEEP = "must_keep_origin_dtype"
FORCE_FP16 = "force_fp16"
FORCE_FP32 = "force_fp32"
FP32_TO_FP16 = "allow_fp32_to_fp16"
MIX = "allow_mix_precision"
MODES = (KEEP, FORCE_FP16, FORCE_FP32, FP32_TO_FP16, MIX)
DEFAULT_MODE = KEEP

# Kept in float32 under allow_mix_precision: wide dynamic range or long sums.
DEFAULT_BLACK = frozenset({
    "Softmax", "LogSoftmax", "LayerNormalization", "GroupNormalization",
    "InstanceNormalization", "Exp", "Log", "Pow", "ReduceMean", "ReduceSum",
    "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd",
})
# Follow their input's precision: they move data and never round it.
DEFAULT_GRAY = frozenset({
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Concat", "Split",
    "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Pad", "DepthToSpace",
    "SpaceToDepth", "Cast", "Dropout", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin",
})
LISTS = ("black-list", "white-list", "gray-list")
MAX_LIST_BYTES = 1 << 20
# atc --modify_mixlist content: list name -> {"to-add": ops, "to-remove": ops}
MixChanges = Mapping[str, Mapping[str, tuple[str, ...]]]

_FUSED_FIXED: Mapping[str, frozenset[str]] = {
    "ge.FusedConv": frozenset({"Conv", "Add"}),
    "ge.FusedMatMul": frozenset({"MatMul", "Gemm", "Add"}),
    "ge.Attention": frozenset({"MatMul", "Softmax", "Mul", "Add"}),
    "ge.MultiHeadAttention": frozenset({"MatMul", "Softmax", "Mul", "Add", "Reshape",
                                        "Transpose"}),
    "ge.AddLayerNorm": frozenset({"Add", "LayerNormalization"}),
    "ge.Gelu": frozenset({"Gelu"}),
}
_BOOKKEEPING = frozenset({"Constant", "CastLike"})  # a composite body's constants


def members(node: Node, graph: Graph | None = None) -> frozenset[str]:
    """The ai.onnx ops a node stands for: itself, what a fused ``ge`` op computes, or the ops
    of a composite op's body (the graph carries its definition)."""
    op = node.qualified_op
    body = graph.function(node.domain, node.op) if graph is not None else None
    if body is not None:
        return frozenset(o for n in body.nodes
                         for o in members(n, Graph((), (), (), functions=body.uses))
                         ) - _BOOKKEEPING
    fixed = _FUSED_FIXED.get(op)
    if fixed is None:
        return frozenset({op})
    activation = node.attrs.get("activation")
    return fixed | {str(activation)} if activation else fixed


@dataclass(frozen=True, slots=True)
class MixList:
    """The black and gray lists in force (everything else is on the white list)."""

    black: frozenset[str] = DEFAULT_BLACK
    gray: frozenset[str] = DEFAULT_GRAY

    def category(self, node: Node, graph: Graph | None = None) -> str:
        """``"black"``, ``"gray"`` or ``"white"`` for this node."""
        ops = members(node, graph)
        if ops & self.black:
            return "black"
        if node.qualified_op in self.gray or (len(ops) == 1 and ops <= self.gray):
            return "gray"
        return "white"

    def apply(self, changes: MixChanges) -> MixList:
        """These lists after atc ``--modify_mixlist`` changes."""
        black, gray = set(self.black), set(self.gray)
        for name in LISTS:
            edits = changes.get(name, {})
            for op in edits.get("to-remove", ()):
                black.discard(op)
                if name == "gray-list":
                    gray.discard(op)
                else:
                    gray.add(op)
            for op in edits.get("to-add", ()):
                black.discard(op)
                gray.discard(op)
                if name == "black-list":
                    black.add(op)
                elif name == "gray-list":
                    gray.add(op)
        return MixList(frozenset(black), frozenset(gray))


@dataclass(frozen=True, slots=True)
class KeepDtype:
    """Nodes pinned to their original dtype (``--keep_dtype``)."""

    names: frozenset[str] = frozenset()
    op_types: frozenset[str] = frozenset()
    where: str = "--keep_dtype"
    lines: Mapping[str, int] = field(default_factory=dict)  # entry -> line (for messages)

    def __bool__(self) -> bool:
        return bool(self.names or self.op_types)

    def pins(self, node: Node) -> bool:
        return node.name in self.names or node.qualified_op in self.op_types


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise UsageError(f"--precision_mode: unknown mode '{mode}'{suggest(mode, MODES)}; "
                         f"choose one of {', '.join(MODES)}")
    return mode


def parse_mixlist(text: str, where: str = "--modify_mixlist") -> MixChanges:
    """atc's mixed-precision list JSON -> ``{list: {"to-add": ops, "to-remove": ops}}``."""
    data = parse_json(text, where=where, kind=UsageError)
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected an object with {', '.join(LISTS)}")
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, edits in data.items():
        if name not in LISTS:
            raise UsageError(f"{where}: unknown list '{name}'{suggest(str(name), LISTS)} "
                             f"(lists: {', '.join(LISTS)})")
        out[name] = _edits(edits, f"{where}: {name}")
    return out


def _edits(edits: object, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(edits, dict):
        raise UsageError(f"{where} must be an object with to-add and to-remove")
    out: dict[str, tuple[str, ...]] = {}
    for key, ops in edits.items():
        if key not in ("to-add", "to-remove"):
            raise UsageError(f"{where}: unknown key '{key}' (expected to-add or to-remove)")
        if not isinstance(ops, list) or not all(isinstance(o, str) and o for o in ops):
            raise UsageError(f"{where}.{key} must be a list of op type names")
        out[key] = tuple(ops)
    return out


def read_mixlist(path: str | Path) -> MixChanges:
    return parse_mixlist(_read(path, "--modify_mixlist"), str(path))


def parse_keep_dtype(text: str, where: str = "--keep_dtype") -> KeepDtype:
    names: set[str] = set()
    types: set[str] = set()
    lines: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("OpType::"):
            op = line[len("OpType::"):].strip()
            if not op:
                raise UsageError(f"{where}:{number}: 'OpType::' needs an op type name")
            types.add(op)
            lines[f"OpType::{op}"] = number
        else:
            names.add(line)
            lines[line] = number
    return KeepDtype(frozenset(names), frozenset(types), where, lines)


def read_keep_dtype(path: str | Path) -> KeepDtype:
    return parse_keep_dtype(_read(path, "--keep_dtype"), str(path))


def _read(path: str | Path, flag: str) -> str:
    return read_input_text(path, limit=MAX_LIST_BYTES, what=f"a {flag} file", kind=UsageError)
