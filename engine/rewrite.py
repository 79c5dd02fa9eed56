"""Rewrites: a searcher (pattern), conditions that run in order, and an applier.

Invariants:
- Searching is read-only; applying adds e-nodes and unions the applier's classes with the matched
  root, each union carrying the rewrite's name as its reason (provenance and ``UnsoundRewrite``).
- A condition maps ``(egraph, root, subst)`` to an extended ``Subst`` or a ``Reject(reason)``;
  conditions run in order, so a ``Let`` can feed a later ``Guard``. ``Guard`` and ``Let`` are the
  two stock conditions (the rule language's ``where`` and ``let``).
- An applier maps ``(egraph, root, subst)`` to the class ids to union with the root, adding
  e-nodes as it needs. ``PatternApplier`` instantiates a pattern; with no conditions the rewrite
  is *pure* and applies whole match lists with code generated against the searcher's layout
  (static attributes: straight-line Python; attribute variables or copies: closures), never
  building a ``Subst``. Applying a pure rewrite's match twice changes nothing the second time.
- Every name an applier pattern uses must be bound by the searcher or a ``Let``; this is checked
  when the rewrite is built (custom conditions defer the check to the first application).
- ``incremental=True`` promises that conditions and applier read only the matched classes (their
  nodes and analysis data), so the runner may skip roots whose neighbourhood did not change.
- A rewrite with conditions or a custom applier applies each match once: the match in canonical
  form (its roots' and named classes' canonical ids, its bound e-nodes with canonical children,
  its attribute values) is remembered per e-graph once applied, and a later iteration that finds
  it again (its root's class grew, so it was searched anew) skips it without running the
  conditions: e-graphs only grow, so its right side is in the root's class already. A rejected
  match is checked again each time it is found; a match whose classes merged with others has a
  new canonical form, unless the merge kept its ids: a right side a ``Let`` computed from
  analysis data that such a merge refined is then not computed again (the shipped rules'
  lets read constants and types, which a class has settled once known; the optimizer bench's
  graphs are the same with and without). (The conv-bn folds' overflow guard materialises each
  folded weight: on ResNet-50 it ran three times per fold.)
- A rewrite over a ``MultiPattern`` unions its applier's i-th class with the match's i-th root
  (the applier gives one class per root), is never pure and never incremental, and never
  matches root e-nodes it added itself (TENSAT's limit on multi-patterns: a horizontal
  fusion's own product would otherwise join the next match, forever).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .enode import ENode, make_attrs
from .errors import EngineError, PatternError
from .machine import Pattern
from .multipattern import MultiPattern
from .pattern import AttrVar, Layout, Match, PatternNode, POp, Subst, Var, Wildcard, variables

if TYPE_CHECKING:
    from .egraph import EGraph


@dataclass(frozen=True, slots=True)
class Reject:
    """A condition's refusal; ``reason`` is what reports show ("matched but not applied").

    ``miss=True`` marks a refusal that is part of matching itself (a pattern literal that is
    not the one asked for): the runner counts it as no match at all, not as a rejection.
    """

    reason: str
    miss: bool = False


Condition = Callable[["EGraph", int, Subst], "Subst | Reject"]
Applier = Callable[["EGraph", int, Subst], Iterable[int]]
AddNode = Callable[[str, Any, tuple[int, ...]], int]
Builder = Callable[[AddNode, Match], Any]
Recorder = Callable[[Match, int], None]
ApplyLoop = Callable[[list[Match], "EGraph", str, "Recorder | None"], int]


class Guard:
    """``where``: keeps the match when ``predicate`` holds, else rejects with ``reason``."""

    def __init__(self, reason: str, predicate: Callable[[EGraph, int, Subst], bool]) -> None:
        self.reason = reason
        self.predicate = predicate

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        return subst if self.predicate(egraph, root, subst) else Reject(self.reason)

    def __repr__(self) -> str:
        return f"Guard({self.reason!r})"


class Let:
    """``let``: binds ``name`` to ``fn``'s value; ``fn`` may return a ``Reject`` instead."""

    def __init__(self, name: str, fn: Callable[[EGraph, int, Subst], Any]) -> None:
        self.name = name
        self.fn = fn

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> Subst | Reject:
        value = self.fn(egraph, root, subst)
        return value if isinstance(value, Reject) else subst.extend(self.name, value)

    def __repr__(self) -> str:
        return f"Let({self.name!r})"


class PatternApplier:
    """Instantiates a pattern: ``Var``s are looked up, ``POp``s are added to the e-graph.

    Attributes are constants or ``AttrVar``s (looked up by name); ``copy="n"`` starts from the
    attributes of the node bound ``as n`` and lets the listed attributes override them.
    """

    def __init__(self, ast: PatternNode) -> None:
        _check_applier(ast)
        self.ast = ast
        self.names = variables(ast)

    def __call__(self, egraph: EGraph, root: int, subst: Subst) -> tuple[int, ...]:
        return (self._build(egraph, subst, self.ast),)

    def _build(self, egraph: EGraph, subst: Subst, node: PatternNode) -> int:
        if isinstance(node, Var):
            return int(subst[node.name])
        assert isinstance(node, POp)  # guaranteed by _check_applier
        children = tuple([self._build(egraph, subst, child) for child in node.children])
        return egraph.add(ENode(node.op, _attrs(node, subst), children))

    def compile(self, layout: Layout) -> tuple[Builder, ApplyLoop]:
        """Instantiation straight from match tuples of ``layout``: one, and a whole list."""
        missing = self.names - set(layout.slots) - set(layout.nodes)
        if missing:
            raise PatternError(f"applier uses names the pattern does not bind: {sorted(missing)}")
        return _compile(self.ast, layout)


def _check_applier(node: PatternNode) -> None:
    if isinstance(node, Var):
        return
    if not isinstance(node, POp):
        raise PatternError("an applier cannot contain a wildcard")
    if node.binder is not None:
        raise PatternError(f"{node.op}: 'as {node.binder}' binds nodes in patterns, not appliers")
    for child in node.children:
        _check_applier(child)


def _attrs(node: POp, subst: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    values = {k: subst[v.name] if isinstance(v, AttrVar) else v for k, v in node.attrs}
    if node.copy is None:
        return make_attrs(values)
    base = dict(_binder_node(subst, node.copy).attrs)
    base.update(values)
    return make_attrs(base)


def _binder_node(subst: Mapping[str, Any], name: str) -> ENode:
    if isinstance(subst, Subst):
        return subst.node(name)
    raise PatternError(f"cannot copy attributes of '{name}': not a node binder")


def _compile(node: PatternNode, layout: Layout) -> tuple[Builder, ApplyLoop]:
    """A builder and an apply loop: generated straight-line code for static attributes."""
    if _static(node):
        return _generate(node, layout)
    build = _closure(node, layout)

    def loop(matches: list[Match], egraph: EGraph, name: str, record: Recorder | None) -> int:
        count = 0
        for regs in matches:
            before = egraph.id_count
            if egraph.union(regs[0], build(egraph.add_node, regs), name):
                count += 1
                if record is not None:
                    record(regs, before)
        return count

    return build, loop


def _closure(node: PatternNode, layout: Layout) -> Builder:
    if isinstance(node, Var):
        slot = layout.slots[node.name]
        return lambda add, regs: regs[slot]
    assert isinstance(node, POp)
    kids = tuple(_closure(child, layout) for child in node.children)
    return lambda add, regs: add(node.op, _attrs(node, Subst(layout, regs)),
                                 tuple([kid(add, regs) for kid in kids]))


def _static(node: PatternNode) -> bool:
    if not isinstance(node, POp):
        return True
    if node.copy is not None or any(isinstance(v, AttrVar) for _, v in node.attrs):
        return False
    return all(_static(child) for child in node.children)


def _generate(node: PatternNode, layout: Layout) -> tuple[Builder, ApplyLoop]:
    """Compile an applier to a loop of straight-line code: per ``POp``, build its children,
    canonicalise them, probe the hashcons (with a plain tuple: it hashes and compares equal to
    the ``ENode``) and add the node when absent; a new top node goes
    straight into the matched root's class (``EGraph.hot_path``). Only register numbers and
    ``repr``'d op names enter the source; attribute tuples come in through the namespace.
    Also returns a one-match builder (closures) for ``Rewrite.apply_match``.
    """
    namespace: dict[str, Any] = {"mk": tuple.__new__, "EN": ENode}
    lines: list[str] = []

    def node_code(sub: POp) -> str:
        kids = [emit(child) for child in sub.children]
        attrs = f"attrs{len(namespace)}"
        namespace[attrs] = make_attrs(sub.attrs)
        for v in kids:  # canonical ids: one hop inline, longer paths through find
            lines.extend((f"if P[{v}] != {v}:", f"    {v} = P[{v}]",
                          f"    if P[{v}] != {v}: {v} = find({v})"))
        return f"({sub.op!r}, {attrs}, ({''.join(v + ', ' for v in kids)}))"

    def emit(sub: PatternNode) -> str:
        k = len(lines)
        if isinstance(sub, Var):
            lines.append(f"v{k} = regs[{int(layout.slots[sub.name])}]")
            return f"v{k}"
        assert isinstance(sub, POp)
        lines.append(f"n{k} = {node_code(sub)}")
        lines.append(f"r{k} = get(n{k})")
        lines.append(f"if r{k} is None: r{k} = new(mk(EN, n{k}))")
        return f"r{k}"

    if isinstance(node, POp):
        lines.append(f"top = {node_code(node)}")
        lines.append("res = get(top)")
        lines.extend(_INTO)
    else:
        lines.append(f"res = {emit(node)}")
    source = _LOOP.format(body="".join(" " * 8 + line + "\n" for line in lines))
    exec(compile(source, "<applier>", "exec"), namespace)  # noqa: S102 - generated above
    loop: ApplyLoop = namespace["loop"]
    return _closure(node, layout), loop


_INTO = (  # a new top node joins the matched class directly
    "if res is None:",
    "    into(mk(EN, top), regs[0], name)",
    "    count += 1",
    "    if record is not None: record(regs, before)",
    "    continue",
)
_LOOP = """
def loop(matches, egraph, name, record):
    P, get, find, new, union, into = egraph.hot_path()
    count = before = 0
    for regs in matches:
        if record is not None: before = egraph.id_count
{body}        root = regs[0]
        if P[root] != root: root = find(root)
        if P[res] != res:
            res = P[res]
            if P[res] != res: res = find(res)
        if root != res and union(root, res, name):
            count += 1
            if record is not None: record(regs, before)
    return count
"""


class Rewrite:
    """A named rewrite: ``searcher`` pattern, ``conditions`` in order, then ``applier``."""

    def __init__(
        self,
        name: str,
        searcher: PatternNode | Pattern | MultiPattern,
        applier: PatternNode | Applier,
        *,
        conditions: Iterable[Condition] = (),
        commutative: Iterable[str] = (),
        incremental: bool = True,
    ) -> None:
        self.name = name
        self.pattern: Pattern | MultiPattern = (
            searcher if isinstance(searcher, Pattern | MultiPattern)
            else Pattern(searcher, commutative))
        self.conditions = tuple(conditions)
        multi = isinstance(self.pattern, MultiPattern)
        self.incremental = incremental and not multi
        self.applier: Applier = _applier(applier)
        self._fast: Builder | None = None
        self._loop: ApplyLoop | None = None
        self._own: weakref.WeakKeyDictionary[EGraph, set[int]] = weakref.WeakKeyDictionary()
        # per e-graph, the canonical forms of the matches applied (``_key``)
        self._done: weakref.WeakKeyDictionary[EGraph, set[Match]] = weakref.WeakKeyDictionary()
        self._parts: tuple[tuple[int, ...], ...] | None = None  # _key's slots by kind
        if isinstance(self.applier, PatternApplier) and multi:
            raise PatternError(f"rule '{name}': a multi-pattern needs an applier that gives "
                               "one class per root")
        if isinstance(self.applier, PatternApplier):
            self._check_names(self.applier)
            if not self.conditions:
                self._fast, self._loop = self.applier.compile(self.pattern.layout)

    def _check_names(self, applier: PatternApplier) -> None:
        if not all(isinstance(c, Guard | Let) for c in self.conditions):
            return
        bound = set(self.pattern.layout.slots) | {c.name for c in self.conditions
                                                   if isinstance(c, Let)}
        missing = applier.names - bound
        if missing:
            raise PatternError(f"rule '{self.name}': right side uses unbound {sorted(missing)}")

    @property
    def layout(self) -> Layout:
        return self.pattern.layout

    @property
    def pure(self) -> bool:
        """No conditions and a pattern applier: a match's effect depends only on its nodes."""
        return self._fast is not None

    def search(
        self, egraph: EGraph, candidates: Iterable[int] | None = None, since: int = -1
    ) -> list[Match]:
        return self.pattern.search(egraph, candidates, since)

    def apply_all(
        self, egraph: EGraph, matches: list[Match], record: Recorder | None,
        rejected: Counter[str], missed: Counter[str] | None = None,
        roots: set[int] | None = None,
    ) -> int:
        """Apply every match; returns how many changed the e-graph. ``record(match, ids_before)``
        is called for each of those, ``rejected`` counts the conditions' reasons, ``missed``
        the reasons of refusals that mean "no match" (``Reject.miss``) and ``roots`` collects
        the root class of every real match."""
        if self._loop is not None:
            if roots is not None:
                roots.update(m[0] for m in matches)
            return self._loop(matches, egraph, self.name, record)
        count = 0
        for match in matches:
            before = egraph.id_count
            outcome = self.apply_match(egraph, match)
            if isinstance(outcome, Reject) and outcome.miss:
                if missed is not None:
                    missed[outcome.reason] += 1
                continue
            if roots is not None:
                roots.add(match[0])
            if isinstance(outcome, Reject):
                rejected[outcome.reason] += 1
            elif outcome:
                count += 1
                if record is not None:
                    record(match, before)
        return count

    def apply_match(self, egraph: EGraph, match: Match) -> bool | Reject:
        """Run conditions and applier on one match; True when the e-graph changed."""
        root: int = match[0]
        if self._fast is not None:
            return egraph.union(root, self._fast(egraph.add_node, match), self.name)
        key = self._key(egraph, match)
        done = self._done.get(egraph)
        if done is None:
            done = self._done[egraph] = set()
        elif key is not None and key in done:
            return False  # applied before: its right side is in the root's class already
        subst = Subst(self.pattern.layout, match)
        for condition in self.conditions:
            outcome = condition(egraph, root, subst)
            if isinstance(outcome, Reject):
                return outcome
            subst = outcome
        pattern = self.pattern
        own = self._own.setdefault(egraph, set()) if isinstance(pattern, MultiPattern) else None
        if own and isinstance(pattern, MultiPattern) and _made(
                egraph, own, [match[r] for r in pattern.root_nodes]):
            return False
        before = egraph.id_count
        try:
            ids = tuple(self.applier(egraph, root, subst))
        except KeyError as exc:
            raise EngineError(f"rule '{self.name}': applier read unbound name {exc}") from exc
        if own is not None:
            own.update(range(before, egraph.id_count))
        roots = self.pattern.layout.roots
        targets = [match[r] for r in roots] if len(roots) > 1 else [root] * len(ids)
        if len(targets) != len(ids):
            raise EngineError(f"rule '{self.name}': the applier gave {len(ids)} classes for "
                              f"{len(roots)} roots")
        changed = False
        for target, cid in zip(targets, ids, strict=True):
            changed = egraph.union(target, cid, self.name) or changed
        if key is not None:
            done.add(key)
        return changed

    def _key(self, egraph: EGraph, match: Match) -> Match | None:
        """The match in canonical form: its roots' and named classes' canonical ids, its bound
        e-nodes with canonical children, its attribute values; ``None`` when a value is not
        hashable (such a match is never skipped)."""
        layout = self.pattern.layout
        parts = self._parts
        if parts is None:
            classes = {*layout.roots, *(layout.slots[n] for n in layout.classes)}
            nodes = set(layout.nodes.values())
            values = {*layout.slots.values()} - classes - nodes
            parts = self._parts = (tuple(sorted(classes)), tuple(sorted(nodes)),
                                   tuple(sorted(values)))
        find, canonical = egraph.find, egraph.canonical
        key = (tuple(find(match[i]) for i in parts[0]),
               tuple(canonical(match[i]) for i in parts[1]),
               tuple(match[i] for i in parts[2]))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def __repr__(self) -> str:
        return f"Rewrite({self.name!r}, {self.pattern.ast!r})"


def _made(egraph: EGraph, own: set[int], nodes: list[ENode]) -> bool:
    """True when one of ``nodes`` is (congruent to) a node the ids ``own`` created."""
    mine = {egraph.canonical(egraph.id_node(i)) for i in own}
    return any(egraph.canonical(n) in mine for n in nodes)


def _applier(applier: PatternNode | Applier) -> Applier:
    if isinstance(applier, Var | POp):
        return PatternApplier(applier)
    if isinstance(applier, Wildcard) or not callable(applier):
        raise PatternError(f"an applier is a pattern or a callable, not {applier!r}")
    return applier


def rewrite(
    name: str, lhs: PatternNode | str, rhs: PatternNode | str | Applier, **options: Any
) -> Rewrite:
    """Build a rewrite; string sides are parsed as s-expressions (see ``engine.sexpr``)."""
    from .sexpr import parse_pattern

    left = parse_pattern(lhs) if isinstance(lhs, str) else lhs
    right = parse_pattern(rhs) if isinstance(rhs, str) else rhs
    return Rewrite(name, left, right, **options)


def birewrite(
    name: str, lhs: PatternNode | str, rhs: PatternNode | str, **options: Any
) -> tuple[Rewrite, Rewrite]:
    """``lhs <=> rhs``: two rewrites, ``name`` and ``name/rev``."""
    forward = rewrite(name, lhs, rhs, **options)
    backward = rewrite(f"{name}/rev", rhs, lhs, **options)
    return forward, backward
