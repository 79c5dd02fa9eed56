"""Model inputs for ``ge-rewrite run``: ``.npy`` files, ``--input-shape`` specs, random draws.

Invariants:
- ``.npy`` files are read with ``allow_pickle=False``, always; the header's shape and dtype
  are checked against the file's size before the array is read, so a lying header cannot
  make us allocate more than the file holds.
- Every bad spec or file is a ``GeError`` with one line naming the spec or file: syntax is a
  ``UsageError`` (exit 2), an unreadable or wrong file a ``ModelError`` (exit 1), an input
  over the byte budget a ``ResourceLimit`` (exit 3).
- Random inputs are a pure function of the seed and the input list: floats ~ N(0, 1),
  integers uniform in ``[0, INT_HIGH)`` (valid as small indices), bools fair coins.
- A symbolic dim takes the size given for it by a ``.npy`` file or ``--input-shape`` of any
  input, else the first compiled gear's (a ``.om`` with several), else 1 (with a warning
  naming the dim); the same name gets the same size in every input. Sizes no gear was
  compiled for are refused before anything runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..budgets import over
from ..errors import ModelError, UsageError
from ..fileio import open_input, os_reason
from ..ir import dtypes
from ..ir.graph import Value
from ..onnx_io.tensors import MAX_RANK

log = logging.getLogger(__name__)

INT_HIGH = 10
NPY_MAGIC = b"\x93NUMPY"
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}


def parse_input_specs(specs: Iterable[str]) -> dict[str, Path]:
    """``["name=file.npy", ...]`` -> ``{name: path}``."""
    out: dict[str, Path] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input '{spec}': expected NAME=FILE.npy")
        if name in out:
            raise UsageError(f"--input '{spec}': input '{name}' is given twice")
        out[name] = Path(path)
    return out


def parse_shape_specs(specs: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """``["x:1,3,224,224;mask:1,128", ...]`` (atc's ``--input_shape``) -> ``{name: dims}``."""
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        for part in filter(None, spec.split(";")):
            name, sep, dims = part.rpartition(":")
            if not sep or not name:
                raise UsageError(f"--input-shape '{part}': expected NAME:D0,D1,...")
            out[name] = _dims(dims, part)
    return out


def _dims(text: str, spec: str) -> tuple[int, ...]:
    if not text.strip():
        return ()
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        raise UsageError(f"--input-shape '{spec}': dims must be integers") from None
    if any(d < 0 for d in dims):
        raise UsageError(f"--input-shape '{spec}': dims must be >= 0")
    return dims


def read_npy(path: Path, max_bytes: int) -> np.ndarray:
    """An array from a ``.npy`` file, never unpickling, never trusting the header's size."""
    fd = open_input(path, what="a .npy file")
    try:
        with os.fdopen(os.dup(fd), "rb") as f:
            return _read_npy(f, path, max_bytes)
    except OSError as e:
        raise ModelError(f"cannot read: {os_reason(e)}", file=str(path)) from None
    finally:
        os.close(fd)


def _read_npy(f: BinaryIO, path: Path, max_bytes: int) -> np.ndarray:
    fmt = np.lib.format
    if f.read(len(NPY_MAGIC)) != NPY_MAGIC:
        raise ModelError("not a .npy file (NumPy's array format)", file=str(path))
    f.seek(0)
    try:
        version = fmt.read_magic(f)
        read_header = _HEADER_READERS.get(version)
        if read_header is None:
            raise ValueError(f"format version {version} is not supported")
        shape, fortran, dtype = read_header(f, max_header_size=10000)
    except (ValueError, SyntaxError, OverflowError, TypeError) as e:
        raise ModelError(f"bad .npy header: {e}", file=str(path)) from None
    if dtype.hasobject:
        raise ModelError("holds Python objects (a pickle), which are never loaded",
                         file=str(path))
    if dtype.name not in dtypes.ONNX_CODES or dtype.byteorder not in "=<>|":
        raise ModelError(f"bad .npy header: element type '{dtype.str}' is not one a model "
                         f"input can have ({', '.join(dtypes.ONNX_CODES)})", file=str(path))
    if not all(isinstance(d, int) and d >= 0 for d in shape) or len(shape) > MAX_RANK:
        raise ModelError(f"bad .npy header: shape {list(shape)[:8]} is not a list of at most "
                         f"{MAX_RANK} sizes >= 0", file=str(path))
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if need > max_bytes:
        raise over("tensor_bytes", need, max_bytes, "the array", file=str(path))
    left = os.fstat(f.fileno()).st_size - f.tell()
    if left < need:
        raise ModelError(f"truncated: the header promises {need} bytes, the file has {left}",
                         file=str(path))
    data = np.frombuffer(f.read(need), dtype=dtype)
    return data.reshape(shape, order="F" if fortran else "C")


def concrete_shapes(inputs: Sequence[Value], given: Mapping[str, tuple[int, ...]], *,
                    bound: Mapping[str, int] | None = None,
                    gears: Sequence[Mapping[str, int]] = (),
                    defaults: Mapping[str, int] | None = None) -> dict[str, tuple[int, ...]]:
    """A static shape per input: from ``--input-shape``, else declared dims with symbols bound
    (by ``bound``: sizes the caller already knows, e.g. from ``.npy`` files; by the specs; then
    by the first compiled gear of ``gears`` that agrees with them, by ``defaults``, else 1
    with a warning)."""
    names = {v.name for v in inputs}
    for name in given:
        if name not in names:
            raise UsageError(f"--input-shape: no model input is called '{name}' (inputs: "
                             f"{', '.join(sorted(names))})")
    bound = dict(bound or {})
    for v in inputs:
        if v.name in given:
            _bind(v, given[v.name], bound)
    if gears:
        gear = pick_gear(gears, bound)
        if gear is None:
            raise UsageError(f"--input-shape: {gear_name(bound)} was not compiled; the model "
                             f"has {', '.join(gear_name(g) for g in gears)}")
        bound = {**gear, **bound}
    bound = {**(defaults or {}), **bound}
    return {v.name: given.get(v.name) or _default_shape(v, bound) for v in inputs}


def pick_gear(gears: Sequence[Mapping[str, int]], bound: Mapping[str, int]
              ) -> Mapping[str, int] | None:
    """The first gear whose sizes agree with every dim already bound."""
    for gear in gears:
        if all(bound.get(k, n) == n for k, n in gear.items()):
            return gear
    return None


def gear_name(dims: Mapping[str, int]) -> str:
    return ",".join(f"{k}={n}" for k, n in sorted(dims.items())) or "the static shapes"


def _bind(v: Value, dims: tuple[int, ...], bound: dict[str, int]) -> None:
    if v.shape is None:
        return
    if len(v.shape) != len(dims):
        raise UsageError(f"--input-shape {v.name}: {len(dims)} dims given, the input has "
                         f"rank {len(v.shape)} ({v.type})")
    for want, got in zip(v.shape, dims, strict=True):
        if isinstance(want, int) and want != got:
            raise UsageError(f"--input-shape {v.name}: {list(dims)} does not fit {v.type}")
        if isinstance(want, str) and bound.setdefault(want, got) != got:
            raise UsageError(f"--input-shape {v.name}: dim '{want}' is {bound[want]} in "
                             f"another input but {got} here")


def _default_shape(v: Value, bound: dict[str, int]) -> tuple[int, ...]:
    if v.shape is None:
        raise UsageError(f"input '{v.name}' has unknown rank; give its shape with "
                         f"--input-shape {v.name}:D0,D1,...")
    dims = []
    for d in v.shape:
        if isinstance(d, str) and d not in bound:
            log.warning("input '%s': symbolic dim '%s' set to 1 (use --input-shape to choose)",
                        v.name, d)
            bound[d] = 1
        dims.append(bound[d] if isinstance(d, str) else d)
    return tuple(dims)


def random_feeds(inputs: Sequence[Value], shapes: Mapping[str, tuple[int, ...]], seed: int,
                 max_bytes: int) -> dict[str, np.ndarray]:
    """Seeded random arrays for ``inputs`` at ``shapes``."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in inputs:
        shape = shapes[v.name]
        need = int(np.prod(shape, dtype=object)) * np.dtype(v.dtype).itemsize
        if need > max_bytes:
            raise over("tensor_bytes", need, max_bytes, f"a random input of shape "
                       f"{list(shape)}", tensor=v.name)
        feeds[v.name] = random_array(rng, v.dtype, shape)
    return feeds


def random_array(rng: np.random.Generator, dtype: str, shape: tuple[int, ...],
                 scale: float = 1.0) -> np.ndarray:
    """Floats ~ N(0, scale), integers in ``[0, INT_HIGH)``, bools fair coins."""
    kind = np.dtype(dtype).kind
    if kind == "f":
        return (rng.standard_normal(shape) * scale).astype(dtype) if scale != 1.0 else \
            rng.standard_normal(shape).astype(dtype)
    if kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, INT_HIGH, size=shape).astype(dtype)
