"""compiler/automata/unique.py: the same values, first indices, inverse and counts as np.unique, exactly."""

import numpy as np
import pytest

from callmaybe.compiler.automata.unique import TABLE_MIN, unique, unique_rows

FLAGS = [dict(return_index=i, return_inverse=v, return_counts=c) for i in (False, True) for v in (False, True)
         for c in (False, True)]


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert isinstance(got, np.ndarray) and not isinstance(got, tuple)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def _cases():
    rng = np.random.default_rng(7)
    yield np.zeros(0, dtype=np.int64)
    yield np.zeros(0, dtype=np.int32)
    yield np.array([5], dtype=np.int32)
    yield np.array([3, 1, 3, 2, 1, 3], dtype=np.int64)
    yield np.array([-4, 9, -4, 0, 9], dtype=np.int16)
    yield np.array([True, False, True])
    yield rng.integers(0, 50, 300)  # small: sorted
    yield rng.integers(-100, 100, TABLE_MIN + 5).astype(np.int32)  # dense range: the table
    yield rng.integers(0, 10**12, 5000)  # wide range: sorted
    yield rng.integers(0, 2**64 - 1, 3000, dtype=np.uint64, endpoint=True)  # near 2**64: sorted
    yield rng.integers(0, 60000, 4000).astype(np.uint16)
    yield rng.integers(0, 30, (40, 50)).astype(np.int64)  # 2-D: flattened, inverse keeps the shape
    yield np.full(2000, 7, dtype=np.int64)


@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: "".join(k[7] for k, v in f.items() if v) or "plain")
def test_unique_equals_numpy(flags):
    for values in _cases():
        _same(unique(values, **flags), np.unique(values, **flags))


def test_unique_exact_small():
    values, first, inverse, counts = unique(np.array([3, 1, 3, 2, 1, 3]), True, True, True)
    assert values.tolist() == [1, 2, 3]
    assert first.tolist() == [1, 3, 0]
    assert inverse.tolist() == [2, 0, 2, 1, 0, 2]
    assert counts.tolist() == [2, 1, 3]


def test_unique_refuses_floats():
    with pytest.raises(TypeError, match="unique takes integer arrays, not float64"):
        unique(np.array([1.0, np.nan]))


def _rows_cases():
    rng = np.random.default_rng(11)
    yield np.zeros((0, 3), dtype=np.int64)
    yield np.array([[2, -1], [0, 5], [2, -1], [-1, 7]], dtype=np.int32)  # negatives: offset per column
    yield rng.integers(-1, 4, (500, 3)).astype(np.int32)  # within DENSE_BITS: the table
    yield rng.integers(-1, 3000, (4000, 4))  # 48 bits: packed and sorted
    yield rng.integers(-(2**40), 2**40, (300, 3))  # 123 bits: hashed
    yield np.full((50, 2), -1, dtype=np.int64)


def test_unique_rows_equals_numpy():
    for m in _rows_cases():
        rows, inverse = unique_rows(m)
        want_rows, want_inverse = np.unique(m, axis=0, return_inverse=True)
        assert rows.dtype == np.int64 and inverse.dtype == np.int64
        assert rows.tolist() == want_rows.tolist()
        assert inverse.tolist() == want_inverse.reshape(-1).tolist()


def test_unique_rows_exact_small():
    rows, inverse = unique_rows(np.array([[2, -1], [0, 5], [2, -1], [-1, 7]]))
    assert rows.tolist() == [[-1, 7], [0, 5], [2, -1]]
    assert inverse.tolist() == [2, 1, 2, 0]
