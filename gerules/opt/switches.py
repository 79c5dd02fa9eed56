"""Fusion switch files, in both of atc's formats, read into a set of names switched off.

Formats (atc's ``--fusion_switch_file``):
- JSON: ``{"Switch": {"GraphFusion": {"NAME": "off", "ALL": "off"}, "UBFusion": {...}}}``;
- text: one ``NAME:off`` (or ``NAME:on``) per line; ``#`` starts a comment.

Names are our rule and ruleset names (``fold_conv_bn``, ``fuse_conv``); ``ALL`` switches every
rule off. atc's own pass names are accepted through ``ATC_NAMES`` where we have an equivalent.
``on`` entries override an ``ALL: off`` for that name.

Invariants: a malformed file is a ``UsageError`` naming ``file:line`` (or the JSON key); the
result never contains names with ``on``; unknown names are kept (the optimizer warns about
them, listing the valid ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..fileio import parse_json, read_input_text

# atc pass names -> our rule or ruleset names, where we implement the same fusion.
ATC_NAMES: dict[str, tuple[str, ...]] = {
    "ConvBatchnormFusionPass": ("fold_conv_bn", "fold_conv_bn_no_bias"),
    "ConvBnFusionPass": ("fold_conv_bn", "fold_conv_bn_no_bias"),
    "BatchNormBnInferFusionPass": ("batchnorm_to_mul_add",),
    "MatMulBiasAddFusionPass": ("matmul_add_to_gemm", "matmul_add_to_flat_gemm",
                                "matmul_add_to_fused"),
    "ConvAddFusionPass": ("fold_conv_add_bias", "fold_conv_add_to_bias", "fuse_conv_add"),
    "TbeConvReluFusionPass": ("fuse_conv_activation[Act=Relu]",),
    "LayerNormFusionPass": ("fuse_layer_norm",),
    "GeluFusionPass": ("fuse_gelu",),
    "AttentionFusionPass": ("fuse_attention",),
    "ConstantFoldingPass": ("fold",),
}


@dataclass(frozen=True, slots=True)
class Switches:
    off: frozenset[str]
    on: frozenset[str]  # names explicitly kept on (matter when ALL is off)


MAX_BYTES = 1 << 20


def read_switch_file(path: str | Path) -> Switches:
    text = read_input_text(path, limit=MAX_BYTES, what="a fusion switch file", kind=UsageError)
    return parse_switches(text, str(path))


def parse_switches(text: str, where: str = "<switches>") -> Switches:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        pairs = _json_pairs(text, where)
    else:
        pairs = _line_pairs(text, where)
    off: set[str] = set()
    on: set[str] = set()
    for name, state in pairs:
        names = ATC_NAMES.get(name, (name,))
        (off if state == "off" else on).update(names)
    return Switches(frozenset(off - on), frozenset(on))


def _json_pairs(text: str, where: str) -> list[tuple[str, str]]:
    data = parse_json(text, where=where, kind=UsageError)
    switch = data.get("Switch") if isinstance(data, dict) else None
    if not isinstance(switch, dict):
        raise UsageError(f"{where}: expected {{\"Switch\": {{\"GraphFusion\": {{...}}}}}}")
    pairs = []
    for group, entries in switch.items():
        if not isinstance(entries, dict):
            raise UsageError(f"{where}: Switch.{group} must be an object of NAME: on/off")
        for name, state in entries.items():
            pairs.append((str(name), _state(state, f"{where}: Switch.{group}.{name}")))
    return pairs


def _line_pairs(text: str, where: str) -> list[tuple[str, str]]:
    pairs = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, state = line.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"{where}:{number}: expected NAME:on or NAME:off, got "
                             f"'{line[:80]}{'...' if len(line) > 80 else ''}'")
        pairs.append((name.strip(), _state(state.strip(), f"{where}:{number}")))
    return pairs


def _state(value: object, where: str) -> str:
    state = str(value).strip().lower()
    if state not in ("on", "off"):
        raise UsageError(f"{where}: switch must be 'on' or 'off', got '{value}'")
    return state
