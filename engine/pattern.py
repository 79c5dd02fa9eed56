"""Patterns and the compiled e-matcher.

The pattern language: ``Var(name)`` (a repeated name is the same class), ``WILDCARD``,
``POp(op, children, attrs, binder)`` where an attribute constraint is a constant (equal) or an
``AttrVar`` (bound on first sight, compared on later ones), and ``binder`` records the matched
e-node under a name that is also a class variable (so DAG-shaped patterns can be written).

Invariants:
- A ``POp`` matches only e-nodes with its op and *exactly* its arity; a missing attribute fails.
- Ops in ``commutative`` are matched in both orders of their first two children (each distinct
  substitution once), without copying rules.
- A pattern compiles once into a chain of closures over a flat register file (egg's machine):
  ``Bind`` enumerates a class's nodes and writes children to registers, ``Compare`` checks a
  repeated variable, ``Yield`` copies the registers into a match tuple. Checks run as early as
  their registers are known (op, arity and attributes before any recursion).
- A match is a tuple of register values; register 0 is the matched root class, registers 1 and
  2 hold the search's ``since`` tick and a count of matched e-nodes stamped after it. ``Layout``
  maps names to registers; ``Subst`` is the name-keyed view of one match plus values added by
  conditions (``let``).
- ``search(..., since=t)`` yields only matches that use at least one e-node stamped after ``t``
  (added, re-canonicalised or moved into its class since then): semi-naive matching. Patterns
  without an op node ignore ``since`` (the caller restricts their candidate roots instead).
- ``height`` counts levels including leaf variables: a match rooted at class ``c`` depends only
  on classes at most ``height - 1`` child steps below ``c`` (the runner's incremental search
  relies on this).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

from .enode import Attrs, ENode
from .errors import PatternError

if TYPE_CHECKING:
    from .egraph import EClass, EGraph

Match = tuple[Any, ...]
Regs = list[Any]
Classes = Mapping[int, "EClass"]
Step = Callable[[Classes, Regs, list[Match]], None]


@dataclass(frozen=True, slots=True)
class Var:
    """A class variable: every occurrence of one name matches the same e-class."""

    name: str


@dataclass(frozen=True, slots=True)
class Wildcard:
    """Matches any class and binds nothing."""


WILDCARD = Wildcard()


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
    """Where each name lives in a match tuple."""

    slots: Mapping[str, int]
    nodes: Mapping[str, int]
    classes: tuple[str, ...]
    size: int


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


# Attribute check kinds.
_CONST, _BIND, _SAME = 0, 1, 2
# Reserved registers: 0 the root class, 1 the ``since`` tick, 2 how many matched nodes are fresh.
_SINCE, _FRESH, _FIRST_FREE = 1, 2, 3
_MISSING = object()


class _Compiler:
    """Assigns registers and emits instructions in pre-order, compares as early as possible."""

    def __init__(self, commutative: frozenset[str]) -> None:
        self.commutative = commutative
        self.size = _FIRST_FREE
        self.class_slot: dict[str, int] = {}
        self.attr_slot: dict[str, int] = {}
        self.node_slot: dict[str, int] = {}
        self.instrs: list[tuple[Any, ...]] = []

    def new_reg(self, count: int = 1) -> int:
        first = self.size
        self.size += count
        return first

    def root(self, node: PatternNode) -> None:
        if isinstance(node, Var):
            self.class_slot[node.name] = 0
        elif isinstance(node, POp):
            self.pop(node, 0)
        clash = set(self.class_slot) & set(self.attr_slot)
        if clash:
            raise PatternError(f"names used both for classes and attributes: {sorted(clash)}")

    def class_name(self, name: str, reg: int) -> None:
        first = self.class_slot.setdefault(name, reg)
        if first != reg:
            self.instrs.append(("compare", reg, first))

    def pop(self, node: POp, reg: int) -> None:
        if node.copy is not None:
            raise PatternError(f"{node.op}: attribute copying is for appliers, not patterns")
        node_reg = -1
        if node.binder is not None:
            if node.binder in self.node_slot:
                raise PatternError(f"binder '{node.binder}' is used for two nodes")
            self.class_name(node.binder, reg)
            node_reg = self.node_slot[node.binder] = self.new_reg()
        checks = tuple(self.attr_check(name, value) for name, value in node.attrs)
        low = self.new_reg(len(node.children))
        comm = node.op in self.commutative and len(node.children) >= 2
        self.instrs.append(("bind", reg, node.op, len(node.children), low, checks, node_reg, comm))
        for i, child in enumerate(node.children):
            if isinstance(child, Var):
                self.class_name(child.name, low + i)
        for i, child in enumerate(node.children):
            if isinstance(child, POp):
                self.pop(child, low + i)

    def attr_check(self, name: str, value: Any) -> tuple[str, int, Any]:
        if not isinstance(value, AttrVar):
            return (name, _CONST, value)
        slot = self.attr_slot.get(value.name)
        if slot is not None:
            return (name, _SAME, slot)
        self.attr_slot[value.name] = self.new_reg()
        return (name, _BIND, self.attr_slot[value.name])


def _check_attrs(checks: tuple[tuple[str, int, Any], ...]) -> Callable[[Attrs, Regs], bool]:
    def check(attrs: Attrs, regs: Regs) -> bool:
        for name, kind, arg in checks:
            value: Any = _MISSING
            for key, found in attrs:
                if key == name:
                    value = found
                    break
            if value is _MISSING:
                return False
            if kind == _BIND:
                regs[arg] = value
            elif not (value == (arg if kind == _CONST else regs[arg])):
                return False
        return True

    return check


def _yield(classes: Classes, regs: Regs, out: list[Match]) -> None:
    out.append(tuple(regs))


def _yield_fresh(classes: Classes, regs: Regs, out: list[Match]) -> None:
    if regs[_FRESH]:
        out.append(tuple(regs))


def _compare(first: int, second: int, k: Step) -> Step:
    def compare(classes: Classes, regs: Regs, out: list[Match]) -> None:
        if regs[first] == regs[second]:
            k(classes, regs, out)

    return compare


def _bind_plain(src: int, op: str, arity: int, low: int, k: Step) -> Step:
    """The common case: no attribute checks, no binder, not commutative."""
    high = low + arity

    def bind(classes: Classes, regs: Regs, out: list[Match]) -> None:
        eclass, since = classes[regs[src]], regs[_SINCE]
        for node, stamp in zip(eclass.nodes, eclass.stamps, strict=True):
            if node.op == op:
                children = node.children
                if len(children) == arity:
                    regs[low:high] = children
                    if stamp > since:
                        regs[_FRESH] += 1
                        k(classes, regs, out)
                        regs[_FRESH] -= 1
                    else:
                        k(classes, regs, out)

    return bind


def _bind(
    src: int, op: str, arity: int, low: int, checks: tuple[tuple[str, int, Any], ...],
    node_reg: int, comm: bool, k: Step,
) -> Step:
    if not checks and node_reg < 0 and not comm:
        return _bind_plain(src, op, arity, low, k)
    high, check = low + arity, _check_attrs(checks) if checks else None

    def bind(classes: Classes, regs: Regs, out: list[Match]) -> None:
        eclass, since = classes[regs[src]], regs[_SINCE]
        for node, stamp in zip(eclass.nodes, eclass.stamps, strict=True):
            children = node.children
            if node.op != op or len(children) != arity:
                continue
            if check is not None and not check(node.attrs, regs):
                continue
            regs[low:high] = children
            if node_reg >= 0:
                regs[node_reg] = node
            fresh = stamp > since
            regs[_FRESH] += fresh
            k(classes, regs, out)
            if comm and children[0] != children[1]:
                regs[low], regs[low + 1] = children[1], children[0]
                k(classes, regs, out)
            regs[_FRESH] -= fresh

    return bind


def _link(instrs: list[tuple[Any, ...]]) -> Step:
    k: Step = _yield_fresh if instrs else _yield
    for instr in reversed(instrs):
        if instr[0] == "compare":
            k = _compare(instr[1], instr[2], k)
        else:
            _, src, op, arity, low, checks, node_reg, comm = instr
            k = _bind(src, op, arity, low, checks, node_reg, comm, k)
    return k


class Pattern:
    """A compiled pattern: ``search`` returns match tuples (see ``Layout`` / ``Subst``)."""

    def __init__(self, ast: PatternNode, commutative: Iterable[str] = ()) -> None:
        comp = _Compiler(frozenset(commutative))
        comp.root(ast)
        self.ast = ast
        self.commutative = comp.commutative
        self.root_op = ast.op if isinstance(ast, POp) else None
        self.height = height(ast)
        classes = tuple(sorted(comp.class_slot, key=comp.class_slot.__getitem__))
        self.layout = Layout({**comp.class_slot, **comp.attr_slot}, comp.node_slot, classes,
                             comp.size)
        self._run = _link(comp.instrs)
        self._dedup = any(i[0] == "bind" and i[7] for i in comp.instrs)

    def search(
        self, egraph: EGraph, candidates: Iterable[int] | None = None, since: int = -1
    ) -> list[Match]:
        """Matches in a clean e-graph rooted at ``candidates`` (default: every class) that use
        an e-node stamped after ``since`` (default: all matches)."""
        ids = self.root_classes(egraph, candidates)
        classes = egraph.class_map
        regs: Regs = [None] * self.layout.size
        regs[_SINCE], regs[_FRESH] = since, 0
        out: list[Match] = []
        run = self._run
        for cid in ids:
            regs[0] = cid
            run(classes, regs, out)
        return list(dict.fromkeys(out)) if self._dedup else out

    def root_classes(self, egraph: EGraph, candidates: Iterable[int] | None) -> Iterable[int]:
        if self.root_op is None:
            return egraph.class_ids() if candidates is None else candidates
        with_op = egraph.classes_with_op(self.root_op)
        if candidates is None:
            return list(with_op)
        return [cid for cid in candidates if cid in with_op]

    def subst(self, match: Match) -> Subst:
        return Subst(self.layout, match)

    def __repr__(self) -> str:
        return f"Pattern({self.ast!r})"
