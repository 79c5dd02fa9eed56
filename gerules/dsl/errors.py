"""The one error type of the rule language.

Invariants:
- Every mistake in a `.ger` file (syntax, limits, encoding, includes, names, arity,
  attributes, scoping, shape soundness) is a ``RuleError`` with the ``Span`` it concerns.
- ``str(error)`` is one line, ``file:line:col: message``, the CLI's one-line contract.
- ``error.render()`` is that line followed by the source line and a caret line under the
  span (the source line is attached where the error is created, or later by ``attach``).
- ``RuleErrors`` groups several errors of one check; it is itself a ``RuleError`` (its
  ``str`` is the first error plus a count) so callers that catch one type catch both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import GeError
from .ast import Span

INDENT = "    "


class RuleError(GeError):
    """A rule file mistake at ``span``: ``file:line:col: message``."""

    def __init__(self, message: str, span: Span, line_text: str | None = None) -> None:
        super().__init__(message, file=span.file)
        self.span = span
        self.line_text = line_text

    def __str__(self) -> str:
        return " ".join(f"{self.span}: {self.message}".split("\n"))

    def attach(self, sources: Mapping[str, str]) -> RuleError:
        """Fill in the source line from ``{file: text}`` if it is still missing."""
        if self.line_text is None and self.span.file in sources:
            self.line_text = line_of(sources[self.span.file], self.span.line)
        return self

    def render(self) -> str:
        """The one-line message, the source line and a caret under the span."""
        if self.line_text is None:
            return str(self)
        return f"{self}\n{caret_lines(self.line_text, self.span)}"


class RuleErrors(RuleError):
    """Several errors found by one check, in source order."""

    def __init__(self, errors: Iterable[RuleError]) -> None:
        self.errors = tuple(errors)
        if not self.errors:
            raise ValueError("RuleErrors needs at least one error")
        first = self.errors[0]
        super().__init__(first.message, first.span, first.line_text)

    def __str__(self) -> str:
        more = len(self.errors) - 1
        first = str(self.errors[0])
        return first if not more else f"{first} (and {more} more error{'s' * (more > 1)})"

    def attach(self, sources: Mapping[str, str]) -> RuleError:
        for e in self.errors:
            e.attach(sources)
        return self

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)


def line_of(text: str, line: int) -> str:
    """Line ``line`` (1-based) of ``text`` without its newline, or ``""`` past the end."""
    lines = text.split("\n")
    return lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""


def caret_lines(line_text: str, span: Span) -> str:
    """The indented source line and a ``^~~~`` line under ``span``'s columns."""
    shown = line_text.expandtabs(1)  # one column per character keeps the caret aligned
    start = min(max(span.col - 1, 0), len(shown))
    end = span.end_col - 1 if span.end_line == span.line else len(shown)
    width = max(1, min(end, len(shown)) - start)
    return f"{INDENT}{shown}\n{INDENT}{' ' * start}^{'~' * (width - 1)}"


def raise_errors(errors: list[RuleError]) -> None:
    """Raise the collected errors (one as itself, several as ``RuleErrors``), if any."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise RuleErrors(errors)
