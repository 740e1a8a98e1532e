"""The arrays of an index whose grammar counts long repetitions with counters (:mod:`..automata.counters`).

The automaton is the resolved :class:`~..automata.counters.Transducer`; the token walk runs over it, so each allowed
(state, token) pair comes with the token's effect on the counters. Rows hold every token the automaton
allows, whatever the counts; the *guarded* entries (a token with an effect or a need) are listed per state
beside them, so that the runtime can take out those whose guard fails at its counter values and update the
counts. Identical guard lists are stored once (``state_guard``). See :mod:`callmaybe.core.indexfile` for the
arrays.

Like the rows (:mod:`.table`), the guard lists are made per source: a state walked alone from its entries,
a group member (:class:`~.walk.GroupWalk`; the walk groups a transducer's states only where their
transitions have the same effects, so a member's shared tokens have the rep's effects) from its group's
shared walk, whose entries are classed by (effect, end state): what a member needs of each counter after a
token depends on the token's effect and on the member's state it ends in only, so a member's guards are
computed per class and each distinct list is made once.

An entry's effect is carried as a number (:meth:`TokenEffects.effect_ids`: each distinct (effect so far, byte
effect) pair composed once), and what the table needs of an entry (its need, whether it is possible, guarded,
tight) is computed once per distinct (effect, target, state), not per entry and counter.
"""

from __future__ import annotations

import numpy as np

from ..automata import native
from ..automata.counters import UNREACHABLE, Transducer
from ..automata.dfa import byte_classes
from .table import RowStore, content_key, min_tokens_from_edges, unique_edges
from .uniq import unique_keys
from .walk import GroupWalk, WalkResult
from ..automata.unique import unique, unique_rows


def _effect_distance(tr: Transducer) -> np.ndarray:
    """int64 (S,): the fewest bytes read from each state before a transition with an effect is taken (that
    transition's byte included: 0 when the state has one); a large number where none can be. A breadth-first
    search backwards from those states (``scipy.sparse.csgraph``, from a virtual source one step before each;
    a relaxation of every transition per distance cost 0.2 s on JSONSchemaStore's vercel)."""
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import dijkstra

    n = tr.num_states
    has = ((tr.effect != 0) & (tr.transitions >= 0)).any(axis=1)
    src, byte = np.nonzero(tr.transitions >= 0)
    key = unique(tr.transitions[src, byte].astype(np.int64) * n + src)  # (next state, state) edges, once each
    starts = np.flatnonzero(has)
    graph = csr_array((np.ones(len(key) + len(starts)),
                       (np.concatenate([key // n, np.full(len(starts), n)]), np.concatenate([key % n, starts]))),
                      shape=(n + 1, n + 1))
    dist = dijkstra(graph, directed=True, indices=n, unweighted=True)[:n] - 1
    return np.where(np.isinf(dist), 1 << 40, dist).astype(np.int64)


def effect_classes(tr: Transducer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(byte_class, class_transitions, class_effects)`` of ``tr``: bytes alike when every state sends them
    to the same state with the same effect; uint8 (256,), int32 (S, C) and int32 (S, C)."""
    width = len(tr.table.effects)
    key = (tr.transitions.astype(np.int64) + 1) * width + tr.effect
    byte_class, _ = byte_classes(key)
    first = np.array([int(np.flatnonzero(byte_class == c)[0]) for c in range(int(byte_class.max()) + 1)])
    return (byte_class, np.take(tr.transitions, first, axis=1).astype(np.int32, copy=False),
            np.take(tr.effect, first, axis=1).astype(np.int32, copy=False))


_PADDED: dict[int, tuple[object, tuple[np.ndarray, np.ndarray]]] = {}


def token_matrix(token_bytes) -> tuple[np.ndarray, np.ndarray]:
    """(length of each token: int64 (V,); its bytes, zero-padded: uint8 (V, longest)) of a vocabulary's
    tokens (128 bytes at most for Qwen's: 19 MB). Kept per vocabulary (the last two), as the token trie is."""
    got = _PADDED.get(id(token_bytes))
    if got is not None and got[0] is token_bytes:
        return got[1]
    lengths = np.array([len(b) if b else 0 for b in token_bytes], dtype=np.int64)
    width = max(1, int(lengths.max(initial=0)))
    flat = np.frombuffer(b"".join(b.ljust(width, b"\0") if b else bytes(width) for b in token_bytes), dtype=np.uint8)
    padded = np.ascontiguousarray(flat.reshape(len(token_bytes), width).T).T  # columns contiguous
    if len(_PADDED) >= 2:
        _PADDED.clear()
    _PADDED[id(token_bytes)] = (token_bytes, (lengths, padded))
    return lengths, padded


#: The numbers of no effect and of an impossible one in :attr:`TokenEffects.rows`.
NO_EFFECT, IMPOSSIBLE = 0, 1


class TokenEffects:
    """What tokens do to the counters of ``tr``: each entry's effect, and what it needs of each counter.

    ``token_bytes``: the vocabulary's bytes per token id. ``rem``: :meth:`~..automata.counters.Transducer.remaining`.
    """

    def __init__(self, tr: Transducer, token_bytes: tuple[bytes | None, ...] | list[bytes | None]):
        self.tr = tr
        self.token_bytes = token_bytes
        self.his = np.asarray(tr.table.his, dtype=np.int64)
        table = tr.table.arrays()
        self._steps = tuple(table[n].astype(np.int32) for n in ("effect_add", "effect_reset", "effect_after"))
        self._lengths, self._bytes = token_matrix(token_bytes)
        # int32 (states * 256,), views where the transducer's tables are int32 (the C walk reads them as they are)
        self._flat_effect = np.ascontiguousarray(tr.effect, dtype=np.int32).reshape(-1)
        self._flat_trans = np.ascontiguousarray(tr.transitions, dtype=np.int32).reshape(-1)
        self._distance = _effect_distance(tr)
        self.rem = tr.remaining()
        # states alike in what they still need of every counter: the table's tightness depends on that only
        self.rem_rows, self.rem_class = unique_rows(self.rem)
        zero = np.zeros(3 * len(self.his), dtype=np.int64)
        self._ids: dict[bytes, int] = {zero.tobytes(): NO_EFFECT}
        self._row_list: list[np.ndarray] = [zero, zero]  # NO_EFFECT, IMPOSSIBLE
        self._rows: np.ndarray | None = None
        # (effect so far, byte effect) -> effect; -1 until composed. Byte effect 0 is none: the identity
        self._comp = np.full((16, len(self._steps[0])), -1, dtype=np.int64)
        self._comp[IMPOSSIBLE] = IMPOSSIBLE
        self._comp[:, 0] = np.arange(16)

    def effects(self, state: np.ndarray, token: np.ndarray) -> tuple[np.ndarray, ...]:
        """The effect on the counters of each entry (``state``, ``token``: int arrays (E,)): the composition
        of its bytes' effects. Returns int32 arrays (E, K) ``add``, ``reset`` (0/1), ``after`` (see
        :data:`~..automata.counters.Effect`) and bool (E,) ``possible`` (False where an advance after a reset already
        passes the bound: no count can take the token; its other arrays are then zero). See
        :meth:`effect_ids`."""
        eid = self.effect_ids(state, token)
        rows = self.rows[eid]
        k = len(self.his)
        return (rows[:, :k].astype(np.int32), rows[:, k : 2 * k].astype(np.int32), rows[:, 2 * k :].astype(np.int32),
                eid != IMPOSSIBLE)

    def effect_ids(self, state: np.ndarray, token: np.ndarray) -> np.ndarray:
        """int64 (E,): the number of each entry's composed effect (``state``, ``token``: int arrays (E,)) in
        :attr:`rows` (int64 (X, 3K): ``add``, ``reset``, ``after`` per counter); :data:`NO_EFFECT` for none,
        :data:`IMPOSSIBLE` where an advance after a reset already passes the bound (no count can take the
        token).

        The entries are walked byte by byte (the longest tokens first, so that the entries still reading
        bytes are a prefix), each carrying the number of its effect so far; a step composes a number with a
        byte's effect through a table of the pairs met so far, so that the work per byte is a few gathers,
        whatever the number of counters, and each distinct (effect so far, byte effect) pair is composed
        once (the counted strings of a schema make a few hundred)."""
        n = len(state)
        eid = np.zeros(n, dtype=np.int64)
        tok_len = self._lengths[token]
        rows = np.flatnonzero(self._distance[state] < tok_len)  # only tokens that reach an effect
        if not len(rows):
            return eid
        longest = int(tok_len[rows].max())
        # longest first, ties in entry order: a stable sort of small keys (a radix sort within 16 bits)
        key = longest - tok_len[rows]
        rows = rows[np.argsort(key.astype(np.uint16) if longest < 1 << 16 else key, kind="stable")]
        length = tok_len[rows]
        active = np.searchsorted(-length, -np.arange(int(length[0])), side="left")  # rows longer than j
        toks, cur = token[rows], state[rows].astype(np.int64)
        ids = np.zeros(len(rows), dtype=np.int64)
        effect, trans, column = self._flat_effect, self._flat_trans, self._bytes.T
        if self._native_walk(active.astype(np.int64), toks, cur, ids):
            eid[rows] = ids
            return eid
        for j, m in enumerate(active.tolist()):
            at = cur[:m] * 256 + column[j][toks[:m]]
            cur[:m] = trans[at]
            ids[:m] = self._compose(ids[:m], effect[at])  # byte effect 0 (none) is the identity
        eid[rows] = ids
        return eid

    def _native_walk(self, active: np.ndarray, toks: np.ndarray, cur: np.ndarray, ids: np.ndarray) -> bool:
        """:meth:`effect_ids`' walk in C (:func:`~..automata.native.effect_levels`): ``cur`` and ``ids`` (int64)
        updated in place; each level's missing pairs composed here as the numpy loop composes them (the pairs
        of the entries that need one, sorted: the same numbers). False where the library is unavailable."""
        toks = toks.astype(np.int32)
        trans, effect, column = self._flat_trans, self._flat_effect, self._bytes.T
        level = 0
        while level < len(active):
            got = native.effect_levels(active, level, toks, cur, ids, column, trans, effect, self._comp)
            if got is None:
                return False
            level, miss = got
            if len(miss):
                at = cur[miss] * 256 + column[level][toks[miss]]
                self._compose(ids[miss], self._flat_effect[at])  # adds the pairs; the level is walked again
        return True

    def _compose(self, ids: np.ndarray, e: np.ndarray) -> np.ndarray:
        """int64: the number of effect ``ids`` followed by byte effect ``e`` (int arrays), from the table
        of composed pairs, the pairs not in it composed (once each) and added."""
        if len(self._row_list) > self._comp.shape[0]:  # every number made so far has its row of the table
            old = self._comp.shape[0]
            grow = max(len(self._row_list), 2 * old) - old
            more = np.full((grow, self._comp.shape[1]), -1, np.int64)
            more[:, 0] = np.arange(old, old + grow)
            self._comp = np.concatenate([self._comp, more])
        key = ids * self._comp.shape[1] + e
        got = self._comp.reshape(-1)[key]
        miss = got < 0
        if miss.any():
            pairs = unique_keys(key[miss], self._comp.size)[0]
            pi, pe = pairs // self._comp.shape[1], pairs % self._comp.shape[1]
            k, his = len(self.his), self.his
            old = self.rows[pi]
            aa, rr, bb = old[:, :k], old[:, k : 2 * k] > 0, old[:, 2 * k :]
            step_add, step_reset, step_after = self._steps
            sa, sr, sb = (step_add[pe].astype(np.int64), step_reset[pe].astype(bool),
                          step_after[pe].astype(np.int64))
            ok = ~(rr & sr & (bb + sa > his)).any(axis=1) & (pi != IMPOSSIBLE)
            new = np.concatenate([np.where(rr, aa, aa + sa), rr | sr, np.where(sr, sb, np.where(rr, bb + sa, bb))],
                                 axis=1).astype(np.int64)
            out = np.full(len(pairs), IMPOSSIBLE, dtype=np.int64)
            for x in np.flatnonzero(ok).tolist():
                out[x] = self._intern(new[x])
            self._comp[pi, pe] = out
            got[miss] = self._comp.reshape(-1)[key[miss]]
        return got

    def _intern(self, row: np.ndarray) -> int:
        """The number of composed effect ``row`` (int64 (3K,)), added to :attr:`rows` when new."""
        key = row.tobytes()
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = len(self._row_list)
            self._row_list.append(row)
            self._rows = None
        return i

    @property
    def rows(self) -> np.ndarray:
        """int64 (X, 3K): each composed effect's ``add``, ``reset`` (0/1), ``after`` per counter (numbered by
        :meth:`effect_ids`; :data:`IMPOSSIBLE`'s row is zero)."""
        if self._rows is None:
            self._rows = np.asarray(self._row_list, dtype=np.int64).reshape(-1, 3 * len(self.his))
        return self._rows

    def needs(self, add: np.ndarray, reset: np.ndarray, after: np.ndarray, possible: np.ndarray,
              rem_target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per entry, its *need* (int64 (E, K): its advances, and unless it resets the counter the fewest
        advances still required after it, ``rem_target``: the ``rem`` of the state it leads to) and whether it
        is possible at all (bool (E,): ``possible`` from :meth:`effects`, the need within every bound, and the
        value after a reset still completable)."""
        need = add + np.where(reset > 0, 0, rem_target)
        ok = possible & ((need <= self.his) & ((reset == 0) | (after + rem_target <= self.his))).all(axis=-1)
        return need, ok

    def tight(self, need: np.ndarray, state: int | np.ndarray) -> np.ndarray:
        """bool (E,): entries that need no more than ``state`` itself (``rem``), which the fewest tokens to
        completion follow (or all, where the state cannot end)."""
        return self.tight_rem(need, self.rem[state])

    def tight_rem(self, need: np.ndarray, rem: np.ndarray) -> np.ndarray:
        """bool (E,): :meth:`tight` given the states' ``rem`` rows (int64 (E, K)) instead of the states."""
        return (need == rem).all(axis=-1) | (rem >= UNREACHABLE).any(axis=-1)


class _Numbered:
    """Distinct int rows (effect codes, needs), numbered provisionally in order of first use; :meth:`final`
    renumbers the used ones in sorted order, so that the arrays do not depend on how the walk was shared."""

    def __init__(self, width: int):
        self.width = width
        self._ids: dict[bytes, int] = {}
        self._rows: list[np.ndarray] = []

    def ids(self, rows: np.ndarray) -> np.ndarray:
        """int64 (n,): the provisional number of each of ``rows`` (int (n, width))."""
        rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1, self.width)
        if len(rows) == 0:
            return np.zeros(0, dtype=np.int64)
        distinct, inverse = unique_rows(rows)
        got = np.empty(len(distinct), dtype=np.int64)
        for j, row in enumerate(distinct):
            key = row.tobytes()
            i = self._ids.get(key)
            if i is None:
                i = self._ids[key] = len(self._rows)
                self._rows.append(row)
            got[j] = i
        return got[inverse.reshape(-1)]

    def final(self, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the used rows, sorted: int64 (m, width); remap: int64 array from provisional to final number, -1
        for a row not used)."""
        used = unique(used)
        table = np.asarray(self._rows, dtype=np.int64).reshape(-1, self.width)
        rows = table[used]
        order = np.lexsort(rows.T[::-1]) if len(rows) else np.zeros(0, dtype=np.int64)
        remap = np.full(len(table), -1, dtype=np.int64)
        remap[used[order]] = np.arange(len(used))
        return rows[order], remap


class _GuardStore:
    """Distinct guard lists (tokens sorted, with provisional effect and need numbers), numbered in order of
    first use."""

    def __init__(self):
        self._lists: dict[bytes, int] = {}
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, tok: np.ndarray, eff: np.ndarray, need: np.ndarray) -> int:
        key = content_key(tok, eff, need)
        i = self._lists.get(key)
        if i is None:
            i = self._lists[key] = len(self.parts)
            self.parts.append((tok.astype(np.int32), eff.astype(np.int64), need.astype(np.int64)))
        return i


class _Entries:
    """The possible entries of a batch (states walked alone, or the members' own walks of a group), with what
    the table needs of each, in the batch's order: ``tok`` (int32) and ``kind`` (int64: its (effect, target,
    rem row), whose ``code`` and ``need``, provisional numbers where guarded, and ``guarded``, an effect or a
    need: listed in the state's guards, :meth:`part` gathers), and the tight entries (followed by the fewest
    tokens to completion: :meth:`edges`); ``before``: int64 (E + 1,), the possible entries before each entry
    of the batch, to slice a state's (None: every entry is possible)."""

    def __init__(self, fx: TokenEffects, codes: _Numbered, needs: _Numbered, state: np.ndarray, tok: np.ndarray,
                 target: np.ndarray):
        # what the table needs of an entry depends on its (effect, target, the state's rem row) only: once each
        eid = fx.effect_ids(state, tok)
        n = fx.tr.num_states
        x = len(fx.rows)
        # (effect, target), then (that pair, the state's rem row: all that tightness asks of the state); the
        # effects numbered among those of the batch first (most entries have none), so the keys stay few
        eids, e_at = unique_keys(eid, x)
        pairs, pair = unique_keys(e_at * n + target, len(eids) * n)
        pairs = eids[pairs // n] * n + pairs % n  # (effect, target) keys again, in the same (sorted) order
        r = len(fx.rem_rows)
        kinds, inverse = unique_keys(pair * r + fx.rem_class[state], len(pairs) * r)
        k_rem, k_pair = kinds % r, pairs[kinds // r]
        k_target, k_eid = k_pair % n, k_pair // n
        k = len(fx.his)
        rows = fx.rows[k_eid]
        need, ok = fx.needs(rows[:, :k], rows[:, k : 2 * k], rows[:, 2 * k :], k_eid != IMPOSSIBLE, fx.rem[k_target])
        guarded = ((rows != 0).any(axis=1) | need.any(axis=1)) & ok
        code = np.zeros(len(kinds), dtype=np.int64)  # numbered only where listed (guarded)
        code[guarded] = codes.ids(rows[guarded])
        need_id = np.zeros(len(kinds), dtype=np.int64)
        need_id[guarded] = needs.ids(need[guarded])
        tight = fx.tight_rem(need, fx.rem_rows[k_rem])
        inverse = inverse.reshape(-1)
        # per entry only its kind: a state's codes, needs and guards are gathered when its part is asked
        self._state, self._target, self._tight = state, target, tight[inverse] & ok[inverse]
        self._guarded, self._code, self._need = guarded, code, need_id
        if ok.all():  # every entry possible (the usual case): nothing to take out
            self.tok, self.kind, self.before = tok.astype(np.int32, copy=False), inverse, None
        else:
            keep = ok[inverse]
            self.tok, self.kind = tok[keep].astype(np.int32), inverse[keep]
            self.before = np.concatenate([[0], np.cumsum(keep)]).astype(np.int64)

    def edges(self, n: int) -> np.ndarray:
        """int64 keys ``state * n + target`` of the tight entries."""
        return self._state[self._tight] * n + self._target[self._tight]

    def tokens(self, lo: int, hi: int) -> np.ndarray:
        """The tokens (int32) of the batch's entries ``lo:hi`` that are possible."""
        a, b = (lo, hi) if self.before is None else (int(self.before[lo]), int(self.before[hi]))
        return self.tok[a:b]

    def part(self, lo: int, hi: int) -> tuple[np.ndarray, ...]:
        """(tokens, codes, needs, guarded) of the batch's entries ``lo:hi`` that are possible."""
        a, b = (lo, hi) if self.before is None else (int(self.before[lo]), int(self.before[hi]))
        kind = self.kind[a:b]
        return self.tok[a:b], self._code[kind], self._need[kind], self._guarded[kind]


class _Shared:
    """One group's shared walk, classed by (effect, end state): ``cls`` int64 (E,) each entry's class; per
    class ``end`` (rep state), ``add``/``reset``/``after`` (C, K), ``possible`` (C,) and ``code``
    (provisional effect number)."""

    def __init__(self, g: GroupWalk, fx: TokenEffects, codes: _Numbered):
        k = len(fx.his)
        self.g = g
        eid = fx.effect_ids(np.full(len(g.tok), g.group.rep, dtype=np.int64), g.tok)
        ends, end_at = unique_keys(g.end, fx.tr.num_states)
        kinds, self.cls = unique_keys(eid * len(ends) + end_at.reshape(-1), len(fx.rows) * len(ends))
        rows = fx.rows[kinds // len(ends)]
        self.add, self.reset, self.after = rows[:, :k], rows[:, k : 2 * k], rows[:, 2 * k : 3 * k]
        self.possible = kinds // len(ends) != IMPOSSIBLE
        self.end = ends[kinds % len(ends)].astype(np.int64)
        self.code = codes.ids(rows)
        self.effect = (rows[:, : 3 * k] != 0).any(axis=1)


class _Member:
    """What member ``i`` of a group takes of the shared walk, per entry of it (E,): ``ok`` (taken, and
    possible for the member), ``need`` (provisional need number; -1 where not ok), ``guarded``; ``edges``:
    int64 keys ``state * n + target`` of its tight entries; ``count``: entries ok. A token's need after it
    depends on the member's state it ends in, so it is computed per (class, met or not) pair, not per entry
    (:func:`_members`); the per-entry arrays are made once per distinct (columns, pair results) and shared,
    so members far from a bound, which take alike, cost O(pairs) each. ``ok_c``, ``need_c``: ``ok`` and
    ``need`` per combination of the shared walk (:func:`_members`: an entry's are its combination's), to
    compare two members of a group without a pass over its entries."""

    def __init__(self, ok: np.ndarray, need: np.ndarray, guarded: np.ndarray, count: int, ok_c: np.ndarray,
                 need_c: np.ndarray, edges: np.ndarray):
        self.ok, self.need, self.guarded, self.count, self.edges = ok, need, guarded, count, edges
        self.ok_c, self.need_c = ok_c, need_c


def _members(sh: _Shared, fx: TokenEffects, needs: _Numbered, n: int) -> list[_Member]:
    """The :class:`_Member` of each member of ``sh``'s group, their needs numbered in one batch."""
    g = sh.g
    width = 2 * len(sh.end)
    pairs_of: dict[bytes, tuple] = {}
    got_of = []
    # a member takes an entry, having met the rep or not, by the entry's (members served, met) pattern: each
    # distinct (pattern, class) combination of the shared walk is worked out once, and an entry's from it
    served, met, pattern = g.patterns()
    n_cls = len(sh.end)
    combos, combo_of = unique_keys(pattern * n_cls + sh.cls, len(served) * n_cls)
    combo_pat, combo_cls = combos // n_cls, combos % n_cls
    combo_count = np.bincount(combo_of, minlength=len(combos))
    keys = [a + b for a, b in zip(g.member_keys(), g.met_keys())]
    for i, key in enumerate(keys):
        got = pairs_of.get(key)
        if got is None:
            takes = served[combo_pat, i]
            pair = combo_cls * 2 + (served[:, i] & met[:, i])[combo_pat]
            got = pairs_of[key] = (key, pair, np.flatnonzero(np.bincount(pair[takes], minlength=width)), takes)
        got_of.append(got)
    # every member's (class, met or not) pairs at once: their targets, needs and tightness in one pass
    counts = [len(got[2]) for got in got_of]
    member = np.repeat(np.arange(len(got_of)), counts)
    pairs = np.concatenate([got[2] for got in got_of]) if got_of else np.zeros(0, np.int64)
    c, same = pairs // 2, (pairs % 2).astype(bool)
    col = g.group.col_of[sh.end[c]]
    mapped = np.where(col >= 0, g.group.phi[member, np.maximum(col, 0)], -1)
    target = np.where(same, sh.end[c], mapped)
    need, ok = fx.needs(sh.add[c], sh.reset[c], sh.after[c], sh.possible[c], fx.rem[target])
    state = g.members.astype(np.int64)[member]
    tight = fx.tight(need, state) & ok
    guarded = sh.effect[c] | need.any(axis=1)
    edge = state * n + target
    bounds = np.cumsum([0] + counts)
    parts = []
    for (key, pair, pairs_i, mine), lo, hi in zip(got_of, bounds[:-1], bounds[1:]):
        parts.append((key, pair, pairs_i, mine, need[lo:hi], ok[lo:hi], guarded[lo:hi], edge[lo:hi][tight[lo:hi]]))
    ids = needs.ids(need)
    made: dict[tuple, tuple] = {}
    out = []
    for (key, pair, pairs, mine, _, ok, guarded, edges), lo, hi in zip(parts, bounds[:-1], bounds[1:]):
        need_id = ids[lo:hi]
        full = (key, ok.tobytes(), need_id.tobytes(), guarded.tobytes())
        got = made.get(full)
        if got is None:
            lut_ok = np.zeros(width, dtype=bool)
            lut_need = np.full(width, -1, dtype=np.int64)
            lut_guarded = np.zeros(width, dtype=bool)
            lut_ok[pairs], lut_need[pairs] = ok, np.where(ok, need_id, -1)
            lut_guarded[pairs] = guarded
            ok_c = mine & lut_ok[pair]  # per combination; then per entry
            need_c = np.where(ok_c, lut_need[pair], -1)
            got = made[full] = (ok_c[combo_of], need_c[combo_of], (ok_c & lut_guarded[pair])[combo_of],
                                int(combo_count[ok_c].sum()), ok_c, need_c)
        out.append(_Member(*got, edges))
    return out


def _member_guards(g: GroupWalk, sh: _Shared, mem: list[_Member], own: _Entries, bounds: list[int],
                   guards: _GuardStore) -> list[int]:
    """The guard list of each member of ``g`` (``mem``: their :class:`_Member`; ``own``/``bounds``: their own
    entries).

    A state's guard list is looked up only for tokens of its row, so a member may use a list made for a
    member that takes more of the shared walk (the positions of a counted string farther from its bound,
    whose rows hold theirs) when the two agree on every token of its row: each shared entry it takes is
    taken by the other with the same need, and each token it walked on its own is listed alike (or not
    listed). The 61 positions of an email's domain label under ``maxLength: 255`` then share a few lists
    instead of 61 of 30,000 entries each. The rows themselves stay exact."""
    out = [0] * len(mem)
    made: list[tuple] = []  # (list, member, listed tokens, codes, needs) of lists made here
    for i in sorted(range(len(mem)), key=lambda i: -mem[i].count):
        o_tok, o_code, o_need, o_gd = own.part(bounds[i], bounds[i + 1])
        m = mem[i]
        for lst, other, l_tok, l_code, l_need in reversed(made[-GUARD_CANDIDATES:]):
            # on every entry m takes, the same need: compared per combination of the shared walk (each entry's
            # is its combination's, and every combination has an entry), not per entry
            if ((other.need_c[m.ok_c] == m.need_c[m.ok_c]).all()
                    and _agrees(l_tok, l_code, l_need, o_tok, o_code, o_need, o_gd)):
                out[i] = lst
                break
        else:
            at = np.flatnonzero(m.guarded)
            tok = np.concatenate([g.tok[at], o_tok[o_gd]]).astype(np.int32)
            code = np.concatenate([sh.code[sh.cls[at]], o_code[o_gd]])
            need = np.concatenate([m.need[at], o_need[o_gd]])
            order = np.argsort(tok, kind="stable")
            tok, code, need = tok[order], code[order], need[order]
            out[i] = guards.add(tok, code, need)
            made.append((out[i], m, tok, code, need))
    return out


def _agrees(l_tok: np.ndarray, l_code: np.ndarray, l_need: np.ndarray, o_tok: np.ndarray, o_code: np.ndarray,
            o_need: np.ndarray, o_gd: np.ndarray) -> bool:
    """True when a guard list (tokens sorted, codes, needs) says of each of a member's own entries (tokens,
    codes, needs, guarded) what the member's own list would: the same code and need where guarded, nothing
    where not."""
    if not len(o_tok):
        return True
    at = np.minimum(np.searchsorted(l_tok, o_tok), max(len(l_tok) - 1, 0))
    listed = (l_tok[at] == o_tok) if len(l_tok) else np.zeros(len(o_tok), dtype=bool)
    if (listed != o_gd).any():
        return False
    if not listed.any():
        return True
    return bool((l_code[at][listed] == o_code[listed]).all() and (l_need[at][listed] == o_need[listed]).all())


#: A group member's guard list may be one made for a member that takes more of the shared walk, tried among
#: this many made last in the group (see :func:`_member_guards`).
GUARD_CANDIDATES = 4


def counted_arrays(tr: Transducer, result: WalkResult, token_bytes, vocab_size: int) -> dict[str, np.ndarray]:
    """The index arrays (plain and counter arrays, :mod:`callmaybe.core.indexfile`) of ``tr`` from its walk.

    Each entry's *need* is what it takes of each counter: its advances, and (unless it resets the counter)
    the fewest advances still required after it (:meth:`~..automata.counters.Transducer.remaining`), so that a token
    is allowed only where the value can still be completed within the bound (a maxLength string that an
    email format must still finish). An entry whose value after a reset cannot be completed is dropped; the
    fewest tokens to completion follow only tight entries (those that need no more than the state's own
    remaining advances), which stay open at every count the guards let through. Rows and guard lists are
    made once per distinct content (see the module docstring): O(distinct lists x their length + members x
    shared entries + entries walked alone), with no per-entry work per member beyond a few vector passes."""
    n, k = tr.num_states, len(tr.table.his)
    fx = TokenEffects(tr, token_bytes)
    codes, needs = _Numbered(3 * k), _Numbered(k)
    rows, guards = RowStore(vocab_size), _GuardStore()
    state_row = np.zeros(n, dtype=np.int32)
    state_guard = np.zeros(n, dtype=np.int32)
    ls, lt, ln = result.lone
    lone = _Entries(fx, codes, needs, ls.astype(np.int64), lt, ln.astype(np.int64))
    edges = [lone.edges(n)]
    member_row: dict[int, tuple] = {}  # state -> (row signature, how to make the row)
    for gi, g in enumerate(result.groups):
        sh = _Shared(g, fx, codes)
        own_counts = [len(t) for t, _ in g.own]
        own = _Entries(fx, codes, needs, np.repeat(g.members.astype(np.int64), own_counts),
                       np.concatenate([t for t, _ in g.own]) if g.own else np.zeros(0, np.int32),
                       np.concatenate([t for _, t in g.own]).astype(np.int64) if g.own else np.zeros(0, np.int64))
        bounds = np.concatenate([[0], np.cumsum(own_counts)]).astype(np.int64).tolist()
        edges.append(own.edges(n))
        mem = _members(sh, fx, needs, n)
        edges += [m.edges for m in mem]
        lists = _member_guards(g, sh, mem, own, bounds, guards)
        ok_keys: dict[int, bytes] = {}  # members that take alike share their ``ok`` array (_members)
        for i, m in enumerate(mem):
            o_tok = own.tokens(bounds[i], bounds[i + 1])
            ok_key = ok_keys.get(id(m.ok))
            if ok_key is None:
                ok_key = ok_keys[id(m.ok)] = content_key(np.packbits(m.ok))
            member_row[int(g.members[i])] = ((gi, ok_key, content_key(o_tok)), g, m.ok, o_tok)
            state_guard[int(g.members[i])] = lists[i]
    slices = result.lone_slices()
    by_sig: dict[tuple, int] = {}
    empty = np.zeros(0, dtype=np.int64)
    empty_row = None
    for s in range(n):
        where = slices.get(s)
        if where is not None:
            tok, code, need, gd = lone.part(*where)
            state_row[s] = rows.add([tok], ordered=True)
            state_guard[s] = guards.add(tok[gd], code[gd], need[gd])
        elif s in member_row:
            sig, g, ok, o_tok = member_row[s]
            row = by_sig.get(sig)
            if row is None:  # the member's shared tokens taken out only for a row not made yet
                row = by_sig[sig] = rows.add([g.tok[ok], o_tok])
            state_row[s] = row
        else:
            if empty_row is None:
                empty_row = (rows.add([empty.astype(np.int32)], ordered=True), guards.add(empty, empty, empty))
            state_row[s], state_guard[s] = empty_row

    arrays = {"state_row": state_row, **rows.arrays()}
    src, dst = unique_edges(np.concatenate(edges) if edges else empty, n)
    arrays["min_tokens"] = min_tokens_from_edges(src, dst, tr.accepting)
    arrays.update(_guard_arrays(tr, guards, codes, needs, state_guard))
    arrays.update(_automaton_arrays(tr))
    return arrays


def _guard_arrays(tr: Transducer, guards: _GuardStore, codes: _Numbered, needs: _Numbered,
                  state_guard: np.ndarray) -> dict[str, np.ndarray]:
    """``state_guard``, ``guard_offset``, ``guard_token``, ``guard_effect``, ``guard_need`` and ``need`` of the
    distinct guard lists, effects numbered in ``tr``'s table (in sorted order of their codes) and needs in
    sorted order."""
    k = len(tr.table.his)
    parts = guards.parts
    tok = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
    code = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    need = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
    used_codes, code_map = codes.final(code)
    ids = np.array([tr.table.id(tuple((c, int(row[c]), bool(row[k + c]), int(row[2 * k + c]))
                                      for c in range(k) if row[c] or row[k + c])) for row in used_codes.tolist()],
                   dtype=np.int64)
    used_needs, need_map = needs.final(need)
    offset = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p[0]) for p in parts], out=offset[1:])
    return {
        "state_guard": state_guard,
        "guard_offset": offset,
        "guard_token": tok.astype(np.int32),
        "guard_effect": (ids[code_map[code]] if len(code) else code).astype(np.int32),
        "guard_need": need_map[need].astype(np.int32),
        "need": used_needs.astype(np.int32).reshape(-1, k),
    }


def _automaton_arrays(tr: Transducer) -> dict[str, np.ndarray]:
    """The transducer's arrays: byte classes (bytes alike also in their effect), transitions and their effects
    per class, accepting states, the counters' bounds and liveness, and the effect table."""
    byte_class, trans, effect = effect_classes(tr)
    arrays = {"byte_class": byte_class, "transitions": trans, "trans_effect": effect,
              "accepting": tr.accepting.astype(np.uint8), "counter_hi": np.asarray(tr.table.his, dtype=np.int32),
              "counter_live": tr.live()}
    arrays.update(tr.table.arrays())
    return arrays
