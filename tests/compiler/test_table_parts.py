"""Issue 31 (second round): the parts the counted table and the walk were made faster with give what the plain
constructions they replaced give: effects composed as numbers, distinct keys without a sort, counter liveness
for every counter at once, shapes that tell a string escape's hex digits apart, and a CPU clock read rarely."""

import time

import numpy as np
import pytest

from callmaybe.compiler.index.counted_index import IMPOSSIBLE, TokenEffects
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


@pytest.mark.parametrize("size", [10, 1 << 23])  # a table of all keys; a sort
def test_unique_keys_are_np_unique(size):
    key = np.array([7, 3, 3, 9, 0, 7, 7], dtype=np.int64) * (size // 10)
    keys, inverse = unique_keys(key, size)
    want_keys, want_inverse = np.unique(key, return_inverse=True)
    assert keys.tolist() == want_keys.tolist() == [0, 3 * (size // 10), 7 * (size // 10), 9 * (size // 10)]
    assert inverse.tolist() == want_inverse.tolist() == [2, 1, 1, 3, 0, 2, 2]


def test_shapes_tell_the_hex_digits_of_an_escape_apart_by_what_follows():
    """After ``"\\u`` a string holds four hex digits: four states with one pattern (22 live bytes, no loop).
    Two bytes deep, the last two are told apart (the last leads back into the string; the one before it into
    the last); three deep, all four."""
    dfa, _ = schema_dfa({"type": "string"})
    hex_states = [dfa.state_after(b'"\\u' + b"0" * i) for i in range(4)]
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

    monkeypatch.setattr(limits, "cpu_clock", clock)
    monkeypatch.setattr(limits.Budget, "tick", counted)
    monkeypatch.setattr(limits.Budget, "running", block)
    schema_dfa({"type": "object", "properties": {f"p{i}": S(maxLength=5 + i) for i in range(8)}})
    assert len(ticks) > 100 and sum(blocks) == 2
    assert len(reads) == 3 * sum(blocks)
