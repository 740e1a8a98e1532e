"""Issue 31 (second round): the parts the counted table and the walk were made faster with give what the plain
constructions they replaced give: effects composed as numbers, distinct keys without a sort, counter liveness
for every counter at once, shapes that tell a string escape's hex digits apart, and a CPU clock read rarely."""

import time

import numpy as np
import pytest

from callmaybe.compiler.automata import native
from callmaybe.compiler.automata.counters import UNREACHABLE
from callmaybe.compiler.index.counted_index import IMPOSSIBLE, TokenEffects, _effect_distance
from callmaybe.compiler.automata.dfa import byte_classes
from callmaybe.compiler.grammar import compile_grammar, schema_dfa
from callmaybe.compiler.index.trie import build_trie
from callmaybe.compiler.index.uniq import unique_keys
from callmaybe.compiler.index.walk import shapes, walk
from callmaybe.core.catalog import parse_catalog

from .test_counters import S, VOCAB

# two counted strings, a counted array of counted strings (its items reset their counter), an email under a length
CATALOG = [{"name": "f", "description": "", "parameters": {
    "to": S(format="email", maxLength=90), "a": S(maxLength=70), "b": S(minLength=2, maxLength=80),
    "tags": {"type": "array", "items": S(maxLength=40), "maxItems": 50}}}]


def _transducer():
    tr = compile_grammar(parse_catalog(CATALOG, "t")).transducer()
    assert tr is not None and len(tr.table.his) >= 3
    return tr


def _effects_byte_by_byte(tr, state: int, token: bytes):
    """The reference: a token's effect composed byte by byte as (add, reset, after) per counter, or None where
    an advance after a reset passes the bound (the composition :meth:`TokenEffects.effects` made per entry)."""
    arrays = tr.table.arrays()
    his = [int(h) for h in tr.table.his]
    k = len(his)
    add, reset, after = [0] * k, [False] * k, [0] * k
    s = state
    for byte in token:
        e = int(tr.effect[s, byte])
        s = int(tr.transitions[s, byte])
        for c in range(k):
            sa, sr, sb = (int(arrays["effect_add"][e, c]), bool(arrays["effect_reset"][e, c]),
                          int(arrays["effect_after"][e, c]))
            if reset[c] and sr and after[c] + sa > his[c]:
                return None
            add[c], after[c] = (add[c], after[c] + sa) if reset[c] else (add[c] + sa, after[c])
            if sr:
                after[c] = sb
            reset[c] = reset[c] or sr
    return add + [int(r) for r in reset] + after


def test_effects_composed_as_numbers_are_the_byte_by_byte_composition():
    """Every allowed (state, token) entry of the catalog's transducer: the effect :meth:`TokenEffects.effect_ids`
    composes through its table of pairs is the byte-by-byte composition of the token's bytes."""
    tr = _transducer()
    trie = build_trie(list(VOCAB.token_bytes))
    result = walk(tr.transitions, trie, share=False)
    state, token = result.state.astype(np.int64), result.token.astype(np.int64)
    fx = TokenEffects(tr, VOCAB.token_bytes)
    eid = fx.effect_ids(state, token)
    seen = {"effect": 0, "impossible": 0, "reset": 0}
    k = len(tr.table.his)
    for s, t, e in zip(state.tolist(), token.tolist(), eid.tolist()):
        want = _effects_byte_by_byte(tr, s, VOCAB.token_bytes[t])
        if want is None:
            assert e == IMPOSSIBLE
            seen["impossible"] += 1
        else:
            assert fx.rows[e].tolist() == want, (s, VOCAB.token_bytes[t])
            seen["effect"] += any(want)
            seen["reset"] += any(want[k : 2 * k])
    assert seen["effect"] > 1000 and seen["reset"] > 10  # the check met advances and resets
    add, reset, after, possible = fx.effects(state, token)
    assert np.array_equal(possible, eid != IMPOSSIBLE)
    assert np.array_equal(np.concatenate([add, reset, after], axis=1), fx.rows[eid])


def test_effects_walked_in_c_are_numbered_as_in_numpy(monkeypatch):
    """The walk of effect_ids in C (levels applied only when their pairs are composed) against the numpy loop:
    the same effect numbers, the same rows in the same order, over several batches (pairs composed in one are
    found in the next)."""
    if native.library() is None:
        pytest.skip("the C routines could not be built here")
    tr = _transducer()
    result = walk(tr.transitions, build_trie(list(VOCAB.token_bytes)), share=False)
    state, token = result.state.astype(np.int64), result.token.astype(np.int64)
    rng = np.random.default_rng(5)
    batches = np.array_split(rng.permutation(len(state)), 4)
    in_c, in_numpy = TokenEffects(tr, VOCAB.token_bytes), TokenEffects(tr, VOCAB.token_bytes)
    monkeypatch.setattr(in_numpy, "_native_walk", lambda *a: False)
    for b in batches:
        assert np.array_equal(in_c.effect_ids(state[b], token[b]), in_numpy.effect_ids(state[b], token[b]))
    assert np.array_equal(in_c.rows, in_numpy.rows) and len(in_c.rows) > 50


def _live_per_counter(tr) -> np.ndarray:
    """The reference: each counter's liveness as its own fixpoint over all 256 bytes (the former loop)."""
    n, k = tr.num_states, len(tr.table.his)
    out = np.zeros((n, k), dtype=np.uint8)
    arrays = tr.table.arrays()
    t = tr.transitions
    for c in range(k):
        advances = arrays["effect_add"][:, c] > 0
        untouched = ~advances & ~(arrays["effect_reset"][:, c] > 0)
        direct = ((t >= 0) & advances[tr.effect]).any(axis=1)
        through = (t >= 0) & untouched[tr.effect]
        live = direct.copy()
        while True:
            nxt = direct | (through & live[np.maximum(t, 0)]).any(axis=1)
            if (nxt == live).all():
                break
            live = nxt
        out[:, c] = live
    return out


def test_counter_liveness_of_all_counters_at_once_is_each_counters_own():
    tr = _transducer()
    live = tr.live()
    assert live.dtype == np.uint8 and live.shape == (tr.num_states, len(tr.table.his))
    assert np.array_equal(live, _live_per_counter(tr))
    assert 0 < int(live.sum()) < live.size  # live somewhere, not everywhere


@pytest.mark.parametrize("size,repeat", [(10, 1), (1 << 23, 1), (1 << 23, 150_000)])
def test_unique_keys_are_np_unique(size, repeat):
    """A small table of all keys; a sort (few keys in a large range); a table again (a large range, but at
    most 8 of it per key given: 1,050,000 keys among 8,388,608)."""
    key = np.tile(np.array([7, 3, 3, 9, 0, 7, 7], dtype=np.int64) * (size // 10), repeat)
    keys, inverse = unique_keys(key, size)
    want_keys, want_inverse = np.unique(key, return_inverse=True)
    assert keys.tolist() == want_keys.tolist() == [0, 3 * (size // 10), 7 * (size // 10), 9 * (size // 10)]
    assert inverse.dtype == np.int64
    assert inverse.tolist() == want_inverse.tolist() == [2, 1, 1, 3, 0, 2, 2] * repeat


def _remaining_plain(tr) -> np.ndarray:
    """Each counter's fewest advances to the end or a reset, by Bellman-Ford over every byte's transition."""
    arrays = tr.table.arrays()
    src, byte = np.nonzero(tr.transitions >= 0)
    dst, eff = tr.transitions[src, byte], tr.effect[src, byte]
    out = np.full((tr.num_states, len(tr.table.his)), UNREACHABLE, dtype=np.int64)
    for c in range(len(tr.table.his)):
        w = arrays["effect_add"][eff, c].astype(np.int64)
        stop = arrays["effect_reset"][eff, c] > 0
        dist = np.where(tr.accepting.astype(bool), 0, UNREACHABLE).astype(np.int64)
        np.minimum.at(dist, src[stop], w[stop])
        while True:
            cand = dist.copy()
            np.minimum.at(cand, src[~stop], np.minimum(dist[dst[~stop]] + w[~stop], UNREACHABLE))
            if np.array_equal(cand, dist):
                break
            dist = cand
        out[:, c] = dist
    return out


def test_remaining_from_distinct_transitions_is_bellman_ford_over_every_byte():
    tr = _transducer()
    rem = tr.remaining()
    assert np.array_equal(rem, _remaining_plain(tr))
    assert rem.shape == (tr.num_states, 3) and tr.table.his == (90, 70, 78)
    # the email's counter: up to 5 advances still needed (the shortest address) in 189 of its states; the
    # other counters' strings can always end or be left at once (their minimum is counted apart)
    assert sorted(set(rem[:, 0].tolist())) == [0, 1, 2, 3, 4, 5] and int((rem[:, 0] > 0).sum()) == 189
    assert not rem[:, 1:].any()


def test_effect_distance_is_the_relaxation_over_every_byte():
    """_effect_distance (a breadth-first search backwards) against relaxing every byte's transition until
    nothing changes: the bytes read before a transition with an effect, that transition's byte included."""
    tr = _transducer()
    has = ((tr.effect != 0) & (tr.transitions >= 0)).any(axis=1)
    plain = np.where(has, 0, 1 << 40).astype(np.int64)
    src, byte = np.nonzero(tr.transitions >= 0)
    dst = tr.transitions[src, byte].astype(np.int64)
    while True:
        cand = plain.copy()
        np.minimum.at(cand, src, plain[dst] + 1)
        if np.array_equal(cand, plain):
            break
        plain = cand
    got = _effect_distance(tr)
    assert got.dtype == np.int64 and np.array_equal(got, plain)
    assert int(has.sum()) == int((got == 0).sum()) and (got == 1 << 40).any() and 0 < int(got[got < 1 << 40].max()) < 40


def test_tightness_by_rem_row_is_tightness_by_state():
    """The table classes an entry's state by its row of ``rem`` (what tightness reads of the state)."""
    tr = _transducer()
    fx = TokenEffects(tr, VOCAB.token_bytes)
    assert np.array_equal(fx.rem_rows[fx.rem_class], fx.rem)
    assert len(fx.rem_rows) == len(np.unique(fx.rem, axis=0)) < tr.num_states
    states = np.arange(tr.num_states)
    need = fx.rem[np.roll(states, 1)]  # some needs equal to the state's own, most not
    assert np.array_equal(fx.tight_rem(need, fx.rem_rows[fx.rem_class]), fx.tight(need, states))


def test_shapes_tell_four_hex_digits_apart_by_what_follows():
    """A string of four hex digits (``pattern: ^[0-9a-f]{4}$``): four states with one pattern (16 live bytes, no
    loop). Two bytes deep, the last two are told apart (the last leads to the closing quote; the one before it
    into the last); three deep, all four."""
    dfa, _ = schema_dfa({"type": "string", "pattern": "^[0-9a-f]{4}$"})
    hex_states = [dfa.state_after(b'"' + b"0" * i) for i in range(4)]
    assert all(s >= 0 for s in hex_states)
    _, ctrans = byte_classes(dfa.transitions)
    at = {d: shapes(ctrans, depth=d)[hex_states].tolist() for d in (0, 1, 2, 3)}
    assert len(set(at[0])) == 1
    assert at[1][0] == at[1][1] == at[1][2] != at[1][3]
    assert at[2][0] == at[2][1] and len({at[2][1], at[2][2], at[2][3]}) == 3
    assert len(set(at[3])) == 4


def test_the_cpu_clock_is_read_when_the_limit_could_be_passed_only(monkeypatch):
    """The ``seconds`` limit's clock is a system call: a compile of well under its limit reads it at the start
    and the end of each running block and at its first tick, not at each of its thousands of ticks."""
    from callmaybe.compiler import limits

    reads = []

    def clock():
        reads.append(1)
        return time.thread_time()

    ticks, blocks = [], []
    tick, running = limits.Budget.tick, limits.Budget.running

    def counted(self, at=None):
        ticks.append(1)
        return tick(self, at)

    def block(self):
        blocks.append(self._since is None)  # an outer block (a nested one reads nothing)
        return running(self)

    from callmaybe.compiler.automata.dfa import MINIMAL_CACHE
    from callmaybe.compiler.automata.nodes import LEAF_CACHE

    LEAF_CACHE.clear()  # a cold compile: the ticks of every build (small searches tick once, cached ones not)
    MINIMAL_CACHE.clear()
    monkeypatch.setattr(limits, "cpu_clock", clock)
    monkeypatch.setattr(limits.Budget, "tick", counted)
    monkeypatch.setattr(limits.Budget, "running", block)
    schema_dfa({"type": "object", "properties": {f"p{i}": S(maxLength=5 + i) for i in range(16)}})
    assert len(ticks) > 50 and sum(blocks) == 2  # 60 ticks with the C minimization (one each), 100+ in numpy
    assert len(reads) == 3 * sum(blocks)


def test_states_walked_alone_with_the_same_tokens_share_the_first_ones_row(monkeypatch):
    """``_same_as_earlier``: each state whose tokens repeat an earlier state's names that state (the first in
    state order); equal hashes of different slices (every multiplier and token alike here) are told apart by
    the check, token by token."""
    from callmaybe.compiler.index import table

    tokens = np.array([1, 2, 3, 1, 2, 3, 2, 1, 1, 2, 3, 7, 2, 1], dtype=np.int32)
    slices = {0: (0, 3), 4: (3, 6), 5: (6, 8), 9: (8, 11), 10: (11, 12), 12: (12, 14)}
    assert table._same_as_earlier(tokens, slices) == {4: 0, 9: 0, 12: 5}
    assert table._same_as_earlier(tokens, {0: (0, 3), 4: (4, 6)}) == {}  # not end to end: nothing claimed
    real = np.random.default_rng

    class Ones:  # every position's multiplier 1: (1, 2) and (2, 1) collide
        def __init__(self, seed):
            self.rng = real(seed)

        def integers(self, lo, hi, size, dtype):
            return np.ones(size, dtype=dtype)

    monkeypatch.setattr(table.np.random, "default_rng", Ones)
    assert table._same_as_earlier(tokens, slices) == {4: 0, 9: 0, 12: 5}
    assert table._same_as_earlier(np.array([1, 2, 2, 1], dtype=np.int32), {0: (0, 2), 1: (2, 4)}) == {}
