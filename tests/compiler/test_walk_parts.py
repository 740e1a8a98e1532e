"""Issue 31 (fourth round): the parts the walk and the counted table were made faster with give what the plain
constructions they replaced give: tokens below each trie node, set bits unpacked once per distinct row, a
group's members keyed by the distinct rows of its shared walk, tokens ordered without a sort, and a capped
group walk that stops a member by the tokens below its live prefixes (the walk and the index stay exact)."""

import numpy as np
import pytest

from callmaybe.compiler.grammar import compile_grammar
from callmaybe.compiler.index import walk as walk_mod
from callmaybe.compiler.index.counted_index import counted_arrays, effect_classes
from callmaybe.compiler.index.trie import build_trie
from callmaybe.compiler.index.uniq import distinct_inverse
from callmaybe.compiler.index.walk import _token_order, bit_column, bit_pairs, member_bits, row_kinds, walk
from callmaybe.core.catalog import parse_catalog
from callmaybe.core.vocabulary import Vocabulary

from .test_counters import TOKENS, S, _per_state


def test_tokens_below_each_trie_node():
    trie = build_trie([b"a", b"ab", b"abc", b"b", None, b"", b"bd", b"c", b"abd"])
    # depth 1: a (a, ab, abc, abd), b (b, bd), c; depth 2: ab (ab, abc, abd), bd; depth 3: abc, abd
    assert [list(b) for b in trie.byte] == [[97, 98, 99], [98, 100], [99, 100]]
    assert [b.tolist() for b in trie.below] == [[4, 2, 1], [3, 1], [1, 1]]


@pytest.mark.parametrize("k", [1, 5, 64, 65, 130, 256])
def test_bit_pairs_are_the_set_bits_of_the_unpacked_rows(k):
    rng = np.random.default_rng(k)
    for n in (0, 1, 7, 300):
        kinds = rng.random((6, k)) < 0.4
        rows = kinds[rng.integers(0, 6, n)] if n else np.zeros((0, k), dtype=bool)
        row, col = bit_pairs(member_bits(rows), k)
        want_row, want_col = np.nonzero(rows)
        assert row.tolist() == want_row.tolist() and col.tolist() == want_col.tolist()


def test_distinct_inverse_gives_back_every_row():
    m = np.array([[3, 1], [0, 0], [3, 1], [2**63 + 5, 7], [0, 0], [1, 3]], dtype=np.uint64)
    rows, inverse = distinct_inverse(m)
    assert len(rows) == 4 and len({r.tobytes() for r in rows}) == 4
    assert np.array_equal(rows[inverse], m)
    assert inverse[0] == inverse[2] and inverse[1] == inverse[4] and inverse[0] != inverse[5]


def test_token_order_sorts_distinct_ids():
    tok = np.array([7, 0, 151935, 3, 42], dtype=np.int32)
    assert _token_order(tok).tolist() == [1, 3, 0, 4, 2]
    assert _token_order(np.zeros(0, dtype=np.int32)).tolist() == []


def _email_catalog():
    tokens = list(TOKENS) + [b"ab.cd", b"x-y", b"abc@", b".com", b'om"', b'm", "', b"a-b-c", b"-a"]
    vocab = Vocabulary(name="lock3", token_bytes=tuple(tokens) + (None,), eos_ids=(len(tokens),),
                       vocab_size=len(tokens) + 1)
    fns = parse_catalog([{"name": "f", "description": "", "parameters": {
        "to": S(format="email", maxLength=90), "a": S(), "b": S(maxLength=80), "c": S()}}], "t")
    tr = compile_grammar(fns).transducer()
    assert tr is not None
    return vocab, tr


def test_group_patterns_give_each_members_bit_columns_and_keys():
    """A member's entries, its keys and the entries of all members come from the distinct (served, met) rows
    of the shared walk exactly as from its bit matrices."""
    vocab, tr = _email_catalog()
    _, ctrans, ceff = effect_classes(tr)
    shared = walk(tr.transitions, build_trie(list(vocab.token_bytes)), class_transitions=ctrans, class_effects=ceff)
    big = max(shared.groups, key=lambda g: len(g.members))
    assert len(big.members) > 60
    for g in shared.groups:
        served, met, pattern = g.patterns()
        k = len(g.members)
        columns = [bit_column(g.bits, i) for i in range(k)]
        met_columns = [bit_column(g.met, i) & columns[i] for i in range(k)]
        assert len(served) <= len(g.tok)
        for i in range(k):
            assert np.array_equal(served[pattern, i], columns[i])
            assert np.array_equal((served & met)[pattern, i], met_columns[i])
        keys, met_keys = g.member_keys(), g.met_keys()
        for i in range(k):
            for j in range(k):
                assert (keys[i] == keys[j]) == np.array_equal(columns[i], columns[j])
                assert (met_keys[i] == met_keys[j]) == np.array_equal(met_columns[i], met_columns[j])
        assert g.served() == sum(int(c.sum()) + len(g.own[i][0]) for i, c in enumerate(columns))


def test_a_capped_group_walk_stops_members_early_and_the_walk_and_index_stay_exact(monkeypatch):
    """With every member heavy past a handful of entries, the capped walk stops members by the tokens below
    their live prefixes (before finding that many); they are grouped again or walked alone, and the walk and
    every state's allowed tokens, guards and fewest tokens to completion are what walking every state apart
    gives. The numpy walk (its _beyond_cap spied on); the walk in C, its cap included, gives the same."""
    from callmaybe.compiler.automata import native

    vocab, tr = _email_catalog()
    _, ctrans, ceff = effect_classes(tr)
    trie = build_trie(list(vocab.token_bytes))
    lib = native.library()
    monkeypatch.setattr(native, "_loaded", [None])
    stopped_early = []
    beyond = walk_mod._beyond_cap

    def spy(trie, d, start, node, began, found, cap, capped):
        out = beyond(trie, d, start, node, began, found, cap, capped)
        stopped_early.extend(s for s in out if found.get(s, 0) <= cap)
        return out

    monkeypatch.setattr(walk_mod, "_beyond_cap", spy)
    monkeypatch.setattr(walk_mod, "HEAVY_MIN", 3)
    monkeypatch.setattr(walk_mod, "HEAVY_SHARE", 0.01)
    shared = walk(tr.transitions, trie, class_transitions=ctrans, class_effects=ceff)
    apart = walk(tr.transitions, trie, share=False)
    assert stopped_early and shared.groups
    for key in ("state", "token", "next_state"):
        assert np.array_equal(getattr(shared, key), getattr(apart, key)), key
    a = counted_arrays(tr, shared, vocab.token_bytes, vocab.vocab_size)
    b = counted_arrays(tr, apart, vocab.token_bytes, vocab.vocab_size)
    assert np.array_equal(a["min_tokens"], b["min_tokens"])
    assert _per_state(a, tr.num_states) == _per_state(b, tr.num_states)
    if lib is not None:
        monkeypatch.setattr(native, "_loaded", [lib])
        in_c = walk(tr.transitions, trie, class_transitions=ctrans, class_effects=ceff)
        assert len(in_c.groups) == len(shared.groups)
        for key in ("state", "token", "next_state"):
            assert np.array_equal(getattr(in_c, key), getattr(shared, key)), key


def test_row_kinds_number_states_by_their_dead_classes_and_effects():
    ctrans = np.array([[0, -1, 1], [1, -1, 0], [-1, 2, 2], [0, -1, 1]], dtype=np.int32)
    # live classes (1, 0, 1) packed are 160, (0, 1, 1) 96: numbered in sorted order
    assert row_kinds(ctrans).tolist() == [1, 1, 0, 1]
    ceff = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 0], [0, 0, 1]], dtype=np.int32)
    assert row_kinds(ctrans, ceff).tolist() == [1, 2, 0, 1]  # states 0 and 1 differ in an effect


def test_distinct_values_by_a_scratch_table_are_np_unique():
    scratch = np.full(10, 7, dtype=np.int64)
    values = np.array([5, 3, 5, 0, 3, 9], dtype=np.int64)
    assert walk_mod._distinct(values, scratch).tolist() == [0, 3, 5, 9]
    assert walk_mod._distinct(np.zeros(0, dtype=np.int64), scratch).tolist() == []
