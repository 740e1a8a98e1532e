"""Walks over a transition table (int32 (states, 256) or (states, classes), -1 for no transition): the
states that can reach acceptance, and the states reachable from the start in breadth-first order. Each
round checks the compile's ``seconds`` limit (:func:`~..limits.tick`).
"""

from __future__ import annotations

import numpy as np

from .. import limits


def coreachable(transitions: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Bool (states,): the states from which an accepting state can be reached (reverse BFS, numpy only)."""
    n = transitions.shape[0]
    src, byte = np.nonzero(transitions >= 0)
    dst = transitions[src, byte].astype(np.int64)
    order = np.argsort(dst, kind="stable")
    src_by_dst = src[order]
    starts = np.searchsorted(dst[order], np.arange(n + 1))
    alive = accepting.copy()
    frontier = np.flatnonzero(alive)
    while len(frontier):
        limits.tick()
        lo, hi = starts[frontier], starts[frontier + 1]
        counts = hi - lo
        if not counts.sum():
            break
        idx = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
        preds = np.unique(src_by_dst[idx])
        frontier = preds[~alive[preds]]
        alive[frontier] = True
    return alive


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
        _, first = np.unique(targets, return_index=True)
        frontier = targets[np.sort(first)]
        seen[frontier] = True
        order.append(frontier)
    return np.concatenate(order)
