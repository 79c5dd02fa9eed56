"""The e-matching machine: patterns compiled to straight-line Python search functions.

A pattern is compiled in two steps (egg's machine, then code generation):
1. ``_Compiler`` assigns registers in pre-order and emits instructions: ``bind`` (enumerate the
   nodes of the class in a register that have the op and arity and pass the attribute checks,
   writing their children to fresh registers) and ``compare`` (a repeated variable), each check
   placed as early as its registers are known.
2. ``_Codegen`` turns the instructions into one function of nested ``for`` loops whose locals
   are the registers (no per-node calls), which appends a match tuple at the innermost level.

Invariants:
- A ``POp`` matches only e-nodes with its op and *exactly* its arity; a missing attribute fails.
- Ops in ``commutative`` are matched in both orders of their first two children; the distinct
  matches are kept once.
- A match is a tuple of register values; register 0 is the matched root class.
  ``Pattern.layout`` maps names to registers.
- ``search(..., since=t)`` keeps only matches that use at least one e-node stamped after ``t``
  (added, re-canonicalised or moved into its class since then): semi-naive matching. The last
  ``bind`` skips a class whose stamp is not after ``t`` when nothing matched so far is fresh (a
  class's stamp is at least each of its nodes' stamps). Patterns without an op node ignore
  ``since`` (the caller restricts their candidate roots instead).
- Only register numbers, ``repr``'d op and attribute names enter generated source; attribute
  constants are passed through the function's namespace.
- The function is generated on the first search that has a root class to start from, so a
  pattern whose root op never appears in the e-graph costs no code generation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import PatternError
from .pattern import AttrVar, Layout, Match, PatternNode, POp, Subst, Unset, Var, height

if TYPE_CHECKING:
    from .egraph import EClass, EGraph

Search = Callable[[Mapping[int, "EClass"], Iterable[int], int, list[Match]], None]

# Attribute check kinds.
_CONST, _BIND, _SAME, _UNSET = 0, 1, 2, 3
_FIRST_FREE = 1  # register 0 is the root class
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
        if isinstance(value, Unset):
            return (name, _UNSET, None)
        if not isinstance(value, AttrVar):
            return (name, _CONST, value)
        slot = self.attr_slot.get(value.name)
        if slot is not None:
            return (name, _SAME, slot)
        self.attr_slot[value.name] = self.new_reg()
        return (name, _BIND, self.attr_slot[value.name])


def _attr(attrs: tuple[tuple[str, Any], ...], name: str) -> Any:
    for key, value in attrs:
        if key == name:
            return value
    return _MISSING


class _Codegen:
    """Emits the nested-loop search function for an instruction list."""

    def __init__(self, instrs: list[tuple[Any, ...]], size: int) -> None:
        self.instrs = instrs
        self.size = size
        self.lines = ["def search(classes, ids, since, out):", "    for R0 in ids:",
                      "        F0 = False"]
        self.namespace: dict[str, Any] = {"_attr": _attr, "_MISSING": _MISSING}
        self.last_bind = max((i for i, ins in enumerate(instrs) if ins[0] == "bind"), default=-1)

    def emit(self, text: str, indent: int) -> None:
        self.lines.append("    " * indent + text)

    def build(self) -> Search:
        indent, depth = 2, 0
        for i, instr in enumerate(self.instrs):
            if instr[0] == "compare":
                self.emit(f"if R{instr[1]} != R{instr[2]}:", indent)
                self.emit("continue", indent + 1)
            else:
                indent = self.bind(instr, indent, depth, last=i == self.last_bind)
                depth += 1
        regs = ", ".join(f"R{r}" for r in range(self.size))
        self.emit(f"if F{depth}:" if self.instrs else "if True:", indent)
        self.emit(f"out.append(({regs},))", indent + 1)
        code = "\n".join(self.lines) + "\n"
        exec(compile(code, "<pattern>", "exec"), self.namespace)  # noqa: S102 - see doc
        search: Search = self.namespace["search"]
        return search

    def bind(self, instr: tuple[Any, ...], indent: int, d: int, last: bool) -> int:
        _, src, op, arity, low, checks, node_reg, comm = instr
        self.emit(f"C{d} = classes[R{src}]", indent)
        if last:
            self.emit(f"if not F{d} and C{d}.stamp <= since:", indent)
            self.emit("continue", indent + 1)
        stamps = "forms" if d == 0 else "stamps"  # a root node that only moved matched before
        self.emit(f"for N{d}, S{d} in zip(C{d}.nodes, C{d}.{stamps}):", indent)
        indent += 1
        self.emit(f"K{d} = N{d}[2]", indent)
        self.emit(f"if N{d}[0] != {op!r} or len(K{d}) != {arity}:", indent)
        self.emit("continue", indent + 1)
        for check in checks:
            self.check(check, d, indent)
        self.emit(f"F{d + 1} = F{d} or S{d} > since", indent)
        if node_reg >= 0:
            self.emit(f"R{node_reg} = N{d}", indent)
        if not comm:
            if arity:
                targets = "".join(f"R{low + i}, " for i in range(arity))
                self.emit(f"{targets}= K{d}", indent)
            return indent
        rest = "".join(f"R{low + i}, " for i in range(2, arity))
        if rest:
            self.emit(f"{rest}= K{d}[2:]", indent)
        both = f"((K{d}[0], K{d}[1]), (K{d}[1], K{d}[0]))"
        self.emit(f"for R{low}, R{low + 1} in ({both} if K{d}[0] != K{d}[1] else {both}[:1]):",
                  indent)
        return indent + 1

    def check(self, check: tuple[str, int, Any], d: int, indent: int) -> None:
        name, kind, arg = check
        self.emit(f"V = _attr(N{d}[1], {name!r})", indent)
        self.emit("if V is not _MISSING:" if kind == _UNSET else "if V is _MISSING:", indent)
        self.emit("continue", indent + 1)
        if kind == _UNSET:
            return
        if kind == _BIND:
            self.emit(f"R{arg} = V", indent)
            return
        if kind == _CONST:
            const = f"A{len(self.namespace)}"
            self.namespace[const] = arg
            self.emit(f"if not (V == {const}):", indent)
        else:
            self.emit(f"if not (V == R{arg}):", indent)
        self.emit("continue", indent + 1)


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
        self._instrs, self._size = comp.instrs, comp.size
        self._search: Search | None = None  # generated on the first search with a root
        self._dedup = any(i[0] == "bind" and i[7] for i in comp.instrs)

    def search(
        self, egraph: EGraph, candidates: Iterable[int] | None = None, since: int = -1
    ) -> list[Match]:
        """Matches in a clean e-graph rooted at ``candidates`` (default: every class) that use
        an e-node stamped after ``since`` (default: all matches)."""
        roots = self.root_classes(egraph, candidates)
        if not roots:
            return []
        if self._search is None:
            self._search = _Codegen(self._instrs, self._size).build()
        out: list[Match] = []
        self._search(egraph.class_map, roots, since, out)
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
