"""``optimize``, ``compile`` and ``read_switch_file``: the optimizer and compiler from Python.

Both take a ``Graph`` or a ``GraphBuilder`` (built first, so its errors name the node) and
wrap ``gerules.opt.optimize`` and ``gerules.compiler.compile_model`` without changing them.

Invariants:
- ``optimize(graph, CompileOptions)`` optimizes exactly as ``compile`` would: the options'
  ``input_shape`` is applied first (atc's meaning, batch dims kept symbolic) and its
  optimizer settings are used; ``OptimizeOptions`` are used as given.
- ``compile(..., output="name")`` writes ``name.om`` (a name already ending in ``.om`` is kept)
  atomically and returns its path; nothing is written when any step fails.
- Options of the wrong type are a ``UsageError``; nothing else is validated here twice.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..compiler import CompileOptions, compile_model
from ..errors import UsageError
from ..ir.graph import Graph
from ..opt.optimize import OptimizeOptions, OptimizeReport
from ..opt.optimize import optimize as run_optimizer
from ..opt.switches import Switches
from ..opt.switches import read_switch_file as read_switches
from .builder import GraphBuilder
from .parse import fix_shapes

GraphLike = Graph | GraphBuilder


def as_graph(graph: GraphLike) -> Graph:
    """The ``Graph`` itself, or the builder's ``build()``."""
    if isinstance(graph, GraphBuilder):
        return graph.build()
    if isinstance(graph, Graph):
        return graph
    raise UsageError(f"expected a gerules Graph or GraphBuilder, got {type(graph).__name__} "
                     "(load files with gerules.parse_model)")


def optimize(graph: GraphLike, options: OptimizeOptions | CompileOptions | None = None
             ) -> tuple[Graph, OptimizeReport]:
    """The cheapest equivalent graph for the NPU, and a report of what was done."""
    g = as_graph(graph)
    if isinstance(options, CompileOptions):
        g = fix_shapes(g, options.input_shape) if options.input_shape else g
        return run_optimizer(g, options.optimize_options())
    if options is not None and not isinstance(options, OptimizeOptions):
        raise UsageError(f"optimize: options must be OptimizeOptions or CompileOptions, got "
                         f"{type(options).__name__}")
    return run_optimizer(g, options)


def compile(graph: GraphLike, options: CompileOptions | None = None,
            output: str | os.PathLike[str] = "model") -> Path:
    """Optimize ``graph``, plan its memory and write ``output.om``; returns the path."""
    g = as_graph(graph)
    if options is not None and not isinstance(options, CompileOptions):
        raise UsageError(f"compile: options must be CompileOptions, got "
                         f"{type(options).__name__}")
    path = om_path(output)
    result = compile_model(g, options or CompileOptions(), path,
                           source=f"<python graph '{g.name}'>")
    return Path(result.path)


def read_switch_file(path: str | os.PathLike[str]) -> Switches:
    """atc's fusion switch file (JSON or ``NAME:off`` lines) as the rule and ruleset names it
    turns ``off`` and keeps ``on``: ``CompileOptions(disabled=s.off, enabled=s.on)``."""
    return read_switches(Path(path))


def om_path(output: str | os.PathLike[str]) -> Path:
    """``output`` with ``.om`` appended unless it already ends so (atc's ``--output``)."""
    text = os.fspath(output)
    if not isinstance(text, str) or not text:
        raise UsageError(f"compile: output must be a file name, got {output!r}")
    return Path(text if text.endswith(".om") else f"{text}.om")
