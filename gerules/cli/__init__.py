"""The ``ge-rewrite`` command line (``main``).

``started()`` is when the current command began (``main`` marks it before importing the
subcommands), so a command's ``time:`` line counts its own start-up.
"""

import time

_START = [time.perf_counter()]


def mark_start() -> None:
    _START[0] = time.perf_counter()


def started() -> float:
    return _START[0]
