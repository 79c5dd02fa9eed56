"""``ge-rewrite``: the command line. The only module family that prints for people.

Invariants:
- Each subcommand lives in its own module ``gerules.cli.cmd_<name>`` exposing
  ``register(subparsers)``; it sets ``func(args) -> int`` on its parser.
- Every ``GeError`` becomes one line ``ge-rewrite: error: <place>: <reason>`` on stderr and
  its ``exit_code`` (1 bad input, 2 usage, 3 limits); argparse misuse exits 2; Ctrl-C exits
  130; a closed stdout (``| head``) exits quietly; any other exception is an internal error
  (exit 70, one line, the traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import shlex
import sys
import traceback
from collections.abc import Sequence

from ..errors import GeError
from .atc import route

PROG = "ge-rewrite"

# Subcommand modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("compile", "optimize", "run", "inspect", "rules", "ops", "explain")


class _Parser(argparse.ArgumentParser):
    """argparse that reports misuse in our one-line format (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Rule-driven graph compiler for an Ascend-like NPU.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument("--log", default=os.environ.get("GE_LOG", "warning"),
                        choices=["debug", "info", "warning", "error", "null"],
                        help="log level (atc's --log)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.cmd_{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:  # importing the subcommands takes a moment: Ctrl-C then is no traceback either
        parser = build_parser()
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(route(raw))  # atc-style lines (--model=...) mean compile
    args.command_line = shlex.join([PROG, *raw])  # recorded verbatim in what we write
    if args.log != "null":
        logging.basicConfig(level=args.log.upper(), format=f"{PROG}: %(levelname)s: %(message)s")
    else:  # no handler at all would make logging print warnings through its last resort
        logging.getLogger().addHandler(logging.NullHandler())
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except GeError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except Exception as e:  # an internal error: a bug in gerules, not bad input
        if args.debug:
            traceback.print_exc()
        detail = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        print(f"{PROG}: internal error: {detail} (rerun with --debug for a traceback)",
              file=sys.stderr)
        return 70


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
