"""The JSON strings of ``lo``..``hi`` decoded code points (``minLength``/``maxLength``): a counter automaton
built directly, not through a regex.

One *unit* is the JSON text of one decoded code point, :data:`~.lexical.COUNTED_CHAR`: a character as
itself (1 to 4 UTF-8 bytes), a short escape (``\\n``), a ``\\uXXXX`` escape of a non-surrogate, or a
surrogate-pair escape ``\\ud83d\\ude00`` (one code point; lone surrogate escapes are refused). Its minimal
byte DFA (:func:`unit`, 21 states, the accepting one without transitions since no unit is a prefix of
another) is copied once per count: state ``(k, s)`` is unit state ``s`` after ``k`` whole units, and a
completed unit moves to ``(k + 1, start)``; without ``hi`` the copy at ``lo`` loops into itself (and the
``lo``-th unit, once begun, continues in it). The
automaton has ``(count + 1) x 20 + 2`` states (``count`` = ``hi``, or ``lo`` when unbounded), each counted
against the compile budget's ``states`` before it is allocated (:mod:`..limits`), so a length the budget
cannot hold is refused with a CompileLimitError instead of being dropped.

Because a unit is defined on the decoded value, intersecting this automaton with a pattern or format
automaton (:func:`~.compose.intersect`) over the same JSON text keeps exactly the texts whose decoded value
satisfies both, whatever spelling each automaton allows for a character.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache

import numpy as np

from . import dfa as D
from .dfa import ByteDFA
from .lexical import COUNTED_CHAR
from ..limits import count_states

_QUOTE = 0x22


@lru_cache(maxsize=1)
def unit() -> ByteDFA:
    """The minimal byte DFA of one unit (:data:`~.lexical.COUNTED_CHAR`), with one accepting state that has
    no transitions."""
    dfa = D.from_regex(COUNTED_CHAR)
    final = np.flatnonzero(dfa.accepting)
    assert len(final) == 1 and not (dfa.transitions[final[0]] >= 0).any(), "a unit is a prefix of another"
    return dfa


def unit_states() -> int:
    """The states of one count in :func:`length_dfa` (the unit's states but its accepting one)."""
    return unit().num_states - 1


def _unit_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unit's states but its accepting one, numbered 0..m-1, as rows to copy: ``local`` int64 (unit
    states,) each state's number (-1: the accepting one); ``stay`` int64 (m, 256) the numbered target of each
    transition inside the unit, -1 elsewhere; ``done`` bool (m, 256) where a transition completes the unit."""
    u = unit()
    final = int(np.flatnonzero(u.accepting)[0])
    keep = np.array([s for s in range(u.num_states) if s != final])
    local = np.full(u.num_states, -1, dtype=np.int64)
    local[keep] = np.arange(len(keep))
    t = u.transitions[keep].astype(np.int64)  # (m, 256)
    return local, np.where((t >= 0) & (t != final), local[np.maximum(t, 0)], -1), t == final


def length_dfa(lo: int, hi: int | None) -> ByteDFA:
    """The byte DFA of the JSON strings (with their quotes) of ``lo``..``hi`` decoded code points (``hi``
    None: no upper bound); minimal once trimmed (the states of the last copy that cannot finish a unit,
    and those of copy ``lo`` - 1 past its start when unbounded, are unreachable or dead).

    Raises ValueError when ``lo`` < 0 or ``hi`` < ``lo``; CompileLimitError when its states pass the compile
    budget (counted before anything is allocated)."""
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"no string has {lo}..{hi} code points")
    u = unit()
    m = unit_states()
    copies = (hi if hi is not None else lo) + 1
    count_states(copies * m + 2, leaf=True)
    local, stay, done = _unit_rows()
    k = np.arange(copies, dtype=np.int64)
    base = (k * m)[:, None, None]
    blocks = np.where(stay[None] >= 0, stay[None] + base, -1)
    after = (k + 1) * m + local[u.start]  # the start of the next count
    if hi is None:
        after[-1] = (copies - 1) * m + local[u.start]  # at lo and beyond: loop
    else:
        after[-1] = -1  # no unit after hi
    blocks = np.where(done[None], after[:, None, None], blocks)
    if hi is None and lo > 0:  # inside the lo-th unit the count is reached already: share the loop's states
        blocks[lo - 1] = np.where(done, after[lo - 1], np.where(stay >= 0, stay + lo * m, -1))
    n = copies * m + 2
    trans = np.full((n, 256), -1, dtype=np.int32)
    trans[: copies * m] = blocks.reshape(copies * m, 256)
    begin, end = copies * m, copies * m + 1
    trans[begin, _QUOTE] = local[u.start]
    closing = np.arange(lo, copies) * m + local[u.start]
    trans[closing, _QUOTE] = end
    accepting = np.zeros(n, dtype=bool)
    accepting[end] = True
    return ByteDFA(trans, accepting, begin)


_CACHE: OrderedDict[tuple[int, int | None], ByteDFA] = OrderedDict()
_LOCK = threading.Lock()


def cached_length_dfa(lo: int, hi: int | None) -> ByteDFA:
    """:func:`length_dfa`, trimmed (so minimal), kept per process for the last 64 (lo, hi) pairs (shared: callers never
    modify it; a hit counts nothing against the budget, as the leaf cache of :mod:`.nodes`)."""
    key = (lo, hi)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    dfa = D.trim(length_dfa(lo, hi))
    with _LOCK:
        _CACHE[key] = dfa
        while len(_CACHE) > 64:
            _CACHE.popitem(last=False)
    return dfa


def counted_length_dfa(lo: int, hi: int, k: int) -> ByteDFA:
    """The marked byte DFA (:mod:`.counters`) of the JSON strings of ``lo``..``hi`` decoded code points:
    ``" R_k U{lo} (N_k U)* "``, ``lo`` copies of the unit then one loop whose iterations counter ``k``
    (bound ``hi - lo``) counts. ``(lo + 1) x 20 + 4`` states, counted against the compile budget.

    Raises ValueError when ``lo`` < 0 or ``hi`` < ``lo``."""
    from .counters import next_byte, reset_byte

    if lo < 0 or hi < lo:
        raise ValueError(f"no string has {lo}..{hi} code points")
    u = unit()
    m = unit_states()
    count_states((lo + 1) * m + 4, leaf=True)
    local, stay, done = _unit_rows()
    head = (lo + 1) * m
    begin, end, reset = head + 1, head + 2, head + 3
    trans = np.full((head + 4, 256), -1, dtype=np.int32)
    for j in range(lo + 1):  # copies 0..lo-1, then the loop's copy (index lo)
        after = (j + 1) * m + local[u.start] if j + 1 < lo else head
        trans[j * m : (j + 1) * m] = np.where(done, after, np.where(stay >= 0, stay + j * m, -1))
    trans[begin, _QUOTE] = reset
    trans[reset, reset_byte(k)] = local[u.start] if lo else head
    trans[head, next_byte(k)] = lo * m + local[u.start]
    trans[head, _QUOTE] = end
    accepting = np.zeros(head + 4, dtype=bool)
    accepting[end] = True
    return ByteDFA(trans, accepting, begin)
