"""Node attributes: an immutable, hashable mapping.

Invariants:
- Values are normalised on construction: lists become tuples, NumPy scalars become Python
  scalars, ``bytes`` strings decode to ``str``, arrays become read-only copies; a subgraph
  (a ``Graph``: the body of If, Loop, Scan) is kept as it is (it is immutable).
- Two ``Attrs`` are equal when they hold the same names with equal values (arrays compare by
  dtype, shape and contents, subgraphs by ``Graph.key()``), and equal ``Attrs`` hash equally,
  so nodes can key dictionaries.
- Schema defaults are *not* stored here; ``OpSchema.resolve`` applies them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

import numpy as np

if TYPE_CHECKING:
    from .graph import Graph  # noqa: F401 - named in AttrValue

AttrValue = Union[  # noqa: UP007 - "Graph" is a forward reference (graph imports attrs)
    int, float, str, tuple[int, ...], tuple[float, ...], tuple[str, ...], np.ndarray, "Graph"
]


def normalize(value: Any) -> AttrValue:
    """Bring an attribute value into its canonical immutable form."""
    if isinstance(value, np.ndarray):
        frozen = np.array(value, copy=True)
        frozen.setflags(write=False)
        return frozen
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (list, tuple)):
        return tuple(normalize(v) for v in value)  # type: ignore[return-value]
    return value  # type: ignore[no-any-return]


def _key(value: AttrValue) -> Any:
    """A hashable stand-in for a value (arrays by dtype, shape and bytes)."""
    if isinstance(value, np.ndarray):
        return ("tensor", value.dtype.str, value.shape, value.tobytes())
    key = getattr(value, "key", None)
    if key is not None and callable(key):  # a subgraph
        return ("graph", key())
    return value


class Attrs(Mapping[str, AttrValue]):
    """An immutable ``{name: value}`` mapping, sorted by name."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(items or {})
        merged.update(kwargs)
        self._items: dict[str, AttrValue] = {
            k: normalize(merged[k]) for k in sorted(merged)
        }
        self._hash: int | None = None

    def __getitem__(self, name: str) -> AttrValue:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple((k, _key(v)) for k, v in self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attrs):
            return NotImplemented
        if self._items.keys() != other._items.keys():
            return False
        return all(_key(v) == _key(other._items[k]) for k, v in self._items.items())

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={_short(v)}" for k, v in self._items.items())
        return f"Attrs({body})"

    def set(self, **changes: Any) -> Attrs:
        """A copy with ``changes`` applied; a value of ``None`` removes the name."""
        merged = dict(self._items)
        for k, v in changes.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        return Attrs(merged)


def _short(value: AttrValue) -> str:
    if isinstance(value, np.ndarray):
        return f"tensor<{value.dtype.name}{list(value.shape)}>"
    if hasattr(value, "nodes"):
        return f"graph<{len(value.nodes)} nodes>"
    return repr(value)


EMPTY = Attrs()
