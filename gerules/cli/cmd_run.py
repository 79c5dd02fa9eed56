"""``ge-rewrite run MODEL``: run a model on given or random inputs and print its outputs.

Invariants:
- The loader is chosen by the model file's suffix from ``LOADERS``; a suffix it does not know
  goes to the ONNX loader, whose format sniffing names what the file really is. A new model
  format (``.om``) plugs in by adding one entry that returns a ``Runnable``.
- Inputs named with ``--input NAME=FILE.npy`` are read from files; every other input without
  an initializer default is drawn at random from ``--seed`` (see ``feeds``).
- stdout gets one table row per output: name, shape, dtype, sum and a short hash
  (``checksum``); nothing else goes to stdout, so runs can be compared with ``diff``.
- ``--output-dir DIR`` is created when missing, but only once the model has run; each output
  goes to a visible ``<name>.npy`` (``file_names``). All files are written to temporary files
  first and renamed together at the end (``fileio.all_or_none``), so a failure leaves no new
  or partial file behind and no existing file replaced; an existing target that is not a
  regular file is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..build import check_budget
from ..errors import GeError, ModelError, UsageError, visible
from ..fileio import all_or_none, atomic_write, check_output_path, output_folder
from ..ir.dims import symbol_sizes
from ..ir.graph import Value
from ..onnx_io import load_model
from ..runtime import feeds
from ..runtime.executor import Executor
from . import options

log = logging.getLogger(__name__)

RunFn = Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass(frozen=True, slots=True)
class Runnable:
    """A loaded model: the inputs to feed (those without defaults) and how to run it."""

    inputs: tuple[Value, ...]
    outputs: tuple[str, ...]
    run: RunFn
    gears: tuple[Mapping[str, int], ...] = ()  # the compiled dims of a .om with several
    ranges: tuple[Mapping[str, tuple[int, int]], ...] = ()  # its range buckets, if any
    run_many: Callable[[Sequence[Mapping[str, np.ndarray]]], list[dict[str, np.ndarray]]] | None \
        = None  # micro-batches through a pipelined .om's stages


def load_onnx(path: Path, args: argparse.Namespace) -> Runnable:
    budgets = options.budgets(args)
    graph = load_model(path, budgets=budgets)
    try:  # a tensor over the budget (a ConstantOfShape bomb) is refused before anything runs
        check_budget(graph, budgets)
    except GeError as e:
        raise e.with_place(file=str(path)) from None
    required = tuple(v for v in graph.inputs if v.name not in graph.initializers)
    return Runnable(required, graph.output_names, Executor(graph, budgets=budgets).run)


def load_om(path: Path, args: argparse.Namespace) -> Runnable:
    """A compiled offline model; it runs in its planned arena (``gerules.runtime.model``), or
    with ``--devices K`` as a pipeline of K stages (``gerules.runtime.pipeline``)."""
    from ..runtime.model import Model

    devices = getattr(args, "devices", 1)
    if devices > 1:
        return _load_pipeline(path, args, devices)
    if getattr(args, "ray_address", None):
        raise UsageError("--ray_address needs --devices K (a model compiled with --partitions)")
    model = Model.load(path, streams=getattr(args, "streams", None),
                       budgets=options.budgets(args))
    inputs = tuple(Value.of(d.name, d.dtype, d.shape) for d in model.inputs)
    ranges = tuple(v.ranges for v in model.variants if v.ranges)
    gears = (tuple(v.dims for v in model.variants)
             if len(model.variants) > 1 and not ranges else ())
    return Runnable(inputs, tuple(d.name for d in model.outputs), model.run, gears, ranges)


def _load_pipeline(path: Path, args: argparse.Namespace, devices: int) -> Runnable:
    from ..runtime.pipeline import PipelineModel

    model = PipelineModel.load(path, devices=devices, backend=args.backend,
                               ray_address=args.ray_address, streams=args.streams,
                               budgets=options.budgets(args))
    _OPEN.append(model)
    inputs = tuple(Value.of(d.name, d.dtype, d.shape) for d in model.inputs)
    log.info("running %s on %d devices (%s backend)", path, devices, model.backend)
    return Runnable(inputs, tuple(d.name for d in model.outputs), model.run,
                    run_many=model.run_many)


_OPEN: list[Any] = []  # pipelines to close when the command ends (their actors and cluster)

# Model loaders by file suffix (lower case). The first entry is the fallback.
LOADERS: dict[str, Callable[[Path, argparse.Namespace], Runnable]] = {
    ".onnx": load_onnx,
    ".om": load_om,
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="run a model on given or random inputs",
                       description="Run a model and print each output's shape and checksum.")
    p.add_argument("model", type=Path, help="model file (.onnx or a compiled .om)")
    p.add_argument("--streams", type=int, default=None, metavar="N",
                   help=".om only: run independent branches on N streams (default: as compiled)")
    p.add_argument("--devices", type=_positive, default=1, metavar="K",
                   help=".om compiled with --partitions K: run its K stages on K devices, one "
                   "Ray actor each (in this process, stage by stage, without Ray)")
    p.add_argument("--ray_address", metavar="ADDR",
                   help="--devices: join this Ray cluster (default: start a local one)")
    p.add_argument("--backend", choices=("auto", "ray", "local"), default="auto",
                   help="--devices: 'ray' (actors), 'local' (in this process) or 'auto' "
                   "(Ray when installed)")
    p.add_argument("--micro_batches", type=_positive, default=1, metavar="M",
                   help="run M micro-batches (random inputs from --seed, --seed+1, ...; a "
                   "table each); through a pipeline they overlap across the stages")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="feed input NAME from a .npy file (repeatable)")
    p.add_argument("--input-shape", "--input_shape", action="append", default=[],
                   metavar="NAME:D0,D1,...", help="shape of a random input ('a:1,3;b:2' or "
                   "repeated); symbolic dims not given are 1")
    p.add_argument("--seed", type=_seed, default=0, help="seed for random inputs (default 0)")
    p.add_argument("--output-dir", type=Path, help="save each output as <name>.npy here "
                   "(created if missing)")
    options.add_budget_flags(p)
    p.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _seed(text: str) -> int:
    value = int(text)
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"must be from 0 to 2**64 - 1, got {text[:40]}")
    return value


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    finally:
        while _OPEN:
            _OPEN.pop().close()


def _run(args: argparse.Namespace) -> int:
    model = _load(args.model, args)
    inputs = _feeds(model, args)
    if model.gears and not getattr(args, "quiet", False):
        shapes = {v.name: inputs[v.name].shape for v in model.inputs}
        gear = {k: n for k, n in symbol_sizes(model.inputs, shapes).items()
                if k in model.gears[0]}
        print(f"ge-rewrite: running the gear {feeds.gear_name(gear)} (compiled: "
              f"{'; '.join(feeds.gear_name(g) for g in model.gears)})", file=sys.stderr)
    batches = [inputs] + [_feeds(model, argparse.Namespace(**{**vars(args), "seed": args.seed + i}))
                          for i in range(1, getattr(args, "micro_batches", 1))]
    start = time.perf_counter()
    try:
        with np.errstate(all="ignore"):  # NaN/Inf are results to report, not warnings
            results = (model.run_many(batches) if model.run_many is not None
                       else [model.run(b) for b in batches])
    except GeError as e:
        raise e.with_place(file=str(args.model)) from None
    seconds = time.perf_counter() - start
    for outputs in results:
        for name, arr in outputs.items():
            if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                log.warning("output '%s' holds NaN or Inf values", name)
    log.info("ran %s: %d micro-batch(es) in %.1f ms (%.1f per s)", args.model, len(results),
             1e3 * seconds, len(results) / seconds if seconds > 0 else 0.0)
    if args.output_dir and len(results) > 1:
        raise UsageError("--output-dir saves one run's outputs; use --micro_batches 1")
    saved = save_outputs(results[0], args.output_dir) if args.output_dir else {}
    for i, outputs in enumerate(results):
        if len(results) > 1:
            print(f"micro-batch {i} (seed {args.seed + i})")
        print(format_table(outputs, saved))
    return 0


def _load(path: Path, args: argparse.Namespace) -> Runnable:
    loader = LOADERS.get(path.suffix.lower(), next(iter(LOADERS.values())))
    return loader(path, args)


def _feeds(model: Runnable, args: argparse.Namespace) -> dict[str, np.ndarray]:
    files = feeds.parse_input_specs(args.input)
    known = {v.name for v in model.inputs}
    for name in files:
        if name not in known:
            raise UsageError(f"--input {name}: the model has no input '{name}' to feed "
                             f"(inputs: {', '.join(sorted(known)) or 'none'})")
    given = {name: feeds.read_npy(p, args.max_tensor_bytes) for name, p in files.items()}
    _check_given(model.inputs, given, files)
    bound = symbol_sizes([v for v in model.inputs if v.name in given],
                   {k: a.shape for k, a in given.items()})
    if model.gears and given and feeds.pick_gear(model.gears, bound) is None:
        raise ModelError(f"{feeds.gear_name(bound)} was not compiled; the model has "
                         f"{', '.join(feeds.gear_name(g) for g in model.gears)}",
                         file=", ".join(str(p) for p in files.values()))
    rest = [v for v in model.inputs if v.name not in given]
    lows = {s: lo for s, (lo, _) in model.ranges[0].items()} if model.ranges else None
    shapes = feeds.concrete_shapes(rest, feeds.parse_shape_specs(args.input_shape),
                                   bound=bound, gears=model.gears, defaults=lows)
    if model.ranges:
        _check_ranges(model, {**symbol_sizes(rest, shapes), **bound}, files)
    drawn = feeds.random_feeds(rest, shapes, args.seed, args.max_tensor_bytes)
    return {**given, **drawn}


def _check_ranges(model: Runnable, sizes: Mapping[str, int], files: Mapping[str, Path]
                  ) -> None:
    """Sizes outside every range bucket: a usage error, or bad input when a file gave them."""
    if any(all(lo <= sizes.get(s, -1) <= hi for s, (lo, hi) in r.items())
           for r in model.ranges):
        return
    have = feeds.gear_name({s: sizes[s] for s in model.ranges[0] if s in sizes})
    spans = ", ".join(f"{s} in {lo}..{hi}" for s, (lo, hi) in sorted(
        {s: (min(r[s][0] for r in model.ranges), max(r[s][1] for r in model.ranges))
         for s in model.ranges[0]}.items()))
    message = f"{have} is outside the compiled ranges ({spans})"
    if files:
        raise ModelError(message, file=", ".join(str(p) for p in files.values()))
    raise UsageError(f"--input-shape: {message}")





def _check_given(inputs: Sequence[Value], given: Mapping[str, np.ndarray],
                 files: Mapping[str, Path]) -> None:
    """A file's array must have the input's dtype and rank and fit its static dims."""
    for v in inputs:
        if v.name not in given:
            continue
        arr = given[v.name]
        fits = arr.dtype.name == v.dtype and (
            v.shape is None or (arr.ndim == len(v.shape) and all(
                isinstance(d, str) or d == n for d, n in zip(v.shape, arr.shape, strict=True))))
        if not fits:
            raise ModelError(f"input '{v.name}' expects {v.type}, the file holds "
                             f"{arr.dtype.name}{list(arr.shape)}", file=str(files[v.name]))


def checksum(array: np.ndarray) -> tuple[str, str]:
    """``(sum, hash)``: the sum in float64 (exact count for bools) and 12 hex digits of SHA-256
    over dtype, shape and bytes."""
    if array.dtype == np.bool_:
        total = str(int(np.count_nonzero(array)))
    elif np.issubdtype(array.dtype, np.integer):
        total = str(int(np.sum(array, dtype=np.int64)))
    else:
        total = f"{float(np.sum(array, dtype=np.float64)):.9g}"
    h = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return total, h.hexdigest()[:12]


def format_table(outputs: Mapping[str, np.ndarray], saved: Mapping[str, Path]) -> str:
    rows = [("output", "shape", "dtype", "sum", "sha256", *(["file"] if saved else []))]
    for name, arr in outputs.items():
        total, digest = checksum(np.asarray(arr))
        extra = [str(saved[name])] if saved else []
        rows.append((name, str(list(arr.shape)), arr.dtype.name, total, digest, *extra))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_STEM = 200


def file_names(names: Sequence[str]) -> dict[str, str]:
    """Output name -> a safe, visible, unique ``.npy`` file name.

    Characters outside ``[A-Za-z0-9._-]`` (path separators, control characters) become ``_``;
    a name that would start with ``.`` (``.``, ``..``, ``../../x``: hidden or special files)
    gets a leading ``_``; long names are cut and made unique with a hash; a name that
    collides after all that (case-insensitively) gets ``_2``, ``_3``...
    """
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        stem = _UNSAFE.sub("_", name) or "_"
        if stem.startswith("."):
            stem = "_" + stem
        if len(stem) > MAX_STEM:
            stem = stem[:MAX_STEM - 13] + "_" + hashlib.sha256(name.encode()).hexdigest()[:12]
        candidate, k = stem, 1
        while candidate.lower() in used:
            k += 1
            candidate = f"{stem}_{k}"
        if candidate != name:
            log.warning("output '%s' is saved as %s.npy", visible(name), candidate)
        used.add(candidate.lower())
        out[name] = candidate + ".npy"
    return out


def save_outputs(outputs: Mapping[str, np.ndarray], folder: Path) -> dict[str, Path]:
    """Write every output to ``folder`` (created when missing) all or none; name -> path."""
    with all_or_none():
        out = output_folder(folder, flag="--output-dir")
        targets = {name: out / fname for name, fname in file_names(list(outputs)).items()}
        for target in targets.values():  # every target checked before anything is written
            check_output_path(target)
        for name, target in targets.items():
            array = np.asarray(outputs[name])
            atomic_write(target, _npy_writer(array))
    return targets


def _npy_writer(array: np.ndarray) -> Callable[[BinaryIO], None]:
    """A function that writes ``array`` as ``.npy`` (no pickled objects) to a file."""
    return lambda f: np.save(f, array, allow_pickle=False)
