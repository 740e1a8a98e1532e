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
    if len(src) <= SMALL_EDGES:  # a queue in Python: scipy's checks cost more than a small search
        order = np.argsort(dst, kind="stable")
        pred, at = src[order].tolist(), np.searchsorted(dst[order], np.arange(n + 1)).tolist()
        alive = np.zeros(n, dtype=bool)
        seen = bytearray(n)
        queue = acc.tolist()
        for a in queue:
            seen[a] = 1
        for q in queue:  # grows while read
            for p in pred[at[q] : at[q + 1]]:
                if not seen[p]:
                    seen[p] = 1
                    queue.append(p)
        alive[queue] = True
        return alive
    rows = np.concatenate([dst, np.full(len(acc), n, dtype=np.int64)])  # reversed; a repeated edge is summed
    cols = np.concatenate([src, acc])
    graph = csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(n + 1, n + 1))
    alive = np.zeros(n + 1, dtype=bool)
    alive[breadth_first_order(graph, n, directed=True, return_predecessors=False)] = True
    return alive[:n]


def reachable(transitions: np.ndarray, start: int) -> np.ndarray:
    """Bool (states,): the states reachable from ``start`` (it included), in no order: a queue in Python over
    each state's targets (one per run of bytes to the same target) up to :data:`SMALL_EDGES` of them, else one
    breadth-first search of ``scipy.sparse.csgraph`` (as :func:`coreachable`, forwards)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    limits.tick()
    n = transitions.shape[0]
    keep = transitions >= 0
    keep[:, 1:] &= transitions[:, 1:] != transitions[:, :-1]  # a run of bytes to one target: its first byte
    src, byte = np.nonzero(keep)  # by source state
    dst = transitions[src, byte].astype(np.int64)
    seen = np.zeros(n, dtype=bool)
    if len(src) <= SMALL_EDGES:
        at, succ = np.searchsorted(src, np.arange(n + 1)).tolist(), dst.tolist()
        mark = bytearray(n)
        mark[start] = 1
        queue = [start]
        for q in queue:  # grows while read
            for t in succ[at[q] : at[q + 1]]:
                if not mark[t]:
                    mark[t] = 1
                    queue.append(t)
        seen[queue] = True
        return seen
    graph = csr_matrix((np.ones(len(src), dtype=np.int32), (src, dst)), shape=(n, n))
    seen[breadth_first_order(graph, start, directed=True, return_predecessors=False)] = True
    return seen


def bfs_order(transitions: np.ndarray, start: int) -> np.ndarray:
    """The states reachable from ``start`` (int64 array, ``start`` first) in breadth-first order, each level
    in (parent order, byte) order. With at most :data:`SMALL_EDGES` transitions, one queue in Python over
    each state's distinct targets in byte order (the order a level-by-level search gives); else level by
    level in numpy (~15 us a level: cheaper for large automata, dearer for small ones with long chains)."""
    live = np.flatnonzero(transitions.reshape(-1) >= 0)
    if len(live) <= SMALL_EDGES:
        return _bfs_queue(transitions, start, live)
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


#: The most live transitions (entries of the table that are not -1) for which :func:`bfs_order` and
#: :func:`coreachable` search with a queue in Python: on the automata a schema's joins minimize (a median of
#: 29 states), 5x faster than numpy level by level; at 75,000 transitions (jscsrc's 39,837 states) 2.5x slower.
SMALL_EDGES = 16384


def _bfs_queue(transitions: np.ndarray, start: int, live: np.ndarray) -> np.ndarray:
    """:func:`bfs_order` by one queue: ``live`` (int64), the flat indices of ``transitions``' live entries."""
    limits.tick()
    n, width = transitions.shape
    target = transitions.reshape(-1)[live].astype(np.int64)
    row = live // width
    _, first = unique(row * n + target, return_index=True)  # a row's first entry to each target
    first = np.sort(first)  # by row, then byte (class)
    at = np.searchsorted(row[first], np.arange(n + 1)).tolist()
    targets = target[first].tolist()
    seen = bytearray(n)
    seen[start] = 1
    order = [start]
    for q in order:  # grows while read
        for t in targets[at[q] : at[q + 1]]:
            if not seen[t]:
                seen[t] = 1
                order.append(t)
    return np.asarray(order, dtype=np.int64)
