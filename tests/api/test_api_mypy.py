"""mypy (strict) passes on the examples and on ``gerules.api``, and sees real types.

One mypy run checks the examples, the API package, ``gerules/__init__.py`` and a probe file
of deliberate mistakes; the run must report exactly the probe's mistakes. The cache lives in
pytest's cache folder, so only the first run on a machine pays for analysing NumPy and the
project (about 20 s); later runs take a second or two.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = '''\
import numpy as np
import gerules as ge

g = ge.GraphBuilder("probe")
x = g.input("x", [1, 3, 8, 8])
y: ge.Tensor = g.ops.Relu(x, name=3)  # line 6: name is a str
a, b = g.op("Split", x, outputs=2, axis=1, num_outputs=2)
c: ge.Tensor = g.op("Split", x, outputs=2)  # line 8: several outputs are a tuple
path = ge.compile(g, "O2")  # line 9: options are CompileOptions
n: int = ge.Session(path).inputs  # line 10: a tuple of TensorDesc
graph, report = ge.optimize(g)
report.nodes_after + "x"  # line 12: an int
'''
EXPECTED_LINES = {6, 8, 9, 10, 12}


@pytest.mark.slow
def test_mypy_passes_on_examples_and_the_api_and_catches_mistakes(
        tmp_path: Path, pytestconfig: pytest.Config) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    store = getattr(pytestconfig, "cache", None)  # absent under -p no:cacheprovider
    cache = store.mkdir("mypy-api") if store else tmp_path / "cache"
    targets = [*sorted(str(p) for p in (ROOT / "examples").glob("*.py")),
               str(ROOT / "gerules" / "api"), str(ROOT / "gerules" / "__init__.py"), str(probe)]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache),
         "--follow-imports=silent", "--no-error-summary", "--hide-error-context", *targets],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    # (mypy may name the probe by the path it had when cached: compare file names only)
    elsewhere = [line for line in errors if not re.match(r".*\bprobe\.py:\d+:", line)]
    assert not elsewhere, "\n".join(elsewhere)
    lines = {int(m.group(1)) for line in errors if (m := re.match(r".*probe\.py:(\d+):", line))}
    assert lines == EXPECTED_LINES, result.stdout
