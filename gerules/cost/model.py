"""An Ascend-like roofline cost model. It *estimates* latency; it never measures.

Per op: ``launch[unit] + max(flops / peak[unit][dtype], bytes / hbm_bandwidth)`` microseconds,
where ``unit`` (cube, vector or scalar/AI CPU) and ``flops`` come from the op registry and
``bytes`` is what the kernel reads and writes in HBM (all inputs and outputs, in their
physical layout: a padded format moves its padding too). Consequences the optimizer relies
on:
- A fused op pays one launch and never writes its intermediates to HBM, so a fusion that removes
  a node saves that node's launch and its output's round trip.
- FP32 on the cube runs at a fraction of FP16's rate (the profile says how much), so casting a
  Conv to float16 pays, which is why ``force_fp16`` exists.
- Metadata-only ops (Reshape, Squeeze, Unsqueeze, Flatten, Identity, Dropout at inference) cost
  only ``view_us``: no kernel runs, but removing them still wins.
- Layout (``cost.layout``): the cube works on padded fractals (its FLOPs grow by the padding:
  a 3-channel conv in C0 = 16 pays 16/3), and a cube op whose data is plain pays the
  TransData nodes that layout implies (``transfer_us``), so transfers moved and cancelled in
  the e-graph are what makes the blocked layout win (``layout=False`` leaves that charge out:
  the model of an optimization that writes no formats, an ONNX file). TransData itself is
  vector work priced by the bytes it moves. The small-channel formats (C0 = 4) are allowed only with
  ``small_channel`` (atc's ``--enable_small_channel``): ``allowed`` says no otherwise.
- Constants, graph inputs and tuple projections cost nothing.

Invariants: every estimate is finite and non-negative; symbolic dims count as 1 (documented in
every report as part of the "estimate" label).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..ir.formats import FRACTAL_Z_C04, NC1HWC0_C04
from ..ir.graph import Graph, Node, TensorType
from ..ir.infer import schema_for
from ..ir.registry import Call, OpSchema, Registry, default_registry
from .layout import cube_bytes, cube_padding, implied_transfers, physical_bytes, transfer_bytes
from .profile import SocProfile, load_profile

VIEW_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout"})
FREE_OPS = frozenset({"Constant"})
SMALL_FORMATS = frozenset({NC1HWC0_C04, FRACTAL_Z_C04})
# An implied transfer costs what the TransData node stating it costs, and 0.1 % more: when
# the two tie (a lone cube op, no transfer to cancel), the graph that states its TransData
# nodes, as GE builds it, is the one extracted.
IMPLIED_TIE = 1.001
LABEL = "estimated by the gerules NPU cost model (roofline over public peak figures)"


@dataclass(frozen=True, slots=True)
class OpEstimate:
    op: str
    unit: str
    us: float
    flops: int
    bytes: int
    bound: str  # "compute", "memory", "launch", "view" or "free"
    transfer_us: float = 0.0  # of ``us``: the format transfers a plain cube op implies
    transfers: int = 0  # how many (each a TransData GE would insert)


@dataclass(frozen=True, slots=True)
class GraphEstimate:
    soc: str
    total_us: float
    nodes: tuple[tuple[str, OpEstimate], ...]  # (node label, estimate), in graph order
    by_op: Mapping[str, float] = field(default_factory=dict)
    label: str = LABEL

    def to_json(self) -> dict[str, object]:
        return {"soc": self.soc, "total_us": round(self.total_us, 3), "label": self.label,
                "by_op_us": {k: round(v, 3) for k, v in self.by_op.items()}}


def _numel(t: TensorType) -> int:
    n = 1
    for d in t.shape or ():
        n *= d if isinstance(d, int) else 1
    return n


def _static(t: TensorType) -> TensorType:
    if t.is_static or t.shape is None:
        return t
    return TensorType(t.dtype, tuple(d if isinstance(d, int) else 1 for d in t.shape))


class NpuCostModel:
    """Estimates per op and per graph for one SoC profile."""

    def __init__(self, profile: SocProfile | str | None = None,
                 registry: Registry | None = None, *, small_channel: bool = False,
                 layout: bool = True) -> None:
        self.profile = profile if isinstance(profile, SocProfile) else load_profile(
            profile or "Ascend910")
        self.registry = registry or default_registry()
        self.small_channel = small_channel
        # price the transfers a plain cube op implies (off: a plain graph is priced as if
        # the cube read it as it is, the model for an optimization that writes no formats)
        self.layout = layout

    def allowed(self, inputs: Sequence[TensorType | None],
                outputs: Sequence[TensorType]) -> bool:
        """False for an op on the small-channel formats unless they are enabled."""
        if self.small_channel:
            return True
        return not any(t is not None and t.format in SMALL_FORMATS for t in (*inputs, *outputs))

    def estimate(self, schema: OpSchema, inputs: Sequence[TensorType | None],
                 outputs: Sequence[TensorType], call: Call,
                 constant: Sequence[bool] = ()) -> OpEstimate:
        """The estimate of one op; ``call.attrs`` are resolved (schema defaults applied);
        ``constant[k]``: input ``k`` is a compile-time constant (a weight)."""
        op = schema.qualified_op
        unit = schema.unit_for(inputs, outputs)
        if op in FREE_OPS:
            return OpEstimate(op, unit, 0.0, 0, 0, "free")
        if op in VIEW_OPS:
            return OpEstimate(op, unit, self.profile.view_us, 0, 0, "view")
        if unit == "cube":
            moved = cube_bytes(op, inputs, outputs)
        else:
            moved = sum(physical_bytes(t) for t in (*inputs, *outputs))
        flops = 0 if unit == "scalar" else self._flops(schema, inputs, outputs, call)
        if unit == "cube":
            flops = int(flops * cube_padding(op, inputs, outputs))
        dtype = self._dtype(unit, inputs, outputs)
        compute = flops / self.profile.peak_flops(unit, dtype)
        memory = moved / self.profile.hbm_bytes_per_us
        launch = self.profile.launch_us[unit]
        bound = "compute" if compute >= memory else "memory"
        if max(compute, memory) < 0.05 * launch:
            bound = "launch"
        implied = (implied_transfers(op, inputs, outputs, constant)
                   if unit == "cube" and self.layout else [])
        transfer = sum(self.transfer_us(transfer_bytes(x)) for x in implied) * IMPLIED_TIE
        return OpEstimate(op, unit, launch + max(compute, memory) + transfer, flops, moved,
                          bound, transfer, len(implied))

    def transfer_us(self, nbytes: int) -> float:
        """One TransData moving ``nbytes`` (read plus written) on the vector unit."""
        return self.profile.launch_us["vector"] + nbytes / self.profile.hbm_bytes_per_us

    def _flops(self, schema: OpSchema, inputs: Sequence[TensorType | None],
               outputs: Sequence[TensorType], call: Call) -> int:
        static_in = [None if t is None else _static(t) for t in inputs]
        static_out = [_static(t) for t in outputs]
        if schema.flops is not None:
            try:
                return max(0, int(schema.flops(static_in, static_out, call)))
            except (TypeError, ValueError, KeyError, IndexError):
                pass
        return sum(_numel(t) for t in static_out)

    @staticmethod
    def _dtype(unit: str, inputs: Sequence[TensorType | None],
               outputs: Sequence[TensorType]) -> str:
        if unit == "cube":
            first = next((t for t in inputs if t is not None), None)
            if first is not None:
                return first.dtype
        return outputs[0].dtype if outputs else "float32"

    def node(self, node: Node, graph: Graph) -> OpEstimate:
        """The estimate of one node of a shape-inferred graph."""
        schema = schema_for(node, graph, self.registry)
        ins = [graph.type_of(i) if i else None for i in node.inputs]
        outs = [graph.type_of(o) or TensorType("float32", ()) for o in node.outputs if o]
        constant = [i in graph.initializers for i in node.inputs]
        return self.estimate(schema, ins, outs, schema.call(node.attrs, len(outs), node.label),
                             constant)

    def graph(self, graph: Graph) -> GraphEstimate:
        """Per-node estimates and their sum (one stream, nodes back to back)."""
        rows = tuple((n.label, self.node(n, graph)) for n in graph.nodes)
        by_op: dict[str, float] = {}
        for _, est in rows:
            by_op[est.op] = by_op.get(est.op, 0.0) + est.us
        total = sum(est.us for _, est in rows)
        return GraphEstimate(self.profile.name, total, rows, dict(sorted(by_op.items())))
