"""The `.ger` rule language: parse, check and (``compile``) turn rule files into rewrites.

Stages, one module each: ``source`` (limits, UTF-8) -> ``parser`` (Lark LALR, grammar in
``gerules.grammar``) -> ``transform`` (AST in ``ast``) -> ``loader`` (includes, library) ->
``check`` / ``rulecheck`` (names, ops, arity, attributes, scoping) -> ``soundness`` (shape and
dtype of both sides) -> ``compile`` (engine rewrites). ``builtins`` / ``values`` /
``evaluate`` are the compile-time expression language; ``contract`` reads decorators.

Invariants: every mistake in a rule file is a ``RuleError`` (a ``GeError``) with a span;
``load_rules`` either returns a library that passed every check or raises.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..ir.registry import Registry
from .ast import Rule, RuleFile, Span
from .check import check_library
from .contract import Contract, contract_of
from .errors import RuleError, RuleErrors, raise_errors
from .loader import RuleLibrary, parse_library, parse_shipped
from .parser import parse_text

if TYPE_CHECKING:  # imported lazily at run time (see __getattr__)
    from .compile import CompiledRule, CompiledRules, compile_library, load_compiled

__all__ = [
    "CompiledRule", "CompiledRules", "Contract", "Rule", "RuleError", "RuleErrors", "RuleFile",
    "RuleLibrary", "Span", "check_library", "compile_library", "contract_of", "load_compiled",
    "load_rules", "parse_library", "parse_shipped", "parse_text",
]
_COMPILE = ("CompiledRule", "CompiledRules", "compile_library", "load_compiled")


def __getattr__(name: str) -> object:
    """The compiler is imported on first use: it needs the engine and ``gerules.opt``, which
    may themselves import this package."""
    if name in _COMPILE:
        from . import compile as compiler

        return getattr(compiler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_rules(paths: Iterable[str | os.PathLike[str]] | None = None,
               registry: Registry | None = None, *, soundness: bool = True) -> RuleLibrary:
    """Parse and check rule files or folders (``None``: the shipped ``rules/``).

    Raises ``RuleError`` (``RuleErrors`` when there are several) on any mistake.
    """
    lib = parse_shipped() if paths is None else parse_library(paths)
    raise_errors(list(lib.errors))
    raise_errors(check_library(lib, registry, soundness=soundness))
    return lib
