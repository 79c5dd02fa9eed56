"""The rule library end to end: parse, check once, compile, check shape soundness.

Invariants:
- Every rule is resolved once (``check.resolve_library``) and compiled once; the soundness
  check runs the compiled rewrites (``soundness``), so what is checked is what runs.
- ``check_library`` returns every error (never raises for bad rules); ``load_compiled`` and
  ``compile_library`` raise ``RuleError`` (``RuleErrors`` for several) instead.
- ``None`` paths mean the shipped library (``gerules.rules``) alone; ``load_library`` is the
  shipped library with a user's files added (``GERULES_RULES_PATH``, then the given paths),
  which is what the optimizer runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..ir.registry import Registry, default_registry
from .check import resolve_library, sort_errors
from .compile import CompiledRule, CompiledRules, assemble, compile_program, compile_rule
from .errors import RuleError, raise_errors
from .loader import RuleLibrary, parse_library, parse_shipped
from .program import Program
from .soundness import check_soundness

Paths = Iterable[str | os.PathLike[str]]
ENV = "GERULES_RULES_PATH"


@dataclass(frozen=True, eq=False)
class Built:
    """A library read once: its program, its compiled form (when clean) and its errors."""

    program: Program
    compiled: CompiledRules | None
    errors: list[RuleError]


def build_library(lib: RuleLibrary, registry: Registry | None = None, *,
                  soundness: bool = True, trust_shipped: bool = False) -> Built:
    """Resolve, compile and (``soundness``) check every rule of ``lib`` once;
    ``trust_shipped`` leaves the shipped files' rules out of the soundness check (their own
    tests check them)."""
    program, errors = resolve_library(lib, registry or default_registry())
    if lib.errors:
        return Built(program, None, errors)
    compiled: list[CompiledRule] = []
    for rule in program.rules:
        done = compile_rule(rule, program.commutative, program.registry)
        if soundness and not (trust_shipped and rule.span.file in lib.shipped):
            errors += check_soundness(rule, done.rewrites, program.registry)
        compiled.append(done)
    if errors:
        return Built(program, None, sort_errors(lib, errors))
    return Built(program, assemble(program, compiled), [])


def check_library(lib: RuleLibrary, registry: Registry | None = None, *,
                  soundness: bool = True) -> list[RuleError]:
    """Every mistake in ``lib`` (empty when it is clean)."""
    return build_library(lib, registry, soundness=soundness).errors


def parse(paths: Paths | None) -> RuleLibrary:
    return parse_shipped() if paths is None else parse_library(paths)


def _clean(built: Built) -> CompiledRules:
    raise_errors(built.errors)
    assert built.compiled is not None
    return built.compiled


def load_rules(paths: Paths | None = None, registry: Registry | None = None, *,
               soundness: bool = True) -> Program:
    """Parse and check rule files or folders into the resolved program (raises)."""
    built = build_library(parse(paths), registry, soundness=soundness)
    _clean(built)
    return built.program


def compile_library(lib: RuleLibrary | Program, registry: Registry | None = None
                    ) -> CompiledRules:
    """Compile a library (checked here, without the soundness check) or a resolved program."""
    if isinstance(lib, Program):
        return compile_program(lib)
    return _clean(build_library(lib, registry, soundness=False))


def load_compiled(paths: Paths | None = None, registry: Registry | None = None, *,
                  soundness: bool = True) -> CompiledRules:
    """Rule files to engine objects in one call (raises ``RuleError``)."""
    return _clean(build_library(parse(paths), registry, soundness=soundness))


def user_paths(paths: Paths = ()) -> tuple[str, ...]:
    """The user's rule files and folders: ``GERULES_RULES_PATH`` (entries separated by
    ``os.pathsep``, like ``PATH``), then ``paths``. Raises ``UsageError`` for a path that
    does not exist or a folder without ``.ger`` files, naming where it came from."""
    found: list[tuple[str, str]] = [(p, ENV) for p in os.environ.get(ENV, "").split(os.pathsep)
                                    if p.strip()]
    found += [(os.fspath(p), "--rules") for p in paths]
    for path, where in found:
        target = Path(path)
        if not target.exists():
            raise UsageError(f"{where} {path}: no such file or folder")
        if target.is_dir() and not any(target.rglob("*.ger")):
            raise UsageError(f"{where} {path}: no .ger files in this folder")
    return tuple(dict.fromkeys(p for p, _ in found))


def load_library(paths: Paths = (), registry: Registry | None = None) -> Built:
    """The shipped library with the user's files (``user_paths``) added: every rule
    resolved and compiled once, the user's rules checked for shape soundness."""
    user = user_paths(paths)
    return build_library(parse_library(user, shipped=True), registry, trust_shipped=True)
