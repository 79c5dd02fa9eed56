"""Seeds, scaled example counts and the outcome check shared by the fuzz tests.

``FUZZ_EXAMPLES`` is five times the hypothesis profile's ``max_examples`` (200 in ``ci``,
25,000 with ``HYPOTHESIS_PROFILE=long``). A failing case is written to a file whose path the
assertion prints, with the one-liner that reproduces it.
"""

from __future__ import annotations

import re
import tempfile
from functools import cache
from pathlib import Path

import onnx
from hypothesis import HealthCheck, settings

from gerules.build import build_om
from gerules.compiler import CompileOptions, compile_model
from gerules.onnx_io import load_model
from gerules.testing import models
from gerules.testing.bad_models import good_model
from gerules.testing.sandbox import Outcome

PLACE = (r"(\S+\.(onnx|om|ger|prototxt)(:\d+:\d+)?|\S+\.(caffemodel|mindir)|"
         r"((node|tensor|graph) '[^\n]*'|graph)( \([\w.]+\))?( name)?): ")
ROOT = Path(__file__).resolve().parents[2]
FUZZ_EXAMPLES = settings().max_examples * 5
FUZZ = settings(max_examples=FUZZ_EXAMPLES,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@cache
def onnx_seeds() -> tuple[onnx.ModelProto, ...]:
    """The shipped test models: the bad-model catalogue's base, a CNN, a residual block and a
    one-layer transformer encoder (opset 17/18, symbolic batch)."""
    return (good_model(), models.cnn().model, models.residual_block().model,
            models.transformer_encoder(layers=1).model)


@cache
def om_seeds() -> tuple[bytes, ...]:
    """Those models compiled: one static .om, one with two dynamic-batch variants, and the
    CNN cut into two pipeline stages (format 1.1, with its report)."""
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for k, (model, dims) in enumerate([(good_model(), ({},)),
                                           (models.cnn().model, ({"N": 1}, {"N": 2}))]):
            graph = load_model(model.SerializeToString())
            path = Path(folder) / f"m{k}.om"
            build_om(graph, path, dims=dims, report={"seed": k})
            out.append(path.read_bytes())
        path = Path(folder) / "piped.om"
        compile_model(load_model(models.cnn().model.SerializeToString()),
                      CompileOptions(input_shape={"input": (1, 3, 16, 16)}, partitions=2), path)
        out.append(path.read_bytes())
    return tuple(out)


def rule_sources() -> list[str]:
    """Shipped rule files, then the rule-language golden files (includes removed)."""
    paths = sorted((ROOT / "rules").rglob("*.ger")) + sorted(
        (ROOT / "tests" / "dsl" / "good").glob("*.ger"))
    return [re.sub(r'include\s+"[^"]*"', "", p.read_text(encoding="utf-8")) for p in paths]


def rule_tokens() -> list[str]:
    """Every literal of the grammar, the keywords, and names the checker knows."""
    grammar = (ROOT / "grammar" / "ger.lark").read_text()
    literals = sorted(set(re.findall(r'"([^"\\]{1,4})"', grammar)))
    words = ["rule", "ruleset", "where", "let", "include", "commutative", "schedule", "as",
             "saturate", "repeat", "not", "and", "or", "in", "true", "false", "none",
             "@exact", "@approx(rtol=1e-3)", "@approx", "Conv", "ge.FusedConv", "MatMul",
             "BatchNormalization", "Transpose", "x", "y", "w", "_", "perm", "epsilon",
             "shape(x)", "rank(x)", "const(x)", "sqrt(", "bcast(", "1e999", "9" * 40,
             "\n", " ", "#", "\"s\"", "0.5", "-1", "[0][1]", "{..n}", "\t", "\u00e9"]
    return literals + words


def check(outcome: Outcome, data: bytes | str, what: str) -> None:
    """The outcome is ``ok`` or one of our errors, whose message is one line that starts with
    its place: the file (``x.onnx``, ``x.ger:3:7``) or, for errors the compile step finds
    after loading (a shape that fails once dims are bound, the ``.om`` writer refusing a
    name), the node, tensor or graph (those do not name the file: a known gap of compile)."""
    if not outcome.allowed:
        path = _save(data, what)
        raise AssertionError(f"{what}: {outcome.describe()}\n  case saved in {path}; "
                             f"reproduce: python -c \"from gerules.testing import fuzz; "
                             f"fuzz.{what}_target(open('{path}', 'rb').read()"
                             f"{'.decode()' if isinstance(data, str) else ''})\"")
    if outcome.kind == "error":
        assert "\n" not in outcome.message, outcome.message
        assert re.match(PLACE, outcome.message), outcome.message


def _save(data: bytes | str, what: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"gerules-fuzz-{what}-"))
    path = folder / "case.bin"
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return path
