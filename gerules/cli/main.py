"""``ge-rewrite``: the command line. The only module family that prints for people.

Invariants:
- Each subcommand lives in its own module ``gerules.cli.cmd_<name>`` exposing
  ``register(subparsers)``; it sets ``func(args) -> int`` on its parser.
- Every ``GeError`` becomes one line ``ge-rewrite: error: <place>: <reason>`` on stderr and
  its ``exit_code`` (1 bad input, 2 usage, 3 limits); argparse misuse exits 2 (a bad
  ``GE_LOG`` too); Ctrl-C, SIGTERM and SIGHUP exit 130, 143 and 129 after every temporary
  file is removed (``signals``); ``--timeout`` is exit 3; a closed stdout (``| head``) exits
  141 quietly, a stdout that cannot be written (``/dev/full``) is one line and exit 1; any
  other exception is an internal error (exit 70, one line, the traceback only with
  ``--debug``).
- Nothing a model names reaches the terminal raw: stdout, log lines and error lines escape
  control characters and bidirectional overrides (``errors.visible``).
- Every command runs inside ``fileio.all_or_none``: its output files appear together at the
  end, or none of them.
"""

from __future__ import annotations

import argparse
import importlib
import io
import logging
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ..errors import GeError, ResourceLimit, visible
from ..fileio import all_or_none, os_reason
from .atc import route
from .signals import Stopped, Timeout, deadline, exit_code, handle_signals, words

PROG = "ge-rewrite"

# Subcommand modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("compile", "optimize", "run", "inspect", "rules", "explain")
LOG_LEVELS = ("debug", "info", "warning", "error", "null")


class _Parser(argparse.ArgumentParser):
    """argparse that reports misuse in our one-line format (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Rule-driven graph compiler for an Ascend-like NPU.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument("--log", default=os.environ.get("GE_LOG", "warning"),
                        choices=LOG_LEVELS, help="log level (atc's --log; default: the "
                        "GE_LOG environment variable, else warning)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.cmd_{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    handle_signals()  # SIGTERM and SIGHUP end the command the way Ctrl-C does
    stdout = sys.stdout
    try:
        sys.stdout = _Guarded(stdout)
        return _main(argv)
    except (KeyboardInterrupt, Stopped) as e:  # also while the subcommands are imported
        print(f"{PROG}: {words(e)}", file=sys.stderr)
        return exit_code(e)
    finally:
        sys.stdout = stdout


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(route(raw))  # atc-style lines (--model=...) mean compile
    args.command_line = shlex.join([PROG, *raw])  # recorded verbatim in what we write
    if args.log not in LOG_LEVELS:  # the GE_LOG environment variable is the default
        parser.error(f"GE_LOG='{visible(args.log)}': expected one of {', '.join(LOG_LEVELS)}")
    if args.log != "null":
        handler = logging.StreamHandler()
        handler.setFormatter(_Visible(f"{PROG}: %(levelname)s: %(message)s"))
        logging.basicConfig(level=args.log.upper(), handlers=[handler])
    else:  # no handler at all would make logging print warnings through its last resort
        logging.getLogger().addHandler(logging.NullHandler())
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with deadline(getattr(args, "timeout", None)), all_or_none():
            code = int(args.func(args) or 0)
            sys.stdout.flush()
        return code
    except GeError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        if isinstance(e, OutputError):
            _silence_stdout()
        return e.exit_code
    except Timeout as e:
        print(f"{PROG}: error: the command ran longer than --timeout {e.seconds:g} s "
              "(raise it with --timeout)", file=sys.stderr)
        return ResourceLimit.exit_code
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except Exception as e:  # an internal error: a bug in gerules, not bad input
        if args.debug:
            traceback.print_exc()
        detail = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        print(f"{PROG}: internal error: {visible(detail)} (rerun with --debug for a "
              "traceback)", file=sys.stderr)
        return 70


class OutputError(GeError):
    """Standard output cannot be written (a full disk, ``/dev/full``, an I/O error)."""


class _Visible(logging.Formatter):
    """Log lines with model-provided names made harmless for the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record), keep_newlines=True)


class _Guarded(io.TextIOBase):
    """``sys.stdout`` for people: control characters from model names are escaped (``\\uXXXX``,
    valid in JSON too; newlines and tabs kept) and write errors (other than a closed pipe)
    are an ``OutputError``."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._call(self._inner.write, visible(text, keep_newlines=True, json=True))
        return len(text)

    def flush(self) -> None:
        self._call(self._inner.flush)

    def fileno(self) -> int:
        return self._inner.fileno()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, buffer, ...: the real stream's
        return getattr(self._inner, name)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputError(f"cannot write to standard output: {os_reason(e)}") from None


def _silence_stdout() -> None:
    """After a failed write, point stdout at /dev/null so the interpreter's final flush is
    quiet (what is still buffered can go nowhere else)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
