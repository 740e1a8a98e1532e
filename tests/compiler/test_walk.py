"""Exact allowed-token sets on a small hand-made vocabulary."""

import pytest

from callmaybe.core.catalog import parse_catalog
from callmaybe.compiler.compile import compile_index
from callmaybe.compiler.index.trie import TrieCache, build_trie, trie_from_file
from callmaybe.compiler.index.walk import walk
from callmaybe.compiler.automata import dfa as D
from callmaybe.core.vocabulary import Vocabulary

TOKENS = [b'{"', b"name", b'":', b" ", b'"', b"f", b"g", b"fg", b", ", b"parameters", b"{", b"}", b"}}",
          b"1", b"12", b"0", b"01", b".", b"-", b"a", b'"a', b"x", b'\\', b"\xc3", b"\xa9", b"\xc3\xa9", None]
VOCAB = Vocabulary(name="tiny", token_bytes=tuple(TOKENS), eos_ids=(26,), vocab_size=32)
T = {t: i for i, t in enumerate(TOKENS) if t is not None}


def ids(*tokens):
    return sorted(T[t] for t in tokens)


def state_after(dfa, text):
    s = dfa.state_after(text)
    assert s >= 0, text
    return s


def test_trie_levels():
    trie = build_trie([b"ab", b"a", b"b", None, b"abc"])
    assert [list(b) for b in trie.byte] == [[97, 98], [98], [99]]
    assert sum(len(b) for b in trie.byte) == 4 and trie.num_tokens == 4


def test_allowed_sets_exact():
    fns = parse_catalog([{"name": "f", "parameters": {"a": {"type": "integer"}}},
                         {"name": "fg", "parameters": {"x": {"type": "string"}}}], "t")
    index, report = compile_index(fns, VOCAB)
    from callmaybe.compiler.grammar import compile_grammar
    dfa = compile_grammar(fns).dfa
    allowed = lambda text: list(index.allowed_tokens(state_after(dfa, text)))
    assert allowed(b"") == ids(b'{"', b"{")
    # after `{"name": "` the names f and fg: f, fg and (for fg) f then g
    assert allowed(b'{"name": "') == ids(b"f", b"fg")
    assert allowed(b'{"name": "f') == ids(b"g", b'"')
    # integer start: digits, minus; "01" is a leading zero, so not allowed
    assert allowed(b'{"name": "f", "parameters": {"a": ') == ids(b"1", b"12", b"0", b"-")
    assert allowed(b'{"name": "f", "parameters": {"a": 0') == ids(b"}", b"}}")
    assert allowed(b'{"name": "f", "parameters": {"a": 1') == ids(b"1", b"12", b"0", b"01", b"}", b"}}")
    # inside a string: every token of string content, the escape, a lead byte, tokens that close the
    # string where `}` may follow; not `":` or `"a` (nothing but `}` after the last value), not a lone
    # continuation byte
    inside = allowed(b'{"name": "fg", "parameters": {"x": "')
    assert inside == ids(b'{"', b"name", b" ", b'"', b"f", b"g", b"fg", b", ", b"parameters", b"{",
                         b"}", b"}}", b"1", b"12", b"0", b"01", b".", b"-", b"a", b"x", b"\\",
                         b"\xc3", b"\xc3\xa9")
    assert allowed(b'{"name": "fg", "parameters": {"x": "\xc3') == ids(b"\xa9")
    # complete: only EOS
    assert allowed(b'{"name": "f", "parameters": {"a": 1}}') == [26]
    assert report.states == dfa.num_states


def test_walk_matches_bytewise_walk():
    dfa = D.from_regex(r'"[a-z]*"')
    result = walk(dfa.transitions, build_trie(TOKENS))
    for s in range(dfa.num_states):
        got = set(result.token[result.state == s].tolist())
        want = {i for i, t in enumerate(TOKENS) if t and dfa.state_after(t, s) >= 0}
        assert got == want
        for tok, nxt in zip(result.token[result.state == s], result.next_state[result.state == s]):
            assert dfa.state_after(TOKENS[tok], s) == nxt


# tokens that stay inside a string, close it and go on (`", "`, `"}`), escape, or carry UTF-8 pieces
SHARED_TOKENS = [bytes([b]) for b in range(32, 127)] + [
    b'"a', b'", "', b'"}', b'"}}', b'", "b": "', b'\\n', b'\\u00', b'\\"', b"\xc3", b"\xa9", b"\xc3\xa9",
    b"\xe2\x82\xac", b"\xe2\x82", b"ab", b"abc", b'c"', b'": "', b"name", b'"name": "', b"\xf0\x9f\x98\x80",
]


def test_shared_walk_equals_the_walk_of_every_state_apart(monkeypatch):
    """Many string values (same automaton, different continuations after the closing quote, one with a
    length limit) share one walk; the result is identical to walking every state on its own."""
    fns = parse_catalog([
        {"name": "f", "parameters": {"a": {"type": "string"}, "b": {"type": "string"},
                                     "c": {"type": "string", "maxLength": 3}, "n": {"type": "integer"}}},
        {"name": "g", "parameters": {"x": {"type": "string"}, "y": {"type": "array", "items": {"type": "string"}}}},
    ], "t")
    from callmaybe.compiler.grammar import compile_grammar
    from callmaybe.compiler.index import walk as walk_mod
    from callmaybe.compiler.index.walk import state_groups
    import numpy as np

    dfa = compile_grammar(fns).dfa
    trie = build_trie(SHARED_TOKENS)
    groups = state_groups(dfa.transitions, np.arange(dfa.num_states))
    assert max(len(g.members) for g in groups) >= 4  # the plain string contents form one group
    apart = walk(dfa.transitions, trie, share=False)
    for limit in (walk_mod.GROUP_MAX_ENTRIES, 1):  # 1: groups split into pairs
        monkeypatch.setattr(walk_mod, "GROUP_MAX_ENTRIES", limit)
        shared = walk(dfa.transitions, trie)
        for key in ("state", "token", "next_state"):
            assert np.array_equal(getattr(shared, key), getattr(apart, key)), key
    assert all(len(g.members) == 2 for g in state_groups(dfa.transitions, np.arange(dfa.num_states)))
    # and the apart walk is right: spot-check against the byte-wise walk
    for s in range(dfa.num_states):
        got = dict(zip(apart.token[apart.state == s].tolist(), apart.next_state[apart.state == s].tolist()))
        want = {i: dfa.state_after(t, s) for i, t in enumerate(SHARED_TOKENS) if dfa.state_after(t, s) >= 0}
        assert got == want


@pytest.mark.parametrize("pairs, held", [(64, 456), (256, 257)])
def test_counted_string_positions_share_one_walk_as_far_as_each_corresponds(monkeypatch, pairs, held):
    """The positions of a ``maxLength`` string form one group whose members correspond less the nearer they
    are to the bound (each as far as it does): each gets exactly the tokens of its own walk, the table built
    from the shared walk is the table built from walking every state apart, and the shared walk holds far
    fewer entries than it serves."""
    import numpy as np
    from callmaybe.compiler.grammar import compile_grammar
    from callmaybe.compiler.index.table import build_rows, min_tokens
    from callmaybe.compiler.index.walk import state_groups

    tokens = SHARED_TOKENS + [b"abcdefgh", b"abcdefghijklmnop", b'abcd"', b'abcdefgh", "', rb"\u00e9\u00e9"]
    fns = parse_catalog([{"name": "f", "parameters": {"s": {"type": "string", "minLength": 2, "maxLength": 40},
                                                      "t": {"type": "string", "maxLength": 70}}}], "t")
    from callmaybe.compiler.automata import long_counts

    dfa = long_counts.under(long_counts.Policy(counters=False), lambda: compile_grammar(fns)).dfa  # copies
    trie = build_trie(tokens)
    groups = state_groups(dfa.transitions, np.arange(dfa.num_states))
    first = dfa.state_after(b'{"name": "f", "parameters": {"s": "abc')
    biggest = next(g for g in groups if first in g.members.tolist())  # the positions of "s"
    assert len(biggest.members) >= 70 and len(set(biggest.core.sum(axis=1).tolist())) > 2  # not all-or-nothing
    from callmaybe.compiler.index import walk as walk_mod

    monkeypatch.setattr(walk_mod, "GROUP_PLAIN_PAIRS", pairs)
    shared, apart = walk(dfa.transitions, trie), walk(dfa.transitions, trie, share=False)
    assert shared.groups and not apart.groups
    for key in ("state", "token", "next_state"):
        assert np.array_equal(getattr(shared, key), getattr(apart, key)), key
    assert shared.entries == apart.entries == len(apart.state)
    served = sum(g.count(i) for g in shared.groups for i in range(len(g.members)))
    assert served == sum(g.served() for g in shared.groups)
    positions = next(g for g in shared.groups if first in g.members.tolist())
    # 456 held for 12,027 served with a plain automaton's pairing cut at 64 rep states (GROUP_PLAIN_PAIRS, the
    # default), 257 with 256: the positions past the 64th pair are walked on their own
    assert (positions.held(), positions.served()) == (held, 12027)
    assert sum(g.held() for g in shared.groups) * 8 < served
    rows_shared = build_rows(shared, dfa.num_states, 256)
    rows_apart = build_rows(apart, dfa.num_states, 256)
    for key in rows_apart:
        assert np.array_equal(rows_shared[key], rows_apart[key]), key
    assert np.array_equal(min_tokens(shared, dfa.accepting), min_tokens(apart, dfa.accepting))
    again = walk(dfa.transitions, trie, states=np.concatenate([biggest.members, biggest.members]))
    assert again.entries == walk(dfa.transitions, trie, states=biggest.members, share=False).entries  # once each
    # and the apart walk is right: the positions near the bound, spot-checked against the byte-wise walk
    for s in biggest.members.tolist():
        got = dict(zip(apart.token[apart.state == s].tolist(), apart.next_state[apart.state == s].tolist()))
        want = {i: dfa.state_after(t, s) for i, t in enumerate(tokens) if dfa.state_after(t, s) >= 0}
        assert got == want


def test_distinct_edges_and_min_tokens_by_bitmap_and_by_sort(monkeypatch):
    import numpy as np
    from callmaybe.compiler.index import table
    from callmaybe.compiler.index.walk import WalkResult

    # 0 -a-> 1 -b-> 2 (accepting), 0 -c-> 2 twice through different tokens, 3 -> 3 only (never completes)
    r = WalkResult(np.array([0, 0, 0, 1, 1, 3], np.int32), np.array([1, 2, 3, 4, 5, 6], np.int32),
                   np.array([1, 2, 2, 2, 2, 3], np.int32))
    accepting = np.array([False, False, True, False])
    for limit in (table.EDGE_BITMAP_MAX, 0):
        monkeypatch.setattr(table, "EDGE_BITMAP_MAX", limit)
        src, dst = table.distinct_edges(r, 4)
        assert list(zip(src.tolist(), dst.tolist())) == [(0, 1), (0, 2), (1, 2), (3, 3)]
        assert table.min_tokens(r, accepting).tolist() == [1, 1, 0, np.iinfo(np.int32).max // 2]


def test_token_trie_is_cached_on_disk_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path))
    TrieCache().get(VOCAB)
    assert not (tmp_path / "vocab" / "tries").exists()  # a tiny vocabulary is not worth a file
    built = TrieCache(min_tokens_on_disk=0).get(VOCAB)  # each new TrieCache: a fresh process
    files = list((tmp_path / "vocab" / "tries").glob("*.npz"))
    assert len(files) == 1

    def same(a, b):
        return a.num_tokens == b.num_tokens and all(
            len(getattr(a, f)) == len(getattr(b, f)) and
            all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(getattr(a, f), getattr(b, f)))
            for f in ("byte", "child_start", "child_end", "end_start", "end_end", "end_tokens"))

    assert same(TrieCache(min_tokens_on_disk=0).get(VOCAB), build_trie(TOKENS)) and same(built, build_trie(TOKENS))
    good = files[0].read_bytes()
    for damaged in (b"not an npz", good[: len(good) // 2]):
        files[0].write_bytes(damaged)
        assert same(TrieCache(min_tokens_on_disk=0).get(VOCAB), build_trie(TOKENS))
    assert trie_from_file(files[0]).num_tokens == build_trie(TOKENS).num_tokens  # rewritten


def test_trie_cache_keeps_one_trie_per_vocabulary_until_cleared():
    cache = TrieCache()
    first = cache.get(VOCAB)
    assert cache.get(VOCAB) is first
    cache.clear()
    assert cache.get(VOCAB) is not first
