"""The arrays of an index whose grammar counts long repetitions with counters (:mod:`.counters`).

The automaton is the resolved :class:`~.counters.Transducer`; the token walk runs over its expansion
(:func:`~.counters.expand`), so each allowed (state, token) pair comes with the token's effect on the
counters. Rows hold every token the automaton allows, whatever the counts; the *guarded* entries (a
token with an effect) are listed per state beside them, so that the runtime can take out those whose
guard fails at its counter values and update the counts. See :mod:`callmaybe.core.indexfile` for the
arrays.
"""

from __future__ import annotations

import numpy as np

from .counters import UNREACHABLE, Transducer
from .dfa import byte_classes
from .table import build_rows, min_tokens_from_edges
from .walk import WalkResult


def _effect_distance(tr: Transducer) -> np.ndarray:
    """int64 (S,): the fewest bytes read from each state before a transition with an effect is taken (that
    transition's byte included: 0 when the state has one); a large number where none can be."""
    has = ((tr.effect != 0) & (tr.transitions >= 0)).any(axis=1)
    dist = np.where(has, 0, 1 << 40).astype(np.int64)
    src, byte = np.nonzero(tr.transitions >= 0)
    dst = tr.transitions[src, byte].astype(np.int64)
    while True:
        cand = dist.copy()
        np.minimum.at(cand, src, dist[dst] + 1)
        if (cand == dist).all():
            return dist
        dist = cand


def token_effects(tr: Transducer, state: np.ndarray, token: np.ndarray,
                  token_bytes: tuple[bytes | None, ...] | list[bytes | None]) -> tuple[np.ndarray, ...]:
    """The effect on the counters of each walk entry (``state``, ``token``: int arrays (E,)): the composition
    of its bytes' effects, vectorized per token length. Returns int32 arrays (E, K) ``add``, ``reset``
    (0/1), ``after`` (see :data:`~.counters.Effect`) and bool (E,) ``possible`` (False where an advance
    after a reset already passes the bound: no count can take the token)."""
    table = tr.table.arrays()
    step_add, step_reset, step_after = (table[n].astype(np.int32) for n in ("effect_add", "effect_reset", "effect_after"))
    his = np.asarray(tr.table.his, dtype=np.int32)
    n, k = len(state), len(his)
    add = np.zeros((n, k), dtype=np.int32)  # int32: bounded by a counter's bound plus a token's length
    reset = np.zeros((n, k), dtype=bool)
    after = np.zeros((n, k), dtype=np.int32)
    possible = np.ones(n, dtype=bool)
    lengths = np.array([len(b) if b else 0 for b in token_bytes], dtype=np.int64)
    tok_len = lengths[token]
    near = _effect_distance(tr)[state] < tok_len  # only tokens that reach a transition with an effect
    for length in np.unique(tok_len[near]).tolist():
        rows = np.flatnonzero(near & (tok_len == length))
        ids = token[rows]
        data = np.frombuffer(b"".join(token_bytes[i] for i in ids.tolist()), dtype=np.uint8).reshape(len(rows), length)
        cur = state[rows].astype(np.int64)
        a, r, b, ok = add[rows], reset[rows], after[rows], possible[rows]
        for j in range(length):
            e = tr.effect[cur, data[:, j]]
            cur = tr.transitions[cur, data[:, j]].astype(np.int64)
            has = e != 0
            if has.any():
                sa, sr, sb = step_add[e], step_reset[e].astype(bool), step_after[e]
                ok &= ~(r & sr & (b + sa > his)).any(axis=1)
                a = np.where(r, a, a + sa)
                b = np.where(sr, sb, np.where(r, b + sa, b))
                r = r | sr
        add[rows], reset[rows], after[rows], possible[rows] = a, r, b, ok
    return add, reset.astype(np.int32), after, possible


def unique_rows(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``m`` (int64 (n, c), non-negative), sorted, and each row's index among them
    (int64 (n,)). Rows are packed into one int64 key where their values fit (a 1-D sort: ~40x faster than
    ``np.unique(axis=0)`` on 20 million rows), else compared whole."""
    n, c = m.shape
    if n == 0:
        return m.reshape(0, c), np.zeros(0, dtype=np.int64)
    bits = [max(int(v).bit_length(), 1) for v in m.max(axis=0).tolist()]
    if sum(bits) > 62:
        rows, inverse = np.unique(m, axis=0, return_inverse=True)
        return rows, inverse.reshape(-1)
    shifts = np.concatenate([[0], np.cumsum(bits[:-1])]).astype(np.int64)
    key = (m << shifts).sum(axis=1)
    keys, inverse = np.unique(key, return_inverse=True)
    rows = (keys[:, None] >> shifts) & ((np.int64(1) << np.asarray(bits, dtype=np.int64)) - 1)
    return rows, inverse.reshape(-1)


def counted_arrays(tr: Transducer, result: WalkResult, token_bytes, vocab_size: int) -> dict[str, np.ndarray]:
    """The index arrays (plain and counter arrays, :mod:`callmaybe.core.indexfile`) of ``tr`` from its walk.

    Each entry's *need* is what it takes of each counter: its advances, and (unless it resets the counter)
    the fewest advances still required after it (:meth:`~.counters.Transducer.remaining`), so that a token
    is allowed only where the value can still be completed within the bound (a maxLength string that an
    email format must still finish). An entry whose value after a reset cannot be completed is dropped; the
    fewest tokens to completion follow only tight entries (those that need no more than the state's own
    remaining advances), which stay open at every count the guards let through."""
    n, his = tr.num_states, np.asarray(tr.table.his, dtype=np.int64)
    k = len(his)
    s, t, target = result.state.astype(np.int64), result.token.astype(np.int64), result.next_state.astype(np.int64)
    add, reset, after, possible = token_effects(tr, s, t, token_bytes)
    rem = tr.remaining()
    need = add + np.where(reset > 0, 0, rem[target])  # (entries, K)
    possible &= ((need <= his) & ((reset == 0) | (after + rem[target] <= his))).all(axis=1)
    # each distinct effect once, numbered in the transducer's table (whose ids the transitions use)
    code = np.concatenate([add, reset, after], axis=1)[possible]
    codes, inverse = unique_rows(code)
    ids = np.array([tr.table.id(tuple((c, int(row[c]), bool(row[k + c]), int(row[2 * k + c]))
                                      for c in range(k) if row[c] or row[k + c])) for row in codes.tolist()],
                   dtype=np.int64)
    eff = ids[inverse.reshape(-1)] if len(codes) else np.zeros(0, dtype=np.int64)
    s, t, target, need = s[possible], t[possible], target[possible], need[possible]
    arrays = build_rows(WalkResult(s.astype(np.int32), t.astype(np.int32), target.astype(np.int32)), n, vocab_size)
    tight = (need == rem[s]).all(axis=1) | (rem[s] >= UNREACHABLE).any(axis=1)
    arrays["min_tokens"] = min_tokens_from_edges(s[tight], target[tight], tr.accepting)
    order = np.flatnonzero((eff != 0) | need.any(axis=1))  # entries are sorted by (state, token)
    needs, need_id = unique_rows(need[order])
    arrays["guard_token"] = t[order].astype(np.int32)
    arrays["guard_effect"] = eff[order].astype(np.int32)
    arrays["guard_need"] = np.asarray(need_id, dtype=np.int32).reshape(-1)
    arrays["need"] = np.asarray(needs, dtype=np.int32).reshape(-1, k)
    arrays["guard_offset"] = np.searchsorted(s[order], np.arange(n + 1)).astype(np.int64)
    width = len(tr.table.effects)
    key = (tr.transitions.astype(np.int64) + 1) * width + tr.effect  # bytes alike: same target, same effect
    byte_class, _ = byte_classes(key)
    first = np.array([int(np.flatnonzero(byte_class == c)[0]) for c in range(int(byte_class.max()) + 1)])
    arrays["byte_class"] = byte_class
    arrays["transitions"] = np.ascontiguousarray(tr.transitions[:, first]).astype(np.int32)
    arrays["trans_effect"] = np.ascontiguousarray(tr.effect[:, first]).astype(np.int32)
    arrays["accepting"] = tr.accepting.astype(np.uint8)
    arrays["counter_hi"] = his.astype(np.int32)
    arrays["counter_live"] = tr.live()
    arrays.update(tr.table.arrays())
    return arrays
