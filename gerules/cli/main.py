"""``ge-rewrite``: the command line. The only module family that prints for people.

Invariants:
- Each subcommand lives in its own module ``gerules.cli.cmd_<name>`` exposing
  ``register(subparsers)``; it sets ``func(args) -> int`` on its parser. Only the module of
  the subcommand a command line names is imported (all of them for ``--help`` or no
  subcommand), so ``run`` of a ``.om`` never loads ONNX, SciPy or the optimizer.
- Every long flag is accepted in both spellings (``--input_shape`` and ``--input-shape``):
  each parser rewrites a spelling it does not know into the one it does before parsing.
  ``--log`` (any case), ``--quiet`` and ``--debug`` work before or after the subcommand.
- An unknown flag is one line naming it, with the closest known flag ("did you mean"), exit 2.
- Exit codes (``EXIT_CODES``, printed by ``--help``): every ``GeError`` becomes one line
  ``ge-rewrite: error: <place>: <reason>`` on stderr and its ``exit_code`` (1 bad input, 2
  usage, 3 limits); argparse misuse exits 2 (a bad ``GE_LOG`` too); Ctrl-C, SIGTERM and
  SIGHUP exit 130, 143 and 129 after every temporary file is removed (``signals``);
  ``--timeout`` is exit 3; a closed stdout (``| head``) exits 141 quietly (the outputs, all
  written by then, stay); a stdout that cannot be written (``/dev/full``) is one line and
  exit 1; any other exception is an internal error (exit 70, one line, the traceback only
  with ``--debug``).
- ``--quiet`` prints nothing but errors: stdout goes nowhere and the log level is ``error``.
- Nothing a model names reaches the terminal raw: stdout, log lines and error lines escape
  control characters and bidirectional overrides (``errors.visible``).
- Every command runs inside ``fileio.all_or_none``: its output files appear together at the
  end, or none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import logging
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from ..errors import GeError, ResourceLimit, visible
from ..fileio import all_or_none, os_reason
from . import mark_start
from .atc import route
from .signals import Stopped, Timeout, deadline, exit_code, handle_signals, words

PROG = "ge-rewrite"

# Subcommand modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("compile", "optimize", "run", "inspect", "rules", "ops", "explain")
LOG_LEVELS = ("debug", "info", "warning", "error", "null")
EXIT_CODES = {0: "done", 1: "bad input: a model, rule, .om, .npy or other file, or what it "
              "holds", 2: "bad command line: a flag, a value, a combination",
              3: "a size or time limit (a budget flag or --timeout raises it)",
              70: "internal error (a bug in gerules)", 129: "hung up (SIGHUP)",
              130: "interrupted (Ctrl-C)", 141: "stdout closed (| head)",
              143: "terminated (SIGTERM)"}


class _Parser(argparse.ArgumentParser):
    """argparse that reports misuse in our one-line format (exit 2) and takes both spellings
    of every long flag."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        raw = list(sys.argv[1:] if args is None else args)
        end = raw.index("--") if "--" in raw else len(raw)
        fixed = [self.respell(a) for a in raw[:end]] + raw[end:]
        return super().parse_known_args(fixed, namespace)

    def respell(self, arg: str) -> str:
        """``arg`` with its flag in the spelling this parser knows (``_`` or ``-``)."""
        if not arg.startswith("--") or len(arg) < 3:
            return arg
        flag, eq, value = arg.partition("=")
        if flag in self._option_string_actions:
            return arg
        for alt in ("--" + flag[2:].replace("-", "_"), "--" + flag[2:].replace("_", "-")):
            if alt in self._option_string_actions:
                return alt + eq + value
        return arg

    def flags(self) -> set[str]:
        return {f for f in self._option_string_actions if f.startswith("--")}


def log_level(text: str) -> str:
    """``--log``'s value in any case (atc writes ``--log=INFO``)."""
    level = text.strip().lower()
    if level not in LOG_LEVELS:
        from ..ir.registry import suggest

        raise argparse.ArgumentTypeError(f"'{visible(text)}' is not a log level"
                                         f"{suggest(level, LOG_LEVELS)}; choose one of "
                                         f"{', '.join(LOG_LEVELS)}")
    return level


def add_global_flags(p: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``--log``, ``--quiet`` and ``--debug``: on the top parser with defaults, on each
    subcommand without (so a value given before the subcommand stays)."""
    default: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors",
                   **default)
    p.add_argument("--log", type=log_level, metavar="LEVEL",
                   help="log level, any case: debug, info, warning (default), error, null "
                   "(atc's --log)", **({"default": os.environ.get("GE_LOG", "warning")}
                                       if top else default))
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing but errors", **default)


def build_parser(only: str | None = None) -> _Parser:
    """The parser; ``only``: register that subcommand alone (its module is the only one
    imported, so ``ge-rewrite run x.om`` loads neither ONNX nor the optimizer)."""
    epilog = "exit codes: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items())
    parser = _Parser(prog=PROG, description="Rule-driven graph compiler for an Ascend-like NPU.",
                     epilog=epilog)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and exit")
    add_global_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"{__package__}.cmd_{name}").register(sub)
    for p in set(sub.choices.values()):
        _add_missing_globals(p)
    return parser


def _add_missing_globals(p: argparse.ArgumentParser) -> None:
    if "--quiet" not in p._option_string_actions:
        add_global_flags(p)
    for action in p._actions:  # nested subcommands (rules check/list/verify)
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _add_missing_globals(child)


class _Version(argparse.Action):
    """``--version``, with the package metadata read only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"{PROG} {_version()}")
        parser.exit(0)


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is one, unless help or the
    version is asked for before it (then every subcommand is registered)."""
    for word in argv:
        if word in ("-h", "--help", "--version"):
            return None
        if word in COMMANDS:
            return word
    return None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gerules")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def _unknown(parser: _Parser, args: argparse.Namespace, extra: list[str]) -> str:
    """One line for unrecognized arguments, with the closest flag of that command."""
    from ..ir.registry import suggest

    command = _command_parser(parser, args)
    known = command.flags() | parser.flags()
    flag = next((e for e in extra if e.startswith("-")), extra[0]).split("=", 1)[0]
    hint = suggest(flag, known) or suggest(flag.replace("-", "_"), known)
    return (f"{PROG}: error: unrecognized arguments: {' '.join(extra)}{hint} "
            f"(see '{command.prog} --help')")


def _command_parser(parser: _Parser, args: argparse.Namespace) -> _Parser:
    found: _Parser = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(args, "command", None):
            found = action.choices.get(args.command, parser)
    for action in found._actions:  # one level down: rules check/list/verify
        sub = getattr(args, "rules_command", None)
        if isinstance(action, argparse._SubParsersAction) and sub in action.choices:
            found = action.choices[sub]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    handle_signals()  # SIGTERM and SIGHUP end the command the way Ctrl-C does
    mark_start()
    stdout = sys.stdout
    try:
        sys.stdout = _Guarded(stdout)
        return _main(argv)
    except (KeyboardInterrupt, Stopped) as e:  # also while the subcommand is imported
        print(f"{PROG}: {words(e)}", file=sys.stderr)
        return exit_code(e)
    finally:
        sys.stdout = stdout
        if argv is None:  # the process's own command line: it ends when this returns
            _ending()


def _ending() -> None:
    """Spare the process's end the garbage collections Python runs while it shuts down.

    By now every output is written, synced and renamed (``all_or_none``) and the streams
    are flushed; what is left are objects the shutdown frees anyway. Its collections still
    walk every tracked object (the e-graph, the rule library, the graphs): a third of a
    second after a ResNet-50 compile on a loaded machine. ``gc.freeze`` moves them out of the
    collector's sight; ``atexit`` handlers and reference counting still run as before. Only
    for the program itself (``argv is None``): a caller of ``main([...])`` keeps its
    collector as it was."""
    import gc

    gc.freeze()


def _main(argv: Sequence[str] | None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    parsed = _parse(raw)
    if isinstance(parsed, str):
        print(parsed, file=sys.stderr)
        return 2
    parser, args = parsed
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        closed = False
        with deadline(getattr(args, "timeout", None)), all_or_none():
            try:
                with _quiet(args.quiet):
                    code = int(args.func(args) or 0)
                    sys.stdout.flush()
            except BrokenPipeError:  # the reader went away after the work was done
                closed = True
        if closed:
            _silence_stdout()
            return 141
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
    except Exception as e:  # an internal error: a bug in gerules, not bad input
        if args.debug:
            traceback.print_exc()
        detail = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        print(f"{PROG}: internal error: {visible(detail)} (rerun with --debug for a "
              "traceback)", file=sys.stderr)
        return 70


def _parse(raw: list[str]) -> tuple[_Parser, argparse.Namespace] | str:
    """The parser (with the subcommand ``raw`` names) and the parsed arguments, logging set;
    or the one line for unrecognized arguments."""
    routed = route(raw)  # --model=... without a command: compile
    parser = build_parser(command_in(routed))
    args, extra = parser.parse_known_args(routed)
    if extra:
        return _unknown(parser, args, extra)
    args.command_line = shlex.join([PROG, *raw])  # recorded verbatim in what we write
    level = "error" if args.quiet and args.log != "null" else args.log
    if level != "null":
        handler = logging.StreamHandler()
        handler.setFormatter(_Visible(f"{PROG}: %(levelname)s: %(message)s"))
        logging.basicConfig(level=level.upper(), handlers=[handler])
    else:  # no handler at all would make logging print warnings through its last resort
        logging.getLogger().addHandler(logging.NullHandler())
    return parser, args


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


@contextlib.contextmanager
def _quiet(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield


def _silence_stdout() -> None:
    """After a failed write, point stdout at /dev/null so the interpreter's final flush is
    quiet (what is still buffered can go nowhere else)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
