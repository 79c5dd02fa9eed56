"""A checking run: the arena poisoned wherever the plan says no live tensor is.

Kernels without ``kernel_out`` compute fresh arrays that the step copies into the arena, so
a plan that lets a node's output share bytes with an input it still reads (a tensor freed one
step early, an overwrite that is not a declared in-place or view alias) gives right numbers
anyway, while a real NPU kernel streaming its output over its input would not.
``run_poisoned`` removes that cover:

- the whole arena starts as 0xFF bytes (NaN for floats, -1 for signed integers);
- before each step, the blocks of its outputs are poisoned, except an output that is a
  declared alias (``memory.liveness.alias_sources``: a view, or an in-place overwrite) of an
  input in the same block; an input that shares bytes with any other output is destroyed;
- after each step, every byte outside the blocks of the tensors still live (produced, with an
  access still to come; graph outputs live to the end) is poisoned again.

A plan that passes ``verify_plan`` gives the same outputs here as the reference executor;
tests use this run end to end (``Model.run(feeds, poison=True)``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..ir.registry import Registry, default_registry
from ..memory.liveness import alias_sources, analyze
from .arena import Arena, Program, execute

POISON = 0xFF


def run_poisoned(program: Program, arena: Arena, env: Mapping[str, np.ndarray],
                 registry: Registry | None = None) -> None:
    """Run ``program`` sequentially in ``arena``, poisoning dead bytes (module docstring)."""
    registry = registry or default_registry()
    graph, plan = program.graph, program.plan
    live = analyze(graph, plan.order, plan.alignment)
    buffer = arena.buffer
    buffer.fill(POISON)
    for pos, step in enumerate(program.steps):
        for name in _fresh_outputs(program, pos, registry):
            slot = program.slots[name]
            buffer[slot.offset:slot.offset + slot.nbytes] = POISON
        with np.errstate(all="ignore"):  # as the other runs (``ir.registry.OpSchema``)
            execute(step, env, arena.views)
        keep = np.zeros(buffer.shape[0], dtype=bool)
        for t in live.tensors:
            if t.first <= pos < t.last:
                off = plan.offsets[t.name]
                keep[off:off + t.nbytes] = True
        buffer[~keep] = POISON


def _fresh_outputs(program: Program, pos: int, registry: Registry) -> list[str]:
    """Outputs of the step at ``pos`` that are not declared aliases of an input's block."""
    node = program.steps[pos].node
    slots = program.slots
    aliased: set[str] = set()
    if len(node.outputs) == 1:
        out = slots.get(node.outputs[0])
        for slot, _kind in alias_sources(node, program.graph, registry):
            src = node.inputs[slot] if slot < len(node.inputs) else ""
            if out is not None and src in slots and slots[src].offset == out.offset \
                    and slots[src].nbytes == out.nbytes:
                aliased.add(node.outputs[0])
    return [o for o in node.outputs if o in slots and o not in aliased]
