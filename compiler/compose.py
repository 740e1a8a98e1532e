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

Results are not minimized here; callers trim and minimize (:func:`~callmaybe.compiler.dfa.minimize`). Each
join counts the states it builds against the compile budget (:func:`~.limits.count_states`) before it
allocates them.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import SchemaError
from . import dfa as D
from .dfa import ByteDFA
from .limits import count_states


class Clash(Exception):
    """Two transitions on the same byte to different states met in a sequence."""


def _empty(n: int) -> np.ndarray:
    """int32 (n, 256) transitions, all dead."""
    return np.full((n, 256), -1, dtype=np.int32)


def _shift(t: np.ndarray, off: int) -> np.ndarray:
    """Transitions ``t`` with every live target moved up by ``off`` (a copy placed at state ``off``)."""
    return np.where(t >= 0, t + off, -1).astype(np.int32)


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
    sizes = [p.num_states for p in parts]
    count_states(sum(sizes))
    offs = np.cumsum([0] + sizes)
    trans = np.concatenate([_shift(p.transitions, int(o)) for p, o in zip(parts, offs)])
    acc = np.zeros(int(offs[-1]), dtype=bool)
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
    (:func:`~.limits.count_states`). Not minimized. Raises ValueError for an unknown ``mode``.
    """
    if mode not in ("or", "and", "minus", "xor"):
        raise ValueError(f"unknown product mode {mode!r}")
    index: dict[tuple[int, int], int] = {}
    order: list[tuple[int, int]] = []

    def state(pair):
        s = index.get(pair)
        if s is None:
            count_states(1)
            s = len(order)
            index[pair] = s
            order.append(pair)
        return s

    state((a.start, b.start))
    rows = []
    i = 0
    none = np.full(256, -1, dtype=np.int64)
    width = b.num_states + 1
    while i < len(order):
        sa, sb = order[i]
        ta = a.transitions[sa].astype(np.int64) if sa >= 0 else none
        tb = b.transitions[sb].astype(np.int64) if sb >= 0 else none
        if mode == "and":
            live = (ta >= 0) & (tb >= 0)
        elif mode == "minus":
            live = ta >= 0
        else:
            live = (ta >= 0) | (tb >= 0)
        key = ta * width + (tb + 1)
        row = np.full(256, -1, dtype=np.int32)
        if live.any():
            uniq, inv = np.unique(key[live], return_inverse=True)
            targets = [state((k // width, k % width - 1)) for k in uniq.tolist()]
            row[live] = np.asarray(targets, dtype=np.int32)[inv.reshape(-1)]
        rows.append(row)
        i += 1
    trans = np.stack(rows)
    in_a = np.array([sa >= 0 and bool(a.accepting[sa]) for sa, _ in order], dtype=bool)
    in_b = np.array([sb >= 0 and bool(b.accepting[sb]) for _, sb in order], dtype=bool)
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
    return not D.coreachable(dfa.transitions, dfa.accepting)[dfa.start] if dfa.num_states else True


def exactly_one(parts: list[ByteDFA]) -> ByteDFA:
    """The texts in exactly one of ``parts`` (JSON Schema ``oneOf``): the union of each part minus the union
    of the others, minimized; raises SchemaError when no text is in exactly one part."""
    if len(parts) == 1:
        return D.minimize(parts[0])
    pieces = []
    for i, p in enumerate(parts):
        others = union_all([q for j, q in enumerate(parts) if j != i])
        only = product(D.minimize(p), others, "minus")
        if not is_empty(only):
            pieces.append(D.minimize(only))
    if not pieces:
        raise SchemaError("the schema accepts no value (empty language)")
    return union_all(pieces)


def union_all(parts: list[ByteDFA]) -> ByteDFA:
    """The union of several DFAs, minimized along the way to keep the pairs few. Parts that accept nothing
    are left out (an impossible ``anyOf`` branch); when every part is empty, so is the result (not
    minimized: minimizing an empty language raises SchemaError)."""
    live = [p for p in parts if not is_empty(p)]
    if not live:
        return parts[0]
    out = D.minimize(live[0])
    for p in live[1:]:
        out = D.minimize(union(out, D.minimize(p)))
    return out


def _insert(rows: list[dict[int, int]], start: int, data: bytes) -> int:
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
        acc[_insert(rows, 0, t)] = True
    count_states(len(rows))
    trans = _empty(len(rows))
    for s, row in enumerate(rows):
        for byte, t in row.items():
            trans[s, byte] = t
    accepting = np.zeros(len(rows), dtype=bool)
    accepting[[s for s, a in acc.items() if a]] = True
    return ByteDFA(trans, accepting, 0)


class _Builder:
    """Grows one transition table from copies of sub-DFAs (none of their states accepting yet)."""

    def __init__(self):
        self.blocks: list[np.ndarray] = []
        self.acc: list[np.ndarray] = []
        self.n = 0

    def add(self, d: ByteDFA) -> tuple[int, np.ndarray]:
        """Copy ``d`` in; returns (its start state, its accepting states)."""
        off = self.n
        self.blocks.append(_shift(d.transitions, off))
        self.acc.append(np.zeros(d.num_states, dtype=bool))
        self.n += d.num_states
        return off + d.start, np.flatnonzero(d.accepting) + off

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """(int32 (states, 256) transitions, bool (states,) accepting) of everything added."""
        if not self.blocks:
            return _empty(0), np.zeros(0, dtype=bool)
        return np.concatenate(self.blocks), np.concatenate(self.acc)


def structure(prefix: bytes, items: list[ByteDFA], boundaries: list[list[tuple[bytes, int | None]]],
              entry: list[tuple[bytes, int | None]]) -> ByteDFA:
    """A DFA made of one copy of each item and literal tries between them.

    After ``prefix``, the ``entry`` choices apply; after item ``i`` completes, ``boundaries[i]`` apply. A
    choice ``(bytes, j)`` reads the bytes then continues as item ``j``; ``(bytes, None)`` reads them and
    accepts (nothing may follow). Raises Clash when choices collide with each other or with an item's own
    continuation.
    """
    count_states(sum(d.num_states for d in items))
    b = _Builder()
    starts, accs = [], []
    for d in items:
        s, a = b.add(d)
        starts.append(s)
        accs.append(a)
    trans, acc = b.table()
    rows: list[dict[int, int]] = []  # new trie rows, indexed from len(trans)
    base = len(trans)
    merges: list[tuple[int, int | None]] = []  # (trie row, item to continue as / None = accept)

    def trie(choices, lead: bytes = b"") -> int:
        root = len(rows)
        rows.append({})
        for data, j in choices:
            merges.append((_insert(rows, root, lead + data), j))
        count_states(len(rows) - root)  # an object's tries grow with the square of its optional members
        return root

    start_row = trie(entry, prefix)
    boundary_rows = [trie(ch) if ch else None for ch in boundaries]
    more = _empty(len(rows))
    for r, row in enumerate(rows):
        for byte, t in row.items():
            more[r, byte] = base + t
    trans = np.concatenate([trans, more])
    acc = np.concatenate([acc, np.zeros(len(rows), dtype=bool)])
    original_starts = {j: trans[starts[j]].copy() for _, j in merges if j is not None}
    for r, j in merges:
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
