"""gerules: a rule-driven graph compiler for neural networks, as a Python library.

```python
import gerules as ge

g = ge.GraphBuilder("net")                      # build a graph by hand ...
x = g.input("x", [1, 3, 32, 32])
g.output(g.ops.Relu(x))
graph = ge.parse_model("model.onnx", input_shape={"x": [1, 3, 224, 224]})  # ... or parse one
optimized, report = ge.optimize(graph, ge.OptimizeOptions(opt_level="O2"))
path = ge.compile(graph, ge.CompileOptions(soc_version="Ascend310"), output="net")
with ge.Session(path) as session:
    outputs = session.run({"x": ...})
```

Invariants:
- ``__all__`` is the public surface; everything in it is typed (``py.typed``) and documented
  in ``docs/API.md``. Other modules are internals that may change.
- Importing ``gerules`` is cheap: the names resolve on first use (PEP 562 ``__getattr__``), so
  ``import gerules`` loads neither NumPy nor ONNX nor the optimizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "GraphBuilder": "gerules.api.builder",
    "Tensor": "gerules.api.handles",
    "Input": "gerules.api.handles",
    "Graph": "gerules.ir.graph",
    "Node": "gerules.ir.graph",
    "Value": "gerules.ir.graph",
    "TensorType": "gerules.ir.graph",
    "parse_model": "gerules.api.parse",
    "optimize": "gerules.api.compiling",
    "compile": "gerules.api.compiling",
    "CompileOptions": "gerules.compiler",
    "OptimizeOptions": "gerules.opt.optimize",
    "OptimizeReport": "gerules.opt.optimize",
    "read_switch_file": "gerules.api.compiling",
    "Session": "gerules.api.session",
    "partition_by_depth": "gerules.partition",
    "partition_by_memory": "gerules.partition",
    "partition_by_cost": "gerules.partition",
    "create_pipeline": "gerules.partition",
    "Partition": "gerules.partition",
    "PipelineSchedule": "gerules.partition",
    "TensorDesc": "gerules.runtime.model",
    "GeError": "gerules.errors",
    "ModelError": "gerules.errors",
    "GraphError": "gerules.errors",
    "ShapeError": "gerules.errors",
    "KernelError": "gerules.errors",
    "OmError": "gerules.errors",
    "UsageError": "gerules.errors",
    "ResourceLimit": "gerules.errors",
}

__all__ = [
    "CompileOptions", "GeError", "Graph", "GraphBuilder", "GraphError", "Input", "KernelError",
    "ModelError", "Node", "OmError", "OptimizeOptions", "OptimizeReport", "Partition",
    "PipelineSchedule", "ResourceLimit", "Session", "ShapeError", "Tensor", "TensorDesc",
    "TensorType", "UsageError", "Value", "__version__", "compile", "create_pipeline",
    "optimize", "parse_model", "partition_by_cost", "partition_by_depth",
    "partition_by_memory", "read_switch_file",
]

if TYPE_CHECKING:
    from .api.builder import GraphBuilder
    from .api.compiling import compile, optimize, read_switch_file
    from .api.handles import Input, Tensor
    from .api.parse import parse_model
    from .api.session import Session
    from .compiler import CompileOptions
    from .errors import (
        GeError,
        GraphError,
        KernelError,
        ModelError,
        OmError,
        ResourceLimit,
        ShapeError,
        UsageError,
    )
    from .ir.graph import Graph, Node, TensorType, Value
    from .opt.optimize import OptimizeOptions, OptimizeReport
    from .partition import (
        Partition,
        PipelineSchedule,
        create_pipeline,
        partition_by_cost,
        partition_by_depth,
        partition_by_memory,
    )
    from .runtime.model import TensorDesc


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gerules' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
