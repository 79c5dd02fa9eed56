"""Random instances of a rule's left side, shared by the shape soundness check and the verifier.

Modules: ``hints`` (what guards say about variables), ``proposals`` (operand types and values
per op and port), ``attributes`` (attributes a pattern leaves open, attribute variables),
``builder`` (``InstanceBuilder``: one seeded ``Draw`` -> one verified graph), ``search``
(``Search``: instances that pass the guards, by solving the guards that fail and rebuilding;
author examples first).
"""

from __future__ import annotations

from .builder import OUTPUT, Instance, InstanceBuilder, Sampler
from .hints import Hints
from .proposals import GUARDS, LAYOUT, PROBES, SHAPE, VALUES, Draw, Operand, values
from .search import NO_TYPING, SOLVED, Found, Search

__all__ = ["GUARDS", "LAYOUT", "NO_TYPING", "OUTPUT", "PROBES", "SHAPE", "SOLVED", "VALUES",
           "Draw", "Found", "Hints", "Instance", "InstanceBuilder", "Operand", "Sampler",
           "Search", "values"]
