"""Issue 31 (tenth round): the fewest tokens to completion by one breadth-first search backwards, the same
numbers as the relaxation of every edge until nothing changes that it replaces."""

import numpy as np

from callmaybe.compiler.index.table import min_tokens_from_edges

INF = np.iinfo(np.int32).max // 2


def _relaxed(src, dst, accepting):
    """The former computation: Bellman-Ford style relaxation of every edge, vectorized."""
    dist = np.where(accepting, 0, INF).astype(np.int64)
    while True:
        cand = dist.copy()
        np.minimum.at(cand, src, dist[dst] + 1)
        if (cand == dist).all():
            return np.minimum(dist, INF).astype(np.int32)
        dist = cand


def test_exact_distances_with_loops_repeats_and_unreachable_states():
    # 0 -> 1 -> 2 (accepting), 0 -> 3 -> 3 (a loop that never accepts), 4 -> 0, 1 -> 1, 2 -> 0 repeated
    src = np.array([0, 1, 0, 3, 4, 1, 2, 2])
    dst = np.array([1, 2, 3, 3, 0, 1, 0, 0])
    accepting = np.array([False, False, True, False, False])
    got = min_tokens_from_edges(src, dst, accepting)
    assert got.dtype == np.int32 and got.tolist() == [2, 1, 0, INF, 3]
    assert min_tokens_from_edges(np.zeros(0, np.int64), np.zeros(0, np.int64), accepting).tolist() == [
        INF, INF, 0, INF, INF]
    assert min_tokens_from_edges(src, dst, np.zeros(5, dtype=bool)).tolist() == [INF] * 5


def test_the_same_as_the_relaxation_on_random_graphs():
    rng = np.random.default_rng(310)
    longest = 0
    for _ in range(100):
        n = int(rng.integers(1, 80))
        e = int(rng.integers(0, 3 * n))
        src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
        accepting = rng.random(n) < 0.05
        got = min_tokens_from_edges(src, dst, accepting)
        assert got.tolist() == _relaxed(src, dst, accepting).tolist()
        longest = max(longest, int(got[got < INF].max(initial=0)))
    assert longest == 8
