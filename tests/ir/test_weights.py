"""Weights: ``content_key`` (one SHA-256 per read-only weight, reused by every caller, and
only for weights whose fingerprint equals another's), deferred constants (typed and compared
without being computed) and the pages of mapped weights given back."""

from __future__ import annotations

import gc
import hashlib
import mmap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from gerules.fileio import map_input
from gerules.ir import weights as weights_module
from gerules.ir.layout import kept
from gerules.ir.weights import (
    CACHE_LINE,
    Deferred,
    aligned,
    content_key,
    fingerprint,
    mapping_of,
    packed,
    release,
    same,
    unique_arrays,
)
from gerules.terms.tensor import ConstTensor


def _sha(a: np.ndarray) -> str:
    h = hashlib.sha256(a.dtype.str.encode() + repr(tuple(a.shape)).encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The shape of every array actually hashed."""
    seen: list[tuple[int, ...]] = []
    real = weights_module._digest

    def counting(a: np.ndarray) -> str:
        seen.append(a.shape)
        return real(a)

    monkeypatch.setattr(weights_module, "_digest", counting)
    return seen


def test_read_only_arrays_are_hashed_once(digests: list[tuple[int, ...]]) -> None:
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a.setflags(write=False)
    keys = {content_key(a) for _ in range(3)}
    assert keys == {_sha(a)} and len(digests) == 1


def test_writeable_arrays_are_hashed_each_time(digests: list[tuple[int, ...]]) -> None:
    a = np.zeros(4, np.int64)
    first = content_key(a)
    a[0] = 1
    assert content_key(a) != first and len(digests) == 2


def test_a_freed_array_leaves_no_key_behind(digests: list[tuple[int, ...]]) -> None:
    a = np.ones(8, np.float32)
    a.setflags(write=False)
    content_key(a)
    ident = id(a)
    del a
    gc.collect()
    assert ident not in weights_module._KEYS


@pytest.mark.parametrize("array", [np.float32(3)[()], np.zeros((0, 3)),
                                   np.arange(16.0).reshape(4, 4)[:, ::2]])
def test_scalars_empty_and_strided_arrays_hash_their_content(array: np.ndarray) -> None:
    a = np.array(array)
    assert content_key(np.asarray(array)) == _sha(a)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def test_unique_arrays_hash_only_look_alikes(digests: list[tuple[int, ...]]) -> None:
    a = _frozen(np.arange(1000, dtype=np.float32))
    same = _frozen(a.copy())
    other = _frozen(np.arange(1000, dtype=np.float32) * 2)
    alike = a.copy()
    alike[1] = -1  # not among the sampled elements: the same fingerprint, other bytes
    alike = _frozen(alike)
    unique, index = unique_arrays([a, other, same, alike])
    assert [id(u) for u in unique] == [id(a), id(other), id(alike)]
    assert index[id(same)] == index[id(a)] == 0 and index[id(alike)] == 2
    assert sorted(digests) == [(1000,)] * 3  # a, same and alike; never `other`


def test_const_tensors_are_equal_by_content_only() -> None:
    a = _frozen(np.arange(1000, dtype=np.float32))
    alike = a.copy()
    alike[1] = -1
    assert ConstTensor(a) == ConstTensor(a.copy()) and hash(ConstTensor(a)) == hash(
        ConstTensor(a.copy()))
    assert ConstTensor(a) != ConstTensor(alike) and hash(ConstTensor(a)) == hash(
        ConstTensor(alike))
    fresh = np.ones(3)
    ConstTensor(fresh)
    assert not fresh.flags.writeable  # taken, not copied


# ----------------------------------------------------------------------------- deferred


def _counted(calls: list[int]):  # type: ignore[no-untyped-def]
    def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        calls.append(1)
        return a * b

    return compute


def test_a_deferred_constant_is_computed_only_when_its_bytes_are_asked_for() -> None:
    calls: list[int] = []
    w = _frozen(np.arange(12, dtype=np.float32).reshape(3, 4))
    s = _frozen(np.array([[1.0], [2.0], [3.0]], dtype=np.float32))
    d = Deferred(np.float32, (3, 4), _counted(calls), [w, s], "Mul")
    assert (d.shape, d.dtype, d.nbytes, d.ndim, d.size) == ((3, 4), np.float32, 48, 2, 12)
    fp, key = fingerprint(d), content_key(d)
    assert ConstTensor(d) == ConstTensor(d) and calls == []  # typed, keyed, compared: no work
    assert np.array_equal(d.materialize(), w * s) and calls == [1]
    assert np.array_equal(np.asarray(d), w * s) and calls == [1, 1]  # nothing kept
    assert not d.materialize().flags.writeable
    assert (fingerprint(d), content_key(d)) == (fp, key)


def test_deferred_constants_are_the_same_by_label_and_operands() -> None:
    w = _frozen(np.arange(1000, dtype=np.float32))
    copy = _frozen(w.copy())
    other = _frozen(w * 2)

    def make(a: np.ndarray, label: str = "Neg") -> Deferred:
        return Deferred(np.float32, a.shape, np.negative, [a], label)

    assert same(make(w), make(w)) and same(make(w), make(copy))  # operands by content
    assert not same(make(w), make(other)) and not same(make(w), make(w, "Abs"))
    assert not same(make(w), w)  # a deferred constant never equals an array
    assert ConstTensor(make(w)) == ConstTensor(make(copy))
    unique, index = unique_arrays([make(w), make(copy), make(other)])
    assert len(unique) == 2 and index[id(unique[0])] == 0


def test_a_deferred_constant_that_computes_another_type_is_a_bug_said_so() -> None:
    d = Deferred(np.float32, (2,), lambda: np.zeros(3, np.float32), [], "Zeros")
    with pytest.raises(AssertionError, match="declared float32"):
        d.materialize()


def test_a_graph_keeps_deferred_weights_until_materialized() -> None:
    from gerules.ir.graph import Graph, Node, TensorType, Value

    calls: list[int] = []
    w = _frozen(np.ones((2, 2), np.float32))
    d = Deferred(np.float32, (2, 2), _counted(calls), [w, w], "Mul")
    g = Graph((Node("Add", ("x", "w"), ("y",)),), (Value("x", TensorType("float32", (2, 2))),),
              (Value("y", TensorType("float32", (2, 2))),), {"w": d})
    assert g.deferred and g.initializers["w"] is d and g.type_of("w") == TensorType(
        "float32", (2, 2))
    done = g.materialized()
    assert not done.deferred and calls == [1] and np.array_equal(done.initializers["w"], w)


# ----------------------------------------------------------------------------- mapped pages


def _resident_kib(start: int, size: int) -> int:
    """Kilobytes of this process's memory resident in [start, start + size) (smaps)."""
    total = 0
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for k, line in enumerate(lines):
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if lo < start + size and start < hi:
                rss = next(x for x in lines[k + 1:] if x.startswith("Rss:"))
                total += int(rss.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc smaps")
def test_released_pages_leave_memory_and_come_back_with_the_same_bytes(
        tmp_path: Path) -> None:
    data = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)  # 4 MiB
    path = tmp_path / "w.bin"
    path.write_bytes(b"\0" * 100 + data.tobytes())
    mapped = map_input(path, limit=1 << 30)
    assert isinstance(mapped, mmap.mmap) and mapping_of(np.frombuffer(mapped, np.uint8)) is mapped
    view = np.frombuffer(memoryview(mapped)[100:], np.float32).reshape(1024, 1024)
    view.setflags(write=False)
    start = np.frombuffer(mapped, np.uint8, 1).ctypes.data
    assert np.array_equal(view, data.reshape(1024, 1024))  # touches every page
    assert _resident_kib(start, len(mapped)) >= 4000
    release(view[512:])  # the second half's pages
    assert _resident_kib(start, len(mapped)) < 2200
    release(view)
    assert _resident_kib(start, len(mapped)) < 64
    assert np.array_equal(view, data.reshape(1024, 1024))  # read again from the file
    release(data)  # not a view of a map: nothing happens
    assert np.array_equal(data, np.frombuffer(path.read_bytes()[100:], np.float32))


def _off_line(a: np.ndarray, offset: int = 4) -> np.ndarray:
    raw = np.empty(a.nbytes + 128, np.uint8)
    at = -raw.ctypes.data % CACHE_LINE + offset
    out = raw[at:at + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def test_packed_copies_start_on_cache_lines_and_keep_the_values() -> None:
    arrays = [np.arange(n, dtype=dt) for n, dt in ((3, np.float32), (17, np.int64),
                                                    (1, np.uint8), (40, np.float16),
                                                    (9, ml_dtypes.bfloat16))]
    arrays.append(np.array(["ab", "cde"]))  # a fixed-width string tensor
    copies = packed([_off_line(a) for a in arrays])
    for a, c in zip(arrays, copies, strict=True):
        assert c.ctypes.data % CACHE_LINE == 0 and not c.flags.writeable
        assert c.dtype == a.dtype
        np.testing.assert_array_equal(c, a)
    on_line = packed([arrays[0]])[0]
    assert aligned(on_line) is on_line
    moved = aligned(_off_line(arrays[1]))
    assert moved.ctypes.data % CACHE_LINE == 0
    np.testing.assert_array_equal(moved, arrays[1])


def test_a_kept_derived_weight_starts_on_a_cache_line() -> None:
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    w.flags.writeable = False
    form = kept(w, "test: transposed off a cache line", lambda: _off_line(w.T.copy()))
    assert form.ctypes.data % CACHE_LINE == 0 and not form.flags.writeable
    np.testing.assert_array_equal(form, w.T)
    assert kept(w, "test: transposed off a cache line", lambda: w.T.copy()) is form
