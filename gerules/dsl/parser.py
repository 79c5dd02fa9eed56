"""Text -> ``ast.RuleFile``: the Lark LALR parser (loaded from the package) and the transformer.

Invariants:
- The grammar is read from ``gerules.grammar/ger.lark`` with ``importlib.resources``, built
  once per process; its tables are kept between processes as JSON in a private per-user
  folder (``dsl.cache``; never Lark's pickle cache). Lark is imported only when a text is
  parsed (a process whose shipped rules all come from ``dsl.cache`` never imports it).
- ``parse_text`` raises only ``RuleError``: source limits (``source.check_text``), syntax
  errors (``syntax.syntax_error``) and transformer refusals (depth, integer size).
- Parsing is iterative end to end (LALR stack, ``Transformer_NonRecursive``), so the depth of
  the input never reaches Python's recursion limit.
"""

from __future__ import annotations

import logging
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING

from . import ast
from .cache import load_parser
from .errors import RuleError
from .source import check_text

if TYPE_CHECKING:
    from lark import Lark

log = logging.getLogger(__name__)


@cache
def lark_parser() -> Lark:
    """The shared LALR parser for `.ger` text."""
    grammar = files("gerules.grammar").joinpath("ger.lark").read_text(encoding="utf-8")
    return load_parser(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                       maybe_placeholders=True)


def parse_text(text: str, file: str = "<string>") -> ast.RuleFile:
    """Parse `.ger` ``text``; errors name ``file``. Raises ``RuleError``."""
    from lark.exceptions import UnexpectedInput

    from .syntax import syntax_error
    from .transform import ToAst

    check_text(text, file)
    lark = lark_parser()
    try:
        tree = lark.parse(text)
    except UnexpectedInput as e:
        raise syntax_error(lark, e, file, text).attach({file: text}) from None
    try:
        items = ToAst(file, text).transform(tree)
    except RuleError as e:
        raise e.attach({file: text}) from None
    log.debug("parsed %s: %d items", file, len(items))
    return ast.RuleFile(file, text, tuple(items))
