"""The compiled single-pass loops (``ir.ops._jit``, the ``jit`` extra): each gives exactly what
its NumPy passes give, a runtime step takes a loop only from its second call on, and what a
loop cannot take safely (partial overlaps, strided arrays, mismatched vectors) runs NumPy.
The blocked conv's epilogue loop is checked with the blocked conv (``test_conv_blocked``)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from gerules.ir.ops import _jit, norm
from gerules.ir.registry import Call

numba = pytest.importorskip("numba", reason="the loops are compiled by Numba (the 'jit' extra)")


def _bn_inputs(shape: tuple[int, ...], dtype: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[:4] = [np.nan, np.inf, -np.inf, -0.0]  # specials pass through as NumPy passes them
    c = shape[1]
    return [x, *(rng.standard_normal(c).astype(dtype) for _ in range(3)),
            (rng.random(c) + 0.1).astype(dtype)]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("shape", [(1, 8, 5, 7), (2, 3, 11), (3, 5), (1, 64, 56, 56)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("in_place", [False, True])
def test_batch_norm_loop_gives_the_numpy_passes_bit_for_bit(
        shape: tuple[int, ...], dtype: str, in_place: bool, jit_loops: list[str]) -> None:
    ins = _bn_inputs(shape, dtype, seed=len(shape) + shape[1])
    call = Call({"epsilon": 1e-5})
    got = []
    for _ in range(2):  # the first call runs NumPy, the second the loop
        x = ins[0].copy()
        y = x if in_place else np.full_like(x, 7)
        norm._bn_out([x, *ins[1:]], call, [y])
        got.append(y)
    assert jit_loops == ["affine_channels"]
    assert _same(got[0], got[1])


def test_a_step_takes_a_loop_from_its_second_call_only(jit_loops: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    compile_ = _jit._compile
    monkeypatch.setattr(_jit, "_COMPILED", {})
    monkeypatch.setattr(_jit, "_compile", lambda name: asked.append(name) or compile_(name))
    ins = _bn_inputs((1, 4, 6, 6), "float32", seed=3)
    step = Call({"epsilon": 1e-5})
    norm._bn_out(ins, step, [np.empty_like(ins[0])])
    norm._bn_out(ins, Call({"epsilon": 1e-5}), [np.empty_like(ins[0])])  # another step
    assert asked == [], "a first call never compiles"
    norm._bn_out(ins, step, [np.empty_like(ins[0])])
    assert asked == ["affine_channels"]
    norm._bn_out(ins, step, [np.empty_like(ins[0])])
    assert asked == ["affine_channels"], "compiled once"


def test_a_loop_numba_cannot_compile_leaves_numpy_running(
        jit_loops: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A Numba that cannot type a loop (another version, say) costs nothing but the loop:
    the kernel runs its NumPy passes and the loop stays off for the process."""

    def untypable(x: np.ndarray, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> None:
        y[0, 0, 0] = object()  # no Numba types an object

    monkeypatch.setattr(_jit, "_SOURCES", {**_jit._SOURCES, "affine_channels": untypable})
    monkeypatch.setattr(_jit, "_COMPILED", {})
    monkeypatch.setattr(_jit, "_FAILED", set())
    ins = _bn_inputs((1, 4, 6, 6), "float32", seed=9)
    call = Call({"epsilon": 1e-5})
    got = []
    for _ in range(3):
        y = np.full_like(ins[0], 7)
        norm._bn_out(ins, call, [y])
        got.append(y)
    assert jit_loops == ["affine_channels"], "handed out once, then left off"
    assert _jit._FAILED == {"affine_channels"}
    assert _same(got[0], got[1]) and _same(got[0], got[2])


def test_what_a_loop_cannot_take_runs_numpy(jit_loops: list[str]) -> None:
    x = np.arange(48, dtype=np.float32).reshape(1, 4, 12)
    assert _jit.fits(x, x) and _jit.fits(x, x.copy())
    assert not _jit.fits(x[:, :, ::2], np.empty((1, 4, 6), np.float32)), "strided"
    buf = np.zeros(60, np.float32)
    assert not _jit.fits(buf[:48].reshape(x.shape), buf[12:].reshape(x.shape)), "overlap"
    ins = _bn_inputs((1, 4, 3, 4), "float32", seed=5)
    call = Call({"epsilon": 1e-5})
    short = [ins[0], ins[1][:3], *ins[2:]]  # a tampered scale: one channel short
    for _ in range(2):  # NumPy refuses it on every call; the loop never reads past it
        with pytest.raises(ValueError):
            norm._bn_out(short, call, [np.empty_like(ins[0])])


def test_switched_off_by_the_environment() -> None:
    code = ("from gerules.ir.ops import _jit; import sys; "
            "sys.exit(0 if not _jit.available() and 'numba' not in sys.modules else 1)")
    env = {**os.environ, _jit.ENV: "0"}
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_loop_gives_numpy_maximum_bit_for_bit(dtype: str, jit_loops: list[str]) -> None:
    from gerules.ir.ops.activation import relu

    rng = np.random.default_rng(2)
    x = rng.standard_normal(5000).astype(dtype)
    x[:5] = [np.nan, -0.0, 0.0, -np.inf, np.inf]
    step = Call({})
    first, second = relu(x, step=step), relu(x, step=step)
    assert jit_loops == ["relu"]
    assert _same(first, second) and _same(second, np.maximum(x, x.dtype.type(0)))
    assert not np.signbit(second[1]), "ReLU of -0 is +0, as np.maximum gives it"
    y = x.copy()
    relu(y, out=y, step=step)  # in place
    assert _same(y, second)


@pytest.mark.parametrize("act", ["", "Relu", "Clip"])
@pytest.mark.parametrize("residual", [False, True])
def test_conv_epilogue_loop_keeps_every_bit(act: str, residual: bool) -> None:
    """The epilogue loop against the NumPy passes on the values where they could part:
    NaN, infinities, signed zeros and values at the bounds, compared bit for bit."""
    from gerules.ir.ops import activation, conv_blocked

    special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 6.0, -6.0, 7.5, -1e-45, 3.0],
                       np.float32)
    rng = np.random.default_rng(1)
    y = rng.choice(special, size=(40, 32)).astype(np.float32)
    z = rng.choice(special, size=(1, 2, 40, 16)).astype(np.float32) if residual else None
    attrs = {"activation": act, "clip_min": 0.0, "clip_max": 6.0}
    want = np.empty((1, 2, 40, 1, 16), np.float32)
    with np.errstate(all="ignore"):
        conv_blocked._from_rows(y, want)
        if z is not None:
            want += z.reshape(want.shape)
        activation.activate_into(want, attrs)
    loop = _jit._compile("rows_to_blocks")
    assert loop is not None
    got = np.empty((1, 2, 40, 16), np.float32)
    lo, hi = np.float32(0), np.float32(6)
    with np.errstate(all="ignore"):
        assert loop(y, got if z is None else z, got, z is not None,
                    {"": 0, "Relu": 1, "Clip": 2}[act], lo, hi)
    assert np.array_equal(got.view(np.uint32), want.reshape(got.shape).view(np.uint32))
