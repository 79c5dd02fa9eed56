"""The isolated runner: a fresh limited process, errors carried back, limits enforced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gerules.errors import ModelError, ResourceLimit, UsageError
from gerules.frontends.isolate import IsolationLimits, run_isolated

T = "gerules.testing.isolated"
LIMITS = IsolationLimits(seconds=120)


def test_runs_in_a_private_isolated_process() -> None:
    out = json.loads(run_isolated(f"{T}:echo", {"a": [1, 2]}, limits=LIMITS))
    assert out["request"] == {"a": [1, 2]} and out["isolated"] == 1
    assert Path(out["cwd"]).name.startswith("gerules-isolated-")
    assert not Path(out["cwd"]).exists()  # removed afterwards
    assert out["env"]["HOME"] == out["cwd"] and "PYTHONPATH" not in out["env"]


def test_errors_come_back_with_their_place() -> None:
    with pytest.raises(ModelError, match=r"node 'n1' \(Frob\): refused"):
        run_isolated(f"{T}:refuse", {"node": "n1"}, limits=LIMITS)
    with pytest.raises(ModelError, match="KeyError: 'a bug'"):
        run_isolated(f"{T}:crash", {}, limits=LIMITS)
    with pytest.raises(UsageError, match="package.module:function"):
        run_isolated("nocolon", {}, limits=LIMITS)
    with pytest.raises(ModelError, match="no such file"):
        run_isolated(f"{T}:echo", {}, limits=LIMITS, inputs=[Path("/nonexistent/model.pb")])


def test_limits() -> None:
    with pytest.raises(ResourceLimit, match="longer than 3 s"):
        run_isolated(f"{T}:hang", {}, limits=IsolationLimits(seconds=3))
    with pytest.raises(ResourceLimit, match="memory limit"):
        run_isolated(f"{T}:allocate", {"bytes": 4 << 30},
                     limits=IsolationLimits(seconds=120, memory_bytes=2 << 30))
    with pytest.raises(ResourceLimit, match="SIGXFSZ|limit"):
        run_isolated(f"{T}:allocate", {"bytes": 8 << 20},
                     limits=IsolationLimits(seconds=120, file_bytes=1 << 20))
    with pytest.raises(ResourceLimit, match="limit"):
        run_isolated(f"{T}:allocate", {"bytes": 2 << 20},
                     limits=IsolationLimits(seconds=120, output_bytes=1 << 20))
