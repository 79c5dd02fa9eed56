"""TfIdfVectorizer (ai.onnx): n-gram counts of integer token rows.

Invariants:
- The pool (``pool_int64s``) holds the n-grams of each length n back to back from
  ``ngram_counts[n - 1]``; the k-th pooled n-gram overall (of any length) counts into output
  column ``ngram_indexes[k]``. Only lengths in ``[min_gram_length, max_gram_length]`` count.
- In a row, an n-gram takes tokens ``start, start + d, ..., start + (n - 1) d`` for each skip
  distance ``d`` in ``1 .. max_skip_count + 1``; unigrams count once (at ``d = 1``).
- ``mode``: TF gives counts, IDF ``weights[col]`` (1 without weights) where the count is
  non-zero, TFIDF ``weights[col] * count``. Output float32 ``[C_out]`` for a 1-D input,
  ``[B, C_out]`` for ``[B, C]``. String pools are refused (the IR holds no strings).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..graph import TensorType
from ..registry import Call
from ._common import Arrays, Types, at, attr, iattr, lattr, need, sattr, schema


def _table(call: Call) -> dict[tuple[int, ...], int]:
    """Pooled n-gram -> output column, for the lengths that count."""
    pool = lattr(call, "pool_int64s")
    if not pool:
        raise ShapeError("TfIdfVectorizer: only pool_int64s is supported (no string pools)")
    starts = lattr(call, "ngram_counts") or [0]
    columns = lattr(call, "ngram_indexes") or []
    lo, hi = iattr(call, "min_gram_length", 1), iattr(call, "max_gram_length", 1)
    table: dict[tuple[int, ...], int] = {}
    k = 0
    for n, begin in enumerate(starts, start=1):
        end = starts[n] if n < len(starts) else len(pool)
        for at_ in range(begin, end - n + 1, n):
            if lo <= n <= hi:
                table[tuple(pool[at_:at_ + n])] = columns[k]
            k += 1
    return table


def _width(call: Call) -> int:
    return max(lattr(call, "ngram_indexes") or [0]) + 1


def _tfidf_infer(types: Types, _c: object, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "TfIdfVectorizer")
    if x.shape is not None and len(x.shape) == 2:
        return [TensorType("float32", (x.shape[0], _width(call)))]
    return [TensorType("float32", (_width(call),))]


def _tfidf_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x = need(at(inputs, 0), "TfIdfVectorizer")
    rows = x.reshape(1, -1) if x.ndim < 2 else x
    table, width = _table(call), _width(call)
    lo, hi = iattr(call, "min_gram_length", 1), iattr(call, "max_gram_length", 1)
    counts = np.zeros((rows.shape[0], width), np.float64)
    for r, row in enumerate(rows.tolist()):
        shortest = lo
        for d in range(1, iattr(call, "max_skip_count") + 2):
            for start in range(len(row)):
                if start + d * (shortest - 1) >= len(row):
                    break
                for n in range(max(shortest, 1), hi + 1):
                    last = start + (n - 1) * d
                    if last >= len(row):
                        break
                    col = table.get(tuple(row[start:last + 1:d]))
                    if col is not None:
                        counts[r, col] += 1
            if shortest == 1:
                shortest = 2
                if shortest > hi:
                    break
    weights = np.asarray(call.attrs.get("weights") or np.ones(width), np.float64)
    mode = sattr(call, "mode", "TF")
    if mode == "IDF":
        counts = np.where(counts > 0, weights[None, :width], 0)
    elif mode == "TFIDF":
        counts = counts * weights[None, :width]
    elif mode != "TF":
        raise ShapeError(f"TfIdfVectorizer: unknown mode '{mode}'")
    out = counts.astype(np.float32)
    return [out if x.ndim == 2 else out.reshape(width)]


SCHEMAS = [
    schema("TfIdfVectorizer", 9, "X", "Y", _tfidf_infer, _tfidf_kernel,
           attrs=[attr("max_gram_length", "int", required=True),
                  attr("max_skip_count", "int", required=True),
                  attr("min_gram_length", "int", required=True),
                  attr("mode", "string", required=True),
                  attr("ngram_counts", "ints", required=True),
                  attr("ngram_indexes", "ints", required=True),
                  attr("pool_int64s", "ints"), attr("pool_strings", "strings"),
                  attr("weights", "floats")],
           doc="TF, IDF or TF-IDF n-gram vector of integer token rows"),
]
