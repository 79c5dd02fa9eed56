"""The machine facts that qualify a figure, and the pass/fail lines every bench prints.

``facts()`` names what a timing depends on: CPU count and model, machine load (the 1/5/15
minute load averages from ``os.getloadavg``, taken when called), the BLAS library NumPy
loaded and the kernel it picked (``threadpoolctl`` when installed: the ``bench`` extra),
whether ``OPENBLAS_CORETYPE`` is set (OpenBLAS then uses that kernel instead of detecting the
CPU), the BLAS thread count, the Python, NumPy and onnxruntime versions, and whether the
runtime's compiled loops run (``jit``: Numba installed and not switched off).

``Verdicts.check(label, value, limit)`` is one line ``PASS``/``FAIL label: value <= limit``;
a bench collects them and writes them into its JSON.

``process_env(folder)`` is the environment for timed child processes: Python's bytecode cache
on, kept in ``folder`` (``PYTHONPYCACHEPREFIX``), whatever ``PYTHONDONTWRITEBYTECODE`` says
here. An installed package has its bytecode compiled at install time; an editable checkout
under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise recompile every module of gerules in
every process (a few tenths of a second), which no user's installation does.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any


def process_env(folder: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = folder
    return env


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas() -> list[dict[str, Any]]:
    """The BLAS libraries loaded into this process (threadpoolctl), or why not known."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return [{"note": "threadpoolctl not installed (pip install -e '.[bench]')"}]
    import numpy  # noqa: F401  (loads its BLAS)

    return [{k: info.get(k) for k in ("internal_api", "version", "architecture",
                                      "threading_layer", "num_threads", "filepath")}
            for info in threadpool_info() if info.get("user_api") == "blas"]


def facts() -> dict[str, Any]:
    import numpy

    out: dict[str, Any] = {
        "cpus": os.cpu_count(), "cpu": cpu_model(),
        "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "blas": blas(), "python": sys.version.split()[0], "numpy": numpy.__version__,
    }
    try:
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    out["jit"] = jit()
    return out


def jit() -> str:
    """Whether the runtime's compiled loops run (the 'jit' extra: Numba), and which Numba."""
    from gerules.ir.ops import _jit

    if not _jit.available():
        off = os.environ.get(_jit.ENV) == "0"
        return f"off ({f'{_jit.ENV}=0' if off else 'numba not installed'})"
    import numba

    return f"numba {numba.__version__}"


def describe(f: dict[str, Any]) -> str:
    """One line for humans: the figures below were taken on this."""
    kernels = ", ".join(f"{b.get('internal_api')} {b.get('version')} kernel "
                        f"{b.get('architecture')}" for b in f["blas"] if "internal_api" in b)
    core = f["OPENBLAS_CORETYPE"]
    load = "/".join(str(x) for x in f["load_avg_1_5_15"])
    return (f"machine: {f['cpus']} cpus ({f['cpu']}), load {load} (1/5/15 min; the machine is "
            f"shared, timings vary with it), BLAS: {kernels or 'unknown'}, OPENBLAS_CORETYPE="
            f"{core if core is not None else '(unset)'}, compiled loops: {f.get('jit', 'unknown')}")


@dataclass
class Verdicts:
    """Pass/fail lines against the targets, printed and kept for the JSON."""

    lines: list[dict[str, Any]] = field(default_factory=list)

    def check(self, label: str, value: float, limit: float, unit: str = "") -> str:
        ok = value <= limit
        self.lines.append({"target": label, "value": value, "limit": limit, "unit": unit,
                           "pass": ok})
        return f"{'PASS' if ok else 'FAIL'} {label}: {value:g}{unit} <= {limit:g}{unit}"

    def summary(self) -> str:
        missed = sum(1 for v in self.lines if not v["pass"])
        return f"targets: {len(self.lines) - missed} met, {missed} missed"
