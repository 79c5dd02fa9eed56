"""The `.ger` rule language: parse, check once into a resolved program, compile to rewrites.

Stages, one module each: ``source`` (limits, UTF-8) -> ``parser`` (Lark LALR, grammar in
``gerules.grammar``) -> ``transform`` (AST in ``ast``) -> ``loader`` (includes, library) ->
``check`` / ``resolve`` (names, ops, arity, attributes, scoping: the resolved ``program``) ->
``compile`` (engine rewrites; ``apply`` builds right sides) -> ``soundness`` (instances of
each left side from ``instances``, run through ``trial``). ``library`` strings them together;
``builtins`` / ``values`` / ``evaluate`` are the compile-time expression language;
``contract`` reads decorators.

Invariants: every mistake in a rule file is a ``RuleError`` (a ``GeError``) with a span;
``load_rules`` either returns a program that passed every check or raises; each rule is read
once.
"""

from __future__ import annotations

from .ast import Rule, RuleFile, Span
from .compile import CompiledRule, CompiledRules
from .contract import Contract, contract_of
from .errors import RuleError, RuleErrors, raise_errors
from .library import (
    Built,
    build_library,
    check_library,
    compile_library,
    load_compiled,
    load_library,
    load_rules,
)
from .loader import RuleLibrary, parse_library, parse_shipped
from .parser import parse_text
from .program import Program, ResolvedRule

__all__ = [
    "Built", "CompiledRule", "CompiledRules", "Contract", "Program", "ResolvedRule", "Rule",
    "RuleError", "RuleErrors", "RuleFile", "RuleLibrary", "Span", "build_library",
    "check_library", "compile_library", "contract_of", "load_compiled", "load_library",
    "load_rules",
    "parse_library", "parse_shipped", "parse_text", "raise_errors",
]
