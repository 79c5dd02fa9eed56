"""Built-in functions and constants of the rule language, one table entry each.

A function is a plain Python function over ``values``; its arity and keyword names come
from its Python signature, its documentation from its docstring (``docs/RULES.md`` lists the
same table, and a test keeps the two in step). Adding a built-in is adding one function to
``_FUNCTIONS``.

Invariants:
- Built-ins are pure and never see the e-graph: a pattern variable arrives as a
  ``values.Tensor`` (its type and constant value, if known).
- Failures raise ``values.EvalError`` with a message naming the argument.
- Sizes stay bounded (``iota`` and ``reshape`` respect ``values.MAX_ELEMENTS``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GeError
from ..ir import formats as F
from ..ir.weights import materialize
from .values import MAX_ELEMENTS, DType, EvalError, Tensor, kernel, kind, same, to_array


@dataclass(frozen=True, slots=True)
class Builtin:
    name: str
    fn: Callable[..., Any]
    min_args: int
    max_args: int | None
    kwargs: tuple[str, ...]
    signature: str
    doc: str


# ---------------------------------------------------------------- helpers


def _shape_of(x: Any) -> tuple[Any, ...]:
    if isinstance(x, Tensor):
        if x.value is not None and (x.type is None or x.type.format == F.ND):
            return tuple(int(d) for d in x.value.shape)
        if x.type is None or x.type.shape is None:
            raise EvalError(f"the shape of {x.name} is unknown")
        return tuple(x.type.shape)
    if isinstance(x, tuple):
        return x
    return tuple(int(d) for d in np.shape(to_array(x)))


def _int(x: Any, what: str) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise EvalError(f"{what} must be an integer, got {kind(x)}")
    return int(x)


def _dims(x: Any) -> tuple[Any, ...]:
    """A shape argument: a tuple of dims, or the shape of a tensor."""
    return x if isinstance(x, tuple) else _shape_of(x)


# ---------------------------------------------------------------- functions


def const(*xs: Any) -> bool:
    """True when every argument has a value known at compile time."""
    return all(not isinstance(x, Tensor) or x.value is not None for x in xs)


def shape(x: Any) -> tuple[Any, ...]:
    """The shape of a tensor as a list of dims (a symbolic dim is a string)."""
    return _shape_of(x)


def rank(x: Any) -> int:
    """The number of dims of a tensor."""
    return len(_shape_of(x))


def dtype(x: Any) -> DType:
    """The element type of a tensor (compare with f32, i64, ...)."""
    if isinstance(x, Tensor):
        if x.value is not None:
            return DType(x.value.dtype.name)
        if x.type is None:
            raise EvalError(f"the dtype of {x.name} is unknown")
        return DType(x.type.dtype)
    if isinstance(x, np.ndarray):
        return DType(x.dtype.name)
    raise EvalError(f"dtype() needs a tensor, got {kind(x)}")


def numel(x: Any) -> int:
    """The number of elements of a tensor (or of a shape); the shape must be static."""
    dims = _dims(x)
    if not static(dims):
        raise EvalError(f"shape {list(dims)} is not static")
    return int(math.prod(dims))


def static(x: Any) -> bool:
    """True when every dim of a shape (or of a tensor's shape) is a known number."""
    return all(isinstance(d, (int, np.integer)) for d in _dims(x))


def broadcastable(*shapes: Any) -> bool:
    """True when the shapes (or tensors) provably broadcast together (NumPy rules)."""
    dims = [_dims(s) for s in shapes]
    width = max((len(d) for d in dims), default=0)
    for i in range(1, width + 1):
        column = {d[-i] for d in dims if len(d) >= i} - {1}
        if len(column) > 1:
            return False
    return True


def bcast(v: Any, rank: Any, *, axis: Any = 0) -> np.ndarray:
    """A 1-D value reshaped to `rank` dims, laid along `axis` (per-channel scales)."""
    a = to_array(v).reshape(-1)
    r, ax = _int(rank, "rank"), _int(axis, "axis")
    if not -r <= ax < r:
        raise EvalError(f"axis {ax} is out of range for rank {r}")
    dims = [1] * r
    dims[ax % r] = a.size
    return a.reshape(dims)


def reshape(v: Any, shape: Any) -> np.ndarray:
    """A constant with new dims (one dim may be -1)."""
    dims = tuple(_int(d, "a dim") for d in _dims(shape))
    try:
        return to_array(v).reshape(dims)
    except ValueError:
        raise EvalError(f"cannot reshape {kind(v)} to {list(dims)}") from None


def sqrt(v: Any) -> Any:
    """Square root, elementwise."""
    return _unary_math(math.sqrt, "Sqrt", v)


def exp(v: Any) -> Any:
    """e to the power v, elementwise."""
    return _unary_math(math.exp, "Exp", v)


def log(v: Any) -> Any:
    """Natural logarithm, elementwise."""
    return _unary_math(math.log, "Log", v)


def abs_(v: Any) -> Any:
    """Absolute value, elementwise."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return abs(v)
    return kernel("Abs", to_array(v))


def _unary_math(scalar: Callable[[float], float], op: str, v: Any) -> Any:
    """Python's math on a plain number (nan outside the domain), else the registry's kernel."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return scalar(float(v))
        except OverflowError:
            return math.inf
        except ValueError:  # outside the domain: what the kernel gives (log(0) = -inf)
            return -math.inf if op == "Log" and v == 0 else math.nan
    a = to_array(v)
    return kernel(op, a if a.dtype.kind == "f" else a.astype(np.float64))


def all_(v: Any) -> bool:
    """True when every element is true."""
    return bool(np.all(to_array(v)))


def any_(v: Any) -> bool:
    """True when some element is true."""
    return bool(np.any(to_array(v)))


def iota(n: Any) -> tuple[int, ...]:
    """The list [0, 1, ..., n-1] (an identity permutation)."""
    count = _int(n, "n")
    if not 0 <= count <= MAX_ELEMENTS:
        raise EvalError(f"iota({count}) is out of range")
    return tuple(range(count))


def len_(v: Any) -> int:
    """The length of a list, or the first dim of a tensor."""
    if isinstance(v, (tuple, str)):
        return len(v)
    dims = _shape_of(v)
    if not dims:
        raise EvalError("len() of a scalar")
    return _int(dims[0], "the first dim")


def approx(a: Any, b: Any, *, rtol: Any = 1e-5, atol: Any = 1e-8) -> bool:
    """True when a and b agree within rtol and atol (NumPy allclose)."""
    x, y = to_array(a), to_array(b)
    try:
        return bool(np.allclose(x, y, rtol=float(rtol), atol=float(atol)))
    except (TypeError, ValueError):
        raise EvalError(f"cannot compare {kind(a)} with {kind(b)}") from None


def min_(*vs: Any) -> Any:
    """The smallest of the arguments, or of the elements of one list."""
    return _extreme(np.min, min, vs)


def max_(*vs: Any) -> Any:
    """The largest of the arguments, or of the elements of one list."""
    return _extreme(np.max, max, vs)


def _extreme(np_fn: Callable[..., Any], py_fn: Callable[..., Any], vs: tuple[Any, ...]) -> Any:
    if not vs:
        raise EvalError("needs at least one argument")
    items = vs[0] if len(vs) == 1 else vs
    if isinstance(items, tuple) and all(isinstance(v, (int, float)) for v in items):
        if not items:
            raise EvalError("of an empty list")
        return py_fn(items)
    arr = to_array(items if not isinstance(items, tuple) else np.asarray(
        [to_array(v) for v in items]))
    if arr.size == 0:
        raise EvalError("of an empty list")
    return np_fn(arr).item()


def sum_(v: Any) -> Any:
    """The sum of the elements."""
    return np.sum(to_array(v)).item()


def prod(v: Any) -> Any:
    """The product of the elements (of a shape: its element count)."""
    return np.prod(to_array(v), dtype=None).item()


def int_(v: Any) -> int:
    """A number (or a one-element tensor) as an integer, truncating toward zero."""
    return int(_number(v))


def float_(v: Any) -> float:
    """A number (or a one-element tensor) as a float."""
    return float(_number(v))


def _number(v: Any) -> Any:
    a = to_array(v)
    if a.size != 1:
        raise EvalError(f"expected one number, got {kind(v)}")
    return a.reshape(()).item()


def cast(v: Any, dtype: Any) -> np.ndarray:
    """A constant converted to an element type: cast(0.5, dtype(x))."""
    if not isinstance(dtype, DType):
        raise EvalError(f"cast() needs an element type such as f32, got {kind(dtype)}")
    with np.errstate(all="ignore"):
        return to_array(v).astype(dtype.name)


def splat(v: Any) -> bool:
    """True when every element of a constant is the same (a broadcast scalar)."""
    a = to_array(v)
    return a.size > 0 and bool(np.all(a == a.reshape(-1)[0]))


def item(v: Any) -> Any:
    """The one value of a splat constant, as a number."""
    a = to_array(v)
    if not splat(a):
        raise EvalError(f"item() needs a constant whose elements are all equal, got {kind(v)}")
    return a.reshape(-1)[0].item()


def concat(*seqs: Any) -> tuple[Any, ...]:
    """The lists joined end to end: concat(shape(x)[:-1], [n])."""
    out: list[Any] = []
    for s in seqs:
        out.extend(s if isinstance(s, tuple) else to_array(s).reshape(-1).tolist())
    return tuple(out)


def norm_axis(axis: Any, rank: Any) -> int:
    """An axis in [-rank, rank) mapped to [0, rank)."""
    a, r = _int(axis, "axis"), _int(rank, "rank")
    if not -r <= a < r:
        raise EvalError(f"axis {a} is out of range for rank {r}")
    return a % r


def inverse(perm: Any) -> tuple[int, ...]:
    """The inverse of a permutation: inverse(p)[p[i]] == i."""
    p = [_int(i, "a permutation entry") for i in perm]
    if sorted(p) != list(range(len(p))):
        raise EvalError(f"{p} is not a permutation")
    out = [0] * len(p)
    for i, v in enumerate(p):
        out[v] = i
    return tuple(out)


def equal(a: Any, b: Any) -> bool:
    """Whole-value equality: same shape and same elements."""
    return same(a, b)


def format_(x: Any) -> str:
    """The format a tensor is held in, as GE names it: "ND", "NCHW" (a plain 4-D tensor),
    "NHWC", "NC1HWC0", "NC1HWC0_C04", "FRACTAL_Z", "FRACTAL_Z_C04", "FRACTAL_NZ"."""
    if not isinstance(x, Tensor) or x.type is None:
        raise EvalError(f"format() needs a tensor of known type, got {kind(x)}")
    return x.type.format_name


def fits(fmt: Any, *xs: Any) -> bool:
    """True when tensors can be the operands of an elementwise op computed in format fmt:
    each a single number, or of the result's rank and size along the dims fmt blocks (a
    5-D activation's channel, a fractal's last two dims); the result's shape must be one fmt
    holds (rank, static blocked dims). With one tensor: fmt can hold it."""
    if not isinstance(fmt, str) or fmt not in F.NAMES:
        raise EvalError(f"fits() needs a format name ({', '.join(F.NAMES)}), got {kind(fmt)}")
    shapes = [_shape_of(x) for x in xs]
    width = max((len(s) for s in shapes), default=0)
    out = tuple(next((s[len(s) - width + i] for s in shapes
                      if len(s) - width + i >= 0 and s[len(s) - width + i] != 1), 1)
                for i in range(width))
    try:
        stored = F.stored(fmt, width)
    except GeError:
        return False
    if F.can_hold(stored, out) is not None:
        return False
    for s in shapes:
        if all(d == 1 for d in s):
            continue  # a single number broadcasts anywhere
        if len(s) != width or any(s[a] != out[a] for a in F.blocked_dims(stored, width)):
            return False
    return True


def transdata(x: Any, fmt: Any) -> np.ndarray:
    """A constant's elements held in another format, as GE's TransData converts them at
    compile time: transdata(w, "FRACTAL_Z") (the padding is zeros)."""
    if not isinstance(x, Tensor) or x.value is None or x.type is None or x.type.shape is None:
        raise EvalError(f"transdata() needs a constant of known type, got {kind(x)}")
    if not isinstance(fmt, str):
        raise EvalError(f"transdata() needs a format name, got {kind(fmt)}")
    try:
        dst = F.stored(fmt, x.type.rank)
        shape = tuple(int(d) for d in x.type.shape)
        if math.prod(int(d) for d in F.physical_shape(shape, x.value.dtype.name, dst)) > (
                MAX_ELEMENTS):
            raise EvalError(f"transdata() would hold more than {MAX_ELEMENTS} elements")
        # a folded weight may still be deferred (in a blocked format too): computed here
        return F.transfer(materialize(x.value), x.type.format, dst, shape)
    except (GeError, ValueError, TypeError) as e:
        raise EvalError(f"transdata({x.name}, {fmt}): {e}") from None


# ---------------------------------------------------------------- tables


def _entry(fn: Callable[..., Any]) -> Builtin:
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
    keywords = tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY)
    shown = [("*" if p.kind is p.VAR_POSITIONAL else "") + p.name
             + ("" if p.default is p.empty else f"={p.default}") for p in params]
    name = fn.__name__.rstrip("_")
    return Builtin(name, fn, len(positional),
                   None if variadic else len(positional), keywords,
                   f"{name}({', '.join(shown)})", " ".join((fn.__doc__ or "").split()))


def copy_dims(target: Any, shape: Any) -> tuple[int, ...]:
    """A Reshape target (a constant, or a value computed from dims, dynamic ones included)
    with every entry that equals the input's dim at the same place replaced by 0, which
    Reshape reads as "copy that dim"; fails when no entry changes or one stays unknown."""
    if isinstance(target, Tensor) and target.value is not None:
        entries: tuple[Any, ...] = tuple(int(v) for v in target.array().reshape(-1))
    elif isinstance(target, Tensor) and target.dims is not None:
        entries = target.dims
    else:
        raise EvalError(f"the value of {kind(target)} is not known, even symbolically")
    dims = _dims(shape)
    out, changed = [], False
    for i, e in enumerate(entries):
        if i < len(dims) and e == dims[i] and e != 0:
            out.append(0)
            changed = True
        elif isinstance(e, (int, np.integer)) and not isinstance(e, bool):
            out.append(int(e))
        else:
            raise EvalError(f"target entry {i} ({e}) is neither a number nor input dim {i}")
    if not changed:
        raise EvalError("no target entry equals the input's dim at its place")
    return tuple(out)


_FUNCTIONS: list[Callable[..., Any]] = [
    const, shape, rank, dtype, numel, static, broadcastable, bcast, reshape, sqrt, exp, log,
    abs_, all_, any_, iota, len_, approx, min_, max_, sum_, prod, int_, float_, cast, splat, item,
    concat, norm_axis, inverse, equal, copy_dims, format_, fits, transdata,
]
FUNCTIONS: dict[str, Builtin] = {b.name: b for b in (_entry(fn) for fn in _FUNCTIONS)}

DTYPE_NAMES = {
    "f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32",
    "u64": "uint64", "bool": "bool",
}
CONSTANTS: dict[str, tuple[Any, str]] = {
    **{k: (DType(v), f"the {v} element type") for k, v in DTYPE_NAMES.items()},
    "pi": (math.pi, "3.14159..."),
    "inf": (math.inf, "positive infinity"),
    "nan": (math.nan, "not a number"),
}
