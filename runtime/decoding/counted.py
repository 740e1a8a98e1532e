"""Decoding an index with counters (index version 5, and 4; :mod:`callmaybe.compiler.automata.counters` builds them).

A decode state is an automaton state and the values of its live counters. :class:`CountedTokenIndex` keeps
the :class:`~.masks.TokenIndex` interface, whose states are ints: states below S are the automaton's
states with every count 0, and each other (state, counts) pair met is given the next free int. A mask is
the state's row unless some guarded token's need would pass a bound at the current counts, in which case
those tokens are taken out (each counter's guarded entries are kept sorted by need, so this costs the
tokens taken out; the mask is then kept per (state, room left)).
The fewest tokens to completion are the state's (counted over tokens that advance no counter, so they hold
at any counts), and forced text stops before any byte with an effect.
"""

from __future__ import annotations

import numpy as np

from ...core.effects import apply
from ...core.indexfile import IndexData
from .masks import Mask, TokenIndex

#: Masks with tokens taken out are kept for this many (state, room) pairs (then the memo starts again); they
#: are shared like the rows' (their bias tensors cached), since the same room recurs across requests.
MASK_MEMO = 4096


class CountedTokenIndex(TokenIndex):
    """:class:`~.masks.TokenIndex` of an index with counters; see the module docstring. Same arguments and
    errors."""

    def __init__(self, data: IndexData, token_bytes):
        super().__init__(data, token_bytes)
        a = data.arrays
        self._his = [int(h) for h in a["counter_hi"].tolist()]
        k = len(self._his)
        self._live = [tuple(np.flatnonzero(row).tolist()) for row in np.asarray(a["counter_live"]).reshape(-1, k)]
        teff = np.array(a["trans_effect"], dtype=np.int32, order="C", copy=True)
        self._teff = memoryview(teff.reshape(-1)).cast("B").cast("i")
        add, reset, after = (np.asarray(a[n]) for n in ("effect_add", "effect_reset", "effect_after"))
        self._effects = [tuple((c, int(add[x, c]), bool(reset[x, c]), int(after[x, c])) for c in range(k)
                               if add[x, c] or reset[x, c]) for x in range(len(add))]
        # each state's guard list (identical lists stored once): its slice of the guard arrays
        off = np.asarray(a["guard_offset"], dtype=np.int64)
        state_guard = np.asarray(a["state_guard"], dtype=np.int64)
        self._g_list = state_guard.tolist()
        self._g_lo, self._g_hi = off[state_guard].tolist(), off[state_guard + 1].tolist()
        self._g_tok = np.asarray(a["guard_token"], dtype=np.int32)
        self._g_eff = np.asarray(a["guard_effect"], dtype=np.int64)
        self._g_need = np.asarray(a["need"], dtype=np.int64).reshape(-1, k)[np.asarray(a["guard_need"], dtype=np.int64)]
        # the most each state's guarded tokens need of each counter: below ``hi - most`` nothing is taken out
        most = np.zeros((len(off) - 1, k), dtype=np.int64)
        if len(self._g_eff):
            owner = np.repeat(np.arange(len(off) - 1), np.diff(off))
            np.maximum.at(most, owner, self._g_need)
        self._most = most[state_guard].tolist()
        self._virtual: list[tuple[int, tuple[int, ...]]] = []
        self._ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self._cnext: dict[int, int] = {}
        self._masks: dict[tuple, Mask] = {}  # (automaton state, room per counter) -> mask
        self._orders: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._zero = (0,) * k

    # -- states ------------------------------------------------------------------------------------------

    def decode(self, state: int) -> tuple[int, tuple[int, ...]]:
        """(automaton state, counts) of ``state``."""
        if state < self._num_states:
            return state, self._zero
        return self._virtual[state - self._num_states]

    def encode(self, q: int, counts: list[int] | tuple[int, ...]) -> int:
        """The state of automaton state ``q`` with ``counts`` (those not live at ``q`` taken as 0)."""
        live = self._live[q]
        key = tuple(counts[c] if c in live else 0 for c in range(len(counts)))
        if not any(key):
            return q
        s = self._ids.get((q, key))
        if s is None:
            s = self._ids[(q, key)] = self._num_states + len(self._virtual)
            self._virtual.append((q, key))
        return s

    def _guard(self, q: int, token: int) -> int:
        """The index of ``token``'s guarded entry at automaton state ``q``, -1 when it has none."""
        lo, hi = self._g_lo[q], self._g_hi[q]
        if lo == hi:
            return -1
        i = lo + int(np.searchsorted(self._g_tok[lo:hi], token))
        return i if i < hi and int(self._g_tok[i]) == token else -1

    def _apply(self, effect: int, counts: list[int]) -> bool:
        """Apply effect ``effect`` to ``counts`` in place; False (unchanged) where an advance passes a bound."""
        return apply(self._effects[effect], counts, self._his)

    def _slack(self, state: int) -> tuple[int, tuple[int, ...]] | None:
        """(automaton state, per counter the room left, capped at the most any guarded token there needs),
        or None where no guarded token can pass a bound at ``state``'s counts (the common case)."""
        if state < self._num_states:
            return None  # every count 0: the compiler keeps each token's need within the bound
        q, counts = self.decode(state)
        most = self._most[q]
        room = tuple(min(self._his[c] - counts[c], most[c]) for c in range(len(counts)))
        if all(room[c] >= most[c] for c in self._live[q]):
            return None
        return q, room

    def _order(self, q: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The guarded entries of ``q`` by what they need of counter ``c``, most first: (their indices into
        the guard arrays, int64; the needs negated, ascending, for ``searchsorted``). Made once per (guard
        list, counter), shared by the states that have the list."""
        key = (self._g_list[q], c)
        got = self._orders.get(key)
        if got is None:
            lo, hi = self._g_lo[q], self._g_hi[q]
            need = self._g_need[lo:hi, c]
            order = np.argsort(-need, kind="stable")
            got = self._orders[key] = (order + lo, -need[order])
        return got

    def _failing(self, state: int) -> np.ndarray | None:
        """int32 token ids allowed by ``state``'s row whose need passes a bound at its counts (None: none)."""
        return self._taken(self._slack(state))

    def _taken(self, slack: tuple[int, tuple[int, ...]] | None) -> np.ndarray | None:
        """int32 token ids of automaton state ``q``'s row whose need passes the room left (``slack``: (q,
        room) of :meth:`_slack`; None: none). O(tokens taken out): each counter's entries are kept sorted by
        need."""
        if slack is None:
            return None
        q, room = slack
        parts = []
        for c in self._live[q]:
            order, negated = self._order(q, c)
            n = int(np.searchsorted(negated, -room[c], side="left"))  # entries needing more than the room
            if n:
                parts.append(order[:n])
        if not parts:
            return None
        taken = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))
        return self._g_tok[taken]

    # -- the TokenIndex interface -------------------------------------------------------------------------

    def is_accepting(self, state: int) -> bool:
        return super().is_accepting(self.decode(state)[0])

    def is_terminal(self, state: int) -> bool:
        return super().is_terminal(self.decode(state)[0])

    def min_tokens(self, state: int) -> int:
        return super().min_tokens(self.decode(state)[0])

    def mask(self, state: int) -> Mask:
        if state < 0:
            raise IndexError(f"no mask for state {state}")
        q = self.decode(state)[0]
        base = super().mask(q)
        slack = self._slack(state)
        if slack is None:
            return base
        got = self._masks.get(slack)  # the same room at the same state: the same mask
        if got is None:
            failing = self._taken(slack)
            if failing is None:
                got = base
            elif base.bits is not None:  # clear the failing tokens' bits in a copy of the row
                bits = base.bits.copy()
                np.bitwise_and.at(bits, failing >> 3, (~(1 << (failing & 7))).astype(np.uint8))
                got = Mask(None, bits, base.eos, self.eos_ids, self.vocab_size)
            else:
                got = Mask(base.ids[~np.isin(base.ids, failing)], None, base.eos, self.eos_ids, self.vocab_size)
            if len(self._masks) >= MASK_MEMO:
                self._masks.clear()
            self._masks[slack] = got
        return got

    def successors(self, state: int) -> np.ndarray:
        """int32 (vocabulary size,): the automaton state (not the decode state) after each token, -1 where
        the token is not allowed at ``state``'s counts (or at any: the automaton reads some tokens, a value
        of 200 characters under ``maxLength: 100``, that the row leaves out)."""
        q = self.decode(state)[0]
        succ = super().successors(q)
        succ[~super().mask(q).tensor()[: len(succ)].numpy()] = -1
        failing = self._failing(state)
        if failing is not None:
            succ[failing] = -1
        return succ

    def next_state(self, state: int, token: int) -> int:
        if not (0 <= token < self._num_tokens) or state < 0 or state >= self._num_states + len(self._virtual):
            return -1
        key = state * self.vocab_size + token
        s = self._cnext.get(key)
        if s is None:
            q, counts = self.decode(state)
            data = self.token_bytes[token]
            # the automaton alone; a token it reads but no count can take is out of the row
            q2 = TokenIndex.state_after(self, q, data) if data and token in super().mask(q) else -1
            s = -1
            i = self._guard(q, token) if q2 >= 0 else -1
            if q2 >= 0 and i < 0:
                s = self.encode(q2, counts)
            elif i >= 0 and all(counts[c] + int(v) <= self._his[c] for c, v in enumerate(self._g_need[i])):
                c = list(counts)
                if self._apply(int(self._g_eff[i]), c):
                    s = self.encode(q2, c)
            self._cnext[key] = s
        return s

    def state_after(self, state: int, data: bytes) -> int:
        q, counts = self.decode(state)
        c = list(counts)
        trans, teff, width = self._trans, self._teff, self._num_classes
        for k in data.translate(self._class_table):
            i = q * width + k
            q = trans[i]
            if q < 0:
                return -1
            e = teff[i]
            if e and not self._apply(e, c):
                return -1
        return self.encode(q, c)

    def _stops_forcing(self, q: int, byte_class: int) -> bool:
        return bool(self._teff[q * self._num_classes + byte_class])

    def forced_bytes(self, state: int) -> bytes:
        """As :meth:`~.masks.TokenIndex.forced_bytes` of the automaton state, stopping before a byte that has
        an effect on the counters (whether it is allowed depends on the counts)."""
        return super().forced_bytes(self.decode(state)[0])
