"""Names in a ``.om`` file are data, never paths.

Invariant: an accepted name is a ``str`` of at most ``MAX_NAME`` characters without control
characters (NUL included) and without a ``..`` path component, so no tool that turns names into
file names (dumps, per-tensor files) can be steered outside its folder by a model file.
"""

from __future__ import annotations

import re

from ..errors import ModelError

MAX_NAME = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DOTDOT = re.compile(r"(^|[/\\])\.\.([/\\]|$)")


def name_problem(name: object, *, empty: bool = False) -> str | None:
    """Why ``name`` is not acceptable, or ``None``."""
    if not isinstance(name, str):
        return f"expected a string, got {type(name).__name__}"
    if not name and not empty:
        return "the name is empty"
    if len(name) > MAX_NAME:
        return f"the name has {len(name)} characters (at most {MAX_NAME})"
    if _CONTROL.search(name):
        return f"the name {name[:40]!r} holds a control character"
    if _DOTDOT.search(name):
        return f"the name {name[:80]!r} holds a '..' path component"
    return None


def check_name(name: str, what: str, *, empty: bool = False) -> str:
    """``name`` itself, or ``ModelError`` naming ``what`` and the problem."""
    problem = name_problem(name, empty=empty)
    if problem:
        raise ModelError(f"{what}: {problem}")
    return name
