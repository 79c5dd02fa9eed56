"""The e-graph: hash-consed e-nodes grouped into e-classes, with deferred rebuilding.

Invariants (``check_invariants`` verifies them whenever ``is_clean``):
- Every e-node ever added got a fresh id (its class id at creation); ``id_node(i)`` is that node.
  Ids are never reused; ``find`` maps any id to its canonical (root) class id.
- After ``rebuild()``: every e-node stored in a class has canonical children; no two classes hold
  the same e-node (congruence closure); a class holds each e-node once; ``memo`` maps every stored
  e-node to its class; ``classes_with_op(op)`` is exactly the set of classes holding an ``op``
  node; every node is listed among the parents of each of its child classes.
- ``union`` is deferred: it merges the union-find, the node and parent lists and the analysis
  data at once, and queues the parents of the absorbed class; ``rebuild`` restores congruence
  and analysis consistency (egg's rebuilding). Searching needs a clean (rebuilt) e-graph.
- A union that joins conflicting analysis data raises ``UnsoundRewrite`` naming its ``reason``
  *before* changing anything; congruence unions found by ``rebuild`` carry the reason of the
  union that caused them (the e-graph should then be discarded: the rebuild stopped midway).
- ``version`` grows on every change (new node, effective union, changed analysis data), so a
  runner detects saturation without comparing data. Each class records the ``clock`` value of
  its last change (``stamp``); ``changed_since(t)`` lists classes changed after tick ``t``.
  Per node, ``stamps[i]`` is when it entered its class in its current form and ``forms[i]``
  when it got that form (added or re-canonicalised); a class's stamp is at least both.
- The hashcons maps each node to the id of a node congruent to it when it was stored (not
  necessarily a root: ``find`` it); explanations pair those ids' creating nodes.
- Hot paths (rebuild, generated appliers through ``hot_path``) inline ``canonical`` and ``find``
  one hop deep; they must stay equivalent to the plain methods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from .analysis import Analysis, AnalysisSet
from .enode import Attrs, ENode
from .errors import EngineError
from .explain import CONGRUENCE, Explanation, ProofForest
from .invariants import check as check_invariants
from .unionfind import UnionFind

log = logging.getLogger(__name__)

Parent = tuple[ENode, int]
_new_node = tuple.__new__  # ENode(...) without NamedTuple's Python-level __new__
Batch = tuple[str, list[Parent]]


class EClass:
    """A set of equivalent e-nodes, the parents that use it, and its analysis data."""

    __slots__ = ("id", "nodes", "stamps", "forms", "ops", "parents", "data", "stamp")

    def __init__(self, cid: int, node: ENode, stamp: int) -> None:
        self.id = cid
        self.nodes: list[ENode] = [node]
        self.stamps: list[int] = [stamp]  # when each node entered this class in its form
        self.forms: list[int] = [stamp]  # when each node got its form (added or canonicalised)
        self.ops: set[str] = {node.op}
        self.parents: list[Parent] = []
        self.data: tuple[Any, ...] = ()
        self.stamp = stamp

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[ENode]:
        return iter(self.nodes)

    def __repr__(self) -> str:
        return f"EClass(#{self.id}, {len(self.nodes)} nodes)"


class EGraph:
    """Hash-consed e-graph with plug-in analyses and optional explanations."""

    def __init__(self, analyses: Sequence[Analysis] = (), *, explanations: bool = True) -> None:
        self._uf = UnionFind()
        self._memo: dict[ENode, int] = {}
        self._classes: dict[int, EClass] = {}
        self._by_op: dict[str, set[int]] = {}
        self._id_nodes: list[ENode] = []
        self._pending: list[Batch] = []
        self._analysis_pending: list[Batch] = []
        self._merged: list[int] = []
        self._analyses = AnalysisSet(analyses)
        self._analyzed = bool(self._analyses.items)
        self._forest = ProofForest() if explanations else None
        self._node_count = 0
        self._version = 0
        self._clock = 0

    # ----------------------------------------------------------------- queries
    def find(self, cid: int) -> int:
        return self._uf.find(cid)

    def __getitem__(self, cid: int) -> EClass:
        return self._classes[self._uf.find(cid)]

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, int) and 0 <= cid < len(self._uf)

    def nodes(self, cid: int) -> list[ENode]:
        """The e-nodes of ``cid``'s class (do not mutate)."""
        return self._classes[self._uf.find(cid)].nodes

    def parents(self, cid: int) -> list[Parent]:
        """``(node, class id)`` pairs using ``cid``'s class; may hold stale forms (use ``find``)."""
        return self._classes[self._uf.find(cid)].parents

    @property
    def class_map(self) -> Mapping[int, EClass]:
        """Canonical id -> class, live (the matcher's fast path; do not mutate)."""
        return self._classes

    def classes(self) -> Iterator[EClass]:
        return iter(self._classes.values())

    def class_ids(self) -> list[int]:
        return list(self._classes)

    def classes_with_op(self, op: str) -> AbstractSet[int]:
        """Canonical ids of classes holding an ``op`` node (a live view; do not mutate)."""
        return self._by_op.get(op, frozenset())

    def ops(self) -> list[str]:
        return [op for op, ids in self._by_op.items() if ids]

    def data(self, cid: int, name: str | None = None) -> Any:
        """Analysis ``name``'s data for ``cid``'s class (``name`` may be omitted with one)."""
        return self._classes[self._uf.find(cid)].data[self._analyses.index(name)]

    def analysis_names(self) -> list[str]:
        return [a.name for a in self._analyses.items]

    def lookup(self, node: ENode) -> int | None:
        """The class of ``node`` (children canonicalised) or ``None`` when it is not present."""
        found = self._memo.get(self.canonical(node))
        return None if found is None else self._uf.find(found)

    def canonical(self, node: ENode) -> ENode:
        """``node`` with canonical children (the same object when already canonical)."""
        parents = self._uf.parents
        for child in node.children:
            if parents[child] != child:
                break
        else:
            if type(node.children) is tuple:
                return node
        find = self._uf.find
        return _new_node(ENode, (node.op, node.attrs, tuple([find(c) for c in node.children])))

    def id_node(self, cid: int) -> ENode:
        """The e-node that created id ``cid`` (children as they were then)."""
        return self._id_nodes[cid]

    @property
    def id_count(self) -> int:
        """Ids handed out so far; an application's new nodes are the ids it added."""
        return len(self._id_nodes)

    @property
    def node_count(self) -> int:
        """E-nodes stored (exact after ``rebuild``; an upper bound before)."""
        return self._node_count

    @property
    def class_count(self) -> int:
        return len(self._classes)

    @property
    def version(self) -> int:
        return self._version

    @property
    def clock(self) -> int:
        return self._clock

    @property
    def is_clean(self) -> bool:
        return not (self._pending or self._analysis_pending or self._merged)

    def tick(self) -> int:
        """Advance the clock; changes from now on are stamped after the returned value."""
        self._clock += 1
        return self._clock - 1

    def changed_since(self, tick: int) -> list[int]:
        """Classes whose nodes or data changed after ``tick`` (new classes included)."""
        return [cid for cid, eclass in self._classes.items() if eclass.stamp > tick]

    def explain(self, a: int, b: int) -> Explanation:
        """The chain of reasons (rule names, congruence) that made ``a`` and ``b`` equal."""
        if self._forest is None:
            raise EngineError("explanations are off: build the EGraph with explanations=True")
        return self._forest.explain(a, b, self.id_node)

    # ------------------------------------------------------------------ adding
    def add(self, node: ENode) -> int:
        """Add ``node`` (or find it); returns its canonical class id."""
        children = node.children
        if children:
            try:
                if min(children) < 0:
                    raise IndexError(min(children))
                node = self.canonical(node)
            except (IndexError, TypeError, ValueError) as exc:
                raise EngineError(f"{node.op}: children {children!r} are not e-class ids") from exc
        try:
            found = self._memo.get(node)
        except TypeError as exc:
            raise EngineError(f"{node.op}: attributes are not hashable: {node.attrs!r}") from exc
        if found is not None:
            return self._uf.find(found)
        return self._add_new(node)

    def add_node(self, op: str, attrs: Attrs, children: tuple[int, ...]) -> int:
        """``add`` by parts, for trusted callers (appliers): children must be valid ids."""
        parents = self._uf.parents
        for child in children:
            if parents[child] != child:
                find = self._uf.find
                children = tuple([find(c) for c in children])
                break
        node = _new_node(ENode, (op, attrs, children))
        found = self._memo.get(node)
        if found is None:
            return self._add_new(node)
        if parents[found] == found:
            return found
        root = parents[found]
        return root if parents[root] == root else self._uf.find(found)

    def hot_path(self) -> tuple[list[int], Callable[[ENode], int | None], Callable[[int], int],
                                Callable[[ENode], int], Callable[[int, int, str], bool],
                                Callable[[ENode, int, str], None]]:
        """For generated appliers: (union-find parents, hashcons ``get``, ``find``, add-new,
        ``union``, add-into). Add-new and add-into take a canonical node that is not in the
        hashcons; add-into(node, a, reason) puts it straight into ``a``'s class, as add-new
        then ``union(a, new, reason)`` would. Valid until the next ``rebuild`` (which may
        replace the hashcons)."""
        add_into = self._add_new_into if not self._analyzed else self._add_then_union
        return self._uf.parents, self._memo.get, self._uf.find, self._add_new, self.union, add_into

    def _add_then_union(self, node: ENode, target: int, reason: str) -> None:
        self.union(target, self._add_new(node), reason)

    def _add_new_into(self, node: ENode, target: int, reason: str) -> None:
        """A new node joins ``target``'s class at once (no analyses: nothing can conflict)."""
        root = self._uf.find(target)
        cid = len(self._id_nodes)
        self._uf.parents.append(root)
        self._id_nodes.append(node)
        if self._forest is not None:
            self._forest.add()
            self._forest.union(cid, target, reason)
        eclass = self._classes[root]
        eclass.nodes.append(node)
        eclass.stamps.append(self._clock)
        eclass.forms.append(self._clock)
        eclass.ops.add(node[0])
        eclass.stamp = self._clock
        self._memo[node] = cid
        pair = (node, cid)
        classes = self._classes
        for child in node[2]:
            classes[child].parents.append(pair)
        ids = self._by_op.get(node[0])
        if ids is None:
            self._by_op[node[0]] = {root}
        else:
            ids.add(root)
        self._node_count += 1
        self._version += 1

    def _add_new(self, node: ENode) -> int:
        cid = len(self._id_nodes)
        self._uf.parents.append(cid)
        self._id_nodes.append(node)
        if self._forest is not None:
            self._forest.add()
        classes = self._classes
        eclass = classes[cid] = EClass(cid, node, self._clock)
        self._memo[node] = cid
        pair = (node, cid)
        for child in node[2]:
            classes[child].parents.append(pair)
        ids = self._by_op.get(node[0])
        if ids is None:
            self._by_op[node[0]] = {cid}
        else:
            ids.add(cid)
        self._node_count += 1
        self._version += 1
        if self._analyzed:
            eclass.data = self._analyses.make(self, node)
            self._analyses.modify(self, cid)
        return self._uf.find(cid)

    # ----------------------------------------------------------------- merging
    def union(self, a: int, b: int, reason: str = "") -> bool:
        """Make ``a`` and ``b`` equal because of ``reason`` (a rule name); True if they differed."""
        parents = self._uf.parents
        root_a = a if parents[a] == a else self._uf.find(a)
        root_b = b if parents[b] == b else self._uf.find(b)
        return root_a != root_b and self._merge(a, b, root_a, root_b, reason, reason)

    def _union(self, a: int, b: int, reason: str, proof: str) -> bool:
        root_a, root_b = self._uf.find(a), self._uf.find(b)
        return root_a != root_b and self._merge(a, b, root_a, root_b, reason, proof)

    def _merge(self, a: int, b: int, root_a: int, root_b: int, reason: str, proof: str) -> bool:
        keep, gone = self._classes[root_a], self._classes[root_b]
        if len(keep.parents) < len(gone.parents):
            keep, gone = gone, keep
        if self._analyzed:
            data, changed_keep, changed_gone = self._analyses.merge(keep.data, gone.data, reason)
        if self._forest is not None:
            self._forest.union(a, b, proof)
        self._uf.union(keep.id, gone.id)
        self._pending.append((reason, gone.parents))
        if self._analyzed:
            if changed_keep:
                self._analysis_pending.append((reason, list(keep.parents)))
            if changed_gone:
                self._analysis_pending.append((reason, gone.parents))
            keep.data = data
        self._absorb(keep, gone)
        if self._analyzed:
            self._analyses.modify(self, keep.id)
        return True

    def _absorb(self, keep: EClass, gone: EClass) -> None:
        """Move ``gone``'s nodes and parents into ``keep`` and retire ``gone``."""
        by_op, old, new = self._by_op, gone.id, keep.id
        for op in gone.ops:
            ids = by_op[op]
            ids.discard(old)
            ids.add(new)
        keep.ops |= gone.ops
        keep.nodes.extend(gone.nodes)
        keep.stamps.extend([self._clock] * len(gone.nodes))
        keep.forms.extend(gone.forms)
        keep.parents.extend(gone.parents)
        del self._classes[old]
        keep.stamp = self._clock
        self._merged.append(new)
        self._version += 1

    # -------------------------------------------------------------- rebuilding
    def rebuild(self) -> int:
        """Restore congruence and analysis data; returns the number of congruence unions."""
        unions = 0
        touched: list[int] = []
        while self._pending or self._analysis_pending:
            unions += self._process_unions(touched)
            self._process_analysis()
        if touched or self._merged:
            self._repair(touched)
        if len(self._memo) > 2 * self._node_count + 1024:
            self._compact_memo()
        return unions

    def _process_unions(self, touched: list[int]) -> int:
        memo, unions, parents, find = self._memo, 0, self._uf.parents, self._uf.find
        while self._pending:
            reason, batch = self._pending.pop()
            for node, cid in batch:
                canon = node  # self.canonical(node), inlined (hot)
                for child in node[2]:
                    if parents[child] != child:
                        kids = tuple([find(c) for c in node[2]])
                        canon = _new_node(ENode, (node[0], node[1], kids))
                        memo.pop(node, None)
                        break
                other = memo.setdefault(canon, cid)
                if other != cid and self._union(other, cid, reason, CONGRUENCE):
                    unions += 1
                touched.append(cid)
        return unions

    def _process_analysis(self) -> None:
        analyses = self._analyses
        while self._analysis_pending:
            reason, batch = self._analysis_pending.pop()
            for node, cid in batch:
                eclass = self._classes[self._uf.find(cid)]
                made = analyses.make(self, self.canonical(node))
                data, changed, _ = analyses.merge(eclass.data, made, reason)
                if changed:
                    eclass.data = data
                    eclass.stamp = self._clock
                    self._version += 1
                    self._analysis_pending.append((reason, list(eclass.parents)))
                    analyses.modify(self, eclass.id)

    def _repair(self, touched: list[int]) -> None:
        """Canonicalise the touched classes' nodes in place, deduplicate where that made two
        nodes equal, and deduplicate merged classes' parent lists."""
        find, classes, parents = self._uf.find, self._classes, self._uf.parents
        clock = self._clock
        for cid in {find(t) for t in touched}:
            eclass = classes[cid]
            nodes, stamps, forms = eclass.nodes, eclass.stamps, eclass.forms
            for i, node in enumerate(nodes):
                for child in node[2]:  # self.canonical(node), inlined (hot)
                    if parents[child] != child:
                        kids = tuple([find(c) for c in node[2]])
                        nodes[i] = _new_node(ENode, (node[0], node[1], kids))
                        stamps[i] = forms[i] = clock
                        break
            if len(set(nodes)) != len(nodes):
                self._dedup(eclass)
            eclass.stamp = clock
        for cid in {find(m) for m in self._merged}:
            eclass = classes[cid]
            unique: dict[Parent, None] = {}
            for node, user in eclass.parents:
                for child in node[2]:  # self.canonical(node), inlined (hot)
                    if parents[child] != child:
                        kids = tuple([find(c) for c in node[2]])
                        node = _new_node(ENode, (node[0], node[1], kids))
                        break
                unique[(node, user if parents[user] == user else find(user))] = None
            eclass.parents = list(unique)
        self._merged.clear()

    def _dedup(self, eclass: EClass) -> None:
        """Keep each node once, with the latest of its stamps."""
        fresh: dict[ENode, tuple[int, int]] = {}
        for node, stamp, form in zip(eclass.nodes, eclass.stamps, eclass.forms, strict=True):
            seen = fresh.get(node)
            fresh[node] = (stamp, form) if seen is None else \
                (max(stamp, seen[0]), max(form, seen[1]))
        self._node_count += len(fresh) - len(eclass.nodes)
        eclass.nodes = list(fresh)
        eclass.stamps = [s for s, _ in fresh.values()]
        eclass.forms = [f for _, f in fresh.values()]

    def _compact_memo(self) -> None:
        """Drop stale hashcons keys (forms with non-canonical children)."""
        self._memo = {n: c.id for c in self._classes.values() for n in c.nodes}

    # -------------------------------------------------------------- invariants
    def check_invariants(self) -> None:
        """Raise ``InvariantError`` when a documented invariant is broken (needs a clean graph)."""
        check_invariants(self)
