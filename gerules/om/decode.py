"""MODEL_DEF from JSON: check every field, then rebuild the graph, weights and variants.

Invariants:
- Nothing from the file is trusted: every field has its type checked, every name passes
  ``names.name_problem``, dims are integers in ``0..MAX_DIM`` (symbolic dims only in declared
  graph inputs and outputs), byte sizes are computed with Python integers and bounded, weights
  lie inside the WEIGHTS section at multiples of 64, ops resolve in the registry at the graph's
  opset, and each variant's memory plan passes ``verify_plan``; a pipeline's stages each pass
  the same checks as a variant, cover every node once and read only what is available.
- Every failure is an ``OmError`` whose one-line message names the file, the section and the
  field, node or tensor.
- Weights become read-only ``np.frombuffer`` views of the file's memory map (no copies).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import GeError, OmError
from ..ir import formats
from ..ir.attrs import Attrs
from ..ir.composite import AttrRef, CompositeOp, body_problem
from ..ir.dtypes import ONNX_CODES, itemsize, to_numpy
from ..ir.graph import UNTYPED, Graph, Node, TensorType, Value
from ..ir.registry import AttrSpec, Port, Registry, default_registry
from ..ir.verify import verify
from ..memory.plan import MemoryFigures, MemoryPlan
from ..memory.verify import verify_plan
from .contents import OmContents, Pipeline, Stage, Variant
from .format import ALIGN, Section
from .names import name_problem

MAX_DIM = 1 << 40
MAX_TENSOR_BYTES = 1 << 40
MAX_ARENA_BYTES = 1 << 42
MAX_OPSET = 10_000
MAX_NESTING = 16  # subgraphs inside subgraphs (as the ONNX reader allows)
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
ATTR_KINDS = ("int", "float", "string", "ints", "floats", "strings")
_REGISTRY = default_registry


class Doc:
    """Checked access to parsed JSON; failures name the file, section and field."""

    def __init__(self, where: str, section: str = "MODEL_DEF") -> None:
        self.where = where
        self.section = section

    def fail(self, ctx: str, msg: str) -> OmError:
        return OmError(f"section {self.section}: {ctx}: {msg}", file=self.where)

    def obj(self, v: Any, ctx: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(ctx, f"expected an object, got {_kind(v)}")
        return v

    def seq(self, v: Any, ctx: str) -> list[Any]:
        if not isinstance(v, list):
            raise self.fail(ctx, f"expected a list, got {_kind(v)}")
        return v

    def get(self, d: dict[str, Any], key: str, ctx: str) -> Any:
        if key not in d:
            raise self.fail(ctx, f"field '{key}' is missing")
        return d[key]

    def text(self, v: Any, ctx: str) -> str:
        if not isinstance(v, str):
            raise self.fail(ctx, f"expected a string, got {_kind(v)}")
        return v

    def integer(self, v: Any, ctx: str, lo: int = 0, hi: int = 1 << 63) -> int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise self.fail(ctx, f"expected an integer, got {_kind(v)}")
        if not lo <= v <= hi:
            raise self.fail(ctx, f"{v} is outside {lo}..{hi}")
        return v

    def name(self, v: Any, ctx: str, *, empty: bool = False) -> str:
        problem = name_problem(v, empty=empty)
        if problem:
            raise self.fail(ctx, problem)
        return v  # type: ignore[no-any-return]

    def items(self, v: Any, ctx: str, fn: Callable[[Any, str], Any]) -> list[Any]:
        return [fn(x, f"{ctx}[{i}]") for i, x in enumerate(self.seq(v, ctx))]


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(v), "?")


def decode(doc: Any, buffer: Any, weights: Section, where: str,
           registry: Registry) -> OmContents:
    """Rebuild an ``OmContents`` from parsed MODEL_DEF JSON and the mapped file."""
    d = Doc(where)
    top = d.obj(doc, "top level")
    blobs = d.items(d.get(top, "weights", "top level"), "weights",
                    lambda b, ctx: _blob(d, b, ctx, buffer, weights))
    graph = _graph(d, d.get(top, "graph", "top level"), blobs)
    try:
        verify(graph, registry, shapes=False)
    except GeError as e:
        raise OmError(f"section MODEL_DEF: {e}", file=where) from None
    variants = d.items(d.get(top, "variants", "top level"), "variants",
                       lambda v, ctx: _variant(d, v, ctx, graph, registry))
    if not variants:
        raise d.fail("variants", "the model has no compiled variant")
    if len({v.name for v in variants}) != len(variants):
        raise d.fail("variants", "two variants have the same name")
    options = d.obj(top.get("compile_options", {}), "compile_options")
    pipeline = None
    if "pipeline" in top:
        if len(variants) != 1:
            raise d.fail("pipeline", "a pipelined model has exactly one variant")
        pipeline = _pipeline(d, top["pipeline"], variants[0].graph, registry)
    return OmContents(graph, tuple(variants), d.text(top.get("soc_version", ""), "soc_version"),
                      options, d.text(top.get("command_line", ""), "command_line"),
                      d.text(top.get("producer", ""), "producer"), pipeline)


def _pipeline(d: Doc, raw: Any, whole: Graph, registry: Registry) -> Pipeline:
    """The stages, checked: they cover every node once, and each reads only graph inputs,
    weights and earlier stages' outputs; every model output is available at the end."""
    raw = d.obj(raw, "pipeline")
    available = set(whole.input_names)
    owner: dict[int, str] = {}
    stages = []
    for i, st in enumerate(d.seq(d.get(raw, "stages", "pipeline"), "pipeline.stages")):
        ctx = f"pipeline.stages[{i}]"
        st = d.obj(st, ctx)
        name = d.name(d.get(st, "name", ctx), f"{ctx}.name")
        ctx = f"pipeline stage '{name}'"
        nodes = tuple(d.items(d.get(st, "nodes", ctx), f"{ctx}.nodes",
                              lambda x, c: d.integer(x, c, 0, len(whole.nodes) - 1)))
        for k in nodes:
            if k in owner:
                raise d.fail(f"{ctx}.nodes", f"node {k} is already in stage '{owner[k]}'")
            owner[k] = name
        raw_v = d.obj(d.get(st, "variant", ctx), f"{ctx}.variant")
        inputs = d.items(d.get(raw_v, "inputs", ctx), f"{ctx}.inputs",
                         lambda x, c: _value(d, x, c, static=True))
        outputs = d.items(d.get(raw_v, "outputs", ctx), f"{ctx}.outputs",
                          lambda x, c: _value(d, x, c, static=True))
        for v in inputs:
            if v.name not in available:
                raise d.fail(f"{ctx}.inputs", f"'{v.name}' is neither a graph input nor an "
                                              "output of an earlier stage")
            if v.type != whole.type_of(v.name):
                raise d.fail(f"{ctx}.inputs '{v.name}'", f"{v.type} differs from the model's "
                                                          f"{whole.type_of(v.name)}")
        part = [whole.nodes[k] for k in nodes]
        used = {n for node in part for n in node.present_inputs()}
        made = {o for node in part for o in node.outputs}
        for v in outputs:
            if v.name not in made:
                raise d.fail(f"{ctx}.outputs", f"'{v.name}' is not made by this stage")
        g = Graph(tuple(part), tuple(inputs), tuple(outputs),
                  {k: a for k, a in whole.initializers.items() if k in used},
                  {k: v for k, v in whole.value_info.items()  # weights held in a format
                   if k in used and k in whole.initializers},
                  name=name, opset=whole.opset)
        try:
            verify(g, registry, shapes=False)
        except GeError as e:
            raise d.fail(ctx, str(e)) from None
        variant = _variant(d, raw_v, ctx, g, registry)
        available.update(v.name for v in outputs)
        stages.append(Stage(name, nodes, variant))
    if len(owner) != len(whole.nodes):
        missing = next(k for k in range(len(whole.nodes)) if k not in owner)
        raise d.fail("pipeline.stages", f"node {missing} ('{whole.nodes[missing].label}') is "
                                        "in no stage")
    for out in whole.output_names:
        if out not in available and out not in whole.initializers:
            raise d.fail("pipeline", f"model output '{out}' is not an output of any stage")
    if not stages:
        raise d.fail("pipeline.stages", "a pipeline has at least one stage")
    return Pipeline(tuple(stages), d.obj(raw.get("info", {}), "pipeline.info"))


def _blob(d: Doc, b: Any, ctx: str, buffer: Any, weights: Section) -> np.ndarray:
    b = d.obj(b, ctx)
    t = _type(d, b, ctx, static=True)
    nbytes = d.integer(d.get(b, "nbytes", ctx), f"{ctx}.nbytes")
    offset = d.integer(d.get(b, "offset", ctx), f"{ctx}.offset")
    numel = t.numel() or 0
    if nbytes != numel * itemsize(t.dtype):
        raise d.fail(ctx, f"nbytes {nbytes} does not match {t}")
    if offset % ALIGN or offset + nbytes > weights.length:
        raise d.fail(ctx, f"bytes [{offset}, {offset + nbytes}) are not 64-aligned inside the "
                          f"{weights.length}-byte WEIGHTS section")
    if numel == 0:
        return np.zeros(t.shape, dtype=to_numpy(t.dtype))  # type: ignore[arg-type]
    arr = np.frombuffer(buffer, dtype=to_numpy(t.dtype), count=numel,
                        offset=weights.offset + offset)
    return arr.reshape(t.shape)  # type: ignore[arg-type]


def _type(d: Doc, v: dict[str, Any], ctx: str, *, static: bool,
          untyped: bool = False) -> TensorType:
    dtype = d.text(d.get(v, "dtype", ctx), f"{ctx}.dtype")
    if untyped and dtype == UNTYPED:
        return TensorType(dtype, None)
    if dtype not in ONNX_CODES:
        raise d.fail(ctx, f"unknown dtype '{dtype[:40]}'")
    shape = d.get(v, "shape", ctx)
    if shape is None and not static:
        return TensorType(dtype, None)
    dims = tuple(_dim(d, x, f"{ctx}.shape", static) for x in d.seq(shape, f"{ctx}.shape"))
    fmt = _format(d, v["format"], f"{ctx}.format") if "format" in v else formats.ND
    why = formats.can_hold(fmt, dims)
    if why:
        raise d.fail(ctx, why)
    t = TensorType(dtype, dims, fmt)
    if fmt != formats.ND:
        physical = tuple(_dim(d, x, f"{ctx}.physical", static)
                         for x in d.seq(d.get(v, "physical", ctx), f"{ctx}.physical"))
        if physical != t.physical_shape:
            raise d.fail(ctx, f"physical shape {list(physical)} is not how {fmt} holds "
                              f"{list(dims)} ({list(t.physical_shape or ())})")
    if t.is_static and (t.nbytes() or 0) > MAX_TENSOR_BYTES:
        raise d.fail(ctx, f"{t} needs {t.nbytes()} bytes (at most {MAX_TENSOR_BYTES})")
    return t


def _dim(d: Doc, x: Any, ctx: str, static: bool) -> int | str:
    if isinstance(x, str) and not static:
        return d.name(x, ctx)
    return d.integer(x, ctx, 0, MAX_DIM)


def _value(d: Doc, v: Any, ctx: str, *, static: bool = False, untyped: bool = False) -> Value:
    v = d.obj(v, ctx)
    name = d.name(d.get(v, "name", ctx), f"{ctx}.name")
    return Value(name, _type(d, v, f"{ctx} '{name}'", static=static, untyped=untyped))


def _graph(d: Doc, g: Any, blobs: list[np.ndarray], depth: int = 0) -> Graph:
    """A graph (``depth > 0``: a subgraph, whose signature may be untyped)."""
    if depth > MAX_NESTING:
        raise d.fail("graph", f"subgraphs nest more than {MAX_NESTING} deep")
    g = d.obj(g, "graph")
    opset = {d.name(k, "graph.opset", empty=True): d.integer(v, f"graph.opset.{k}", 1, MAX_OPSET)
             for k, v in d.obj(d.get(g, "opset", "graph"), "graph.opset").items()}
    meta = {d.text(k, "graph.metadata"): d.text(v, f"graph.metadata.{k}")
            for k, v in d.obj(g.get("metadata", {}), "graph.metadata").items()}
    inits, held = {}, {}
    for i, item in enumerate(d.seq(d.get(g, "initializers", "graph"), "graph.initializers")):
        ctx = f"graph.initializers[{i}]"
        item = d.obj(item, ctx)
        name = d.name(d.get(item, "name", ctx), f"{ctx}.name")
        inits[name] = _weight(d, item.get("weight"), f"{ctx} '{name}'", blobs)
        if "format" in item:
            held[name] = Value(name, _held_type(d, item, inits[name], f"{ctx} '{name}'"))
    functions: list[CompositeOp] = []
    for i, f in enumerate(d.seq(g.get("functions", []), "graph.functions")):
        functions.append(_function(d, f, f"graph.functions[{i}]", blobs, functions))
    return Graph(
        functions=tuple(functions),
        nodes=tuple(d.items(d.get(g, "nodes", "graph"), "graph.nodes",
                            lambda n, c: _node(d, n, c, blobs, depth))),
        inputs=tuple(d.items(d.get(g, "inputs", "graph"), "graph.inputs",
                             lambda v, c: _value(d, v, c, untyped=depth > 0))),
        outputs=tuple(d.items(d.get(g, "outputs", "graph"), "graph.outputs",
                              lambda v, c: _value(d, v, c, untyped=depth > 0))),
        initializers=inits, value_info=held,
        name=d.name(g.get("name", "graph"), "graph.name", empty=True), opset=opset,
        metadata=meta)


def _held_type(d: Doc, item: dict[str, Any], blob: np.ndarray, ctx: str) -> TensorType:
    """The logical type of a weight held in a blocked format; its blob must have exactly
    that format's physical shape."""
    fmt = _format(d, item.get("format"), f"{ctx}.format")
    dims = tuple(d.integer(x, f"{ctx}.shape", 0, MAX_DIM)
                 for x in d.seq(d.get(item, "shape", ctx), f"{ctx}.shape"))
    why = formats.can_hold(fmt, dims)
    if why:
        raise d.fail(ctx, why)
    t = TensorType(blob.dtype.name, dims, fmt)
    if t.physical_shape != tuple(blob.shape):
        raise d.fail(ctx, f"a {t} weight is held as {list(t.physical_shape or ())}, its blob "
                          f"is {list(blob.shape)}")
    return t


def _format(d: Doc, x: Any, ctx: str) -> str:
    fmt = d.text(x, ctx)
    if fmt not in formats.FORMATS:
        raise d.fail(ctx, f"unknown format '{fmt[:40]}' (formats: {', '.join(formats.FORMATS)})")
    return fmt


def _weight(d: Doc, idx: Any, ctx: str, blobs: list[np.ndarray]) -> np.ndarray:
    return blobs[d.integer(idx, f"{ctx}.weight", 0, len(blobs) - 1)]


def _function(d: Doc, f: Any, ctx: str, blobs: list[np.ndarray],
              earlier: list[CompositeOp]) -> CompositeOp:
    """A composite op; its body may use only functions listed before it."""
    f = d.obj(f, ctx)
    domain = d.name(d.get(f, "domain", ctx), f"{ctx}.domain")
    name = d.name(d.get(f, "name", ctx), f"{ctx}.name")
    ctx = f"function '{domain}.{name}'"
    inputs = []
    for k, p in enumerate(d.seq(d.get(f, "inputs", ctx), f"{ctx}.inputs")):
        p = d.obj(p, f"{ctx}.inputs[{k}]")
        inputs.append(Port(d.name(d.get(p, "name", ctx), f"{ctx}.inputs[{k}].name"),
                           p.get("optional") is True))
    attrs = []
    for k, a in enumerate(d.seq(d.get(f, "attrs", ctx), f"{ctx}.attrs")):
        a = d.obj(a, f"{ctx}.attrs[{k}]")
        kind = d.text(d.get(a, "kind", ctx), f"{ctx}.attrs[{k}].kind")
        if kind not in ATTR_KINDS:
            raise d.fail(f"{ctx}.attrs[{k}]", f"unknown attribute kind '{kind[:40]}'")
        default = a.get("default")
        value = None if default is None else _attr(d, default, f"{ctx}.attrs[{k}]", blobs)
        attrs.append(AttrSpec(d.name(d.get(a, "name", ctx), f"{ctx}.attrs[{k}].name"),
                              kind, value, required=value is None))  # type: ignore[arg-type]
    nodes = d.items(d.get(f, "nodes", ctx), f"{ctx}.nodes",
                    lambda n, c: _node(d, n, c, blobs, refs=True))
    uses = {(u.domain, u.name): u for u in earlier}
    op = CompositeOp(domain, name, tuple(inputs),
                     tuple(d.name(o, f"{ctx}.outputs")
                           for o in d.seq(d.get(f, "outputs", ctx), f"{ctx}.outputs")),
                     tuple(attrs), tuple(nodes),
                     d.integer(d.get(f, "opset", ctx), f"{ctx}.opset", 1, MAX_OPSET),
                     tuple(uses[n.domain, n.op] for n in nodes if (n.domain, n.op) in uses),
                     d.text(f.get("doc", ""), f"{ctx}.doc"))
    problem = body_problem(op, _REGISTRY())
    if problem:
        raise d.fail(ctx, problem)
    return op


def _node(d: Doc, n: Any, ctx: str, blobs: list[np.ndarray], depth: int = 0,
          refs: bool = False) -> Node:
    n = d.obj(n, ctx)
    name = d.name(n.get("name", ""), f"{ctx}.name", empty=True)
    ctx = f"node '{name}'" if name else ctx
    attrs = {d.name(k, f"{ctx}.attrs"): _attr(d, v, f"{ctx}.attrs.{k}", blobs, depth, refs)
             for k, v in d.obj(n.get("attrs", {}), f"{ctx}.attrs").items()}
    return Node(
        op=d.name(d.get(n, "op", ctx), f"{ctx}.op"),
        inputs=tuple(d.name(i, f"{ctx}.inputs", empty=True)
                     for i in d.seq(d.get(n, "inputs", ctx), f"{ctx}.inputs")),
        outputs=tuple(d.name(o, f"{ctx}.outputs")
                      for o in d.seq(d.get(n, "outputs", ctx), f"{ctx}.outputs")),
        attrs=Attrs(attrs), name=name,
        domain=d.name(n.get("domain", ""), f"{ctx}.domain", empty=True))


def _attr(d: Doc, a: Any, ctx: str, blobs: list[np.ndarray], depth: int = 0,
          refs: bool = False) -> Any:
    a = d.obj(a, ctx)
    kind = d.text(d.get(a, "type", ctx), f"{ctx}.type")
    if kind == "tensor":
        return _weight(d, a.get("weight"), ctx, blobs)
    if kind == "graph":
        return _graph(d, d.get(a, "value", ctx), blobs, depth + 1)
    if kind == "ref" and refs:  # inside a function body: one of its own attributes
        return AttrRef(d.name(d.get(a, "value", ctx), ctx))
    value = d.get(a, "value", ctx)
    one = {"int": lambda x, c: d.integer(x, c, -(1 << 63), (1 << 63) - 1),
           "float": lambda x, c: _float(d, x, c), "string": d.text}
    if kind in one:
        return one[kind](value, ctx)
    if kind[:-1] in one and kind.endswith("s"):
        return tuple(d.items(value, ctx, one[kind[:-1]]))
    raise d.fail(ctx, f"unknown attribute type '{kind[:40]}'")


def _float(d: Doc, x: Any, ctx: str) -> float:
    if isinstance(x, str) and x in _FLOATS:
        return _FLOATS[x]
    if isinstance(x, int | float) and not isinstance(x, bool):
        return float(x)
    raise d.fail(ctx, f"expected a number, got {_kind(x)}")


def _variant(d: Doc, v: Any, ctx: str, graph: Graph, registry: Registry) -> Variant:
    v = d.obj(v, ctx)
    name = d.name(d.get(v, "name", ctx), f"{ctx}.name")
    ctx = f"variant '{name}'"
    dims = {d.name(k, f"{ctx}.dims"): d.integer(x, f"{ctx}.dims.{k}", 0, MAX_DIM)
            for k, x in d.obj(v.get("dims", {}), f"{ctx}.dims").items()}
    inputs = _bound(d, v, "inputs", ctx, graph.inputs, dims)
    outputs = _bound(d, v, "outputs", ctx, graph.outputs, dims)
    info, offsets = _tensor_table(d, v, ctx, graph)
    plan = MemoryPlan(
        order=tuple(d.items(d.get(v, "order", ctx), f"{ctx}.order",
                            lambda x, c: d.integer(x, c, 0, len(graph.nodes)))),
        streams=tuple(d.items(d.get(v, "streams", ctx), f"{ctx}.streams",
                              lambda x, c: d.integer(x, c, 0, 1 << 16))),
        offsets=offsets,
        arena_bytes=d.integer(d.get(v, "arena_bytes", ctx), f"{ctx}.arena_bytes", 0,
                          MAX_ARENA_BYTES),
        alignment=d.integer(d.get(v, "alignment", ctx), f"{ctx}.alignment", 1, 4096),
        figures=_figures(d, v.get("figures"), f"{ctx}.figures"),
        stream_count=d.integer(d.get(v, "stream_count", ctx), f"{ctx}.stream_count", 1, 1 << 16))
    for out in outputs:
        if out.name in info and info[out.name].type != out.type:
            raise d.fail(f"{ctx}.outputs '{out.name}'", f"{out.type} differs from the tensor "
                                                         f"table's {info[out.name].type}")
    vgraph = graph.replace(inputs=inputs, outputs=outputs,
                           value_info={**graph.value_info, **info})  # + weights' formats
    try:
        verify_plan(vgraph, plan, registry)
    except GeError as e:
        raise d.fail(ctx, f"memory plan: {e}") from None
    return Variant(name, dims, vgraph, plan, _ranges(d, v.get("ranges", {}), ctx, dims))


def _ranges(d: Doc, raw: Any, ctx: str, dims: dict[str, int]) -> dict[str, tuple[int, int]]:
    """A range bucket's ``{symbol: [low, high]}``: its symbols are the variant's dims and
    ``high`` is the size it was planned at."""
    out = {}
    for k, x in d.obj(raw, f"{ctx}.ranges").items():
        name = d.name(k, f"{ctx}.ranges")
        pair = d.items(x, f"{ctx}.ranges.{k}", lambda y, c: d.integer(y, c, 0, MAX_DIM))
        if len(pair) != 2 or not pair[0] <= pair[1] or dims.get(name) != pair[1]:
            raise d.fail(f"{ctx}.ranges.{k}", "expected [low, high] with high the planned size")
        out[name] = (pair[0], pair[1])
    return out


def _bound(d: Doc, v: dict[str, Any], key: str, ctx: str, declared: tuple[Value, ...],
           dims: dict[str, int]) -> tuple[Value, ...]:
    """The variant's static inputs or outputs, checked against the declared ones."""
    got = d.items(d.get(v, key, ctx), f"{ctx}.{key}", lambda x, c: _value(d, x, c, static=True))
    if [x.name for x in got] != [x.name for x in declared]:
        raise d.fail(f"{ctx}.{key}", "the names differ from the graph's")
    have: Value
    for want, have in zip(declared, got, strict=True):
        if not _fits(want.type, have.type, dims):
            raise d.fail(f"{ctx}.{key} '{want.name}'", f"{have.type} does not fit the declared "
                                                        f"{want.type}")
    return tuple(got)


def _fits(want: TensorType, have: TensorType, dims: dict[str, int]) -> bool:
    if want.dtype != have.dtype or want.format != have.format:
        return False
    if want.shape is None:
        return True
    if len(want.shape) != len(have.shape or ()):
        return False
    for w, h in zip(want.shape, have.shape or (), strict=True):
        if isinstance(w, int) and w != h or isinstance(w, str) and dims.get(w, h) != h:
            return False
    return True


def _tensor_table(d: Doc, v: dict[str, Any], ctx: str, graph: Graph
                  ) -> tuple[dict[str, Value], dict[str, int]]:
    info: dict[str, Value] = {}
    offsets: dict[str, int] = {}
    for i, t in enumerate(d.seq(d.get(v, "tensors", ctx), f"{ctx}.tensors")):
        value = _value(d, t, f"{ctx}.tensors[{i}]", static=True)
        if value.name in info:
            raise d.fail(f"{ctx}.tensors", f"tensor '{value.name}' is listed twice")
        info[value.name] = value
        offsets[value.name] = d.integer(d.get(t, "offset", ctx), f"{ctx} tensor '{value.name}'",
                                    0, MAX_ARENA_BYTES)
    for node in graph.nodes:
        for out in node.outputs:
            if out not in info:
                raise d.fail(f"{ctx}.tensors", f"node output '{out}' has no entry")
    return info, offsets


def _figures(d: Doc, f: Any, ctx: str) -> MemoryFigures | None:
    if f is None:
        return None
    f = d.obj(f, ctx)
    fields = {x.name: x.type for x in dataclasses.fields(MemoryFigures)}
    if set(f) != set(fields):
        raise d.fail(ctx, f"expected the fields {', '.join(fields)}")
    values: dict[str, Any] = {
        k: d.text(v, f"{ctx}.{k}") if fields[k] == "str" else d.integer(v, f"{ctx}.{k}")
        for k, v in f.items()}
    return MemoryFigures(**values)
