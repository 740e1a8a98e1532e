"""Issue 31 (eleventh round): the tokens that end at a walk's trie nodes read from one table per depth
(:attr:`~callmaybe.compiler.index.trie.TokenTrie.end_one`) when no node ends two tokens, and from the ranges
of ``end_tokens`` otherwise; both give the same (owner, token) pairs in the same order."""

import numpy as np

from callmaybe.compiler.index import walk as walk_mod
from callmaybe.compiler.index.trie import build_trie
from callmaybe.compiler.index.walk import _ends, walk

TOKENS = [b"a", b"ab", b"abc", b"b", None, b"", b"bd", b"c", b"abd"]


def test_end_one_is_the_one_token_ending_at_each_node():
    trie = build_trie(TOKENS)
    # depth 1: a, b, c; depth 2: ab, bd; depth 3: abc, abd
    assert [t.tolist() for t in trie.end_one] == [[0, 3, 7], [1, 6], [2, 8]]
    assert [t.dtype for t in trie.end_one] == [np.int32] * 3
    assert [t.tolist() for t in build_trie([b"ab", b"b"]).end_one] == [[-1, 1], [0]]  # "a" ends no token


def test_end_one_is_none_when_two_tokens_share_their_bytes():
    trie = build_trie([b"a", b"b", b"a"])
    assert trie.end_one is None
    owner, tokens = _ends(trie, 0, np.array([1, 0, 1, 0]))
    assert owner.tolist() == [0, 1, 1, 2, 3, 3] and tokens.tolist() == [1, 0, 2, 1, 0, 2]  # "a" ends 0 and 2


def test_ends_by_the_table_are_the_ends_by_ranges():
    trie = build_trie(TOKENS)
    for d, node in ((0, [2, 0, 0, 1, 2]), (1, [1, 0, 1]), (2, [1, 1, 0]), (0, [])):
        node = np.array(node, dtype=np.int64)
        owner, tokens = _ends(trie, d, node)
        want_owner, pos = walk_mod._expand(trie.end_start[d][node], trie.end_end[d][node])
        assert owner.tolist() == want_owner.tolist()
        assert tokens.tolist() == trie.end_tokens[d][pos].tolist()
        assert owner.dtype == want_owner.dtype and tokens.dtype == np.int32
    owner, tokens = _ends(trie, 0, np.array([2, 0, 0, 1, 2]))
    assert owner.tolist() == [0, 1, 2, 3, 4] and tokens.tolist() == [7, 0, 0, 3, 7]
    owner, tokens = _ends(build_trie([b"ab", b"b"]), 0, np.array([0, 1, 0]))
    assert owner.tolist() == [1] and tokens.tolist() == [1]


def test_a_walk_over_a_trie_with_repeated_tokens_allows_each():
    # state 0 --a--> 1 --b--> 2, 0 --b--> 2; every state reads no more
    t = np.full((3, 256), -1, dtype=np.int32)
    t[0, ord("a")], t[1, ord("b")], t[0, ord("b")] = 1, 2, 2
    for tokens, want in (([b"a", b"ab", b"a", b"b", b"bb"], [(0, 0, 1), (0, 1, 2), (0, 2, 1), (0, 3, 2),
                                                              (1, 3, 2)]),
                         ([b"a", b"ab", b"b", b"bb"], [(0, 0, 1), (0, 1, 2), (0, 2, 2), (1, 2, 2)])):
        r = walk(t, build_trie(tokens), share=False)
        assert list(zip(r.state.tolist(), r.token.tolist(), r.next_state.tolist())) == want


def test_expand_gives_each_range_element_with_its_owner():
    owner, pos = walk_mod._expand(np.array([5, 0, 9, 2], dtype=np.int64), np.array([8, 0, 10, 4], dtype=np.int64))
    assert owner.tolist() == [0, 0, 0, 2, 3, 3] and pos.tolist() == [5, 6, 7, 9, 2, 3]
    assert owner.dtype == np.int64 and pos.dtype == np.int64
    owner, pos = walk_mod._expand(np.array([3], dtype=np.int32), np.array([3], dtype=np.int32))
    assert owner.tolist() == [] and pos.tolist() == []
    rng = np.random.default_rng(7)
    starts = rng.integers(0, 1000, 500)
    ends = starts + rng.integers(0, 5, 500)
    owner, pos = walk_mod._expand(starts.astype(np.int32), ends.astype(np.int32))
    assert owner.tolist() == [i for i in range(500) for _ in range(ends[i] - starts[i])]
    assert pos.tolist() == [p for i in range(500) for p in range(starts[i], ends[i])]
    assert pos.dtype == np.int64
