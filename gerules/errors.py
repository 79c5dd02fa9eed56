"""The project's error types for bad input.

Invariants:
- Every error a user can provoke with a model, a rule file, an ``.om`` file or a flag is a
  ``GeError``; ``str(error)`` is one line that names the place (file, ``line:col``, node or
  tensor) before the reason, so the CLI prints it as is.
- ``exit_code`` is the process exit status the CLI uses: 1 bad input, 2 usage, 3 resource limit.
- Internal bugs are *not* ``GeError``: they surface as ordinary exceptions (exit 70 in the CLI).
- Names in messages come from files we do not trust: ``str(error)`` shows control characters,
  bidirectional overrides and line separators escaped (``visible``), so a model cannot move
  the cursor, recolour the terminal or fake a second line.
"""

from __future__ import annotations

import re

# C0/C1 controls, DEL, bidirectional marks and overrides, line/paragraph separators.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                        "\u2066-\u2069]")


def visible(text: str, *, keep_newlines: bool = False, json: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\u202e``).

    ``keep_newlines`` leaves ``\\n`` and ``\\t`` alone (multi-line output); ``json`` writes
    every escape as ``\\uXXXX``, which is also valid inside JSON strings (JSON itself escapes
    only C0 controls, so C1 controls and bidi overrides would reach the terminal raw)."""

    def escape(m: re.Match[str]) -> str:
        c = m.group()
        if keep_newlines and c in "\n\t":
            return c
        if json or ord(c) >= 0x100:
            return f"\\u{ord(c):04x}"
        return f"\\x{ord(c):02x}"

    return _INVISIBLE.sub(escape, text)


class GeError(Exception):
    """Bad input, reported as ``<file>[:line:col][: node 'n' (Op)][: tensor 't']: reason``."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        node: str | None = None,
        op: str | None = None,
        tensor: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.node = node
        self.op = op
        self.tensor = tensor

    def place(self) -> str:
        """The location prefix, or ``""`` when the error names no place."""
        parts: list[str] = []
        if self.file:
            parts.append(visible(self.file))
        if self.node is not None:
            op = f" ({visible(self.op)})" if self.op else ""
            parts.append(f"node '{visible(self.node)}'{op}")
        elif self.op:
            parts.append(f"op {visible(self.op)}")
        if self.tensor is not None:
            parts.append(f"tensor '{visible(self.tensor)}'")
        return ": ".join(parts)

    def with_place(
        self,
        *,
        file: str | None = None,
        node: str | None = None,
        op: str | None = None,
        tensor: str | None = None,
    ) -> GeError:
        """Fill in location fields that are still empty; returns ``self`` for ``raise``."""
        self.file = self.file or file
        self.node = self.node if self.node is not None else node
        self.op = self.op or op
        self.tensor = self.tensor if self.tensor is not None else tensor
        return self

    def __str__(self) -> str:
        place = self.place()
        text = f"{place}: {self.message}" if place else self.message
        return visible(" ".join(text.split("\n")))


class ModelError(GeError):
    """A model file or graph that cannot be loaded, verified or run."""


class GraphError(ModelError):
    """A graph that breaks an IR invariant (SSA, acyclicity, arity, shapes)."""


class ShapeError(ModelError):
    """Shape or dtype inference failed: operands that do not fit the op."""


class KernelError(ModelError):
    """A kernel refused its inputs at run time (names the node)."""


class OmError(GeError):
    """A compiled ``.om`` file that is malformed, truncated or tampered with."""


class UsageError(GeError):
    """A command line or API call that is wrong in itself."""

    exit_code = 2


class ResourceLimit(GeError):
    """A size or time budget was exceeded (a model or tensor too large, a limit hit)."""

    exit_code = 3
