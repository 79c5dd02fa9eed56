"""``content_key``: one SHA-256 per read-only weight, reused by every caller, and only for
weights whose fingerprint equals another's (``unique_arrays``, ``ConstTensor``)."""

from __future__ import annotations

import gc
import hashlib

import numpy as np
import pytest

from gerules.ir import graph as graph_module
from gerules.ir.graph import content_key, unique_arrays
from gerules.terms.tensor import ConstTensor


def _sha(a: np.ndarray) -> str:
    h = hashlib.sha256(a.dtype.str.encode() + repr(tuple(a.shape)).encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The shape of every array actually hashed."""
    seen: list[tuple[int, ...]] = []
    real = graph_module._digest

    def counting(a: np.ndarray) -> str:
        seen.append(a.shape)
        return real(a)

    monkeypatch.setattr(graph_module, "_digest", counting)
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
    assert ident not in graph_module._KEYS


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
