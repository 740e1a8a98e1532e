"""Joins of byte DFAs, so that large automata are composed from small ones instead of determinized from one
big regex (the grammar nodes of :mod:`.nodes` use these):

* :func:`seq`: parts one after another; each part's accepting states take the next part's start
  transitions. JSON values never continue with the byte that follows them (``,``, ``}``, ``]``, ``:``), so
  the merge is deterministic; a clash raises :class:`Clash` (the caller falls back to interegular);
* :func:`product`: two automata run side by side over pairs of states, accepting by a boolean mode; from it
  :func:`union` / :func:`union_all` (alternatives), :func:`intersect` (``allOf`` of languages, a length
  with a pattern), :func:`difference` (``not``, ``if``/``else``) and :func:`exactly_one` (``oneOf``);
* :func:`literals`: a finite set of byte strings as a trie;
* :func:`structure`: one copy of each item automaton with literal tries between them (objects: the keys
  that may come next, every subset of optional members in declaration order, so the size is linear in the
  members instead of the quadratic regex; arrays and maps loop back into their item).

Results are not minimized here; callers trim and minimize (:func:`~callmaybe.compiler.automata.dfa.minimize`). Each
join counts the states it builds against the compile budget (:func:`~..limits.count_states`) before it
allocates them.
"""

from __future__ import annotations

import numpy as np

from . import dfa as D
from . import counters, long_counts, native
from .assembly import Assembly
from .dfa import ByteDFA
from .. import limits
from ..limits import count_states
from .reach import coreachable
from .unique import unique


class Clash(Exception):
    """Two transitions on the same byte to different states met in a sequence."""


def _empty(n: int) -> np.ndarray:
    """int32 (n, 256) transitions, all dead."""
    return np.full((n, 256), -1, dtype=np.int32)


def merge_rows(trans: np.ndarray, states: np.ndarray, row: np.ndarray) -> None:
    """Add the transitions ``row`` (int32 (256,), -1 = none) to each of ``states``; raises Clash on conflict."""
    if len(states) == 0:
        return
    cur = trans[states]
    clash = (cur >= 0) & (row >= 0) & (cur != row)
    if clash.any():
        raise Clash()
    trans[states] = np.where(row >= 0, row, cur)


def seq(parts: list[ByteDFA]) -> ByteDFA:
    """The DFA of ``parts`` one after another (see the module docstring); raises Clash when a part's
    continuation and the next part's start disagree on a byte."""
    count_states(sum(p.num_states for p in parts))
    b = Assembly()
    offs = [b.copy(p) for p in parts] + [b.size]
    trans = b.table()
    acc = np.zeros(b.size, dtype=bool)
    # from the last part backwards: a part's accepting states take the next part's start transitions
    final = parts[-1]
    acc[int(offs[-1]) - final.num_states:] = final.accepting
    for k in range(len(parts) - 2, -1, -1):
        p, o = parts[k], int(offs[k])
        nxt_start = int(offs[k + 1]) + parts[k + 1].start
        states = np.flatnonzero(p.accepting) + o
        merge_rows(trans, states, trans[nxt_start].copy())
        acc[states] = acc[nxt_start]
    return ByteDFA(trans, acc, int(offs[0]) + parts[0].start)


def product(a: ByteDFA, b: ByteDFA, mode: str) -> ByteDFA:
    """The product automaton of ``a`` and ``b`` over their reachable pairs of states, accepting by ``mode``:
    "or" (L(a) | L(b)), "and" (L(a) & L(b)), "minus" (L(a) - L(b)) or "xor" (in exactly one).

    A dead side is written -1 in a pair; pairs that can no longer accept are not built ("and": both sides
    live; "minus": the left side live). Each new pair counts one state against the compile budget
    (:func:`~..limits.count_states`). Not minimized. Without counter markers on either side, built in C where
    it can be (:func:`.native.product`: the same arrays). Raises ValueError for an unknown ``mode``.
    """
    if mode not in ("or", "and", "minus", "xor"):
        raise ValueError(f"unknown product mode {mode!r}")
    if not (counters.uses_markers(a.transitions) or counters.uses_markers(b.transitions)):
        got = native.product((a.transitions, a.accepting, a.start), (b.transitions, b.accepting, b.start), mode)
        if got is not None:  # in C: the same pairs, numbered alike (native.py); counted as the loop below does
            count_states(len(got[1]))
            return ByteDFA(*got, 0)
    dead = np.full((1, 256), -1, dtype=np.int64)
    ta = np.concatenate([a.transitions.astype(np.int64), dead])  # row -1: the dead side
    tb = np.concatenate([b.transitions.astype(np.int64), dead])
    used_a, used_b = counters.markers_used(a.transitions), counters.markers_used(b.transitions)
    # a side stays put on a counter marker that only the other side reads, where that side reads it: the
    # count is the other's, and the staying side's verdict does not depend on it
    only_a, only_b = np.flatnonzero(used_a & ~used_b), np.flatnonzero(used_b & ~used_a)
    markers = np.flatnonzero(used_a & used_b)  # a counter both sides use must advance on both at once
    width = b.num_states + 1
    index: dict[int, int] = {}  # (sa + 1) * width + (sb + 1) -> state
    pairs_a: list[int] = [a.start]
    pairs_b: list[int] = [b.start]
    index[(a.start + 1) * width + b.start + 1] = 0
    count_states(1)
    rows: list[np.ndarray] = []
    lo, hi = 0, 1
    # breadth first, one level of new pairs at a time: every transition of the level in one numpy pass,
    # a dictionary lookup only per distinct target pair
    while lo < hi:
        sa, sb = np.asarray(pairs_a[lo:hi]), np.asarray(pairs_b[lo:hi])
        na, nb = ta[sa], tb[sb]
        if len(only_a) or len(only_b):
            nb[:, only_a] = np.where(na[:, only_a] >= 0, sb[:, None], -1)
            na[:, only_b] = np.where(nb[:, only_b] >= 0, sa[:, None], -1)
        if mode == "and":
            live = (na >= 0) & (nb >= 0)
        elif mode == "minus":
            live = na >= 0
        else:
            live = (na >= 0) | (nb >= 0)
        if len(markers) and mode != "or":
            # a difference may not let one side's counter decide the other's verdict, and an intersection
            # may not count one counter in two places of one text (a union's two readings of one text are
            # found ambiguous when the markers are resolved)
            both = (sa >= 0) & (sb >= 0)
            alone = (na[:, markers] >= 0) != (nb[:, markers] >= 0)
            if (both[:, None] & alone).any():
                raise counters.CounterClash("one counter counted in two places of one text")
        keys = (na + 1) * width + (nb + 1)
        uniq, inverse = unique(keys[live], return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int32)
        for j, key in enumerate(uniq.tolist()):
            s = index.get(key)
            if s is None:
                count_states(1)
                s = len(pairs_a)
                index[key] = s
                pairs_a.append(key // width - 1)
                pairs_b.append(key % width - 1)
            ids[j] = s
        level = np.full(na.shape, -1, dtype=np.int32)
        level[live] = ids[inverse.reshape(-1)]
        rows.append(level)
        lo, hi = hi, len(pairs_a)
    trans = np.concatenate(rows)
    sa, sb = np.asarray(pairs_a), np.asarray(pairs_b)
    in_a = (sa >= 0) & np.concatenate([a.accepting, [False]])[sa]
    in_b = (sb >= 0) & np.concatenate([b.accepting, [False]])[sb]
    acc = {"or": in_a | in_b, "and": in_a & in_b, "minus": in_a & ~in_b, "xor": in_a ^ in_b}[mode]
    return ByteDFA(trans, acc, 0)


def union(a: ByteDFA, b: ByteDFA) -> ByteDFA:
    """The DFA of L(a) | L(b) (:func:`product` "or")."""
    return product(a, b, "or")


def intersect(a: ByteDFA, b: ByteDFA) -> ByteDFA:
    """The DFA of L(a) & L(b) (:func:`product` "and"), minimized; raises SchemaError when it is empty."""
    return D.minimize(product(D.minimize(a), D.minimize(b), "and"))


def difference(a: ByteDFA, b: ByteDFA) -> ByteDFA:
    """The DFA of L(a) - L(b) (:func:`product` "minus"), minimized; raises SchemaError when it is empty."""
    return D.minimize(product(D.minimize(a), D.minimize(b), "minus"))


def is_empty(dfa: ByteDFA) -> bool:
    """True when ``dfa`` accepts no text (no accepting state reachable from the start)."""
    if D.is_minimal(dfa):
        return False
    return not coreachable(dfa.transitions, dfa.accepting)[dfa.start] if dfa.num_states else True


def exactly_one(parts: list[ByteDFA], loose: list[ByteDFA | None] | None = None) -> ByteDFA:
    """The texts in exactly one of ``parts`` (JSON Schema ``oneOf``): the union of each part minus the union
    of the others, minimized; raises EmptyLanguage when no text is in exactly one part.

    ``loose`` (same length as ``parts``, optional): for each part, a language that contains it, subtracted
    instead of the part itself (a schema compiled exactly where the part is an under-approximation: then
    a text is kept only when no other part could possibly accept it)."""
    loose = list(parts) if loose is None else loose
    present = [q for q in loose if q is not None]
    if len(present) > 1 and _disjoint_starts(present):  # e.g. a string or an integer: disjoint by type
        return union_all([p for p in parts if p is not None])
    pieces = []
    if not long_counts.current().used and not any(
            counters.uses_markers(q.transitions) for q in present + [p for p in parts if p is not None]):
        # no counters: subtract the other parts one at a time from each part (products of a small automaton,
        # the part minus what is subtracted so far, with one other part), instead of building the union of
        # the others, which for objects in any order grows with the product of their automata. Not once a
        # long count is enforced: the states built decide whether it stays (long_counts.LONG_STATES), and
        # this way builds fewer than the union
        present_at = [None if q is None else _minimal_or_none(q) for q in loose]
        for i, p in enumerate(parts):
            if p is not None:
                if loose[i] is p and present_at[i] is not None:
                    p = present_at[i]  # the part is its own loose language: minimized already (past the cache)
                only = _minus_each(p, [q for j, q in enumerate(present_at) if j != i and q is not None])
                if only is not None:
                    pieces.append(only)
        if not pieces:
            raise D.EmptyLanguage("the schema accepts no value (empty language)")
        return union_all(pieces)
    # with counters, one difference from the union of the others (the product's checks of counter
    # markers see the others together)
    others = _unions_of_others(loose)
    for i, p in enumerate(parts):
        if p is None:
            continue
        rest = others[i]
        if rest is None:
            pieces.append(D.minimize(p))
            continue
        only = _minimal_or_none(product(D.minimize(p), rest, "minus"))
        if only is not None:
            pieces.append(only)
    if not pieces:
        raise D.EmptyLanguage("the schema accepts no value (empty language)")
    return union_all(pieces)


def _minus_each(part: ByteDFA, others: list[ByteDFA]) -> ByteDFA | None:
    """The minimal DFA of L(part) minus each of ``others`` (automata without counter markers), or None when
    nothing is left; minimized after each difference, so each product pairs the small remainder."""
    out = D.minimize(part)
    successors = None
    for q in others:
        if _apart(out, q):
            continue
        if successors is None:
            successors = _successors(out.transitions)
        if _disjoint(out, q, successors):
            continue
        out = _minimal_or_none(product(out, q, "minus"))
        if out is None:
            return None
        successors = None
    return out


def _minimal_or_none(dfa: ByteDFA) -> ByteDFA | None:
    """The minimal ``dfa``, or None when its language is empty (:func:`~.dfa.minimize` finds that in its trim:
    no search of its own first, as :func:`is_empty` would make)."""
    try:
        return D.minimize(dfa)
    except D.EmptyLanguage:
        return None


def _successors(transitions: np.ndarray) -> list[list[int]]:
    """For each state, its targets (one per run of bytes to the same target; a target may repeat)."""
    keep = transitions >= 0
    keep[:, 1:] &= transitions[:, 1:] != transitions[:, :-1]
    src, byte = np.nonzero(keep)
    at = np.searchsorted(src, np.arange(transitions.shape[0] + 1)).tolist()
    dst = transitions[src, byte].tolist()
    return [dst[at[s]:at[s + 1]] for s in range(transitions.shape[0])]


def _disjoint(a: ByteDFA, b: ByteDFA, successors: list[list[int]]) -> bool:
    """True when the minimal ``a`` and ``b`` (no counter markers) share no text: then L(a) - L(b) is L(a),
    and ``a`` itself its minimal DFA. Searches the pairs of states both sides reach on one text (what
    :func:`product` "and" pairs, built no further than a pair where both accept: False at once). True: counts
    the states :func:`product` "minus" would have built against the compile budget, so that the budget runs
    out where it did (its verdicts, the place and text of a refusal, are unchanged): those pairs, and a pair
    (state of ``a``, dead) for each state of ``a`` reached from one of them by a byte ``b`` has no transition
    on (``successors``: :func:`_successors` of ``a``), or after it."""
    ta, tb = a.transitions, b.transitions
    width = b.num_states
    if a.accepting[a.start] and b.accepting[b.start]:
        return False
    seen = {a.start * width + b.start}
    pairs_a, pairs_b = [a.start], [b.start]
    escaped: list[np.ndarray] = []
    lo, hi = 0, 1
    while lo < hi:
        limits.tick()
        sa, sb = np.asarray(pairs_a[lo:hi]), np.asarray(pairs_b[lo:hi])
        na, nb = ta[sa], tb[sb]
        live = na >= 0
        both = live & (nb >= 0)
        escaped.append(na[live & ~both])
        na, nb = na[both].astype(np.int64), nb[both].astype(np.int64)
        if (a.accepting[na] & b.accepting[nb]).any():
            return False
        for key in unique(na * width + nb).tolist():
            if key not in seen:
                seen.add(key)
                pairs_a.append(key // width)
                pairs_b.append(key % width)
        lo, hi = hi, len(pairs_a)
    reached = bytearray(a.num_states)
    queue = unique(np.concatenate(escaped)).tolist()
    for s in queue:
        reached[s] = 1
    for s in queue:  # grows while read
        for t in successors[s]:
            if not reached[t]:
                reached[t] = 1
                queue.append(t)
    count_states(len(pairs_a) + len(queue))
    return True


def _apart(a: ByteDFA, b: ByteDFA) -> bool:
    """True when the minimal ``a`` and ``b`` share no text by their first byte (no byte leaves both start
    states, and not both accept the empty text): then L(a) - L(b) is L(a), and ``a`` itself its minimal DFA.
    Counts the states :func:`product` "minus" would have built against the compile budget (the start pair,
    then a pair (state of ``a``, dead) for each state reached in one byte or more: every state of the
    minimal ``a`` but its start, and the start again when a transition leads back to it), so that the budget
    runs out where it did (its verdicts, the place and text of a refusal, are unchanged)."""
    ta, tb = a.transitions, b.transitions
    if ((ta[a.start] >= 0) & (tb[b.start] >= 0)).any() or (a.accepting[a.start] and b.accepting[b.start]):
        return False
    count_states(1)
    count_states(a.num_states - 1 + int((ta == a.start).any()))
    return True


def _unions_of_others(parts: list[ByteDFA | None]) -> list[ByteDFA | None]:
    """For each position ``i``, the union of the parts at the other positions (None where there is none),
    from the unions of the parts before and after each position: about 3n unions, not n (n - 1). The
    languages are those of ``union_all`` of the other parts."""
    n = len(parts)

    def join(a: ByteDFA | None, b: ByteDFA | None) -> ByteDFA | None:
        return b if a is None else a if b is None else union_all([a, b])

    before: list[ByteDFA | None] = [None] * (n + 1)  # before[i]: the union of parts[:i]
    after: list[ByteDFA | None] = [None] * (n + 1)  # after[i]: the union of parts[i:]
    for i in range(n):
        before[i + 1] = join(before[i], parts[i])
    for i in range(n - 1, -1, -1):
        after[i] = join(parts[i], after[i + 1])
    return [join(before[i], after[i + 1]) for i in range(n)]


def union_all(parts: list[ByteDFA]) -> ByteDFA:
    """The union of several DFAs, minimized along the way to keep the pairs few: parts joined two by two, then
    the unions two by two (a balanced tree: each part's states are paired about log2(parts) times, where
    joining them one after another paired the growing union once per part; JSONSchemaStore's statamic
    blueprint: products 0.73 -> 0.41 s, minimizations 1.09 -> 0.51 s). The minimal automaton of a language
    is one, so the result is the same either way. Parts that accept nothing are left out (an impossible
    ``anyOf`` branch); when every part is empty, so is the result (not minimized: minimizing an empty
    language raises SchemaError)."""
    live = [p for p in parts if not is_empty(p)]
    if not live:
        return parts[0]
    if len(live) > 1 and _disjoint_starts(live):
        return D.minimize(_dispatch(live))
    level = [D.minimize(p) for p in live]
    while len(level) > 1:
        level = [D.minimize(union(level[k], level[k + 1])) if k + 1 < len(level) else level[k]
                 for k in range(0, len(level), 2)]
    return level[0]


def _disjoint_starts(parts: list[ByteDFA]) -> bool:
    """True when no byte leaves the start state of two of ``parts`` (JSON values of different types: the
    first byte tells them apart)."""
    used = np.zeros(256, dtype=np.int32)
    for p in parts:
        used += p.transitions[p.start] >= 0
    return bool((used <= 1).all())


def _dispatch(parts: list[ByteDFA]) -> ByteDFA:
    """The union of ``parts`` whose start states share no byte: one copy of each, and a new start state
    with every part's start transitions (accepting when a part accepts the empty text). Linear in the
    parts' states, where the product construction would pair them."""
    count_states(1 + sum(p.num_states for p in parts))
    b = Assembly()
    b.fresh(1)
    offsets = [b.copy(p) for p in parts]
    trans = b.table()
    accepting = np.concatenate([[any(bool(p.accepting[p.start]) for p in parts)]] + [p.accepting for p in parts])
    for p, o in zip(parts, offsets):
        row = trans[int(o) + p.start]
        trans[0] = np.where(row >= 0, row, trans[0])
    return ByteDFA(trans, accepting, 0)


def insert_text(rows: list[dict[int, int]], start: int, data: bytes) -> int:
    """Follow ``data`` from trie node ``start``, adding nodes as needed; returns the node at its end."""
    s = start
    for byte in data:
        nxt = rows[s].get(byte)
        if nxt is None:
            nxt = len(rows)
            rows.append({})
            rows[s][byte] = nxt
        s = nxt
    return s


def literals(texts: list[bytes]) -> ByteDFA:
    """The DFA of a finite set of byte strings (a trie; a string may be a prefix of another)."""
    rows: list[dict[int, int]] = [{}]
    acc = {0: False}
    for t in texts:
        acc[insert_text(rows, 0, t)] = True
    count_states(len(rows))
    trans = _empty(len(rows))
    for s, row in enumerate(rows):
        for byte, t in row.items():
            trans[s, byte] = t
    accepting = np.zeros(len(rows), dtype=bool)
    accepting[[s for s, a in acc.items() if a]] = True
    return ByteDFA(trans, accepting, 0)


class _Tries:
    """Tries of choices ``(bytes, item or None)``, each node made once per (depth, set of choices left): the
    tries after each member of an object share every node whose remaining choices are the same (the tail
    of a key that only one choice still has, the ``}`` that closes), so their states grow with the keys'
    bytes, not with the square of the optional members (hash-consing: equal sub-tries are one node, as in a
    minimal acyclic automaton; Daciuk et al., "Incremental construction of minimal acyclic finite-state
    automata", Computational Linguistics 26(1), 2000). The language is the plain tries'.

    ``rows``: the transitions of each node (byte -> node); ``ends``: the items (None: accept) the choices that
    end at each node continue as, in the order of the choices; ``size``: for each node, the nodes of the plain
    trie it stands for (what a trie per choice list would hold, counted against the compile budget as
    before, so that limits and the long-count policy decide as they did).
    """

    def __init__(self):
        self.rows: list[dict[int, int]] = []
        self.ends: list[list[int | None]] = []
        self.size: list[int] = []
        self._memo: dict[tuple[int, frozenset], int] = {}

    def trie(self, choices: list[tuple[bytes, int | None]]) -> int:
        """The root node of the trie of ``choices``; counts the plain trie's nodes against the budget."""
        first_new = len(self.rows)
        root = self._node(0, choices)
        for s in range(len(self.rows) - 1, first_new - 1, -1):  # children were made after their parents
            self.size[s] = 1 + sum(self.size[t] for t in self.rows[s].values())
        count_states(self.size[root])
        return root

    def _node(self, depth: int, choices: list[tuple[bytes, int | None]]) -> int:
        key = (depth, frozenset(choices))
        known = self._memo.get(key)
        if known is not None:
            return known
        node = self._new(key, [j for data, j in choices if len(data) == depth])
        stack = [(node, depth, choices)]
        while stack:  # a stack, not recursion: a key may be longer than Python's recursion limit
            parent, d, cands = stack.pop()
            by_byte: dict[int, list[tuple[bytes, int | None]]] = {}
            for c in cands:
                if len(c[0]) > d:
                    by_byte.setdefault(c[0][d], []).append(c)
            for byte, sub in by_byte.items():
                key = (d + 1, frozenset(sub))
                child = self._memo.get(key)
                if child is None:
                    child = self._new(key, [j for data, j in sub if len(data) == d + 1])
                    stack.append((child, d + 1, sub))
                self.rows[parent][byte] = child
        return node

    def _new(self, key: tuple[int, frozenset], ends: list[int | None]) -> int:
        node = len(self.rows)
        self.rows.append({})
        self.ends.append(ends)
        self.size.append(0)
        self._memo[key] = node
        return node


def structure(prefix: bytes, items: list[ByteDFA], boundaries: list[list[tuple[bytes, int | None]]],
              entry: list[tuple[bytes, int | None]]) -> ByteDFA:
    """A DFA made of one copy of each item and literal tries between them.

    After ``prefix``, the ``entry`` choices apply; after item ``i`` completes, ``boundaries[i]`` apply. A
    choice ``(bytes, j)`` reads the bytes then continues as item ``j``; ``(bytes, None)`` reads them and
    accepts (nothing may follow). The tries share their equal sub-tries (:class:`_Tries`). Raises Clash when
    choices collide with each other or with an item's own continuation.
    """
    count_states(sum(d.num_states for d in items))
    b = Assembly()
    starts, accs = [], []
    for d in items:
        off = b.copy(d)
        starts.append(off + d.start)
        accs.append(np.flatnonzero(d.accepting) + off)
    base = b.size
    tries = _Tries()
    start_row = tries.trie([(prefix + data, j) for data, j in entry])
    boundary_rows = [tries.trie(ch) if ch else None for ch in boundaries]
    rows = tries.rows
    b.fresh(len(rows))
    trans = b.table()
    acc = np.zeros(b.size, dtype=bool)
    for r, row in enumerate(rows):
        if row:
            trans[base + r, list(row.keys())] = [base + t for t in row.values()]
    original_starts = {j: trans[starts[j]].copy() for ends in tries.ends for j in ends if j is not None}
    for r, ends in enumerate(tries.ends):
        for j in ends:
            if j is None:
                if (trans[base + r] >= 0).any():
                    raise Clash()
                acc[base + r] = True
            else:
                merge_rows(trans, np.array([base + r]), original_starts[j])
    for i, r in enumerate(boundary_rows):
        if len(accs[i]):
            if r is not None:
                merge_rows(trans, accs[i], trans[base + r].copy())
            acc[accs[i]] = False
    return ByteDFA(trans, acc, base + start_row)


#: Bytes that never occur in UTF-8 text (RFC 3629: 0xC0, 0xC1 and 0xF5-0xFF), used as end markers of the
#: members of :func:`members_any_order` while it is built.
NOT_UTF8 = [0xC0, 0xC1] + list(range(0xF5, 0x100))


def members_any_order(pairs: list[ByteDFA], required: list[bool]) -> ByteDFA:
    """An object of members in any order and any number: ``{}`` or ``{M, M, ...}``, each member ``M`` a text of
    one of ``pairs`` (each the automaton of ``"key": value`` for its keys; the pairs' keys must be disjoint),
    with every pair marked ``required`` used at least once.

    Built by marking the end of each pair with a byte UTF-8 never uses (one marker per required pair, one
    shared by the rest), joining the pairs into one minimal automaton, then copying it once per subset of
    required pairs seen so far and turning each marker into the ``, `` or ``}`` that may follow: states grow
    like ``2 ** required`` (at most 12 required pairs; raises ValueError past that). Raises Clash when a
    member's automaton may itself continue with ``,`` or ``}`` (never for JSON values).
    """
    if any(counters.uses_markers(p.transitions) for p in pairs):  # its end markers are the counters' bytes
        raise counters.CounterClash("a counted repetition in the members of an object in any order")
    need = [i for i, r in enumerate(required) if r]
    if len(need) > len(NOT_UTF8) - 1:
        raise ValueError(f"at most {len(NOT_UTF8) - 1} required members, got {len(need)}")
    mark = {i: NOT_UTF8[n] for n, i in enumerate(need)}
    rest = NOT_UTF8[-1]
    union_of = union_all([seq([p, literals([bytes([mark.get(i, rest)])])]) for i, p in enumerate(pairs)])
    n, k = union_of.num_states, len(need)
    markers = [mark[i] for i in need] + [rest]
    base = union_of.transitions.copy()
    ends = {m: np.flatnonzero(base[:, m] >= 0) for m in markers}
    base[:, NOT_UTF8] = -1
    full = (1 << k) - 1
    count_states(3 + (1 << k) * (n + 1))
    # 0 before "{", 1 after it, 2 the end; per subset, a copy of the members' automaton, then the state after
    # ", " (reads the space)
    b = Assembly()
    b.fresh(3)
    off = []
    for _ in range(1 << k):
        off.append(b.copy(ByteDFA(base, union_of.accepting, union_of.start)))
        b.fresh(1)
    trans = b.table()
    final = 2
    trans[0, ord("{")] = 1
    for c in range(1 << k):
        sep = np.full(256, -1, dtype=np.int32)  # after ",": the space, then a member in this subset's copy
        sep[ord(" ")] = off[c] + union_of.start
        trans[off[c] + n] = sep
    trans[1] = trans[off[0] + union_of.start]
    if k == 0:
        trans[1, ord("}")] = final
    for c in range(1 << k):
        for bit, m in enumerate(markers):
            after = c | (1 << bit) if bit < k else c
            row = np.full(256, -1, dtype=np.int32)
            row[ord(",")] = off[after] + n
            if after == full:
                row[ord("}")] = final
            merge_rows(trans, ends[m] + off[c], row)
    accepting = np.zeros(len(trans), dtype=bool)
    accepting[final] = True
    out = ByteDFA(trans, accepting, 0)
    if k:
        D.set_equivalent(out, lambda: merge_copies(trans, accepting, base, [ends[m] for m in markers], off))
    return out


def merge_copies(trans: np.ndarray, accepting: np.ndarray, base: np.ndarray, ends: list[np.ndarray],
                 off: list[int]) -> ByteDFA:
    """An automaton of the language of :func:`members_any_order`'s (``trans``, ``accepting``, start 0) with
    fewer reachable states, for :func:`~.dfa.minimize` to refine: a state of the members' automaton from which the end of
    one required member only can be reached (its key read: the rest of that member) goes on alike in the
    copy of a subset without that member and in the copy of the subset with it (after the member, both
    continue in the latter copy), so every transition into the former goes to the latter instead. The
    states left unreachable stay (the same rows: the table's shape is unchanged); minimize trims them.

    ``base``: int32 (n, 256), the members' automaton with its end markers removed; ``ends``: int64 arrays,
    the states that read each marker, the required members' in bit order then the one the others share;
    ``off``: the first state of each subset's copy (2 ** required, subsets as bit masks)."""
    n, k = base.shape[0], len(ends) - 1
    reached = np.zeros(n, dtype=np.int64)  # how many markers each state can reach
    bit_of = np.full(n, -1, dtype=np.int64)  # the required member whose end it reaches (one of them)
    for bit, states in enumerate(ends):
        goal = np.zeros(n, dtype=bool)
        goal[states] = True
        can = coreachable(base, goal)
        reached += can
        if bit < k:
            bit_of[can] = bit
    one = (reached == 1) & (bit_of >= 0)
    remap = np.arange(len(trans) + 1, dtype=np.int32)
    remap[-1] = -1  # a dead transition (-1) stays dead
    offsets = np.asarray(off, dtype=np.int64)
    subsets = np.arange(len(off), dtype=np.int64)
    for bit in range(k):
        states = np.flatnonzero(one & (bit_of == bit))
        without = subsets[(subsets >> bit & 1) == 0]
        into = (offsets[without | 1 << bit, None] + states).reshape(-1)
        remap[(offsets[without, None] + states).reshape(-1)] = into
    return ByteDFA(remap[trans], accepting, 0)
