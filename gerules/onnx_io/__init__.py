"""ONNX import and export for the IR.

- ``load_model(path_or_bytes, *, base_dir=None, budgets=DEFAULT) -> Graph``: a verified,
  shape-inferred graph, read without the ``onnx`` package (``proto``, ``wire``); every
  problem in the file is a ``ModelError`` naming the file and the node or tensor (see
  ``load`` for the checks, ``external`` for external data safety).
- ``to_model_proto(graph) -> onnx.ModelProto`` and ``save_model(graph, path)``: export that
  passes ``onnx.checker.check_model(full_check=True)`` for ai.onnx graphs; ``ge`` ops are
  written in domain ``ge``.

Names (nodes, tensors, the graph) survive import -> export unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .load import load_model, parse
from .tensors import DEFAULT_MAX_TENSOR_BYTES

if TYPE_CHECKING:
    from .writer import save_model, to_model_proto

__all__ = ["DEFAULT_MAX_TENSOR_BYTES", "load_model", "parse", "save_model", "to_model_proto"]


def __getattr__(name: str) -> Any:
    """The writer (and with it the ``onnx`` package) is imported on first use only."""
    if name in ("save_model", "to_model_proto"):
        from . import writer

        return getattr(writer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
