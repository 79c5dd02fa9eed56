"""Workloads for ``bench/engine.py``: the same terms and rules for our engine and egglog.

A workload is engine-neutral: terms are ``Term`` DAGs (shared by identity) and rules are
s-expression pairs in ``gerules.engine.sexpr`` syntax, with at most one kind of guard ("the two
transpose codes are inverse": ``p + q == 0``). ``bench/engine.py`` turns both into our
``EGraph``/``Rewrite`` objects and into egglog expressions/rewrites.

- ``resnet50``: the ResNet-50 graph (53 conv + BN, 49 ReLU, 16 residual Add; ~510 terms with the
  weights), NHWC<->NCHW transpose round trips at the stage boundaries and a factorised
  classifier (two chained MatMuls); rules fold BN into conv, fuse conv+ReLU and conv+Add+ReLU,
  cancel transposes and reassociate MatMul both ways.
- ``bert``: 12 encoder layers of a BERT-base-shaped graph (~720 terms): Q/K/V projections,
  transposes (with redundant round trips), scores, an exp/sum/div softmax, the output projection,
  residual adds, two mean/var/sqrt layer norms and a GELU FFN; rules fuse MatMul+bias(+GELU),
  softmax and layer norm (DAG patterns with repeated variables), cancel transposes and
  reassociate MatMul.
- ``math``: egg-style arithmetic (commutativity, associativity, distributivity, identities) on a
  few polynomial terms, a fixed number of iterations.
- ``ac10``: commutativity + associativity of Add over a 10-term sum, to saturation (57,012
  e-nodes in both engines: the whole AC closure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False, slots=True)
class Term:
    """An engine-neutral term node; identity is sharing (a DAG)."""

    op: str
    kids: tuple[Term, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()


def t(op: str, *kids: Term, **attrs: Any) -> Term:
    return Term(op, kids, tuple(sorted(attrs.items())))


def leaf(name: str) -> Term:
    return t("Leaf", name=name)


# op -> (arity, int attribute names, cost). Leaf{name: str} and Num{v: int} are the leaves.
OPS: dict[str, tuple[int, tuple[str, ...], int]] = {
    "Conv": (3, ("group", "kernel", "stride"), 10),
    "BatchNormalization": (5, (), 6),
    "Relu": (1, (), 4),
    "Add": (2, (), 4),
    "FoldW": (3, (), 0),
    "FoldB": (5, (), 0),
    "FusedConvRelu": (3, ("group", "kernel", "stride"), 11),
    "ConvAddRelu": (4, ("group", "kernel", "stride"), 12),
    "Transpose": (1, ("perm",), 3),
    "MatMul": (2, (), 8),
    "MaxPool": (1, (), 3),
    "GlobalAveragePool": (1, (), 2),
    "Flatten": (1, (), 1),
    "Sub": (2, (), 4),
    "Mul": (2, (), 4),
    "Div": (2, (), 4),
    "Exp": (1, (), 4),
    "Sqrt": (1, (), 4),
    "ReduceSum": (1, (), 4),
    "ReduceMean": (1, (), 4),
    "Gelu": (1, (), 4),
    "FusedMatMul": (3, (), 9),
    "FusedMatMulGelu": (3, (), 10),
    "Softmax": (1, (), 5),
    "LayerNormCore": (2, (), 6),
}
LEAF_COST = 0


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    lhs: str
    rhs: str
    inverse: tuple[str, str] | None = None  # guard: attribute vars p, q with p + q == 0


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    roots: tuple[Term, ...]
    rules: tuple[Rule, ...]
    iterations: int | None = None  # None: saturate
    node_limit: int = 200_000
    simple_scheduler: bool = False
    notes: str = field(default="")


CONV = ":group ?g :kernel ?k :stride ?s"
CANCEL = Rule("cancel_transposes", "(Transpose (Transpose ?x :perm ?p) :perm ?q)", "?x",
              ("p", "q"))
ASSOC = (Rule("matmul_assoc", "(MatMul (MatMul ?a ?b) ?c)", "(MatMul ?a (MatMul ?b ?c))"),
         Rule("matmul_assoc/rev", "(MatMul ?a (MatMul ?b ?c))", "(MatMul (MatMul ?a ?b) ?c)"))
RESNET_RULES = (
    Rule("fold_conv_bn", f"(BatchNormalization (Conv ?x ?w ?b {CONV}) ?gm ?bt ?mu ?var)",
         f"(Conv ?x (FoldW ?w ?gm ?var) (FoldB ?b ?gm ?bt ?mu ?var) {CONV})"),
    Rule("fuse_conv_relu", f"(Relu (Conv ?x ?w ?b {CONV}))", f"(FusedConvRelu ?x ?w ?b {CONV})"),
    Rule("fuse_conv_add_relu", f"(Relu (Add (Conv ?x ?w ?b {CONV}) ?y))",
         f"(ConvAddRelu ?x ?w ?b ?y {CONV})"),
    CANCEL, *ASSOC,
)


# ------------------------------------------------------------------ ResNet-50
class _Names:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, prefix: str) -> Term:
        self.count += 1
        return leaf(f"{prefix}{self.count}")


def _conv_bn(x: Term, kernel: int, stride: int, names: _Names) -> Term:
    conv = t("Conv", x, names("w"), names("b"), group=1, kernel=kernel, stride=stride)
    return t("BatchNormalization", conv, names("g"), names("beta"), names("mean"), names("var"))


def _bottleneck(x: Term, stride: int, project: bool, names: _Names) -> Term:
    y = t("Relu", _conv_bn(x, 1, 1, names))
    y = t("Relu", _conv_bn(y, 3, stride, names))
    y = _conv_bn(y, 1, 1, names)
    shortcut = _conv_bn(x, 1, stride, names) if project else x
    return t("Relu", t("Add", y, shortcut))


def resnet50() -> Workload:
    names = _Names()
    x = t("Transpose", leaf("image_nhwc"), perm=1)  # NHWC -> NCHW
    x = t("MaxPool", t("Relu", _conv_bn(x, 7, 2, names)))
    for stage, blocks in enumerate((3, 4, 6, 3)):
        for block in range(blocks):
            x = _bottleneck(x, 2 if block == 0 and stage else 1, block == 0, names)
        x = t("Transpose", t("Transpose", x, perm=1), perm=-1)  # a layout round trip
    feats = t("Flatten", t("GlobalAveragePool", x))
    logits = t("Add", t("MatMul", t("MatMul", feats, names("fc_u")), names("fc_v")), names("fc_b"))
    return Workload("resnet50", (logits,), RESNET_RULES)


# ----------------------------------------------------------------------- BERT
BERT_RULES = (
    Rule("fuse_matmul_bias", "(Add (MatMul ?a ?b) ?c)", "(FusedMatMul ?a ?b ?c)"),
    Rule("fuse_matmul_gelu", "(Gelu (Add (MatMul ?a ?b) ?c))", "(FusedMatMulGelu ?a ?b ?c)"),
    Rule("fuse_softmax", "(Div (Exp ?x) (ReduceSum (Exp ?x)))", "(Softmax ?x)"),
    Rule("fuse_layer_norm",
         "(Div (Sub ?x (ReduceMean ?x)) (Sqrt (Add (ReduceMean (Mul (Sub ?x (ReduceMean ?x)) "
         "(Sub ?x (ReduceMean ?x)))) ?eps)))", "(LayerNormCore ?x ?eps)"),
    CANCEL, *ASSOC,
)


def _layer_norm(x: Term, names: _Names) -> Term:
    d = t("Sub", x, t("ReduceMean", x))
    var = t("ReduceMean", t("Mul", d, d))
    norm = t("Div", d, t("Sqrt", t("Add", var, leaf("eps"))))
    return t("Add", t("Mul", norm, names("ln_g")), names("ln_b"))


def _linear(x: Term, names: _Names) -> Term:
    return t("Add", t("MatMul", x, names("w")), names("b"))


def _encoder(x: Term, names: _Names) -> Term:
    x = t("Transpose", t("Transpose", x, perm=2), perm=-2)  # a redundant layout round trip
    q, k, v = (t("Transpose", _linear(x, names), perm=3) for _ in range(3))
    scores = t("Div", t("MatMul", q, t("Transpose", k, perm=4)), leaf("sqrt_dk"))
    e = t("Exp", scores)
    ctx = t("Transpose", t("MatMul", t("Div", e, t("ReduceSum", e)), v), perm=-3)
    x = _layer_norm(t("Add", _linear(ctx, names), x), names)
    hidden = t("Gelu", _linear(x, names))
    return _layer_norm(t("Add", _linear(hidden, names), x), names)


def bert() -> Workload:
    names = _Names()
    x = leaf("embeddings")
    for _ in range(12):
        x = _encoder(x, names)
    return Workload("bert", (x,), BERT_RULES)


# ----------------------------------------------------------------------- math
MATH_RULES = (
    Rule("comm_add", "(Add ?a ?b)", "(Add ?b ?a)"),
    Rule("comm_mul", "(Mul ?a ?b)", "(Mul ?b ?a)"),
    Rule("assoc_add", "(Add (Add ?a ?b) ?c)", "(Add ?a (Add ?b ?c))"),
    Rule("assoc_mul", "(Mul (Mul ?a ?b) ?c)", "(Mul ?a (Mul ?b ?c))"),
    Rule("distribute", "(Mul ?a (Add ?b ?c))", "(Add (Mul ?a ?b) (Mul ?a ?c))"),
    Rule("factor", "(Add (Mul ?a ?b) (Mul ?a ?c))", "(Mul ?a (Add ?b ?c))"),
    Rule("add_zero", "(Add ?a (Num :v 0))", "?a"),
    Rule("mul_one", "(Mul ?a (Num :v 1))", "?a"),
    Rule("mul_zero", "(Mul ?a (Num :v 0))", "(Num :v 0)"),
    Rule("sub_canon", "(Sub ?a ?b)", "(Add ?a (Mul (Num :v -1) ?b))"),
    Rule("sub_self", "(Sub ?a ?a)", "(Num :v 0)"),
)


def math() -> Workload:
    x, y, z = leaf("x"), leaf("y"), leaf("z")
    zero, one, two = t("Num", v=0), t("Num", v=1), t("Num", v=2)
    roots = (
        t("Sub", t("Mul", t("Add", x, y), t("Add", x, y)), t("Mul", x, x)),
        t("Add", t("Mul", x, t("Add", y, one)), t("Mul", zero, z)),
        t("Mul", t("Add", t("Mul", two, x), t("Mul", two, y)), t("Sub", z, z)),
        t("Add", t("Mul", t("Add", x, zero), one), t("Mul", y, t("Add", z, x))),
    )
    return Workload("math", roots, MATH_RULES, iterations=4, simple_scheduler=True)


# ------------------------------------------------------------------ AC sum
def ac10() -> Workload:
    total = leaf("t0")
    for i in range(1, 10):
        total = t("Add", total, leaf(f"t{i}"))
    rules = (Rule("comm_add", "(Add ?a ?b)", "(Add ?b ?a)"),
             Rule("assoc_add", "(Add (Add ?a ?b) ?c)", "(Add ?a (Add ?b ?c))"))
    return Workload("ac10", (total,), rules, simple_scheduler=True)


WORKLOADS = {"resnet50": resnet50, "bert": bert, "math": math, "ac10": ac10}


def topological(roots: tuple[Term, ...]) -> list[Term]:
    """Every term under ``roots``, children first, each once (iterative)."""
    order: list[Term] = []
    seen: set[int] = set()
    stack: list[tuple[Term, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        term, done = stack.pop()
        if done:
            order.append(term)
        elif id(term) not in seen:
            seen.add(id(term))
            stack.append((term, True))
            stack.extend((kid, False) for kid in reversed(term.kids))
    return order
