"""Run a function in a fresh, limited ``python -I`` process: where code from a model may run.

``run_isolated(entry, request, limits=..., inputs=...)`` runs ``entry``
(``"package.module:function"``, called as ``function(request, output: Path)``; it writes its
result, normally ONNX model bytes, to ``output``) in a new interpreter and returns the bytes of
that output file. Frontends that must execute code from a model (a TorchScript archive's
methods, a TensorFlow graph) run it there, never in the compiler's process.

The worker (``gerules.frontends.worker``) gets:
- a private temporary folder (mode 0700, removed afterwards) as its working folder, ``HOME``
  and ``TMPDIR``; each of ``inputs`` copied into it through the safe reader (regular files
  and folders of them only; a symlink, FIFO or device is refused) and passed to the function
  as ``request["inputs"]`` (strings, in order; the key is reserved);
- a scrubbed environment (``PATH``, ``HOME``, ``TMPDIR``, a UTF-8 locale and the BLAS/OpenMP
  thread counts; nothing else, so no tokens or proxies leak in) and ``python -I`` (no user
  site, no ``PYTHON*`` variables, no current folder on ``sys.path``);
- resource limits it sets on itself before anything else runs: ``RLIMIT_AS`` (memory),
  ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (largest file it may write), ``RLIMIT_NOFILE``,
  ``RLIMIT_NPROC`` (not enforced by the kernel for root) and no core dumps; and the parent's
  wall-clock timeout, after which its whole process group is killed;
- a Landlock sandbox where the kernel has one (``landlock``): reads only beneath the Python
  installation, the system libraries and its own folder; writes only in its own folder; no
  TCP, no signals to processes outside. Without Landlock (older kernels, other systems) the
  worker can still read and write whatever its user can: docs/SECURITY.md says so.

Invariants:
- The request travels as JSON on the worker's stdin (a file in the private folder); the
  worker's answer is a small JSON record it writes at the end; its output is read back through
  ``fileio.read_input`` with ``limits.output_bytes`` as the cap.
- Every failure is a ``GeError``: the worker's own one-line message with its exit code (1 bad
  input, 2 usage; anything else it reports counts as 1), or ``ResourceLimit`` (exit 3) naming
  the limit that was hit and the flag that raises it (``limits.flags``). Nothing the worker
  writes reaches the terminal unescaped (``errors.visible``) or longer than one line.
- The private folder and every process the worker started are gone when ``run_isolated``
  returns or raises (also on Ctrl-C, SIGTERM or SIGHUP in the parent).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GeError, ModelError, ResourceLimit, UsageError, visible
from ..fileio import CHUNK, open_input, read_input, released, signals_held

log = logging.getLogger(__name__)

ENTRY = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
RECORD_BYTES = 1 << 16
MAX_INPUT_FILES = 100_000
PASS_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE")
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/localtime",
               "/dev/urandom", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
               "/sys/devices/system/cpu", "/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class IsolationLimits:
    """What the worker may use; ``flags`` maps a limit's name to the flag that raises it."""

    seconds: float = 600.0  # wall clock
    memory_bytes: int = 8 << 30  # RLIMIT_AS (address space)
    cpu_seconds: int | None = None  # RLIMIT_CPU; None: twice ``seconds`` (threads)
    file_bytes: int = 4 << 30  # RLIMIT_FSIZE
    open_files: int = 1024  # RLIMIT_NOFILE
    processes: int = 256  # RLIMIT_NPROC
    output_bytes: int = (2 << 30) - 1  # the result read back (protobuf's limit)
    input_bytes: int = 8 << 30  # the copied inputs together
    sandbox: bool = True  # Landlock where the kernel has it
    flags: Mapping[str, str] = field(default_factory=dict)

    def worker_json(self) -> dict[str, Any]:
        """The limits the worker sets on itself."""
        cpu = self.cpu_seconds if self.cpu_seconds is not None else int(2 * self.seconds) + 1
        out = {k: v for k, v in asdict(self).items() if k != "flags"}
        return {**out, "cpu_seconds": max(1, cpu)}

    def exceeded(self, name: str, what: str) -> ResourceLimit:
        flag = self.flags.get(name)
        raise_it = f" (raise it with {flag})" if flag else ""
        return ResourceLimit(f"the isolated worker {what}{raise_it}")


def run_isolated(entry: str, request: Mapping[str, Any], *, limits: IsolationLimits,
                 inputs: Sequence[Path] = ()) -> bytes:
    """Run ``entry(request, output)`` in a limited worker process; the output file's bytes."""
    if not ENTRY.match(entry):
        raise ValueError(f"entry must be 'package.module:function', got {entry!r}")
    if "inputs" in request:
        raise ValueError("the request key 'inputs' is reserved for the copied input paths")
    with _private_folder() as folder:
        home = folder / "home"
        home.mkdir()
        copies = _copy_inputs(inputs, folder / "inputs", limits.input_bytes)
        output, record = folder / "output", folder / "record.json"
        job = {"entry": entry, "request": {**request, "inputs": [str(c) for c in copies]},
               "output": str(output), "record": str(record), "limits": limits.worker_json(),
               "read": _read_roots(), "write": [str(folder), "/dev/null"]}
        (folder / "job.json").write_text(json.dumps(job, allow_nan=False))
        code = _run_worker(folder, home, limits)
        answer = _record(record)
        _raise_for(code, answer, limits)
        return read_input(output, limit=limits.output_bytes, what="the isolated worker's output",
                          kind=ResourceLimit, label="the isolated worker's output")


@contextlib.contextmanager
def _private_folder() -> Iterator[Path]:
    with signals_held():  # no signal between creating the folder and the ``try``
        folder = Path(tempfile.mkdtemp(prefix="gerules-isolate-"))  # 0700, unpredictable name
        try:
            with released():
                yield folder
        finally:
            _remove_tree(folder)


def _remove_tree(folder: Path) -> None:
    """Remove ``folder`` even when the worker left unreadable or read-only folders in it."""

    def retry(func: Any, path: str, _exc: BaseException) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)

    if sys.version_info >= (3, 12):
        shutil.rmtree(folder, onexc=retry)
    else:
        shutil.rmtree(folder, onerror=lambda f, p, e: retry(f, p, e[1]))


# ----------------------------------------------------------------------------- inputs


def _copy_inputs(inputs: Sequence[Path], folder: Path, budget: int) -> list[Path]:
    folder.mkdir()
    left = [budget]
    copies = []
    for k, source in enumerate(inputs):
        slot = folder / str(k)
        slot.mkdir()
        target = slot / (Path(source).name or "input")
        if Path(source).is_dir() and not Path(source).is_symlink():
            _copy_tree(Path(source), target, left, [0])
        else:
            _copy_file(Path(source), target, left, str(source))
        copies.append(target)
    return copies


def _copy_file(source: Path, target: Path, left: list[int], label: str) -> None:
    fd = open_input(source, what="an input file", label=label)
    try:
        size = os.fstat(fd).st_size
        if size > left[0]:
            raise _input_budget(label)
        with open(target, "xb") as out:
            while chunk := os.read(fd, CHUNK):
                left[0] -= len(chunk)
                if left[0] < 0:
                    raise _input_budget(label)
                out.write(chunk)
    except OSError as e:
        raise ModelError(f"cannot copy for the isolated worker: {e.strerror or e}",
                         file=label) from None
    finally:
        os.close(fd)


def _copy_tree(source: Path, target: Path, left: list[int], count: list[int]) -> None:
    """Copy a folder of regular files and folders; links and special files are refused."""
    target.mkdir()
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        count[0] += 1
        if count[0] > MAX_INPUT_FILES:
            raise ResourceLimit(f"more than {MAX_INPUT_FILES} files", file=str(source))
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            _copy_tree(Path(entry.path), target / entry.name, left, count)
        elif stat.S_ISREG(mode):
            _copy_file(Path(entry.path), target / entry.name, left, entry.path)
        else:
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
            raise ModelError(f"is {kind}; a model folder holds only files and folders",
                             file=entry.path)


def _input_budget(label: str) -> ResourceLimit:
    return ResourceLimit("the inputs of the isolated worker are over their size budget",
                         file=label)


# ----------------------------------------------------------------------------- the worker


def _read_roots() -> list[str]:
    """What the worker may read: Python, the packages it imports, the system libraries."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             *SYSTEM_READ, *(p for p in sys.path if p and os.path.isdir(p))}
    for name in ("gerules", "gerules.engine", "gerules.grammar", "gerules.rules"):
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            roots.update(spec.submodule_search_locations or () if spec else ())
    return sorted(os.path.realpath(r) for r in roots)


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _environment(home: Path) -> dict[str, str]:
    env = {"PATH": os.defpath, "HOME": str(home), "TMPDIR": str(home), "TMP": str(home),
           "TEMP": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    return env


def _run_worker(folder: Path, home: Path, limits: IsolationLimits) -> int:
    boot = ("import sys; sys.path.append(sys.argv[1]); "
            "from gerules.frontends.worker import main; sys.exit(main())")
    log_path = folder / "worker.log"
    with open(folder / "job.json", "rb") as stdin, open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", boot, _package_root()],
            stdin=stdin, stdout=out, stderr=subprocess.STDOUT, cwd=home,
            env=_environment(home), start_new_session=True, close_fds=True)
    try:
        return proc.wait(timeout=limits.seconds)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        raise limits.exceeded("seconds", f"ran longer than {limits.seconds:g} s") from None
    finally:
        _kill_group(proc.pid)  # whatever it started goes too
        if proc.returncode is None:
            proc.wait()
        _log_tail(log_path)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _log_tail(path: Path) -> None:
    if log.isEnabledFor(logging.DEBUG):
        with contextlib.suppress(OSError, GeError):
            text = read_input(path, limit=1 << 20).decode("utf-8", "replace")[-4000:]
            log.debug("isolated worker output:\n%s", visible(text, keep_newlines=True))


def _record(path: Path) -> dict[str, Any]:
    """The worker's answer; ``{}`` when it wrote none (it was killed) or wrote nonsense."""
    try:
        data = json.loads(read_input(path, limit=RECORD_BYTES))
    except (GeError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


_SIGNAL_LIMITS = {signal.SIGXCPU: ("cpu_seconds", "used up its CPU time"),
                  signal.SIGXFSZ: ("file_bytes", "tried to write a file over its size limit")}
_RECORD_LIMITS = {"memory": ("memory_bytes", "ran out of its memory limit"),
                  "file": ("file_bytes", "tried to write a file over its size limit"),
                  "files": ("open_files", "opened too many files"),
                  "processes": ("processes", "started too many processes")}


def _raise_for(code: int, answer: Mapping[str, Any], limits: IsolationLimits) -> None:
    sandbox = answer.get("sandbox")
    if isinstance(sandbox, str):
        log.info("isolated worker sandbox: %s", visible(sandbox[:200]))
    if code == 0 and answer.get("ok") is True:
        return
    limit = answer.get("limit")
    if isinstance(limit, str) and limit in _RECORD_LIMITS:
        name, what = _RECORD_LIMITS[limit]
        raise limits.exceeded(name, what)
    if code < 0:
        if -code in _SIGNAL_LIMITS:
            name, what = _SIGNAL_LIMITS[signal.Signals(-code)]
            raise limits.exceeded(name, what)
        if -code == signal.SIGKILL:  # the CPU hard limit, or the kernel's OOM killer
            raise limits.exceeded("memory_bytes", "was killed (out of memory or CPU time)")
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = str(-code)
        raise ModelError(f"the isolated worker crashed (signal {sig})")
    error = answer.get("error")
    if not isinstance(error, dict):
        raise ModelError(f"the isolated worker failed without saying why (exit {code})")
    raise _worker_error(error)


def _worker_error(error: Mapping[str, Any]) -> GeError:
    def text(key: str, limit: int = 500) -> str | None:
        value = error.get(key)
        return visible(" ".join(value.split()))[:limit] if isinstance(value, str) else None

    kinds: dict[object, type[GeError]] = {2: UsageError, 3: ResourceLimit}
    kind = kinds.get(error.get("exit_code"), ModelError)
    return kind(text("message", 2000) or "the isolated worker failed", file=text("file"),
                node=text("node"), op=text("op"), tensor=text("tensor"))
