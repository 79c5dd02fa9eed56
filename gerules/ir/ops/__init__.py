"""Every shipped op schema, grouped by family, one module per family.

Invariant: ``all_schemas()`` lists each ``(domain, op, since_version)`` exactly once.
"""

from __future__ import annotations

from ..registry import OpSchema


def all_schemas() -> list[OpSchema]:
    from . import (
        activation,
        constant,
        conv,
        elementwise,
        fused,
        gather,
        linalg,
        movement,
        norm,
        pool,
        reduce,
        resize,
        shape,
        softmax,
    )

    schemas: list[OpSchema] = []
    for module in (elementwise, activation, softmax, conv, pool, norm, linalg, reduce, shape,
                   constant, movement, gather, resize, fused):
        schemas.extend(module.SCHEMAS)
    return schemas
