"""Every shipped op schema, grouped by family, one module per family.

Invariant: ``all_schemas()`` lists each ``(domain, op, since_version)`` exactly once.
"""

from __future__ import annotations

from ..registry import OpSchema


def all_schemas() -> list[OpSchema]:
    from . import elementwise

    schemas: list[OpSchema] = []
    for module in (elementwise,):
        schemas.extend(module.SCHEMAS)
    return schemas
