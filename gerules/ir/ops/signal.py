"""Signal processing (ai.onnx): DFT, STFT, MelWeightMatrix (the windows live in
``constant``).

Invariants:
- Complex values are a last axis of 2 (real, imaginary); a last axis of 1 is a real signal.
- DFT transforms along ``axis`` (an attribute with default 1 at opset 17, an input with
  default -2 from 20) with length ``dft_length`` (padded or cut; default the axis length, or
  ``2 (n - 1)`` for an inverse one-sided transform); ``onesided`` keeps the first
  ``n // 2 + 1`` bins (inverse: takes them and gives a real signal); ``inverse`` divides by
  the length. Computed with ``numpy.fft`` (complex64, complex128 for float64 input),
  returned in the input type.
- STFT frames ``signal [batch, length, 1|2]`` every ``frame_step`` samples (frames of
  ``frame_length``, or the window's length), multiplies by ``window`` and transforms each
  frame: ``[batch, frames, bins, 2]`` (``onesided`` default 1: ``bins = n // 2 + 1``).
- MelWeightMatrix: ``[dft_length // 2 + 1, num_mel_bins]`` triangular filters evenly spaced
  on the mel scale between the two edge frequencies.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ...errors import ShapeError
from ..dtypes import from_onnx
from ..graph import TensorType
from ..registry import Call
from ._cast import cast
from ._common import UNKNOWN, Arrays, Types, at, attr, iattr, ints, need, norm_axis, schema


def _complex(x: np.ndarray) -> np.ndarray:
    """Complex values (complex64 for 32-bit floats and below, as NumPy's FFT keeps them)."""
    x64: NDArray[np.floating] = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
    if x.shape[-1] == 1:
        return x64[..., 0] + 0j
    if x.shape[-1] != 2:
        raise ShapeError(f"a signal's last axis is 1 (real) or 2 (complex), got {x.shape[-1]}")
    return x64[..., 0] + 1j * x64[..., 1]


def _split(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


def dft(x: np.ndarray, length: int | None, axis: int, inverse: bool, onesided: bool
        ) -> np.ndarray:
    """The DFT of ``x`` along ``axis`` (an axis of ``x`` without its complex last axis)."""
    a = norm_axis(axis, x.ndim)
    if a == x.ndim - 1:
        raise ShapeError("DFT: the axis must not be the last (complex) axis")
    z = _complex(x)
    n = length if length is not None else (2 * (x.shape[a] - 1) if inverse and onesided
                                           else x.shape[a])
    if inverse:
        if onesided:
            return np.fft.irfft(z, n=n, axis=a)[..., None]
        return _split(np.fft.ifft(z, n=n, axis=a))
    out = np.fft.fft(z, n=n, axis=a)
    if onesided:
        out = np.take(out, range(n // 2 + 1), axis=a)
    return _split(out)


def _dft_axis(call: Call, consts: Arrays, opset20: bool) -> int | None:
    if not opset20:
        return iattr(call, "axis", 1)
    given = at(consts, 2)
    return -2 if given is None and len(consts) < 3 else (None if given is None
                                                         else ints(given)[0])


def _dft_infer(opset20: bool):  # type: ignore[no-untyped-def]
    def infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
        x = need(at(types, 0), "DFT")
        if x.shape is None:
            return [TensorType(x.dtype, None)]
        axis = _dft_axis(call, consts, opset20)
        if axis is None or (at(types, 1) is not None and at(consts, 1) is None):
            return [TensorType(x.dtype, (UNKNOWN,) * len(x.shape))]
        a = norm_axis(axis, len(x.shape))
        inverse, onesided = iattr(call, "inverse"), iattr(call, "onesided")
        size = x.shape[a]
        length = ints(at(consts, 1))[0] if at(consts, 1) is not None else (
            2 * (size - 1) if inverse and onesided and isinstance(size, int) else size)
        if not inverse and onesided and isinstance(length, int):
            size = length // 2 + 1
        else:
            size = length
        shape = list(x.shape)
        shape[a], shape[-1] = size, 1 if inverse and onesided else 2
        return [TensorType(x.dtype, tuple(shape))]

    return infer


def _dft_kernel(opset20: bool):  # type: ignore[no-untyped-def]
    def kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
        x = need(at(inputs, 0), "DFT")
        length = at(inputs, 1)
        axis = _dft_axis(call, inputs, opset20)
        y = dft(x, None if length is None else ints(length)[0], -2 if axis is None else axis,
                bool(iattr(call, "inverse")), bool(iattr(call, "onesided")))
        return [y.astype(x.dtype)]

    return kernel


def _stft_parts(inputs: Arrays) -> tuple[np.ndarray, int, np.ndarray | None, int]:
    x, step = need(at(inputs, 0), "STFT"), ints(need(at(inputs, 1), "STFT", "frame_step"))[0]
    window, length = at(inputs, 2), at(inputs, 3)
    n = ints(length)[0] if length is not None else (window.shape[0] if window is not None
                                                     else 0)
    if n <= 0 or step <= 0:
        raise ShapeError("STFT needs a frame_length or a window, and a positive frame_step")
    return x, step, window, n


def _stft_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    x = need(at(types, 0), "STFT")
    known = [at(consts, i) for i in (1, 3)]
    win = at(types, 2)
    n = ints(known[1])[0] if known[1] is not None else (
        win.shape[0] if win is not None and win.shape else None)
    if x.shape is None or known[0] is None or not isinstance(n, int) or \
            not isinstance(x.shape[1], int):
        return [TensorType(x.dtype, (x.shape[0] if x.shape else UNKNOWN, UNKNOWN, UNKNOWN, 2))]
    frames = 1 + (x.shape[1] - n) // ints(known[0])[0]
    bins = n // 2 + 1 if iattr(call, "onesided", 1) else n
    return [TensorType(x.dtype, (x.shape[0], frames, bins, 2))]


def _stft_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    x, step, window, n = _stft_parts(inputs)
    frames = 1 + (x.shape[1] - n) // step
    idx = np.arange(frames)[:, None] * step + np.arange(n)[None, :]
    chunks = x[:, idx]  # [batch, frames, n, 1|2]
    if window is not None:
        chunks = chunks * window.astype(np.float64)[None, None, :, None]
    y = dft(chunks, n, 2, False, bool(iattr(call, "onesided", 1)))
    return [y.astype(x.dtype)]


def _mel_infer(types: Types, consts: Arrays, call: Call) -> list[TensorType]:
    bins, length = at(consts, 0), at(consts, 1)
    dtype = from_onnx(iattr(call, "output_datatype", 1))
    return [TensorType(dtype, (UNKNOWN if length is None else ints(length)[0] // 2 + 1,
                               UNKNOWN if bins is None else ints(bins)[0]))]


def _mel_kernel(inputs: Arrays, call: Call) -> list[np.ndarray]:
    bins, length, rate = (int(np.asarray(need(at(inputs, i), "MelWeightMatrix")).reshape(-1)[0])
                          for i in range(3))
    low, high = (float(np.asarray(need(at(inputs, i), "MelWeightMatrix")).reshape(-1)[0])
                 for i in (3, 4))

    def to_mel(f: float) -> float:
        return float(2595 * np.log10(1 + f / 700))

    step = (to_mel(high) - to_mel(low)) / (bins + 2)
    mels = np.arange(bins + 2) * step + to_mel(low)
    edges = (((length + 1) * (700 * (10 ** (mels / 2595) - 1))) // rate).astype(int)
    out = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        lo, mid, hi = edges[i], edges[i + 1], edges[i + 2]
        if mid == lo:
            out[mid, i] = 1
        else:
            j = np.arange(lo, mid + 1)
            out[j, i] = (j - lo) / (mid - lo)
        if hi > mid:
            j = np.arange(mid, hi)
            out[j, i] = (hi - j) / (hi - mid)
    return [cast(out.astype(np.float32), from_onnx(iattr(call, "output_datatype", 1)))]


SCHEMAS = [
    schema("DFT", 17, "input dft_length:i64?", "output", _dft_infer(False), _dft_kernel(False),
           attrs=[attr("axis", "int", 1), attr("inverse", "int", 0), attr("onesided", "int", 0)],
           doc="discrete Fourier transform along an axis (real or complex input)"),
    schema("DFT", 20, "input dft_length:i64? axis:i64?", "output", _dft_infer(True),
           _dft_kernel(True), attrs=[attr("inverse", "int", 0), attr("onesided", "int", 0)],
           doc="discrete Fourier transform along an axis given as an input"),
    schema("STFT", 17, "signal frame_step:i64 window? frame_length:i64?", "output",
           _stft_infer, _stft_kernel, attrs=[attr("onesided", "int", 1)],
           doc="short-time Fourier transform of windowed frames"),
    schema("MelWeightMatrix", 17, "num_mel_bins dft_length sample_rate lower_edge_hertz "
           "upper_edge_hertz", "output", _mel_infer, _mel_kernel, unit="scalar",
           attrs=[attr("output_datatype", "int", 1)],
           doc="triangular mel filter bank weights"),
]
