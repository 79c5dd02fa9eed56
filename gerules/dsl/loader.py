"""Files and folders -> ``RuleLibrary``: reading, includes, and the library's tables.

Invariants:
- ``include "x.ger"`` resolves relative to the including file, ``include "gerules:x.ger"``
  to the shipped library (``resolve_include``, the one place includes are resolved); an
  absolute path is an error at the ``include``. The file it names must stay, every symlink
  resolved, inside the folder the user named (a file's own folder, or the folder given) or
  the shipped library (``fileio.inside``); anything else is refused at the ``include`` before
  the file is opened, so no error can quote a file the user did not name. Each file is
  parsed once per library (a diamond of includes is fine, and a user file including a
  shipped file that is loaded anyway adds nothing); an include cycle is a ``RuleError`` at
  the ``include`` that closes it, naming the whole chain.
- Files come in dependency order: a file's includes before the file itself; folders are
  read recursively in sorted order; with ``shipped=True`` the shipped library comes first.
- ``parse_library`` never raises for a bad file: it returns the files it could parse and
  the errors of the others, so a command can report every broken file at once.
- Display paths are the paths as given (or ``rules/<name>`` for the shipped library); they
  are what spans and messages show. ``RuleLibrary.shipped`` holds the shipped files' ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import as_file, files
from pathlib import Path

from ..fileio import inside
from . import ast, cache
from .errors import RuleError
from .parser import parse_text
from .source import read_source

SHIPPED = "gerules.rules"
LIBRARY = "gerules:"  # include "gerules:fold.ger" names a file of the shipped library


@dataclass(frozen=True, slots=True)
class RuleLibrary:
    """Parsed rule files and what they declare, in load order."""

    files: tuple[ast.RuleFile, ...]
    errors: tuple[RuleError, ...] = ()  # files that could not be read or parsed
    origin: Mapping[str, str] = field(default_factory=dict)  # display path -> top-level path
    shipped: frozenset[str] = frozenset()  # display paths of the shipped library's files

    @property
    def rules(self) -> tuple[ast.Rule, ...]:
        return tuple(r for f in self.files for r in f.rules)

    @property
    def sources(self) -> dict[str, str]:
        return {f.path: f.source for f in self.files}

    def items(self, kind: type) -> list:  # type: ignore[type-arg]
        return [i for f in self.files for i in f.items if isinstance(i, kind)]

    @property
    def rulesets(self) -> dict[str, tuple[ast.Rule, ...]]:
        """Ruleset name -> its rules, in declaration order (rules without one are left out)."""
        out: dict[str, list[ast.Rule]] = {d.name: [] for d in self.items(ast.RulesetDecl)}
        for rule in self.rules:
            if rule.ruleset is not None:
                out.setdefault(rule.ruleset, []).append(rule)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def schedules(self) -> dict[str, ast.Schedule]:
        return {s.name: s for s in self.items(ast.Schedule)}

    @property
    def commutative(self) -> tuple[ast.OpRef, ...]:
        return tuple(op for c in self.items(ast.Commutative) for op in c.ops)

    def rule(self, name: str) -> ast.Rule:
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)


@lru_cache(maxsize=256)
def _parse(text: str, display: str, shipped: bool) -> ast.RuleFile:
    """``parse_text``, once per text and name; a shipped file's tree is also kept between
    processes (``dsl.cache``: every command reads the shipped library)."""
    if shipped:
        found = cache.parsed(text, display)
        if found is not None:
            return found
    tree = parse_text(text, display)
    if shipped:
        cache.keep(tree)
    return tree


def shipped_root() -> Path:
    """The folder of the shipped library (a regular package folder)."""
    root = files(SHIPPED)
    if not isinstance(root, Path):
        with as_file(root) as folder:  # pragma: no cover - zipped installs only
            return Path(folder)
    return root


def resolve_include(inc: ast.Include, path: Path, display: str) -> tuple[Path, str]:
    """The file an ``include`` in the file at ``path`` (shown as ``display``) names, and its
    display path: relative to the including file, or ``gerules:NAME`` in the shipped
    library. Raises ``RuleError`` at the include for an absolute path or a library name
    that leaves the library."""
    text = inc.path
    if text.startswith(LIBRARY):
        name = text[len(LIBRARY):]
        parts = Path(name).parts
        if not name or Path(name).is_absolute() or ".." in parts:
            raise RuleError(f"'{text}': a library include names a file of the shipped "
                            "library, such as \"gerules:fold.ger\"", inc.span)
        return shipped_root() / name, str(Path("rules") / name)
    if Path(text).is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise RuleError(f"include '{text}': absolute paths are not allowed; name a file "
                        "relative to this one, or a shipped file as \"gerules:NAME\"",
                        inc.span)
    shown = os.path.normpath(os.path.join(os.path.dirname(display), text))
    return path.parent / text, shown


class _Loader:
    def __init__(self) -> None:
        self.files: list[ast.RuleFile] = []
        self.errors: list[RuleError] = []
        self.done: set[Path] = set()
        self.origin: dict[str, str] = {}
        self.shipped: set[str] = set()
        self.root = shipped_root().resolve()
        self.roots: tuple[Path, ...] = ()

    def load(self, path: Path, display: str, opened_at: ast.Span | None,
             chain: tuple[tuple[Path, str], ...], top: str) -> None:
        real = path.resolve()
        if any(p == real for p, _ in chain):
            names = [d for _, d in chain] + [display]
            start = next(i for i, (p, _) in enumerate(chain) if p == real)
            assert opened_at is not None
            raise RuleError(f"include cycle: {' -> '.join(names[start:])}", opened_at)
        if real in self.done:
            return
        self.done.add(real)
        shipped = real.is_relative_to(self.root)
        parsed = _parse(read_source(path, display, opened_at,
                                    self.roots if opened_at is not None else None),
                        display, shipped)
        for inc in (i for i in parsed.items if isinstance(i, ast.Include)):
            try:
                target, shown = resolve_include(inc, path, display)
                self.confine(inc, target, display)
                self.load(target, shown, inc.span, (*chain, (real, display)), top)
            except RuleError as e:
                self.errors.append(e.attach({display: parsed.source}))
        self.files.append(parsed)
        self.origin[display] = top
        if shipped:
            self.shipped.add(display)

    def confine(self, inc: ast.Include, target: Path, display: str) -> None:
        if not inside(target, self.roots):
            raise RuleError(f"include '{inc.path}' leaves the rules' folder (an include stays "
                            f"in the folder of '{display}' or the shipped library)", inc.span)

    def load_top(self, path: Path, display: str, root: Path) -> None:
        self.roots = (root, self.root)
        try:
            self.load(path, display, None, (), display)
        except RuleError as e:
            self.errors.append(e)

    def library(self) -> RuleLibrary:
        return RuleLibrary(tuple(self.files), tuple(self.errors), self.origin,
                           frozenset(self.shipped))


def rule_paths(path: Path) -> list[Path]:
    """``path`` itself, or the `.ger` files under a folder (recursive, sorted)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*.ger") if p.is_file())
    return [path]


def parse_library(paths: Iterable[str | os.PathLike[str]], *, shipped: bool = False
                  ) -> RuleLibrary:
    """Parse files and folders (with their includes) into one library, collecting errors;
    ``shipped=True`` loads the shipped library first and adds these files to it."""
    loader = _Loader()
    if shipped:
        for path in rule_paths(loader.root):
            loader.load_top(path, str(Path("rules") / path.relative_to(loader.root)),
                            loader.root)
    for top in paths:
        root = Path(top) if Path(top).is_dir() else Path(top).parent
        for path in rule_paths(Path(top)):
            loader.load_top(path, str(path), root)
    return loader.library()


def parse_shipped() -> RuleLibrary:
    """The library shipped in ``gerules.rules`` (display paths ``rules/<name>``)."""
    return parse_library((), shipped=True)
