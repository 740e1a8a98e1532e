"""The distinct values of an integer array, as ``np.unique`` gives them, by a sort or a table of all values.

numpy 2.x's ``np.unique`` without ``return_*`` hashes every value and then sorts the distinct ones: on int
arrays with many distinct values that is 4-8x slower than one sort (1 million values among 100,000: 0.42 s
against 0.08 s on one core), and its sort-based path with ``return_inverse`` sorts twice. Both the automata
and the index build (which may import this module, not the other way round) use :func:`unique`.
"""

from __future__ import annotations

import numpy as np

#: A table of all values from the smallest to the largest is used instead of a sort when that range is at
#: most this many times the number of values (and the array has at least :data:`TABLE_MIN` values).
TABLE_PER_VALUE = 4
TABLE_MIN = 1024
#: Rows whose packed key has at most this many bits are told apart by a table of all keys, not by a sort.
DENSE_BITS = 20


def unique(values: np.ndarray, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False):
    """The sorted distinct values of ``values`` (any integer array, flattened) and, as asked, the index of each
    one's first occurrence (int64), each value's index among them (int64, the shape of ``values``) and each
    one's count (int64): exactly what ``np.unique(values, return_index=..., return_inverse=...,
    return_counts=...)`` returns (a bare array when nothing else is asked, else a tuple in that order).

    Values within a range of at most :data:`TABLE_PER_VALUE` x their number are marked in a table of that
    range (no sort; not for ``return_index``, whose first occurrences need a stable sort); others are sorted
    once (``argsort``, stable when ``return_index`` is asked) and told apart by their neighbours.

    Raises:
        TypeError: ``values`` is not an integer or bool array (floats would need NaN handling).
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iub":
        raise TypeError(f"unique takes integer arrays, not {arr.dtype}")
    flat = arr.reshape(-1)
    n = len(flat)
    if n >= TABLE_MIN and not return_index and (flat.dtype.kind == "i" or flat.dtype.kind == "u" and flat.dtype.itemsize < 8):
        lo, hi = int(flat.min()), int(flat.max())
        if hi - lo < TABLE_PER_VALUE * n:
            return _by_table(flat, lo, hi, arr.shape, return_inverse, return_counts)
    if not (return_index or return_inverse):
        ordered = np.sort(flat)
        first = _firsts(ordered)
        uniq = ordered[first]
        return (uniq, _counts(first, n)) if return_counts else uniq
    order = np.argsort(flat, kind="stable" if return_index else "quicksort")
    ordered = flat[order]
    first = _firsts(ordered)
    out = [ordered[first]]
    if return_index:
        out.append(order[first].astype(np.int64))
    if return_inverse:
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.cumsum(first) - 1
        out.append(inverse.reshape(arr.shape))
    if return_counts:
        out.append(_counts(first, n))
    return tuple(out)


def _firsts(ordered: np.ndarray) -> np.ndarray:
    """Bool (n,): where a sorted array's value differs from the one before it (the first always)."""
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def _counts(first: np.ndarray, n: int) -> np.ndarray:
    starts = np.flatnonzero(first)
    return np.diff(starts, append=n).astype(np.int64)


def _by_table(flat: np.ndarray, lo: int, hi: int, shape: tuple, return_inverse: bool, return_counts: bool):
    """:func:`unique` by a table of the range [``lo``, ``hi``]: which values are present, each one's rank."""
    offset = flat.astype(np.int64) - lo
    if return_counts:
        count = np.bincount(offset, minlength=hi - lo + 1)
        present = np.flatnonzero(count)
    else:
        mark = np.zeros(hi - lo + 1, dtype=bool)
        mark[offset] = True
        present = np.flatnonzero(mark)
    out = [(present + lo).astype(flat.dtype)]
    if return_inverse:
        rank = np.empty(hi - lo + 1, dtype=np.int64)
        rank[present] = np.arange(len(present))
        out.append(rank[offset].reshape(shape))
    if return_counts:
        out.append(count[present].astype(np.int64))
    return out[0] if len(out) == 1 else tuple(out)


def unique_rows(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``m`` (int (n, c)), sorted lexicographically, and each row's index among them
    (int64 (n,)): the rows and the inverse of ``np.unique(m, axis=0, return_inverse=True)``, rows as int64.

    Each column is offset by its smallest value and the rows packed into one int64 key where their bits fit
    in 62 (a 1-D sort: ~40x faster than ``np.unique(axis=0)`` on 20 million rows; no sort at all within
    :data:`DENSE_BITS`), else hashed to one uint64 each and checked exactly (a collision falls back to
    ``np.unique(axis=0)``).
    """
    m = np.asarray(m, dtype=np.int64)
    n, c = m.shape
    if n == 0:
        return m.reshape(0, c), np.zeros(0, dtype=np.int64)
    lo = m.min(axis=0)
    span = m.max(axis=0) - lo
    bits = [max(int(v).bit_length(), 1) for v in span.tolist()]
    if sum(bits) > 62:  # hashed to one uint64 per row, checked exactly, then sorted
        rows, inverse = distinct_inverse(m)
        order = np.lexsort(rows.T[::-1])
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return rows[order], rank[inverse]
    shifts = np.concatenate([np.cumsum(bits[::-1])[::-1][1:], [0]]).astype(np.int64)  # the first column highest
    key = ((m - lo) << shifts).sum(axis=1)
    if sum(bits) <= DENSE_BITS:  # no sort: mark the keys present in a table of all keys
        present = np.zeros(1 << sum(bits), dtype=bool)
        present[key] = True
        keys = np.flatnonzero(present)
        inverse = (np.cumsum(present) - 1)[key]
    else:
        keys, inverse = unique(key, return_inverse=True)
    rows = ((keys[:, None] >> shifts) & ((np.int64(1) << np.asarray(bits, dtype=np.int64)) - 1)) + lo
    return rows, inverse.reshape(-1)  # keys in order are rows in lexicographic order: no lexsort


def distinct_inverse(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``m`` (any 64-bit integer matrix (n, c)) in no particular order, and each row's
    index among them (int64 (n,)): rows hashed to one uint64 each (a matrix-vector product with random odd
    multipliers), told apart by :func:`unique`, and checked exactly (a hash collision falls back to
    ``np.unique(axis=0)``)."""
    m = np.ascontiguousarray(m)
    if len(m) == 0:
        return m, np.zeros(0, dtype=np.int64)
    mult = np.random.default_rng(0x5EED).integers(1, 2**63, size=m.shape[1], dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        h = (m.view(np.uint64) * mult).sum(axis=1, dtype=np.uint64)
    _, first, inverse = unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(m[first[inverse]], m):
        rows, inverse = np.unique(m, axis=0, return_inverse=True)
        return rows, inverse.reshape(-1).astype(np.int64)
    return m[first], inverse.astype(np.int64)
