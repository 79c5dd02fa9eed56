"""Reusable test material: small models built in code (``models``).

Invariant: importable without pytest or hypothesis, so examples and benchmarks use it too.
"""
