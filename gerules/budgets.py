"""Budgets for a whole run: how much one model may make gerules allocate, count or spend.

A budget bounds what an untrusted input can cost *in total*, not only per tensor: the bytes
of all initializers together (counting a region of external data each time a tensor uses it),
the node count, the outputs of one node, the bytes alive at run time (the arena plus what a
kernel is about to allocate), what an archive may expand to, the wall clock. Each is checked
before the memory or time is spent, from sizes the file declares (Python integers, never
allocation attempts).

Invariants:
- ``Budgets`` is frozen data; ``DEFAULT`` holds the defaults the CLI and the API use.
- ``Budgets.check(name, need, what, ...)`` raises ``ResourceLimit`` (exit 3) when ``need``
  exceeds the budget ``name``: one line naming what needed it, both numbers, and the command
  line flag that raises that budget (``FLAGS``).
- This module imports nothing but the error types: every layer (loader, ``.om`` reader,
  runtime, frontends) may use it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import ResourceLimit

GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class Budgets:
    tensor_bytes: int = 4 * GiB  # one tensor
    model_bytes: int = 8 * GiB  # all weights of a model together (ONNX initializers, .om WEIGHTS)
    archive_bytes: int = 2 * GiB  # what an archive (.pt, .pt2) expands to
    nodes: int = 100_000  # nodes of a graph
    node_outputs: int = 10_000  # outputs of one node
    live_bytes: int = 8 * GiB  # bytes alive at run time: the arena plus a kernel's outputs
    seconds: float | None = None  # wall clock of a command (the CLI's --timeout)

    def check(self, name: str, need: int, what: str, **place: str | None) -> None:
        """Raise ``ResourceLimit`` when ``need`` is over the budget ``name``."""
        limit = getattr(self, name)
        if limit is not None and need > limit:
            raise over(name, need, limit, what, **place)

    def replace(self, **changes: object) -> Budgets:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


FLAGS = {
    "tensor_bytes": "--max_tensor_bytes",
    "model_bytes": "--max_model_bytes",
    "archive_bytes": "--max_archive_bytes",
    "nodes": "--max_nodes",
    "node_outputs": "--max_node_outputs",
    "live_bytes": "--max_live_bytes",
    "seconds": "--timeout",
}
NAMES = {
    "tensor_bytes": "tensor", "model_bytes": "model weights", "archive_bytes": "archive",
    "nodes": "node count", "node_outputs": "outputs-per-node", "live_bytes": "run-time memory",
    "seconds": "time",
}
UNITS = {"nodes": "", "node_outputs": "", "seconds": " s"}

DEFAULT = Budgets()


def over(name: str, need: int, limit: float, what: str, **place: str | None) -> ResourceLimit:
    """The ``ResourceLimit`` for ``need`` over the budget ``name`` of ``limit``."""
    unit = UNITS.get(name, " bytes")
    shown = f"{limit:g}" if isinstance(limit, float) else str(limit)
    return ResourceLimit(f"{what} {'needs' if unit == ' bytes' else 'has'} {need}{unit}, over "
                         f"the {NAMES[name]} budget of {shown}{unit} (raise it with "
                         f"{FLAGS[name]})", **place)
