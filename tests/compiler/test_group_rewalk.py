"""Issue 31 (ninth round): a group's walk less its heavy members derived from the walk of the whole group (not
walked again), and a plain automaton's pairing cut at GROUP_PLAIN_PAIRS rep states: the same walks."""

import numpy as np
import pytest

from callmaybe.compiler.automata.dfa import byte_classes
from callmaybe.compiler.index import walk as walk_mod
from callmaybe.compiler.index.trie import build_trie
from callmaybe.compiler.index.walk import _groups, _match, _walk_group, row_kinds

from .test_compile_tail import _strings_automaton

TOKENS = [b"a", b"ab", b"x", b'x"', b'"', b'"b', b'"c', b"yy", b'yy"d', b"\x7f", b'"e', b'x"f']


def _group(k: int = 9):
    t = _strings_automaton(k)
    _, ct = byte_classes(t)
    groups, left = _groups(ct, [3 * i for i in range(k)], 1024, kind=row_kinds(ct))
    assert len(groups) == 1 and left == []
    return t, groups[0]


def _same(a, b) -> None:
    for key in ("tok", "end", "bits", "met", "members"):
        x, y = getattr(a, key), getattr(b, key)
        assert x.dtype == y.dtype and np.array_equal(x, y), key
    assert len(a.own) == len(b.own)
    for (ta, na), (tb, nb) in zip(a.own, b.own):
        assert np.array_equal(ta, tb) and np.array_equal(na, nb)
    assert not b.capped.any() and not a.capped.any()


@pytest.mark.parametrize("dropped", [[2, 5], [1], list(range(1, 8)), list(range(1, 66))])
def test_a_walk_less_some_members_is_the_walk_of_the_smaller_group(dropped):
    k = 70 if max(dropped) >= 8 else 9  # 70 members: two words of member bits, down to one
    t, g = _group(k)
    trie = build_trie(TOKENS)
    whole = _walk_group(t.reshape(-1), trie, g)
    drop = np.zeros(k, dtype=bool)
    drop[dropped] = True
    derived = whole.without(drop)
    _same(derived, _walk_group(t.reshape(-1), trie, g.without(drop)))
    assert derived.members.tolist() == [3 * i for i in range(k) if i not in dropped]
    assert derived.bits.shape[1] == (1 if k - len(dropped) <= 64 else 2)
    # content 3 (state 9): the tokens that stay in the string, or close it and go on with its key byte "d"
    if 3 not in dropped:
        tok, nxt = derived.piece(int(np.flatnonzero(derived.members == 9)[0]))
        assert [TOKENS[i] for i in tok.tolist()] == [b"a", b"ab", b"x", b'x"', b'"', b"yy", b'yy"d']
        assert nxt.tolist() == [9, 9, 9, 10, 10, 9, 11]


def test_a_walk_less_all_but_one_member_is_none_and_capped_members_must_go():
    t, g = _group()
    trie = build_trie(TOKENS)
    whole = _walk_group(t.reshape(-1), trie, g)
    drop = np.ones(9, dtype=bool)
    drop[0] = False
    assert whole.without(drop) is None
    whole.capped[4] = True
    with pytest.raises(ValueError, match="^a member kept was capped: its own walk is incomplete$"):
        whole.without(np.eye(9, dtype=bool)[5])
    assert whole.without(np.eye(9, dtype=bool)[4]).members.tolist() == [0, 3, 6, 9, 15, 18, 21, 24]


def test_a_walk_with_heavy_members_is_the_walk_apart(monkeypatch):
    """Members whose own walks are heavy are grouped again apart, and the group less them is derived: with
    HEAVY_MIN 1, every member that walks something of its own (past its closing quote) is heavy."""
    t = _strings_automaton(9)
    trie = build_trie(TOKENS)
    monkeypatch.setattr(walk_mod, "HEAVY_MIN", 1)
    monkeypatch.setattr(walk_mod, "HEAVY_SHARE", 0.0)
    calls = []
    real = walk_mod.GroupWalk.without
    monkeypatch.setattr(walk_mod.GroupWalk, "without", lambda self, drop: calls.append(drop.sum()) or real(self, drop))
    shared, apart = walk_mod.walk(t, trie), walk_mod.walk(t, trie, share=False)
    assert calls  # the heavy round ran
    for key in ("state", "token", "next_state"):
        assert np.array_equal(getattr(shared, key), getattr(apart, key)), key


def test_a_pairing_stops_after_max_pairs_rep_states():
    t = _strings_automaton(3)
    _, ct = byte_classes(t)
    members = np.array([0, 3, 6])
    cols, col_of, phi, core = _match(ct, 0, members, kind=row_kinds(ct), max_pairs=1)
    assert cols.tolist() == [0, 1] and phi.tolist() == [[0, 1], [3, 4], [6, 7]]
    assert core.tolist() == [[True, False]] * 3
    cols, col_of, phi, core = _match(ct, 0, members, kind=row_kinds(ct))
    assert cols.tolist() == [0, 1, 2] and phi.tolist() == [[0, 1, 2], [3, 4, -1], [6, 7, -1]]
    assert core.tolist() == [[True, True, True], [True, False, False], [True, False, False]]  # the rep: itself


@pytest.mark.parametrize("pairs", [1, 2, 64])
def test_a_plain_walk_with_fewer_pairs_is_the_walk_apart(monkeypatch, pairs):
    t = _strings_automaton(9)
    trie = build_trie(TOKENS)
    monkeypatch.setattr(walk_mod, "GROUP_PLAIN_PAIRS", pairs)
    seen = []
    real = walk_mod._match
    monkeypatch.setattr(walk_mod, "_match", lambda *a: seen.append(a[-1]) or real(*a))
    shared, apart = walk_mod.walk(t, trie), walk_mod.walk(t, trie, share=False)
    assert seen and set(seen) == {pairs}
    for key in ("state", "token", "next_state"):
        assert np.array_equal(getattr(shared, key), getattr(apart, key)), key
