"""Random instances of a rule's left side, shared by the shape soundness check and the verifier.

Modules: ``hints`` (what guards say about variables), ``proposals`` (operand types and values
per op and port), ``attributes`` (attributes a pattern leaves open, attribute variables),
``builder`` (``InstanceBuilder``: one seeded ``Draw`` -> one verified graph).
"""

from __future__ import annotations

from .builder import OUTPUT, Instance, InstanceBuilder, Sampler
from .hints import Hints
from .proposals import Draw, Operand

__all__ = ["OUTPUT", "Draw", "Hints", "Instance", "InstanceBuilder", "Operand", "Sampler"]
