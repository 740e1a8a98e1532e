"""Counters: a long counted repetition enforced by one counter instead of one automaton copy per count.

A ``maxLength: 255`` string written as copies is ~5,000 states; inside an object that a ``oneOf`` joins
with another, or in the items of an array, the copies multiply (JSONSchemaBench Github_medium o55361 built
516,000 states; Github_easy o9925 ran out of 21.7 GB). With a counter the repetition is one loop.

**Markers.** The compiler writes the loop with two marker bytes per counter ``k``: ``R_k`` (reset: the
counter is 0) before the loop and ``N_k`` (next: one more iteration, at most ``hi_k``) before each optional
iteration, e.g. ``" R_k U{lo} (N_k U)* "`` for a string of ``lo``..``lo + hi_k`` code points (``U``: one
code point's JSON text). Marker bytes are bytes that UTF-8 never holds (:data:`MARKER_BYTES`), so every
construction of the compiler (products, sequences, minimization) treats them as ordinary symbols: the
marked automaton is a plain :class:`~.dfa.ByteDFA`. Two counted repetitions share a counter only when they
are the same construct (:func:`counter`: same key, e.g. ``("length", 1, 255)``), so that where both run
over the same text (an ``allOf``, the branches of a ``oneOf``) they place the same markers in the same
places. A product joins a side that uses a marker with one that does not by letting the latter stay put
in an intersection (:func:`~.compose.product`); where a union or a difference would have to decide one
side's verdict by a counter of the other, it raises :class:`CounterClash` and the compile is done again
without counters (:mod:`.long_counts`).

**Resolution.** :func:`resolve` folds the markers into the byte that follows them: the result is a byte
transducer whose transitions carry an *effect* on the counters (:data:`Effect`). A state from which one
byte could be read after two different marker paths is ambiguous (the count would depend on a choice):
:class:`CounterClash`. The effect of a whole token is the composition of its bytes' effects
(:func:`compose`): the token walk runs over the transducer's automaton as over any other, and the effects
of the entries it finds are composed afterwards, vectorized (:mod:`..index.counted_index`).

**Decoding** (:mod:`callmaybe.runtime.decoding.masks`): the runtime's state is (automaton state, counter values).
A token allowed by the automaton is allowed at counter values ``c`` when its effect's guard holds
(``c_k + add_k <= hi_k`` for each counter it advances before any reset). Only lower bounds of 0 are left
to counters (``lo`` iterations are copies), so the fewest tokens to completion never depends on them.

The idea of bounded repetition as a counter beside a finite automaton is that of counting automata
(Kupferman, Lustig, Vardi; and Turoňová et al., "Regex matching with counting-set automata", OOPSLA 2020);
the marker construction, resolution and token-level effects here are ours.
"""

from __future__ import annotations

import contextvars
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from ...core.effects import apply
from .reach import bfs_order
from .unique import unique

#: Bytes that never occur in UTF-8 text: the markers, two per counter (reset, next).
MARKER_BYTES = (0xC0, 0xC1, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF)
#: The most counters one compile may use.
MAX_COUNTERS = len(MARKER_BYTES) // 2
MARKER_MASK = np.zeros(256, dtype=bool)
MARKER_MASK[list(MARKER_BYTES[: 2 * MAX_COUNTERS])] = True
_MARKER_COLS = np.flatnonzero(MARKER_MASK)

#: :meth:`Transducer.remaining` where no end can be reached.
UNREACHABLE = 1 << 40

#: An effect on the counters (:mod:`callmaybe.core.effects`: ``(k, add, reset, after)`` per counter touched).
Effect = tuple


class CounterClash(Exception):
    """A composition that counters cannot carry exactly (or more than :data:`MAX_COUNTERS` counters): the
    compile is done again without counters (:mod:`.long_counts`)."""


def reset_byte(k: int) -> int:
    """The marker byte that resets counter ``k``."""
    return MARKER_BYTES[2 * k]


def next_byte(k: int) -> int:
    """The marker byte that advances counter ``k`` by one."""
    return MARKER_BYTES[2 * k + 1]


def _op(byte: int) -> Effect:
    i = MARKER_BYTES.index(byte)
    k = i // 2
    return ((k, 0, True, 0),) if i % 2 == 0 else ((k, 1, False, 0),)


# ---------------------------------------------------------------------------------------------------------
# the counters of one compile


@dataclass
class Registry:
    """The counters of one compile attempt: ``his[k]`` is counter ``k``'s upper bound; ``keys`` maps a
    construct's key to the counters it was given (several where one nests in another)."""

    his: list[int] = field(default_factory=list)
    keys: dict[Hashable, list[int]] = field(default_factory=dict)


_REGISTRY: contextvars.ContextVar[Registry | None] = contextvars.ContextVar("callmaybe_counters", default=None)


def active() -> bool:
    """True when the running compile attempt enforces long counts with counters."""
    return _REGISTRY.get() is not None


def registry() -> Registry | None:
    """The running attempt's registry (None: counters are not used)."""
    return _REGISTRY.get()


def set_registry(reg: Registry | None) -> contextvars.Token:
    """Make ``reg`` the running registry; returns the token that :func:`restore` takes."""
    return _REGISTRY.set(reg)


def restore(token: contextvars.Token) -> None:
    _REGISTRY.reset(token)


def counter(key: Hashable, hi: int, avoid: frozenset[int] = frozenset()) -> int:
    """The counter of the construct ``key`` (bound ``hi``), not one of ``avoid`` (those used inside it).
    Raises CounterClash past :data:`MAX_COUNTERS`, RuntimeError outside an attempt using counters."""
    reg = _REGISTRY.get()
    if reg is None:
        raise RuntimeError("no counter registry: counters are not in use")
    for k in reg.keys.get(key, []):
        if k not in avoid:
            return k
    if len(reg.his) >= MAX_COUNTERS:
        raise CounterClash(f"more than {MAX_COUNTERS} distinct long counts")
    reg.his.append(int(hi))
    reg.keys.setdefault(key, []).append(len(reg.his) - 1)
    return len(reg.his) - 1


def try_counter(key: Hashable, hi: int, avoid: frozenset[int] = frozenset()) -> int | None:
    """:func:`counter`, or None where the running attempt uses no counters or they are all taken (the
    construct is then copied, or left to the check, as without counters)."""
    if _REGISTRY.get() is None:
        return None
    try:
        return counter(key, hi, avoid)
    except CounterClash:
        return None


def markers_used(transitions: np.ndarray) -> np.ndarray:
    """Bool (256,): the marker bytes that some transition of ``transitions`` (int32 (S, 256)) reads."""
    used = np.zeros(256, dtype=bool)
    if len(transitions):
        used[_MARKER_COLS] = (transitions[:, _MARKER_COLS] >= 0).any(axis=0)
    return used


def uses_markers(transitions: np.ndarray) -> bool:
    """True when some transition of ``transitions`` reads a marker."""
    return bool(len(transitions)) and bool((transitions[:, _MARKER_COLS] >= 0).any())


# ---------------------------------------------------------------------------------------------------------
# effects


def compose(first: Effect, then: Effect, his: list[int] | tuple[int, ...]) -> Effect | None:
    """The effect of ``first`` followed by ``then``; None when no counter value can pass it (an add past the
    bound, or a value after a reset past it)."""
    if not first:
        return then
    if not then:
        return first
    a = {k: (add, r, b) for k, add, r, b in first}
    for k, add2, r2, b2 in then:
        if k not in a:
            a[k] = (add2, r2, b2)
            continue
        add1, r1, b1 = a[k]
        if not r1:
            a[k] = (add1 + add2, r2, b2)
        elif not r2:
            a[k] = (add1, True, b1 + add2)
        else:
            if b1 + add2 > his[k]:
                return None
            a[k] = (add1, True, b2)
    out = tuple((k, add, r, b) for k, (add, r, b) in sorted(a.items()))
    if any(add > his[k] or b > his[k] for k, add, _, b in out):
        return None
    return out


def increment_free(effect: Effect) -> bool:
    """True when ``effect`` only resets counters (to 0): a path of such tokens is open at any counter values."""
    return all(add == 0 and b == 0 for _, add, _, b in effect)


class EffectTable:
    """Effects numbered in order of first use; effect 0 is ``()``. ``compose(i, j)`` is memoized."""

    def __init__(self, his: list[int] | tuple[int, ...]):
        self.his = tuple(his)
        self.effects: list[Effect] = [()]
        self.ids: dict[Effect, int] = {(): 0}
        self._composed: dict[tuple[int, int], int] = {}

    def id(self, effect: Effect) -> int:
        i = self.ids.get(effect)
        if i is None:
            i = self.ids[effect] = len(self.effects)
            self.effects.append(effect)
        return i

    def compose(self, i: int, j: int) -> int:
        """The id of effect ``i`` then ``j``; -1 when nothing can pass it."""
        if i == 0:
            return j
        if j == 0:
            return i
        got = self._composed.get((i, j))
        if got is None:
            e = compose(self.effects[i], self.effects[j], self.his)
            got = self._composed[(i, j)] = -1 if e is None else self.id(e)
        return got

    def arrays(self) -> dict[str, np.ndarray]:
        """``effect_add`` int32, ``effect_reset`` uint8, ``effect_after`` int32, each (effects, counters)."""
        n, k = len(self.effects), len(self.his)
        add = np.zeros((n, k), dtype=np.int32)
        reset = np.zeros((n, k), dtype=np.uint8)
        after = np.zeros((n, k), dtype=np.int32)
        for i, e in enumerate(self.effects):
            for c, a, r, b in e:
                add[i, c], reset[i, c], after[i, c] = a, r, b
        return {"effect_add": add, "effect_reset": reset, "effect_after": after}


# ---------------------------------------------------------------------------------------------------------
# resolution: markers folded into the byte after them


@dataclass
class Transducer:
    """A byte automaton whose transitions carry counter effects.

    ``transitions``: int32 (S, 256), -1 dead (marker columns always dead); ``effect``: int32 (S, 256), the
    effect id (in ``table``) of each transition, 0 none; ``accepting``: bool (S,); ``start``;
    ``table``: the :class:`EffectTable` (its ``his`` the counters' bounds).
    """

    transitions: np.ndarray
    effect: np.ndarray
    accepting: np.ndarray
    start: int
    table: EffectTable

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])

    def run(self, data: bytes) -> tuple[int, list[int]]:
        """The state and counter values after ``data`` from the start; state -1 once dead or past a bound."""
        s, c = self.start, [0] * len(self.table.his)
        for b in data:
            nxt = int(self.transitions[s, b])
            if nxt < 0:
                return -1, c
            e = int(self.effect[s, b])
            if e and not apply(self.table.effects[e], c, self.table.his):
                return -1, c
            s = nxt
        return s, c

    def accepts(self, data: bytes) -> bool:
        """True when ``data`` is in the language, every count within its bound."""
        s, _ = self.run(data)
        return s >= 0 and bool(self.accepting[s])

    def remaining(self) -> np.ndarray:
        """int64 (S, counters): the fewest advances of each counter from each state before the text can end
        or the counter is reset (its loop left and another begun): a count ``c`` at the state can still be
        completed only when ``c + remaining <= hi``. :data:`UNREACHABLE` where the text cannot end.

        Shortest paths backwards over the distinct transitions (an advance costs its count, most cost 0),
        from a virtual source joined to each state by the cost of ending there (0 where it accepts; a
        transition that resets the counter: its advances): Dijkstra's algorithm of ``scipy.sparse.csgraph``,
        which takes explicit zeros as edges (a breadth-first search in Python per counter cost 0.55 s on
        JSONSchemaStore's vercel, 37,675 states)."""
        from scipy.sparse import csr_array
        from scipy.sparse.csgraph import dijkstra

        n, k = self.num_states, len(self.table.his)
        out = np.full((n, k), UNREACHABLE, dtype=np.int64)
        src, byte = np.nonzero(self.transitions >= 0)
        dst = self.transitions[src, byte].astype(np.int64)
        eff = self.effect[src, byte].astype(np.int64)
        # the distinct (state, next state, effect) transitions, once for all counters (bytes alike are many)
        width = int(eff.max(initial=0)) + 1
        triple = unique((src.astype(np.int64) * n + dst) * width + eff)
        src, dst, eff = triple // (n * width), triple // width % n, triple % width
        arrays = self.table.arrays()
        adds, resets = arrays["effect_add"].astype(np.int64), arrays["effect_reset"] > 0
        for c in range(k):
            add, ends = adds[:, c], resets[:, c]
            w, stop = add[eff], ends[eff]
            ending = np.full(n, UNREACHABLE, dtype=np.int64)  # the cost of ending the count at each state
            ending[self.accepting.astype(bool)] = 0
            np.minimum.at(ending, src[stop], w[stop])  # a reset ends the count here
            keep = ~stop
            # each (next state, state) edge once, at its least cost (csr would sum repeats)
            key, cost = dst[keep] * n + src[keep], w[keep]
            order = np.lexsort((cost, key))
            key, cost = key[order], cost[order]
            first = np.ones(len(key), dtype=bool)
            first[1:] = key[1:] != key[:-1]
            key, cost = key[first], cost[first]
            ends_at = np.flatnonzero(ending < UNREACHABLE)
            graph = csr_array((np.concatenate([cost, ending[ends_at]]).astype(np.float64),
                               (np.concatenate([key // n, np.full(len(ends_at), n)]),
                                np.concatenate([key % n, ends_at]))), shape=(n + 1, n + 1))
            best = dijkstra(graph, directed=True, indices=n)[:n]
            out[:, c] = np.where(np.isinf(best), UNREACHABLE, best).astype(np.int64)
        return out

    def live(self) -> np.ndarray:
        """uint8 (S, counters): 1 where the counter's value at the state matters (an advance of it can
        follow before a reset); elsewhere the runtime keeps it at 0.

        A least fixpoint over the distinct (state, next state, effect) transitions, every counter at once
        (one bit each in uint64 words): a state is live for a counter when a transition from it advances
        the counter, or leaves it untouched into a state live for it."""
        n, k = self.num_states, len(self.table.his)
        arrays = self.table.arrays()
        advances = arrays["effect_add"] > 0
        untouched = ~advances & ~(arrays["effect_reset"] > 0)
        x = len(advances)
        src, byte = np.nonzero(self.transitions >= 0)
        if not len(src) or not k:
            return np.zeros((n, k), dtype=np.uint8)
        key = unique((src.astype(np.int64) * n + self.transitions[src, byte]) * x + self.effect[src, byte])
        src, dst, eff = key // (n * x), (key // x) % n, key % x  # sorted by src

        def bits(rows: np.ndarray) -> np.ndarray:
            words = (k + 63) // 64
            padded = np.zeros((len(rows), words * 64), dtype=bool)
            padded[:, :k] = rows
            return np.packbits(padded, axis=1, bitorder="little").view(np.uint64)

        adv, thr = bits(advances), bits(untouched)
        heads, starts = unique(src, return_index=True)
        direct = np.zeros((n, adv.shape[1]), dtype=np.uint64)
        direct[heads] = np.bitwise_or.reduceat(adv[eff], starts, axis=0)
        live = direct
        while True:
            nxt = direct.copy()
            nxt[heads] |= np.bitwise_or.reduceat(thr[eff] & live[dst], starts, axis=0)
            if np.array_equal(nxt, live):
                break
            live = nxt
        return np.unpackbits(live.view(np.uint8), axis=1, bitorder="little")[:, :k].astype(np.uint8)


def resolve(transitions: np.ndarray, accepting: np.ndarray, start: int, his: list[int] | tuple[int, ...]) -> Transducer:
    """Fold the markers of a marked automaton (trimmed: every state can accept) into the bytes after them.

    Returns the :class:`Transducer` over the states reachable from ``start``, renumbered breadth first.
    Raises CounterClash where one byte (or the end) follows two different marker paths, or where the end
    follows an advance.
    """
    table = EffectTable(his)
    t = transitions
    trans = np.where(MARKER_MASK[None, :], -1, t).astype(np.int32)
    eff = np.zeros(t.shape, dtype=np.int32)
    acc = accepting.astype(bool).copy()
    has = (t[:, _MARKER_COLS] >= 0).any(axis=1)
    real = ~MARKER_MASK
    for q in np.flatnonzero(has).tolist():
        closure = [(q, ())]
        seen = {(q, ())}
        i = 0
        while i < len(closure):
            p, e = closure[i]
            i += 1
            for m in _MARKER_COLS[t[p, _MARKER_COLS] >= 0].tolist():
                e2 = compose(e, _op(m), his)
                if e2 is None:
                    continue
                item = (int(t[p, m]), e2)
                if item in seen:
                    continue
                seen.add(item)
                closure.append(item)
        for p, e in closure[1:]:
            if accepting[p]:
                if not increment_free(e):
                    raise CounterClash("an accepting state follows an advance of a counter")
                acc[q] = True
            cols = np.flatnonzero((t[p] >= 0) & real)
            if not len(cols):
                continue
            eid = table.id(e)
            targets = t[p, cols]
            taken = trans[q, cols] >= 0
            if taken.any() and ((trans[q, cols][taken] != targets[taken]).any() or (eff[q, cols][taken] != eid).any()):
                raise CounterClash("a byte follows two different paths of counter markers")
            trans[q, cols] = targets
            eff[q, cols] = eid
    order = bfs_order(trans, start)
    remap = np.full(len(trans) + 1, -1, dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    new_t = remap[trans[order]]
    new_e = np.where(new_t >= 0, eff[order], 0).astype(np.int32)
    return Transducer(new_t.astype(np.int32), new_e, acc[order], 0, table)
