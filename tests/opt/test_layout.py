"""Layout in the e-graph (rules/layout.ger): the NPU's formats stated around cube ops, moved
and cancelled by rules, placed by extraction under the cost model."""

from __future__ import annotations

import numpy as np
import pytest

from gerules.compiler import fix_input_shapes
from gerules.cost import NpuCostModel
from gerules.cost.layout import layout_figures
from gerules.ir.formats import ND
from gerules.onnx_io import load_model
from gerules.opt.optimize import OptimizeOptions, optimize
from gerules.runtime.executor import run_graph
from gerules.testing.models import MODELS, ModelCase, cnn

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _optimized(case: ModelCase, **options: object):  # noqa: ANN202
    """The case at the static shapes of its feeds (a compile fixes them), optimized."""
    source = load_model(case.model.SerializeToString())
    shapes = {k: v.shape for k, v in case.feeds(0).items()}
    source, _ = fix_input_shapes(source, shapes, keep_batch=False)
    out, report = optimize(source, OptimizeOptions(layout=True, **options))  # type: ignore
    return source, out, report


def _same(case: ModelCase, source, after) -> None:  # noqa: ANN001
    for seed in (0, 1):
        feeds = case.feeds(seed)
        want, got = run_graph(source, feeds), run_graph(after, feeds)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], **TOL, err_msg=k)


def _transfers(graph) -> list[tuple[str, str]]:  # noqa: ANN001
    return [(str(n.attrs["src_format"]), str(n.attrs["dst_format"])) for n in graph.nodes
            if n.qualified_op == "ge.TransData"]


def test_a_resnet_runs_in_5hd_from_its_first_conv_to_its_last() -> None:
    """GE's result: one transfer into NC1HWC0 at the input, the classifier's matmul in
    FRACTAL_NZ at the end, every conv (residuals included), the pooling in between in 5HD,
    the weights stored in FRACTAL_Z."""
    case = MODELS["tiny_resnet"]()
    source, out, report = _optimized(case)
    _same(case, source, out)
    assert _transfers(out) == [("NCHW", "NC1HWC0"), ("NC1HWC0", "NCHW"), ("ND", "FRACTAL_NZ"),
                               ("FRACTAL_NZ", "ND")]
    convs = [n for n in out.nodes if n.qualified_op == "ge.FusedConv"]
    assert convs and all(out.type_of(n.outputs[0]).format == "NC1HWC0" for n in convs)
    assert all(out.type_of(n.inputs[1]).format == "FRACTAL_Z" for n in convs)
    assert {out.type_of(n.outputs[0]).format for n in out.nodes
            if n.op in ("MaxPool", "GlobalAveragePool")} == {"NC1HWC0"}
    kept = report.rules["transdata_round_trip"]["kept"]
    assert kept > 0 and report.estimate_after.total_us < report.estimate_before.total_us


def test_the_cost_model_decides_and_layout_pays() -> None:
    """Layout off (the layout rulesets switched off) leaves plain cube ops that pay the
    transfers their layout implies; on, the estimate drops by what the cancelled pairs cost."""
    case = MODELS["tiny_resnet"]()
    source, on, _ = _optimized(case)
    _, off, _ = _optimized(case, disabled=frozenset({"layout"}))
    assert not _transfers(off)
    model = NpuCostModel()
    est_on, est_off = model.graph(on), model.graph(off)
    lay_on, lay_off = layout_figures(on, est_on), layout_figures(off, est_off)
    assert lay_off["transdata"]["final"] == 0 and lay_off["transdata"]["implied"] > 10
    assert lay_on["transdata"]["final"] == 4 and lay_on["transdata"]["implied"] == 0
    assert lay_on["transdata"]["naive"] > 20  # a pair around each of its 11 convs and the fc
    assert est_on.total_us < est_off.total_us
    assert lay_on["padding_bytes"]["activations"] > 0  # 3 input channels padded to 16


def test_a_transformer_shares_fractal_nz_across_layer_norm_and_residuals() -> None:
    """The matmuls of a layer and the AddLayerNorm between them stay in FRACTAL_NZ; the
    transfers left are those around the attention (plain-only) and at the ends."""
    case = MODELS["transformer_encoder"]()
    source, out, _ = _optimized(case, disabled=frozenset())
    _same(case, source, out)
    norms = [n for n in out.nodes if n.qualified_op == "ge.AddLayerNorm"]
    assert norms and all(out.type_of(n.outputs[0]).format == "FRACTAL_NZ" for n in norms)
    mms = [n for n in out.nodes if n.qualified_op == "ge.FusedMatMul"]
    nz = [n for n in mms if out.type_of(n.inputs[0]).format == "FRACTAL_NZ"]
    assert len(nz) == len(mms)
    naive = sum(2 for n in out.nodes if n.qualified_op in ("ge.FusedMatMul",
                                                           "ge.MultiHeadAttention"))
    assert len(_transfers(out)) < naive / 2


@pytest.mark.parametrize("target", ["onnx", "npu"])
def test_no_formats_where_none_can_be_written(target: str) -> None:
    """--target onnx, and layout off (an ONNX file holds no formats): plain graphs."""
    case = cnn()
    source = load_model(case.model.SerializeToString())
    out, _ = optimize(source, OptimizeOptions(target=target, layout=target == "npu"
                                              and False))
    assert not _transfers(out)
    assert all(out.type_of(o).format == ND for n in out.nodes for o in n.outputs)


def test_small_channel_is_chosen_only_when_enabled() -> None:
    """The first conv (3 channels) reads C0 = 4 blocks with --enable_small_channel: fewer
    padded bytes and cube work, priced lower; without the flag the form is never taken."""
    case = MODELS["tiny_resnet"]()
    source, plain, rep = _optimized(case)
    _, small, rep4 = _optimized(case, small_channel=True)
    _same(case, source, small)
    assert ("NCHW", "NC1HWC0_C04") in _transfers(small)
    assert not any("C04" in d for _, d in _transfers(plain))
    assert rep4.estimate_after.total_us < rep.estimate_after.total_us


def test_layout_runs_in_an_egraph_of_its_own_after_fusion() -> None:
    """GE's order: the level's schedule fuses, then schedule LAYOUT places formats on the
    graph that gave, in a second (smaller) e-graph with its own figures and phase times; a
    fusion the layout e-graph then stated in 5HD keeps its whole chain back to the source
    nodes; with every layout rule switched off the second e-graph is not built."""
    case = MODELS["tiny_resnet"]()
    source, out, report = _optimized(case)
    saturation = report.to_json()["saturation"]
    assert 0 < saturation["layout"]["egraph_nodes"] < saturation["egraph_nodes"]
    assert {"layout lower", "layout saturate", "layout extract"} <= set(report.phases)
    names = {n.name for n in source.nodes}
    assert all(name in names for f in report.fusions for name, _ in f.replaced)
    assert {n.name for n in out.nodes} >= {f.node for f in report.fusions}
    stem = next(f for f in report.fusions if ("stem", "Conv") in f.replaced)
    assert stem.op == "ge.FusedConv" and stem.chain[0] == "fold_conv_bn"
    assert stem.chain[-1] == "conv_in_5hd" and ("stem.relu", "Relu") in stem.replaced
    _, off, plain = _optimized(case, disabled=frozenset({"layout", "layout_motion"}))
    assert "layout" not in plain.to_json()["saturation"] and not _transfers(off)
    assert not any(k.startswith("layout ") for k in plain.phases)
