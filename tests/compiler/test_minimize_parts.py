"""Issue 31 (tenth round): minimization's parts made cheaper without changing what it returns: members in any
order hand :func:`~callmaybe.compiler.automata.dfa.minimize` a smaller automaton of their language, the trim
finds the states to keep without ordering them, and the incremental refinement finds the blocks recomputed
whole from its sorted candidates."""

import numpy as np

from callmaybe.compiler import limits
from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.automata import reach
from callmaybe.compiler.automata.compose import literals, members_any_order
from callmaybe.compiler.automata.reach import reachable
from callmaybe.compiler.limits import Budget, CompileLimits

TEXTS = [b"{}", b'{"a": 1}', b'{"a": 10, "b": 2}', b'{"b": 2, "a": 1}', b'{"c": 3, "a": 1, "b": 2}',
         b'{"a": 1, "a": 1, "b": 2}', b'{"b": 2}', b'{"a": 1, "c": 3}', b'{"b": 2,"a": 1}']


def _members():
    pairs = [literals([b'"a": 1', b'"a": 10']), literals([b'"b": 2']), literals([b'"c": 3'])]
    return members_any_order(pairs, [True, True, False])


def _plain(dfa):
    """The same arrays without the equivalent automaton that minimize would use."""
    return D.ByteDFA(dfa.transitions, dfa.accepting, dfa.start)


def test_members_give_minimize_a_smaller_automaton_of_their_language():
    out = _members()
    smaller = out.__dict__["_equivalent"]()
    # the same table (what joins count and pair), 79 states reachable of 83; the equivalent reaches 57
    assert (out.num_states, smaller.num_states) == (83, 83)
    assert (int(reachable(out.transitions, 0).sum()), int(reachable(smaller.transitions, 0).sum())) == (79, 57)
    assert [t for t in TEXTS if out.accepts(t)] == [t for t in TEXTS if smaller.accepts(t)] == [
        b'{"a": 10, "b": 2}', b'{"b": 2, "a": 1}', b'{"c": 3, "a": 1, "b": 2}', b'{"a": 1, "a": 1, "b": 2}']
    got, alone = D.minimize(out), D._minimize(_plain(out))
    assert got.num_states == 52
    assert np.array_equal(got.transitions, alone.transitions) and np.array_equal(got.accepting, alone.accepting)
    assert got.start == alone.start == 0


def test_members_count_the_same_states_and_without_required_members_give_nothing():
    budget = Budget(CompileLimits(), lambda at: at)
    with limits.active(budget):
        D.minimize(_members())
    assert budget.used["states"] == 174  # as on main (4af6541): the equivalent automaton counts nothing
    plain = members_any_order([literals([b'"a": 1']), literals([b'"b": 2'])], [False, False])
    assert "_equivalent" not in plain.__dict__


def test_members_with_a_shared_value_and_a_shared_key_prefix():
    # "ab" and "ac" share a prefix (a state that reaches both ends is not merged); the values are alike
    pairs = [literals([b'"ab": 1']), literals([b'"ac": 1']), literals([b'"d": 1'])]
    out = members_any_order(pairs, [True, True, False])
    smaller = out.__dict__["_equivalent"]()
    assert (int(reachable(out.transitions, 0).sum()), int(reachable(smaller.transitions, 0).sum())) == (79, 59)
    got, alone = D.minimize(out), D._minimize(_plain(out))
    assert got.num_states == alone.num_states == 38
    assert np.array_equal(got.transitions, alone.transitions)
    assert [t for t in (b'{"ab": 1, "ac": 1}', b'{"ac": 1, "d": 1, "ab": 1}', b'{"ab": 1}') if got.accepts(t)] == [
        b'{"ab": 1, "ac": 1}', b'{"ac": 1, "d": 1, "ab": 1}']


def _bfs(trans, start):
    seen, queue = {start}, [start]
    for q in queue:
        for t in trans[q].tolist():
            if t >= 0 and t not in seen:
                seen.add(t)
                queue.append(t)
    return sorted(seen)


def test_reachable_by_a_queue_and_by_scipy(monkeypatch):
    rng = np.random.default_rng(31)
    for _ in range(40):
        n = int(rng.integers(1, 60))
        trans = np.where(rng.random((n, 8)) < 0.15, rng.integers(0, n, (n, 8)), -1).astype(np.int32)
        start = int(rng.integers(0, n))
        want = _bfs(trans, start)
        assert np.flatnonzero(reachable(trans, start)).tolist() == want
        monkeypatch.setattr(reach, "SMALL_EDGES", 0)
        assert np.flatnonzero(reachable(trans, start)).tolist() == want
        monkeypatch.setattr(reach, "SMALL_EDGES", 16384)
    chain = np.full((4, 256), -1, dtype=np.int32)
    chain[0, 97:100] = 1  # a run of three bytes to one target, and a state (3) that nothing reaches
    chain[1, 98] = 2
    chain[3, 97] = 0
    assert reachable(chain, 0).tolist() == [True, True, True, False]


def test_trim_keeps_the_table_when_nothing_is_removed_and_removes_in_state_order():
    ct = np.array([[1, -1], [2, 1], [-1, -1]], dtype=np.int32)
    acc = np.array([False, False, True])
    got, got_acc, start = D._trim_classes(ct, acc, 0)
    assert got is ct and got_acc is acc and start == 0
    # state 1 cannot accept, state 3 is not reached: kept 0, 2, 4 as 0, 1, 2 (the start now 1)
    ct = np.array([[1, 4], [1, -1], [0, -1], [0, 0], [-1, -1]], dtype=np.int32)
    acc = np.array([False, False, False, False, True])
    got, got_acc, start = D._trim_classes(ct, acc, 2)
    assert got.tolist() == [[-1, 2], [0, -1], [-1, -1]] and got_acc.tolist() == [False, False, True]
    assert start == 1


def _partition(block):
    """The blocks as sorted lists of states, sorted: a numbering-free form."""
    return sorted(np.flatnonzero(block == b).tolist() for b in np.unique(block))


def test_incremental_refinement_is_moores():
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(200):
        n = int(rng.integers(2, 50))
        ct = np.where(rng.random((n, 3)) < 0.7, rng.integers(0, n, (n, 3)), -1).astype(np.int32)
        acc = rng.random(n) < 0.3
        mult = np.random.default_rng(0x5EED).integers(1, 2**63, size=4, dtype=np.uint64) | np.uint64(1)
        got = D._refine_incremental(ct, acc.astype(np.int64), mult)
        assert _partition(got) == _partition(D._refine_exact(ct, acc))
        checked += len(np.unique(got)) < n
    assert checked == 41  # automata where some states merge
