"""Run many ``ge-rewrite`` command lines as separate processes without paying start-up each time.

Imports the CLI (its subcommands and the op registry) once, then forks one child per command
line: the child points fds 1 and 2 at files, runs ``main(argv)`` in its folder and leaves with
``os._exit(code)``; an exception that escapes ``main`` is printed with its traceback and exits
99, as an uncaught one would. So each
case gets a real process (real exit code, real stdout/stderr bytes, no state shared between
cases) for a few milliseconds instead of a second of imports.

    python cli_driver.py JOBS.json   # [{"argv": [...], "cwd": ..., "stdout": ..., "stderr": ...}]

prints a JSON list of exit codes, one per job.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from gerules.cli.main import build_parser, main
from gerules.ir.registry import default_registry


def _child(job: dict[str, object]) -> None:
    code = 99
    try:
        os.chdir(str(job["cwd"]))
        for fd, key in ((1, "stdout"), (2, "stderr")):
            out = os.open(str(job[key]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        code = main([str(a) for a in job["argv"]])  # type: ignore[attr-defined]
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_all(jobs: list[dict[str, object]]) -> list[int]:
    build_parser()  # import every subcommand and build the op registry once, before forking
    default_registry()
    codes = []
    for job in jobs:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(job)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    return codes


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(run_all(json.load(f))))
