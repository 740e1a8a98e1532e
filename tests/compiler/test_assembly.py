"""One transition table from copies and new states (:mod:`callmaybe.compiler.automata.assembly`), and the
object automaton's edits checked together (``object_automaton._edit``): exact arrays and errors."""

from __future__ import annotations

import numpy as np
import pytest

from callmaybe.compiler.automata.assembly import Assembly
from callmaybe.compiler.automata.dfa import ByteDFA
from callmaybe.compiler.automata.object_automaton import _edit
from callmaybe.core.errors import SchemaError


def dfa(rows: dict[int, dict[int, int]], n: int, dtype=np.int32) -> ByteDFA:
    t = np.full((n, 256), -1, dtype=dtype)
    for s, row in rows.items():
        for b, q in row.items():
            t[s, b] = q
    return ByteDFA(t, np.zeros(n, dtype=bool), 0)


def test_copies_are_moved_up_by_their_offset_and_new_states_are_dead():
    a = Assembly()
    assert a.fresh(2) == 0
    assert a.copy(dfa({0: {97: 1}, 1: {98: 0, 99: 1}}, 2)) == 2
    assert a.fresh(1) == 4
    assert a.fresh(2) == 5  # joined to the run before it
    assert a.copy(dfa({0: {120: 0}}, 1, dtype=np.int64)) == 7
    assert a.size == 8
    t = a.table()
    assert t.dtype == np.int32 and t.shape == (8, 256)
    live = {(int(s), int(b)): int(t[s, b]) for s, b in zip(*np.nonzero(t >= 0))}
    assert live == {(2, 97): 3, (3, 98): 2, (3, 99): 3, (7, 120): 7}
    assert (t[t < 0] == -1).all()
    assert len(a._parts) == 4


def test_nothing_added_is_an_empty_table():
    assert Assembly().table().shape == (0, 256)


def test_edits_set_transitions_and_refuse_a_second_target():
    t = np.full((3, 256), -1, dtype=np.int32)
    t[0, 1] = 2
    _edit(t, [(1, 5, 2), (1, 5, 2), (0, 1, 2), (2, 7, 0)])  # a repeated edit, and one the state has already
    assert {(int(s), int(b)): int(t[s, b]) for s, b in zip(*np.nonzero(t >= 0))} == {
        (0, 1): 2, (1, 5): 2, (2, 7): 0}
    with pytest.raises(SchemaError, match="^object automaton: two transitions on one byte$"):
        _edit(t.copy(), [(0, 1, 1)])  # the state goes to 2 on byte 1 already
    with pytest.raises(SchemaError, match="^object automaton: two transitions on one byte$"):
        _edit(t.copy(), [(1, 9, 0), (1, 9, 1)])
