"""Byte-level DFAs: regex -> character FSM -> DFA over UTF-8 bytes, plus trimming, byte classes and
minimization.

interegular (https://github.com/MegaIng/interegular) parses the regex; its DFA over *characters* is built
from that parse by :mod:`.positions` (the position automaton and the subset construction; interegular's own
construction for the lookarounds and flags it leaves). A tokenizer's tokens are *bytes* and may end inside a
character, so each character transition is expanded into UTF-8 byte transitions. Code points are handled as
sorted intervals: for every lead byte, the block of code points it starts is intersected with the state's
intervals and the remainder is expanded one continuation byte at a time; intermediate states are memoized on
(continuation bytes left, relative interval map), so all states that accept "any character" share the same
few intermediate states (the classic UTF-8 range construction of RE2 / Rust's regex-syntax
``Utf8Sequences``, written here from the UTF-8 definition in RFC 3629: no overlong forms, no surrogates
U+D800-U+DFFF, nothing above U+10FFFF; the interval helpers are in :mod:`.intervals`).

Larger automata are composed from these (:mod:`.nodes`, :mod:`.compose`) rather than determinized from one
giant regex, then trimmed (unreachable and dead states removed) and minimized with Moore's partition
refinement, vectorized with numpy over byte classes.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import interegular
import interegular.fsm
import numpy as np
from interegular.fsm import anything_else

from ...core.errors import SchemaError
from .. import limits
from . import native, positions
from .counters import CounterClash, resolve
from .reach import bfs_order, coreachable, reachable
from ...core.intervals import MAX_CODE_POINT, SURROGATES, complement, normalize, restrict, subtract
from .unique import unique


class EmptyLanguage(SchemaError):
    """An automaton that accepts no text (a schema, or a combination of schemas, that admits no value)."""


@dataclass
class ByteDFA:
    """A deterministic automaton over bytes.

    ``transitions``: int32 array of shape (states, 256); entry ``[s, b]`` is the state after byte ``b``
    from state ``s``, or -1 (dead). ``accepting``: bool array of shape (states,). ``start``: the initial state.
    """

    transitions: np.ndarray
    accepting: np.ndarray
    start: int = 0
    #: the bounds of the counters whose markers it reads (:mod:`.counters`); () for a plain automaton
    counters: tuple = ()

    @property
    def num_states(self) -> int:
        """The number of states (rows of ``transitions``)."""
        return int(self.transitions.shape[0])

    def state_after(self, data: bytes, state: int | None = None) -> int:
        """The state after reading the bytes ``data`` from ``state`` (default: the start), or -1 once dead."""
        s = self.start if state is None else state
        for b in data:
            s = int(self.transitions[s, b])
            if s < 0:
                return -1
        return s

    def accepts(self, data: bytes) -> bool:
        """True when ``data`` (UTF-8 bytes) is in the language (for an automaton with counters: through its
        :meth:`transducer`, every count within its bound)."""
        if self.counters:
            return self.transducer().accepts(data)
        s = self.state_after(data)
        return s >= 0 and bool(self.accepting[s])

    def transducer(self):
        """The :class:`~.counters.Transducer` of an automaton with counters (memoized), None for a plain one.
        Raises CounterClash where its markers are ambiguous."""
        if not self.counters:
            return None
        got = self.__dict__.get("_transducer")
        if got is None:
            got = self.__dict__["_transducer"] = resolve(self.transitions, self.accepting, self.start, self.counters)
        return got


# ---------------------------------------------------------------------------------------------------------
# regex -> byte DFA


def _intervals_of_symbols(fsm: interegular.FSM,
                          atoms: dict[str, list[tuple[int, int]]] | None = None) -> dict[object, list[tuple[int, int]]]:
    """Map each symbol of ``fsm``'s alphabet to its sorted code-point intervals (surrogates excluded).

    ``atoms`` (optional): characters of the regex that stand for sets of code points (character -> sorted
    intervals); any other character stands for itself."""
    explicit: dict[object, list[tuple[int, int]]] = {}
    else_symbol = None
    for char, symbol in fsm.alphabet._symbol_mapping.items():
        if char is anything_else:
            else_symbol = symbol
        else:
            runs = atoms.get(char) if atoms else None
            explicit.setdefault(symbol, []).extend(runs if runs is not None else [(ord(char), ord(char))])
    result = {symbol: normalize(runs) for symbol, runs in explicit.items()}
    if else_symbol is not None:  # "anything else": every code point no symbol names
        gaps = complement(run for runs in explicit.values() for run in runs)
        result[else_symbol] = sorted(result.get(else_symbol, []) + gaps)
    return {symbol: subtract(runs, *SURROGATES) for symbol, runs in result.items()}


class _ByteBuilder:
    """Accumulates byte transitions; states 0..n-1 are the character FSM's, later ones are intermediate."""

    def __init__(self, num_states: int):
        self.rows: list[dict[int, int]] = [dict() for _ in range(num_states)]
        self.memo: dict[tuple, int] = {}

    def continuation(self, remaining: int, relmap: tuple) -> int:
        """The state that reads ``remaining`` continuation bytes (0x80-0xBF) according to ``relmap``."""
        if remaining == 0:
            assert len(relmap) == 1 and relmap[0][0] == 0 and relmap[0][1] == 0
            return relmap[0][2]
        key = (remaining, relmap)
        if key in self.memo:
            return self.memo[key]
        state = len(self.rows)
        self.rows.append({})
        self.memo[key] = state
        size = 64 ** (remaining - 1)
        starts = [r[0] for r in relmap]
        for j in range(64):
            sub = restrict(list(relmap), starts, j * size, (j + 1) * size - 1)
            if sub:
                self.rows[state][0x80 + j] = self.continuation(remaining - 1, sub)
        return state

    def add_state(self, state: int, intervals: list[tuple[int, int, int]]) -> None:
        """Add the byte transitions of character-FSM ``state`` whose code points go to targets by ``intervals``."""
        row = self.rows[state]
        starts = [r[0] for r in intervals]
        for lo, hi, target in intervals:
            for cp in range(lo, min(hi, 0x7F) + 1):
                row[cp] = target
        # (lead byte range, bits of the lead byte kept, continuation bytes, valid code points)
        for leads, mask, cont, valid_lo, valid_hi in (
            (range(0xC2, 0xE0), 0x1F, 1, 0x80, 0x7FF),
            (range(0xE0, 0xF0), 0x0F, 2, 0x800, 0xFFFF),
            (range(0xF0, 0xF5), 0x07, 3, 0x10000, MAX_CODE_POINT),
        ):
            if not intervals or intervals[-1][1] < valid_lo or intervals[0][0] > valid_hi:
                continue
            size = 64**cont
            for lead in leads:
                base = (lead & mask) * size
                lo, hi = max(base, valid_lo), min(base + size - 1, valid_hi)
                if lo > hi:
                    continue
                sub = restrict(intervals, starts, lo, hi)
                if sub:
                    shift = lo - base
                    sub = tuple((a + shift, b + shift, t) for a, b, t in sub)
                    row[lead] = self.continuation(cont, sub)

    def to_dfa(self, finals: set[int], start: int) -> ByteDFA:
        """The accumulated rows as a (not yet trimmed) ByteDFA with accepting states ``finals``."""
        trans = np.full((len(self.rows), 256), -1, dtype=np.int32)
        for s, row in enumerate(self.rows):
            if row:
                trans[s, list(row.keys())] = list(row.values())
        accepting = np.zeros(len(self.rows), dtype=bool)
        accepting[list(finals)] = True
        return ByteDFA(trans, accepting, start)


# Where interegular builds a regex's automaton itself (lookarounds, flags: :mod:`.positions` builds the
# others and counts its own states), it builds each step (concatenation, repetition, reduction) with
# ``interegular.fsm.crawl``, which calls ``final(state)`` once per state it creates. While a regex is compiled
# under a compile budget, that call is counted, so that a regex whose character automaton explodes (a pattern
# such as ``^[ab]*a[ab]{20}$``: 2**20 states, which interegular would not finish) stops at the ``pattern``
# limit. Outside such a compile the wrapper only forwards.
_interegular_crawl = interegular.fsm.crawl
_CRAWLED: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("callmaybe_crawled", default=None)


def _counted_crawl(alphabet, initial, final, follow):
    counter = _CRAWLED.get()
    if counter is None:
        return _interegular_crawl(alphabet, initial, final, follow)
    budget, seen = counter

    def counted_final(state):
        seen[0] += 1
        budget.pattern_states(seen[0])
        return final(state)

    return _interegular_crawl(alphabet, initial, counted_final, follow)


interegular.fsm.crawl = _counted_crawl


@contextmanager
def _timed(timings: dict[str, float] | None, phase: str):
    """Add the seconds spent in the ``with`` block to ``timings[phase]`` (nothing when ``timings`` is None)."""
    t = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - t


def from_regex(regex: str, timings: dict[str, float] | None = None,
               atoms: dict[str, list[tuple[int, int]]] | None = None, raw: dict[str, int] | None = None) -> ByteDFA:
    """Compile ``regex`` (interegular's dialect) into a trimmed, minimal byte-level DFA.

    ``atoms`` (optional): characters of ``regex`` that each stand for a set of code points (character ->
    sorted disjoint intervals), so that a class of many thousands of code points (``\\p{L}``) is one
    character for interegular (which expands a class one character at a time) and intervals again in the
    byte expansion. ``raw`` (optional): characters of ``regex`` that each stand for one byte that is not
    UTF-8 (a counter marker, :mod:`.counters`); the regex must use them outside negated classes.

    ``timings`` (if given) accumulates seconds under "automaton" (the character DFA) and "byte
    expansion" (the UTF-8 expansion and minimization). Raises SchemaError when interegular cannot parse the
    regex, or when its language is empty; under a compile budget (:mod:`..limits`), CompileLimitError when the
    character automaton passes the ``pattern`` limit or the byte automaton the ``states`` budget.
    """
    budget = limits.current()
    with _timed(timings, "automaton"):
        token = _CRAWLED.set(None if budget is None else (budget, [0]))
        try:
            parsed = interegular.parse_pattern(regex)
            fsm = positions.character_fsm(parsed, None if budget is None else budget.pattern_states)
            if fsm is None:  # lookarounds or flags: interegular's own construction
                fsm = parsed.to_fsm()
        except limits.CompileLimitError:
            raise
        except Exception as exc:  # interegular raises several unrelated types
            raise SchemaError(f"cannot compile regex: {type(exc).__name__}: {exc}") from None
        finally:
            _CRAWLED.reset(token)
    with _timed(timings, "byte expansion"):
        return _expand(fsm, atoms, raw)


def _expand(fsm: interegular.FSM, atoms: dict[str, list[tuple[int, int]]] | None = None,
            raw: dict[str, int] | None = None) -> ByteDFA:
    """interegular's character DFA -> a trimmed, minimal DFA over UTF-8 bytes (see the module docstring)."""
    states = sorted(fsm.states)
    index = {s: i for i, s in enumerate(states)}
    symbol_intervals = _intervals_of_symbols(fsm, {**(atoms or {}), **{c: [] for c in raw or {}}})
    raw_symbols: dict[object, int] = {}
    for char, byte in (raw or {}).items():
        symbol = fsm.alphabet._symbol_mapping.get(char)
        if symbol is None:
            continue
        if symbol_intervals.get(symbol) or symbol in raw_symbols:  # grouped with other characters
            raise CounterClash("a counter marker shares its symbol with other characters")
        raw_symbols[symbol] = byte
    builder = _ByteBuilder(len(states))
    for s in states:
        merged: list[tuple[int, int, int]] = []
        for symbol, target in fsm.map.get(s, {}).items():
            for lo, hi in symbol_intervals.get(symbol, ()):
                merged.append((lo, hi, index[target]))
        merged.sort()
        builder.add_state(index[s], merged)
        for symbol, target in fsm.map.get(s, {}).items():
            if symbol in raw_symbols:
                builder.rows[index[s]][raw_symbols[symbol]] = index[target]
    limits.count_states(len(builder.rows), leaf=True)
    dfa = builder.to_dfa({index[f] for f in fsm.finals}, index[fsm.initial])
    return minimize(dfa)


# ---------------------------------------------------------------------------------------------------------
# trim and minimize


#: Rows per block of :func:`byte_classes`' column hash.
_CHUNK = 4096


def byte_classes(transitions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group bytes that every state treats alike.

    Returns ``(byte_class, class_transitions)``: uint8 array of shape (256,) giving each byte's class
    (classes numbered in order of their first byte), and int32 array of shape (states, classes) with one
    column per class (the column of its first byte). Columns are compared through a 64-bit hash of each
    (a sum of rows times multipliers, ~1 ms for 3,339 states against ~55 ms for ``np.unique(axis=0)``);
    the grouping is then checked exactly and recomputed exactly should two different columns collide. In C
    where the library is built (:func:`.native.byte_classes`: the same arrays; compose-spec's 47,000 states:
    0.13 s in numpy).
    """
    if (made := native.byte_classes(transitions)) is not None:
        return made
    num_states = transitions.shape[0]
    rng = np.random.default_rng(0xB17E)
    mult = rng.integers(1, 2**63, size=num_states, dtype=np.uint64) | np.uint64(1)
    h = np.zeros(transitions.shape[1], dtype=np.uint64)
    for lo in range(0, num_states, _CHUNK):  # (row + 1) x multiplier summed per column, a block of rows at a
        rows = transitions[lo:lo + _CHUNK].astype(np.uint64)  # time (a transposed copy of the whole table
        rows += np.uint64(1)  # costs ten times more)
        rows *= mult[lo:lo + _CHUNK, None]
        h += rows.sum(axis=0)
    _, first, inverse = unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    # columns gathered by np.take (6x faster than fancy indexing of columns on a row-major table)
    if not np.array_equal(np.take(transitions, first[inverse], axis=1), transitions):  # a hash collision
        _, first, inverse = np.unique(transitions.T, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    byte_class = rank[inverse].astype(np.uint8)
    class_trans = np.take(transitions, np.sort(first), axis=1).astype(np.int32, copy=False)
    return byte_class, class_trans


def trim(dfa: ByteDFA) -> ByteDFA:
    """Remove states unreachable from the start and states that cannot reach an accepting state.

    States are renumbered breadth-first from the start in byte order, so equal languages give equal
    arrays after :func:`minimize`. Raises EmptyLanguage (a SchemaError) when the language is empty.
    """
    t = dfa.transitions
    alive = coreachable(t, dfa.accepting)
    if not alive[dfa.start]:
        raise EmptyLanguage("the schema accepts no value (empty language)")
    t = np.where((t >= 0) & alive[np.maximum(t, 0)], t, -1)
    old = bfs_order(t, dfa.start)
    remap = np.full(dfa.num_states + 1, -1, dtype=np.int32)
    remap[old] = np.arange(len(old), dtype=np.int32)
    new_t = remap[t[old]]  # -1 indexes the extra last slot, which holds -1
    return ByteDFA(new_t.astype(np.int32), dfa.accepting[old].copy(), 0)


def _consistent(ct: np.ndarray, block: np.ndarray) -> bool:
    """True when all states of each block have the same transitions up to blocks (a stable partition)."""
    nxt = np.where(ct >= 0, block[np.maximum(ct, 0)], -1)
    order = np.argsort(block, kind="stable")
    b, rows = block[order], nxt[order]
    same_block = b[1:] == b[:-1]
    return bool((rows[1:][same_block] == rows[:-1][same_block]).all())


def _refine_exact(ct: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Moore's refinement comparing whole rows (no hashing): the int64 (states,) block of each state."""
    block = accepting.astype(np.int64)
    n_blocks = len(unique(block))
    while True:
        limits.tick()
        nxt = np.where(ct >= 0, block[np.maximum(ct, 0)], -1)
        sig = np.concatenate([block[:, None], nxt], axis=1)
        _, block = np.unique(sig, axis=0, return_inverse=True)
        block = block.reshape(-1)
        n_new = int(block.max()) + 1
        if n_new == n_blocks:
            return block
        n_blocks = n_new


def _predecessors(ct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The predecessors of every state over ``ct`` (int32 (states, classes)): (sources int64 sorted by
    target, int64 (states + 1,) offsets), so that the predecessors of t are ``src[at[t]:at[t + 1]]``."""
    src, cls = np.nonzero(ct >= 0)
    dst = ct[src, cls].astype(np.int64)
    order = np.argsort(dst, kind="stable")
    return src[order].astype(np.int64), np.searchsorted(dst[order], np.arange(ct.shape[0] + 1))


def _refine_incremental(ct: np.ndarray, block: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """Finish a partition refinement from ``block`` (int64 (states,), a partition coarser than or equal to
    the final one) recomputing only the states that may split: the predecessors of states whose block
    changed in the previous round (Hopcroft's observation; here in rounds, vectorized). A block keeps its
    number for the states whose signature (their successors' blocks) is unchanged, or, when every member
    is recomputed, for its largest group; the others get new numbers. Each round costs the states
    recomputed, not all states, so that a long chain (a length counter: one round per character, 20,000
    states for ``maxLength`` 1,000) finishes in seconds less. Returns the int64 (states,) block of each
    state (numbers not contiguous). ``mult``: the uint64 hash multipliers, one per class and one more.
    A state's hash is summed over its live transitions only (:func:`_live_hashes`: the dense sum over all
    classes, whose dead ones add 0, at the cost of a few live classes of ~100)."""
    n = ct.shape[0]
    src, at = _predecessors(ct)
    live_src, live_cls = np.nonzero(ct >= 0)  # row-major: by state, then class
    live_dst = ct[live_src, live_cls].astype(np.int64)
    live_w = mult[1:][live_cls]
    live_at = np.searchsorted(live_src, np.arange(n + 1))
    # no block ever empties (one group keeps each number), so the numbers stay below the states
    size = np.bincount(block, minlength=n + 1).astype(np.int64)  # members per block
    ref = np.zeros(n + 1, dtype=np.uint64)  # each block's signature hash (set in the first round)
    next_id = int(block.max()) + 1
    cand = np.arange(n, dtype=np.int64)  # first round: every state
    while len(cand):
        limits.tick()
        h = _live_hashes(cand, block, live_at, live_dst, live_w)
        b = block[cand]
        # groups (block, hash) of the recomputed states
        order = np.lexsort((h, b))
        bs, hs = b[order], h[order]
        new_block = np.ones(len(order), dtype=bool)
        new_block[1:] = bs[1:] != bs[:-1]
        new_group = new_block.copy()
        new_group[1:] |= hs[1:] != hs[:-1]
        gid = np.cumsum(new_group) - 1
        g_start = np.flatnonzero(new_group)
        g_block, g_hash = bs[g_start], hs[g_start]
        g_size = np.diff(np.append(g_start, len(order)))
        # the blocks recomputed whole (every member a candidate): their largest group keeps the number
        b_start = np.flatnonzero(new_block)
        b_count = np.diff(np.append(b_start, len(order)))
        g_full = np.repeat(b_count == size[bs[b_start]], b_count)[g_start]
        keep = np.zeros(len(g_start), dtype=bool)
        # partly recomputed blocks: the group whose hash is the block's keeps the number
        keep[~g_full] = g_hash[~g_full] == ref[g_block[~g_full]]
        # fully recomputed blocks: the largest group (the first of equals) keeps it, with its hash
        if g_full.any():
            fi = np.flatnonzero(g_full)
            by = np.lexsort((-g_size[fi], g_block[fi]))
            fi = fi[by]
            lead = np.ones(len(fi), dtype=bool)
            lead[1:] = g_block[fi][1:] != g_block[fi][:-1]
            keep[fi[lead]] = True
            ref[g_block[fi[lead]]] = g_hash[fi[lead]]
        moving = np.flatnonzero(~keep)
        if not len(moving):
            break
        new_ids = next_id + np.arange(len(moving))
        next_id += len(moving)
        target = np.full(len(g_start), -1, dtype=np.int64)
        target[moving] = new_ids
        ref[new_ids] = g_hash[moving]
        t_of = target[gid]
        moved = t_of >= 0
        states = cand[order][moved]
        np.subtract.at(size, g_block[moving], g_size[moving])  # a group moves whole, to a number of its own
        size[new_ids] = g_size[moving]
        block[states] = t_of[moved]
        # next round: the predecessors of the states that changed block
        lo, hi = at[states], at[states + 1]
        cnt = hi - lo
        if not cnt.sum():
            break
        idx = np.repeat(lo - np.concatenate([[0], np.cumsum(cnt)[:-1]]), cnt) + np.arange(cnt.sum())
        cand = unique(src[idx])
    return block


def _live_hashes(cand: np.ndarray, block: np.ndarray, at: np.ndarray, dst: np.ndarray,
                 weight: np.ndarray) -> np.ndarray:
    """uint64 (len(cand),): for each state of ``cand`` (int64, distinct), the sum over its live transitions
    of their class's multiplier x (the target's block + 1), modulo 2**64: ``(nxt + 1) @ mult[1:]`` of its
    dense row of successors' blocks (-1 where dead), over the live transitions only. ``at``: int64
    (states + 1,) offsets of each state's transitions in ``dst`` (int64 targets) and ``weight`` (uint64)."""
    lo, hi = at[cand], at[cand + 1]
    count = hi - lo
    h = np.zeros(len(cand), dtype=np.uint64)
    total = int(count.sum())
    if not total:
        return h
    first = np.zeros(len(cand), dtype=np.int64)
    np.cumsum(count[:-1], out=first[1:])
    pos = np.repeat(lo - first, count) + np.arange(total)
    vals = weight[pos] * (block[dst[pos]].astype(np.uint64) + np.uint64(1))
    has = count > 0
    h[has] = np.add.reduceat(vals, first[has])
    return h


class _Edges:
    """The live transitions of a class table ``ct`` (int32 (states, classes)) as flat arrays sorted by source
    state, so that a round of Moore's refinement costs the transitions, not states x classes (most states
    of a JSON automaton have a few live classes of ~100).

    ``src``, ``dst``: int64 (edges,); ``weight``: uint64 (edges,), the hash multiplier of each edge's class;
    ``at``: int64 (states + 1,) offsets of each state's edges; ``mult``: the multipliers, one per class and
    the last for the state's own block."""

    def __init__(self, ct: np.ndarray, mult: np.ndarray):
        src, cls = np.nonzero(ct >= 0)  # row-major: sorted by source, then class
        self.n = ct.shape[0]
        self.src, self.dst = src.astype(np.int64), ct[src, cls].astype(np.int64)
        self.weight = mult[cls]
        self.own = mult[-1]
        self.at = np.searchsorted(self.src, np.arange(self.n + 1))
        self._firsts = self.at[:-1][self.at[:-1] < self.at[1:]]  # states with an edge: their first edge
        self._has = self.at[:-1] < self.at[1:]

    def row_hashes(self, block: np.ndarray) -> np.ndarray:
        """uint64 (states,): sum over a state's classes of multiplier x (successor's block + 1), plus the
        last multiplier x (its block + 1), modulo 2**64 (a dead class adds 0): the dense hash
        ``(row + 1) @ mult`` of the row [block, successors' blocks], computed over the live edges only."""
        h = (block.astype(np.uint64) + np.uint64(1)) * self.own
        if len(self.src):
            vals = self.weight * (block[self.dst].astype(np.uint64) + np.uint64(1))
            h[self._has] += np.add.reduceat(vals, self._firsts)
        return h

    def consistent(self, block: np.ndarray) -> bool:
        """True when every state has the same classes, going to the same blocks, as the first state of its
        block (a stable partition: each block is a class of equivalent states)."""
        _, first, inverse = unique(block, return_index=True, return_inverse=True)
        rep = first[inverse.reshape(-1)]
        deg = np.diff(self.at)
        if not np.array_equal(deg, deg[rep]):
            return False
        own = np.arange(len(self.src))
        theirs = np.repeat(self.at[rep] - self.at[:-1], deg) + own  # the rep's edge at the same position
        return bool(np.array_equal(self.weight, self.weight[theirs])
                    and np.array_equal(block[self.dst], block[self.dst[theirs]]))


#: Moore rounds over all states before :func:`minimize` recomputes only the states that may split.
FULL_ROUNDS = 8


def is_minimal(dfa: ByteDFA) -> bool:
    """True when ``dfa`` is known to be minimal and numbered as :func:`minimize` numbers (it was made by
    :func:`minimize`); False says nothing. A minimal automaton is never empty."""
    return bool(dfa.__dict__.get("_minimal"))


def _trim_classes(ct: np.ndarray, accepting: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`trim` over a class table (int32 (states, classes), :func:`byte_classes`): the states reachable
    from ``start`` that can reach acceptance, as (class table, bool accepting, start). Raises EmptyLanguage
    when the language is empty. Classes are fewer columns than bytes (~100 of 256 in a JSON automaton)."""
    alive = coreachable(ct, accepting)
    if not alive[start]:
        raise EmptyLanguage("the schema accepts no value (empty language)")
    if not alive.all():
        ct = np.where((ct >= 0) & alive[np.maximum(ct, 0)], ct, -1)
    keep = reachable(ct, start)
    if keep.all():  # a product's pairs, a join of trimmed parts: nothing to remove
        return ct, accepting, start
    old = np.flatnonzero(keep)
    remap = np.full(ct.shape[0] + 1, -1, dtype=np.int32)
    remap[old] = np.arange(len(old), dtype=np.int32)
    return remap[ct[old]], accepting[old], int(remap[start])


def _renumber(ct: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray, start: int) -> ByteDFA:
    """The automaton of class table ``ct`` (int32 (states, classes); every state reachable and able to accept)
    and ``byte_class`` (uint8 (256,), classes numbered in order of their first byte), its states renumbered
    as :func:`trim` does. The search runs over the classes, not the bytes: a row's targets first met by byte
    are first met by class in the same order, as each class's first byte orders the classes."""
    old = bfs_order(ct, start)
    remap = np.full(ct.shape[0] + 1, -1, dtype=np.int32)
    remap[old] = np.arange(len(old), dtype=np.int32)
    return ByteDFA(np.take(remap[ct[old]], byte_class, axis=1), accepting[old], 0)


def minimize(dfa: ByteDFA) -> ByteDFA:
    """Trim, then merge equivalent states (Moore's partition refinement), then renumber.

    Equal languages give equal arrays (states numbered as in :func:`trim`). Cost: O(rounds x states x byte
    classes), rounds <= the longest distinguishing suffix, for the first :data:`FULL_ROUNDS` rounds; after
    them only the states that may still split are recomputed (:func:`_refine_incremental`). An automaton
    this function made is returned as it is (a new :class:`ByteDFA` on the same arrays, without counters):
    joins minimize their parts, and most parts were minimized already; so is one of a small automaton
    minimized before (:data:`MINIMAL_CACHE`). An automaton given a smaller one of its language
    (:func:`set_equivalent`) is minimized through that one. Raises SchemaError when the language is empty.
    """
    if is_minimal(dfa):
        return _as_minimal(dfa)
    key = MINIMAL_CACHE.key(dfa)
    if key is not None:
        got = MINIMAL_CACHE.get(key)
        if got is not None:
            return _as_minimal(got)
    make = dfa.__dict__.get("_equivalent")
    out = _minimize(dfa if make is None else make())
    if key is not None:
        MINIMAL_CACHE.put(key, out)
    return out


def set_equivalent(dfa: ByteDFA, make: Callable[[], ByteDFA]) -> None:
    """Give ``dfa`` an automaton of the same language that is cheaper to minimize (fewer reachable states):
    ``make()`` builds it when :func:`minimize` first needs it. The automaton itself is left as it is (its
    states are what joins count and pair)."""
    dfa.__dict__["_equivalent"] = make


def _as_minimal(dfa: ByteDFA) -> ByteDFA:
    """A new :class:`ByteDFA` on the arrays of the minimal ``dfa`` (no counters), known minimal."""
    out = ByteDFA(dfa.transitions, dfa.accepting, dfa.start)
    out.__dict__["_minimal"] = True
    return out


class MinimalCache:
    """The minimal automata of small automata minimized before, by their content, kept per process and
    bounded (least recently used dropped first): a schema's joins minimize the same small automata again and
    again (the branches of a ``$ref`` inlined in several places, each subtracted from the others: 178 of
    jscsrc's 683 minimizations, 177 of o69635's 423). Only automata of at most ``max_states`` states are
    kept (their content hashed in ~30 us, where a minimization costs ~1 ms). The cached arrays are shared:
    callers never modify them, as with the leaf cache. ``maxsize``: the most automata kept; ``max_total``: the
    most states of the minimal automata kept, all together (1 KB each: 64 MB at the default)."""

    def __init__(self, maxsize: int = 1024, max_states: int = 4096, max_total: int = 1 << 16):
        self.maxsize, self.max_states, self.max_total = maxsize, max_states, max_total
        self._dfas: OrderedDict[bytes, ByteDFA] = OrderedDict()
        self._states = 0
        self._lock = threading.Lock()

    def key(self, dfa: ByteDFA) -> bytes | None:
        """A 32-byte digest of ``dfa``'s transitions, accepting states and start (None past ``max_states``)."""
        if dfa.num_states > self.max_states:
            return None
        h = hashlib.blake2b(digest_size=32)
        h.update(f"{dfa.transitions.dtype.str} {dfa.transitions.shape} {dfa.start}".encode())
        h.update(np.ascontiguousarray(dfa.transitions).tobytes())
        h.update(np.ascontiguousarray(dfa.accepting, dtype=bool).tobytes())
        return h.digest()

    def get(self, key: bytes) -> ByteDFA | None:
        with self._lock:
            got = self._dfas.get(key)
            if got is not None:
                self._dfas.move_to_end(key)
            return got

    def put(self, key: bytes, dfa: ByteDFA) -> None:
        with self._lock:
            old = self._dfas.pop(key, None)
            self._states += dfa.num_states - (old.num_states if old is not None else 0)
            self._dfas[key] = dfa
            while self._dfas and (len(self._dfas) > self.maxsize or self._states > self.max_total):
                self._states -= self._dfas.popitem(last=False)[1].num_states

    def clear(self) -> None:
        with self._lock:
            self._dfas.clear()
            self._states = 0


MINIMAL_CACHE = MinimalCache()


def _minimize(dfa: ByteDFA) -> ByteDFA:
    """:func:`minimize` of an automaton not known to be minimal: in C where it is built (:mod:`.native`), else
    in numpy (:func:`_minimize_numpy`); the same arrays either way."""
    limits.tick()
    got = native.minimize(dfa.transitions, dfa.accepting, dfa.start)
    if got is None:
        return _minimize_numpy(dfa)
    transitions, accepting = got
    if not len(accepting):
        raise EmptyLanguage("the schema accepts no value (empty language)")
    out = ByteDFA(transitions, accepting, 0)
    out.__dict__["_minimal"] = True
    return out


def _minimize_numpy(dfa: ByteDFA) -> ByteDFA:
    """:func:`_minimize` in numpy (Moore's refinement over byte classes, hashed rows)."""
    byte_class, ct = byte_classes(dfa.transitions)
    ct, accepting, start = _trim_classes(ct, dfa.accepting, dfa.start)
    block = accepting.astype(np.int64)
    n_blocks = len(unique(block))
    rng = np.random.default_rng(0x5EED)
    mult = rng.integers(1, 2**63, size=ct.shape[1] + 1, dtype=np.uint64) | np.uint64(1)
    edges = _Edges(ct, mult)
    rounds = 0
    while True:
        rounds += 1
        if rounds > FULL_ROUNDS:
            block = unique(_refine_incremental(ct, block, mult), return_inverse=True)[1].reshape(-1)
            break
        limits.tick()
        # a 64-bit multiplicative hash of each state's row (its block, its successors' blocks) stands in for
        # the row (a collision would merge two states wrongly; the exact check below catches it and falls
        # back to exact row comparison)
        _, new_block = unique(edges.row_hashes(block), return_inverse=True)
        new_block = new_block.reshape(-1)
        n_new = int(new_block.max()) + 1
        block = new_block
        if n_new == n_blocks:
            break
        n_blocks = n_new
    if not edges.consistent(block):
        block = _refine_exact(ct, accepting)
    # representative of each block (blocks are numbered 0..n_blocks-1): its lowest state
    _, reps = unique(block, return_index=True)
    t = ct[reps]
    merged = np.where(t >= 0, block[np.maximum(t, 0)], -1).astype(np.int32)
    # the quotient of a trimmed automaton: every state reachable and able to accept; only renumbered
    out = _renumber(merged, byte_class, accepting[reps], int(block[start]))
    out.__dict__["_minimal"] = True
    return out
