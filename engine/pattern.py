"""The pattern language, and substitutions (one match by name).

The pattern language: ``Var(name)`` (a repeated name is the same class), ``WILDCARD``,
``POp(op, children, attrs, binder)`` where an attribute constraint is a constant (equal) or an
``AttrVar`` (bound on first sight, compared on later ones), and ``binder`` records the matched
e-node under a name that is also a class variable (so DAG-shaped patterns can be written).
Appliers use the same nodes (``POp.copy`` names a binder whose attributes are copied).
Patterns are compiled by ``engine.machine``.

Invariants:
- AST nodes are frozen values; ``height`` counts levels including leaf variables, so a match
  rooted at class ``c`` depends only on classes at most ``height - 1`` child steps below ``c``
  (the runner's incremental search relies on this).
- A match is a tuple of register values (register 0: the root class); ``Layout`` maps names to
  registers; ``Subst`` is the name-keyed view of one match plus values added by conditions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from .enode import ENode
from .errors import PatternError

Match = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Var:
    """A class variable: every occurrence of one name matches the same e-class."""

    name: str


@dataclass(frozen=True, slots=True)
class Wildcard:
    """Matches any class and binds nothing."""


WILDCARD = Wildcard()


@dataclass(frozen=True, slots=True)
class Unset:
    """In an attribute position: the matched node must not have that attribute at all."""


UNSET = Unset()


@dataclass(frozen=True, slots=True)
class AttrVar:
    """An attribute variable (in an attribute position): binds or compares the value."""

    name: str


@dataclass(frozen=True, slots=True)
class POp:
    """``op(children...) {attrs}``, optionally ``as binder``; ``copy`` is for appliers only."""

    op: str
    children: tuple[PatternNode, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()
    binder: str | None = None
    copy: str | None = None


PatternNode = Var | Wildcard | POp


def height(node: PatternNode) -> int:
    """Levels of the pattern tree, leaf variables included."""
    if isinstance(node, POp) and node.children:
        return 1 + max(height(child) for child in node.children)
    return 1


def variables(node: PatternNode) -> set[str]:
    """Names a pattern (or applier) refers to: class variables, binders and attribute vars."""
    if isinstance(node, Var):
        return {node.name}
    if not isinstance(node, POp):
        return set()
    names = {v.name for _, v in node.attrs if isinstance(v, AttrVar)}
    names |= {n for n in (node.binder, node.copy) if n is not None}
    for child in node.children:
        names |= variables(child)
    return names


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each name lives in a match tuple (``roots``: the register of each root; one
    root at register 0 unless the pattern is a multi-pattern)."""

    slots: Mapping[str, int]
    nodes: Mapping[str, int]
    classes: tuple[str, ...]
    size: int
    roots: tuple[int, ...] = (0,)


class Subst(Mapping[str, Any]):
    """One match by name: class ids, attribute values, binders' e-nodes, ``let`` values."""

    __slots__ = ("layout", "match", "extra")

    def __init__(
        self, layout: Layout, match: Match, extra: Mapping[str, Any] | None = None
    ) -> None:
        self.layout = layout
        self.match = match
        self.extra: Mapping[str, Any] = extra or {}

    @property
    def root(self) -> int:
        return int(self.match[0])

    def __getitem__(self, name: str) -> Any:
        slot = self.layout.slots.get(name)
        if slot is not None:
            return self.match[slot]
        return self.extra[name]

    def __iter__(self) -> Iterator[str]:
        return chain(self.layout.slots, self.extra)

    def __len__(self) -> int:
        return len(self.layout.slots) + len(self.extra)

    def node(self, name: str) -> ENode:
        """The e-node matched by the ``POp`` bound ``as name``."""
        slot = self.layout.nodes.get(name)
        if slot is None:
            raise PatternError(f"'{name}' is not a node binder of this pattern")
        node: ENode = self.match[slot]
        return node

    def extend(self, name: str, value: Any) -> Subst:
        """A new substitution with ``name`` bound to ``value`` (names never rebind)."""
        if name in self:
            raise PatternError(f"'{name}' is already bound")
        return Subst(self.layout, self.match, {**self.extra, name: value})

    def class_items(self) -> tuple[tuple[str, int], ...]:
        """The class-valued names (variables and binders) with their class ids."""
        slots = self.layout.slots
        return tuple((name, int(self.match[slots[name]])) for name in self.layout.classes)

    def __repr__(self) -> str:
        return f"Subst({dict(self)})"
