"""The machine facts that qualify a figure, shared by the bench scripts (bench/ is not a
package: scripts import this module from beside them).

``machine()``: CPU count, the load average (``os.getloadavg``), whether ``OPENBLAS_CORETYPE``
is set, and every BLAS library NumPy and SciPy loaded with its version, kernel architecture
and thread count (through threadpoolctl when it is installed).
"""

from __future__ import annotations

import os


def machine() -> dict[str, object]:
    facts: dict[str, object] = {"cpus": os.cpu_count(), "load_avg": os.getloadavg(),
                                "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        facts["blas"] = "threadpoolctl not installed"
    else:
        facts["blas"] = [{k: i.get(k) for k in ("internal_api", "version", "architecture",
                                                 "num_threads")} for i in threadpool_info()
                         if i.get("user_api") == "blas"]
    return facts
