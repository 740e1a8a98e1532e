"""Issue 31 (seventh round): the parts made faster for JSONSchemaBench's tail give what the constructions they
replaced give: the searches of small automata by a queue in Python, a pattern's candidates paired with one rep
and cut into groups that share it, the first level of a walk from the states' rows, edges deduplicated after
dropping repeated neighbours, and shapes computed near the states asked only."""

import numpy as np
import pytest

from callmaybe.compiler.automata import reach
from callmaybe.compiler.automata.dfa import byte_classes
from callmaybe.compiler.index import walk as walk_mod
from callmaybe.compiler.index.table import unique_edges
from callmaybe.compiler.index.trie import build_trie
from callmaybe.compiler.index.walk import _first_level, _groups, row_kinds, shapes

from .test_dfa import _runs


def _both(monkeypatch, fn, *args):
    """``fn(*args)`` by the numpy search (SMALL_EDGES -1) and by the queue (SMALL_EDGES large)."""
    monkeypatch.setattr(reach, "SMALL_EDGES", -1)
    by_levels = fn(*args)
    monkeypatch.setattr(reach, "SMALL_EDGES", 10**9)
    return by_levels, fn(*args)


def test_the_queue_search_is_the_level_search(monkeypatch):
    # 0 -b-> 1, 0 -a-> 2, 0 -c-> 1 (1 is met at "b" after 2 at "a"), 2 -x-> 3 (accepting), 1 -y-> 4 (dead end)
    t = np.full((5, 256), -1, dtype=np.int32)
    t[0, ord("b")], t[0, ord("a")], t[0, ord("c")], t[2, ord("x")], t[1, ord("y")] = 1, 2, 1, 3, 4
    accepting = np.array([False, False, False, True, False])
    for by_levels, by_queue in (_both(monkeypatch, reach.bfs_order, t, 0), _both(monkeypatch, reach.bfs_order, t, 1)):
        assert by_queue.dtype == by_levels.dtype == np.int64
        assert by_queue.tolist() == by_levels.tolist()
    assert reach.bfs_order(t, 0).tolist() == [0, 2, 1, 3, 4]
    assert reach.bfs_order(t, 1).tolist() == [1, 4]
    by_levels, by_queue = _both(monkeypatch, reach.coreachable, t, accepting)
    assert by_queue.tolist() == by_levels.tolist() == [True, False, True, True, False]
    rng = np.random.default_rng(31)
    for n in (1, 7, 60, 500):
        for table in (_runs(rng, n), byte_classes(_runs(rng, n))[1]):
            accepting = rng.random(n) < 0.05
            for start in {0, n // 2}:
                a, b = _both(monkeypatch, reach.bfs_order, table, start)
                assert np.array_equal(a, b) and a.dtype == b.dtype
            a, b = _both(monkeypatch, reach.coreachable, table, accepting)
            assert np.array_equal(a, b) and a.dtype == b.dtype == bool


def _strings_automaton(k: int) -> np.ndarray:
    """``k`` string contents alike up to their closing quote, each followed by its own key byte: state 3i is
    content i (printable bytes loop, ``"`` -> 3i + 1), 3i + 1 reads key byte ``a + i`` -> 3i + 2 (accepting),
    and every other content's bytes; returned with a last state that nothing enters."""
    t = np.full((3 * k + 1, 256), -1, dtype=np.int32)
    for i in range(k):
        t[3 * i, 0x20:0x7F] = 3 * i
        t[3 * i, ord('"')] = 3 * i + 1
        t[3 * i + 1, ord("a") + i] = 3 * i + 2
    return t


def test_one_pairing_cut_into_groups_that_share_the_rep():
    t = _strings_automaton(7)
    _, ct = byte_classes(t)
    members = [0, 3, 6, 9, 12, 15, 18]
    groups, left = _groups(ct, members, 3, kind=row_kinds(ct))
    assert [g.members.tolist() for g in groups] == [[0, 3, 6], [9, 12, 15]]
    assert left == [18]  # a last piece of one member goes back to the pool
    assert all(g.rep == 0 for g in groups)
    assert groups[0].cols is groups[1].cols
    groups, left = _groups(ct, members, 7, kind=row_kinds(ct))
    assert [g.members.tolist() for g in groups] == [members] and left == []


@pytest.mark.parametrize("size", [2, 3, 1024])
def test_a_walk_in_shared_groups_is_the_walk_apart(monkeypatch, size):
    t = _strings_automaton(9)
    tokens = [b"a", b"ab", b"x", b'x"', b'"', b'"b', b'"c', b"yy", b'yy"d', b"\x7f"]
    trie = build_trie(tokens)
    monkeypatch.setattr(walk_mod, "GROUP_SHARED_MEMBERS", size)
    shared, apart = walk_mod.walk(t, trie), walk_mod.walk(t, trie, share=False)
    assert shared.groups and max(len(g.members) for g in shared.groups) == min(size, 9)
    for key in ("state", "token", "next_state"):
        assert np.array_equal(getattr(shared, key), getattr(apart, key)), key
    # content 4 (state 12): every token but "\x7f" and those whose byte after the quote is not "e"
    four = apart.token[apart.state == 12].tolist()
    assert [tokens[i] for i in four] == [b"a", b"ab", b"x", b'x"', b'"', b"yy"]


def test_first_level_from_the_rows_is_every_live_first_byte():
    trie = build_trie([b"b", b"a", b"ab", b"\xff", b"c"])  # first bytes a, b, c, 0xff: nodes 0..3
    t = np.full((3, 256), -1, dtype=np.int32)
    t[0, ord("a")], t[0, 0xFF], t[2, ord("c")], t[2, ord("b")], t[1, ord("z")] = 1, 2, 0, 1, 2
    start, node, cur = _first_level(t.reshape(-1), trie, np.array([2, 0, 1]))
    assert start.tolist() == [2, 2, 0, 0] and node.tolist() == [1, 2, 0, 3] and cur.tolist() == [1, 0, 1, 2]
    assert start.dtype == node.dtype == cur.dtype == np.int64


def test_unique_edges_by_a_sort_after_dropping_repeated_neighbours(monkeypatch):
    from callmaybe.compiler.index import table

    key = np.array([5, 5, 5, 2, 2, 9, 5, 5, 0, 9], dtype=np.int64)
    monkeypatch.setattr(table, "EDGE_BITMAP_MAX", 0)  # the sort
    src, dst = unique_edges(key, 4)
    assert src.tolist() == [0, 0, 1, 2] and dst.tolist() == [0, 2, 1, 1]
    monkeypatch.setattr(table, "EDGE_BITMAP_MAX", 1 << 25)  # the bitmap
    assert [a.tolist() for a in unique_edges(key, 4)] == [src.tolist(), dst.tolist()]
    assert [a.tolist() for a in unique_edges(np.array([3], dtype=np.int64), 4)] == [[0], [3]]


def _partition(values: np.ndarray) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for i, v in enumerate(values.tolist()):
        groups.setdefault(v, []).append(i)
    return sorted(groups.values())


def test_shapes_near_the_states_asked_are_the_shapes_of_the_whole():
    rng = np.random.default_rng(5)
    for n in (20, 300):
        for effects in (False, True):
            ct = byte_classes(_runs(rng, n))[1]
            eff = rng.integers(0, 2, size=ct.shape) * (ct >= 0) if effects else None
            whole = shapes(ct, eff)
            for _ in range(5):
                asked = np.unique(rng.integers(0, n, size=int(rng.integers(1, 12))))
                near = shapes(ct, eff, states=asked)
                assert (near[asked] >= 0).all()
                assert _partition(near[asked]) == _partition(whole[asked])
    # two copies of a chain a -> b -> c -> accept and one a -> b -> d: alike to depth 1, apart at depth 2
    t = np.full((11, 256), -1, dtype=np.int32)
    for base, last in ((0, "c"), (4, "c"), (8, "d")):
        t[base, ord("a")], t[base + 1, ord("b")] = base + 1, base + 2
        if base + 3 < 11:
            t[base + 2, ord(last)] = base + 3
    ct = byte_classes(t)[1]
    asked = np.array([0, 4, 8])
    assert _partition(shapes(ct, depth=1, states=asked)[asked]) == [[0, 1, 2]]
    assert _partition(shapes(ct, depth=2, states=asked)[asked]) == [[0, 1], [2]]
    assert shapes(ct, states=np.array([4]))[[0, 8]].tolist() == [-1, -1]


def test_a_small_automaton_minimized_again_comes_from_the_cache(monkeypatch):
    from callmaybe.compiler.automata import dfa as D

    cache = D.MinimalCache(maxsize=2, max_states=4)
    monkeypatch.setattr(D, "MINIMAL_CACHE", cache)
    calls = []
    real = D._minimize
    monkeypatch.setattr(D, "_minimize", lambda dfa: calls.append(dfa.num_states) or real(dfa))
    # "ab" with a duplicate accepting state (4 states, minimal: 3), and "a" then any of "bc" (3 states)
    t = np.full((4, 256), -1, dtype=np.int32)
    t[0, ord("a")], t[1, ord("b")], t[1, ord("c")] = 1, 2, 3
    ab = D.ByteDFA(t, np.array([False, False, True, True]), 0)
    first = D.minimize(ab)
    again = D.minimize(D.ByteDFA(t.copy(), ab.accepting.copy(), 0))
    assert calls == [4] and first.num_states == again.num_states == 3
    assert again.transitions is first.transitions and D.is_minimal(again) and again is not first
    t5 = np.full((5, 256), -1, dtype=np.int32)
    t5[0, ord("x")], t5[1, ord("y")], t5[2, ord("z")], t5[3, ord("w")] = 1, 2, 3, 4
    chain = D.ByteDFA(t5, np.array([False] * 4 + [True]), 0)
    D.minimize(chain), D.minimize(chain)  # past max_states: minimized each time
    assert calls == [4, 5, 5]
    other = D.ByteDFA(t, np.array([False, True, False, False]), 0)  # "a" alone: another key
    for dfa in (other, ab):
        D.minimize(dfa)
    assert calls == [4, 5, 5, 4]
    # a third: "a" alone is the least recently used (ab was asked after it), dropped; then asked again
    for dfa in (D.ByteDFA(t, np.array([False, False, False, True]), 0), other):
        D.minimize(dfa)
    assert calls == [4, 5, 5, 4, 4, 4]
    assert cache.key(chain) is None and len(cache.key(ab)) == 32
    small = D.MinimalCache(maxsize=10, max_states=4, max_total=5)  # two of 3 states pass 5: the older out
    monkeypatch.setattr(D, "MINIMAL_CACHE", small)
    for dfa in (ab, D.ByteDFA(t, np.array([False, False, False, True]), 0), ab):
        D.minimize(dfa)
    assert calls == [4, 5, 5, 4, 4, 4, 4, 4, 4] and small._states == 3


def test_escape_states_lead_into_strings_and_are_grouped_too():
    """A string's escape state after a backslash has 8 live bytes, 7 of which lead back into the string: with
    ``deeper`` (a plain automaton's walk) the escape states of several strings are grouped like their contents,
    and the walk stays the walk apart."""
    from callmaybe.compiler.grammar import compile_grammar
    from callmaybe.core.catalog import parse_catalog

    fns = parse_catalog([{"name": "f", "parameters": {k: {"type": "string"} for k in ("a", "b", "c", "d")}}], "t")
    dfa = compile_grammar(fns).dfa
    head = b'{"name": "f", "parameters": {"a": "'
    escapes = [dfa.state_after(head + b"".join(b'x", "' + k + b'": "' for k in (b"b", b"c", b"d")[:i]) + b"\\")
               for i in range(4)]
    assert all(s >= 0 for s in escapes) and int((dfa.transitions[escapes[0]] >= 0).sum()) == 8
    _, ct = byte_classes(dfa.transitions)
    states = np.arange(dfa.num_states)

    def grouped(deeper):
        return {int(m) for g in walk_mod.iter_state_groups(dfa.transitions, states, ct, deeper=deeper)
                for m in g.members}

    assert not set(escapes) & grouped(False)
    assert set(escapes) <= grouped(True)
    tokens = [b"\\", b"\\n", b"nx", b"n", b'n"', b'"', b'", "b', b"u00", b"\\u00e9", b"x"]
    trie = build_trie(tokens)
    shared, apart = walk_mod.walk(dfa.transitions, trie), walk_mod.walk(dfa.transitions, trie, share=False)
    assert any(set(escapes) <= set(g.members.tolist()) for g in shared.groups)
    for key in ("state", "token", "next_state"):
        assert np.array_equal(getattr(shared, key), getattr(apart, key)), key


def test_live_hashes_are_the_dense_hashes():
    from callmaybe.compiler.automata.dfa import _live_hashes

    ct = np.array([[1, -1, 2], [-1, -1, -1], [0, 0, -1]], dtype=np.int32)
    mult = np.array([99, 3, 5, 7], dtype=np.uint64)  # the first (the state's own block) is not used here
    block = np.array([4, 0, 1], dtype=np.int64)
    src, cls = np.nonzero(ct >= 0)
    dst, w, at = ct[src, cls].astype(np.int64), mult[1:][cls], np.searchsorted(src, np.arange(4))
    # state 0: 3 x (block[1] + 1) + 7 x (block[2] + 1) = 3 + 14; state 1: no live class; state 2: 3 x 5 + 5 x 5
    assert _live_hashes(np.arange(3), block, at, dst, w).tolist() == [17, 0, 40]
    assert _live_hashes(np.array([2, 0]), block, at, dst, w).tolist() == [40, 17]
    rng = np.random.default_rng(9)
    for n in (1, 40, 2000):
        ct = rng.integers(-1, n, size=(n, 30)).astype(np.int32)
        ct[rng.random(ct.shape) < 0.8] = -1
        mult = rng.integers(1, 2**63, size=31, dtype=np.uint64)
        block = rng.integers(0, 9, n).astype(np.int64)
        src, cls = np.nonzero(ct >= 0)
        dst, w, at = ct[src, cls].astype(np.int64), mult[1:][cls], np.searchsorted(src, np.arange(n + 1))
        cand = np.unique(rng.integers(0, n, size=max(1, n // 2)))
        dense = np.where(ct[cand] >= 0, block[np.maximum(ct[cand], 0)], -1)
        assert np.array_equal(_live_hashes(cand, block, at, dst, w), (dense.astype(np.uint64) + np.uint64(1)) @ mult[1:])
