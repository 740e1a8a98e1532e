"""Walks over a transition table (int32 (states, 256) or (states, classes), -1 for no transition): the
states that can reach acceptance, and the states reachable from the start in breadth-first order. Each
round checks the compile's ``seconds`` limit (:func:`~..limits.tick`).
"""

from __future__ import annotations

import numpy as np

from .. import limits
from .unique import unique


def coreachable(transitions: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Bool (states,): the states from which an accepting state can be reached: one breadth-first search
    backwards from a node joined to every accepting state, over the reversed transitions,
    one per run of bytes to the same target (``scipy.sparse.csgraph``, which sums repeated edges: a
    level-by-level search in numpy paid ~50 us a level, and a chain of key bytes is hundreds of levels; a
    sort of the distinct edges ~5x what the runs cost)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    limits.tick()
    n = transitions.shape[0]
    keep = transitions >= 0
    keep[:, 1:] &= transitions[:, 1:] != transitions[:, :-1]  # a run of bytes to one target: its first byte
    src, byte = np.nonzero(keep)
    dst = transitions[src, byte].astype(np.int64)
    acc = np.flatnonzero(accepting)
    rows = np.concatenate([dst, np.full(len(acc), n, dtype=np.int64)])  # reversed; a repeated edge is summed
    cols = np.concatenate([src, acc])
    graph = csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(n + 1, n + 1))
    alive = np.zeros(n + 1, dtype=bool)
    alive[breadth_first_order(graph, n, directed=True, return_predecessors=False)] = True
    return alive[:n]


def bfs_order(transitions: np.ndarray, start: int) -> np.ndarray:
    """The states reachable from ``start`` (int64 array, ``start`` first) in breadth-first order, each level
    in (parent order, byte) order."""
    seen = np.zeros(transitions.shape[0], dtype=bool)
    seen[start] = True
    order = [np.array([start])]
    frontier = order[0]
    while len(frontier):
        limits.tick()
        targets = transitions[frontier].reshape(-1)
        targets = targets[targets >= 0]
        targets = targets[~seen[targets]]
        if not len(targets):
            break
        _, first = unique(targets, return_index=True)
        frontier = targets[np.sort(first)]
        seen[frontier] = True
        order.append(frontier)
    return np.concatenate(order)
