"""Every shipped op schema, grouped by family, one module per family.

Invariant: ``all_schemas()`` lists each ``(domain, op, since_version)`` exactly once.
"""

from __future__ import annotations

from ..registry import OpSchema


def all_schemas() -> list[OpSchema]:
    from . import (
        activation,
        attention,
        constant,
        control,
        conv,
        elementwise,
        fused,
        gather,
        layout,
        linalg,
        loss,
        movement,
        ngram,
        norm,
        pool,
        quant,
        recurrent,
        reduce,
        resize,
        select,
        shape,
        signal,
        softmax,
        training,
        vision,
    )

    schemas: list[OpSchema] = []
    for module in (elementwise, activation, softmax, conv, pool, norm, linalg, reduce, shape,
                   constant, movement, gather, resize, fused, layout, attention, loss, quant,
                   select, recurrent, vision, signal, ngram, control, training):
        schemas.extend(module.SCHEMAS)
    return schemas
