"""``g.ops``: one function per registry op, its signature and docstring from the schema."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import gerules as ge
from gerules.api.namespace import UnknownOpError
from gerules.ir.registry import OpSchema, default_registry


def _schemas(g: ge.GraphBuilder, domain: str) -> list[OpSchema]:
    """Every schema in force at the builder's opset, straight from the registry."""
    registry, version = default_registry(), g.opset_of(domain)
    return [registry.get(op, d, version) for d, op in registry.ops(domain)
            if registry.versions(op, d)[0].since_version <= version]


@pytest.mark.parametrize("domain", ["", "ge"])
def test_every_op_gets_its_schema_as_signature_and_docstring(domain: str) -> None:
    g = ge.GraphBuilder("t")
    schemas = _schemas(g, domain)
    namespace = g.ops.ge if domain else g.ops
    assert sorted(dir(namespace)) == sorted(s.op for s in schemas)
    for schema in schemas:
        fn = getattr(namespace, schema.op)
        params = inspect.signature(fn).parameters
        ports = [p for p in params.values() if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                          p.VAR_POSITIONAL)]
        assert len(ports) == len(schema.inputs), schema.qualified_op
        for port, param in zip(schema.inputs, ports, strict=True):
            assert (param.kind == param.VAR_POSITIONAL) == port.variadic
            assert param.name.rstrip("_") == port.name
        for spec in schema.attrs.values():
            param = params[spec.name]
            assert param.kind == param.KEYWORD_ONLY
            assert (param.default is param.empty) == spec.required
            assert spec.name in (fn.__doc__ or "")
        assert list(params)[-2:] == ["name", "outputs"]
        assert fn.__name__ == schema.op and (schema.doc or schema.op) in (fn.__doc__ or "")


def test_no_schema_uses_the_reserved_keywords() -> None:
    for schema in default_registry():
        assert not {"name", "outputs", "domain"} & set(schema.attrs), schema.qualified_op


def test_namespace_and_op_build_the_same_node() -> None:
    nodes = []
    for spell in ("op", "namespace"):
        g = ge.GraphBuilder("t")
        x = g.input("x", ["N", 3, 8, 8])
        w = g.const(np.ones((2, 3, 3, 3), np.float32), name="w")
        if spell == "op":
            g.op("Conv", x, w, strides=[2, 2], pads=[1] * 4, name="c")
        else:
            g.ops.Conv(x, w, strides=[2, 2], pads=[1] * 4, name="c")
        nodes.append(g.nodes[0])
    assert nodes[0] == nodes[1]


def test_inputs_by_port_name_go_to_their_port() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [4])
    y = g.ops.Clip(x, max=6.0, name="clip")
    assert g.nodes[-1].inputs == ("x", "", "clip.max") and y.shape == (4,)
    w = g.const(np.ones((2, 1, 1), np.float32), name="w")
    g.ops.Conv(X=g.input("img", [1, 1, 3]), W=w, name="conv")
    assert g.nodes[-1].inputs == ("img", "w")
    with pytest.raises(ge.UsageError, match="input 'X' given twice"):
        g.ops.Relu(x, X=x)


def test_missing_input_through_the_namespace_names_the_node() -> None:
    g = ge.GraphBuilder("t")
    x = g.input("x", [1, 3, 4, 4])
    with pytest.raises(ge.GraphError) as err:
        g.ops.Conv(x, name="conv1")
    assert str(err.value).startswith("node 'conv1' (Conv): required input 'W' is missing")
    with pytest.raises(ge.GraphError, match="required input 'W' is missing"):
        g.ops.Conv(x, B=g.const(np.zeros(2, np.float32)))


def test_unknown_ops_are_attribute_errors_with_a_suggestion() -> None:
    g = ge.GraphBuilder("t", opset=17)
    assert not hasattr(g.ops, "Cnv") and not hasattr(g.ops, "_private")
    with pytest.raises(UnknownOpError) as err:
        _ = g.ops.Cnv
    assert isinstance(err.value, ge.GraphError) and isinstance(err.value, AttributeError)
    assert str(err.value) == "op Cnv: unknown op Cnv (did you mean Conv?)"
    assert "Gelu" not in dir(g.ops) and not hasattr(g.ops, "Gelu")  # Gelu is opset 20
    assert "Gelu" in dir(ge.GraphBuilder("u", opset=20).ops)
    with pytest.raises(UnknownOpError, match="ge.Conv"):
        _ = g.ops.ge.Conv


def test_functions_are_cached_and_repr_names_the_domain() -> None:
    g = ge.GraphBuilder("t")
    assert g.ops.Relu is g.ops.Relu
    assert repr(g.ops.ge) == "<ops of domain 'ge' for graph 't'>"
    assert "Conv" in dir(g.ops) and "FusedConv" in dir(g.ops.ge)
