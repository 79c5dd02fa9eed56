"""Gears: the input shapes one ``.om`` is compiled for (atc's dynamic shape flags).

atc compiles several shapes into one offline model, one memory plan each ("gears"):
- ``--dynamic_batch_size=1,2,4``: the ``-1`` dims of ``--input_shape`` are the batch;
- ``--dynamic_image_size=224,224;448,448``: the two ``-1`` dims (height, width) take each pair;
- ``--dynamic_dims=1,128;8,128``: every ``-1`` of ``--input_shape``, in order, takes a value;
- ``--input_shape_range=x:[1~8],3,[224~448],[224~448]``: each range dim is symbolic; the
  ``.om`` holds one plan per *bucket* of the ranges (planned at the bucket's largest sizes,
  valid for every size inside it), and the runtime runs any size in range in its bucket.

Invariants:
- At most one of the four is given (as atc); ``Gears.dims`` lists one binding ``{symbol:
  size}`` per gear (per bucket: its upper bounds), in order; ``ranges`` is empty, or holds per
  bucket ``{symbol: (low, high)}``, the sizes it runs.
- Every gear binds exactly ``symbols``, the dims that vary; a ``-1`` whose values are the same
  column in every gear as another ``-1`` at the same dim index shares its symbol (the sequence
  length of ``input_ids`` and ``attention_mask``), so symbolic shape inference sees one dim.
- Bad specs are ``UsageError``s naming the flag.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .errors import UsageError

MODES = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims", "input_shape_range")
MAX_BUCKETS = 16  # range buckets in one .om
BUCKETS_PER_DIM = 4
Position = tuple[str, int]  # (input name, dim index)


@dataclass(frozen=True)
class Gears:
    """What a conversion compiles: one binding per gear (see the module invariants)."""

    mode: str = ""
    symbols: tuple[str, ...] = ()
    dims: tuple[Mapping[str, int], ...] = ({},)
    ranges: tuple[Mapping[str, tuple[int, int]], ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.mode)

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode or None, "symbols": list(self.symbols),
                "gears": [dict(d) for d in self.dims],
                "ranges": [{k: list(v) for k, v in r.items()} for r in self.ranges]}


def positions(input_shape: Mapping[str, Sequence[int]]) -> list[Position]:
    """The ``-1`` dims of ``--input_shape``, in the order written."""
    return [(name, k) for name, dims in input_shape.items() for k, d in enumerate(dims)
            if d == -1]


def gear_values(mode: str, spec: str, count: int) -> list[tuple[int, ...]]:
    """Per gear, one size per ``-1`` position (``count`` of them)."""
    if mode == "dynamic_batch_size":
        sizes = _ints(spec, ",", mode)
        if len(set(sizes)) != len(sizes):
            raise UsageError(f"--{mode}: sizes must be distinct: '{spec}'")
        return [(b,) * count for b in sizes]
    groups = [g for g in (x.strip() for x in spec.split(";")) if g]
    if not groups:
        raise UsageError(f"--{mode}: expected gears like '1,224;8,448', got '{spec}'")
    width = 2 if mode == "dynamic_image_size" else count
    if mode == "dynamic_image_size" and count != 2:
        raise UsageError(f"--{mode} needs exactly two -1 dims (height and width) in "
                         f"--input_shape, there are {count}")
    out = []
    for group in groups:
        values = _ints(group, ",", mode)
        if len(values) != width:
            raise UsageError(f"--{mode}: gear '{group}' has {len(values)} sizes; --input_shape "
                             f"has {width} -1 dims")
        out.append(values)
    if len(set(out)) != len(out):
        raise UsageError(f"--{mode}: a gear is given twice: '{spec}'")
    return out


def _ints(text: str, sep: str, mode: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(sep))
    except ValueError:
        raise UsageError(f"--{mode}: expected integers, got '{text}'") from None
    if any(v < 1 for v in values):
        raise UsageError(f"--{mode}: sizes must be positive: '{text}'")
    return values


def shared_symbols(where: Sequence[Position], values: Sequence[tuple[object, ...]]
                   ) -> list[int]:
    """Per position, the index of the first position it shares a symbol with (itself if
    none): same dim index and the same entry in every row of ``values`` (a gear's sizes, or
    the ``(lo, hi)`` ranges)."""
    owner = []
    for i, (_, k) in enumerate(where):
        column = [g[i] for g in values]
        owner.append(next((j for j in range(i) if where[j][1] == k
                           and [g[j] for g in values] == column), i))
    return owner


def parse_ranges(spec: str) -> tuple[dict[str, tuple[int, ...]], dict[Position, tuple[int, int]]]:
    """atc's ``--input_shape_range``: the shapes (``-1`` where a range is) and the ranges."""
    shapes: dict[str, tuple[int, ...]] = {}
    ranges: dict[Position, tuple[int, int]] = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise UsageError(f"--input_shape_range: expected NAME:D0,[LO~HI],... in '{part}'")
        out = []
        for k, d in enumerate(re.findall(r"\[[^\]]*\]|[^,]+", dims)):
            d = d.strip()
            if d.startswith("["):
                m = re.fullmatch(r"\[\s*(\d+)\s*~\s*(-1|\d+)\s*\]", d)
                if not m:
                    raise UsageError(f"--input_shape_range {name}: '{d}' is not [LO~HI]")
                lo, hi = int(m[1]), int(m[2])
                if hi == -1:
                    raise UsageError(f"--input_shape_range {name}: '{d}' has no upper bound; "
                                     "a .om plans its memory for the largest size: give one")
                if not 1 <= lo <= hi:
                    raise UsageError(f"--input_shape_range {name}: '{d}' needs 1 <= LO <= HI")
                ranges[(name, k)] = (lo, hi)
                out.append(-1)
            else:
                try:
                    out.append(int(d))
                except ValueError:
                    raise UsageError(f"--input_shape_range {name}: '{d}' is not a dim") from None
                if out[-1] == -1:
                    raise UsageError(f"--input_shape_range {name}: an unbounded dim (-1) "
                                     "cannot be planned; give [LO~HI]")
        shapes[name] = tuple(out)
    if not ranges:
        raise UsageError(f"--input_shape_range: no [LO~HI] range in '{spec}'")
    return shapes, ranges


def buckets(bounds: Mapping[str, tuple[int, int]]) -> list[dict[str, tuple[int, int]]]:
    """Range buckets: per symbol the high end and up to three halvings above the low end,
    combined (at most ``MAX_BUCKETS``); each bucket covers (previous edge, its edge]."""
    per = {}
    for sym, (lo, hi) in bounds.items():
        edges = sorted({hi, *(hi >> s for s in range(1, BUCKETS_PER_DIM) if hi >> s >= lo)})
        per[sym] = list(zip([lo, *(e + 1 for e in edges[:-1])], edges, strict=True))
    while _count(per) > MAX_BUCKETS:  # coarsen the symbol with the most buckets
        sym = max(per, key=lambda s: len(per[s]))
        spans = per[sym]
        per[sym] = [(spans[0][0], spans[1][1]), *spans[2:]]
    names = sorted(per)
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(per[n] for n in names))]


def _count(per: Mapping[str, list[tuple[int, int]]]) -> int:
    n = 1
    for spans in per.values():
        n *= len(spans)
    return n
