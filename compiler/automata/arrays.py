"""Array automata: items counted, matched against ``contains`` and kept distinct (``uniqueItems``).

An array is read by a small *control* machine whose states say what the items so far imply (how many were
written, how many matched ``contains``, which values were used). Each control state that may take another
item holds one copy of that item's automaton, whose accepting states carry a *tag* (which kind of item was
just read: matching ``contains`` or not, or which value); after an item of tag ``t`` the control state
moves by ``after(q, t)``, and there ``", "`` leads into the next copy and ``"]"`` closes the array when the
control state allows it (:func:`assemble`). The automaton is linear in the control states times the item's
states: an array of up to 1,000 integers is 1,000 copies of an 18-state automaton, not a regex repetition.

* counted arrays (:func:`counted`): control states (items written, ``contains`` matches), the position
  collapsing once only the tail item is left and the count saturating at the bound that matters;
* distinct items (:func:`distinct`): when each position's item language is a finite set of values, the
  control state is the set of values used so far (so at most 2**K states for K values, bounded by the
  caller); values compare as JSON does (``1`` equals ``1.0``, ``true`` does not equal ``1``, objects with
  the same members are equal, :func:`value_key`);
* :func:`split`: an item automaton with its accepting states tagged by whether a second automaton (the
  ``contains`` schema's) accepts their texts, from the intersection and the difference (:mod:`.compose`);
* :func:`finite_texts`: the texts of an automaton whose language is finite and small; :func:`shortest`, the
  length of its shortest text.

Every state is counted against the compile budget before it is built (:func:`~..limits.count_states`).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from ...core.errors import SchemaError
from . import dfa as D
from .assembly import Assembly
from .compose import Clash, difference, insert_text, intersect, merge_rows
from .dfa import ByteDFA
from ..limits import count_states
from .unique import unique

#: A tagged automaton: the DFA and an int64 (states,) array, -1 for a state that does not accept, else the
#: tag of the texts that end there.
Tagged = tuple[ByteDFA, np.ndarray]


def plain(dfa: ByteDFA) -> Tagged:
    """``dfa`` with every accepting state tagged 0."""
    return dfa, np.where(dfa.accepting, 0, -1).astype(np.int64)


def tagged_union(parts: list[ByteDFA]) -> Tagged:
    """One automaton for the union of the pairwise disjoint languages ``parts``, each accepting state tagged
    with the index of the part whose texts end there.

    The product construction (Rabin and Scott, 1959) over the tuples of part states reachable from the
    starts, a dead part written -1; each tuple counts one state against the compile budget. Raises
    ValueError when two parts accept a common text (they must be disjoint).
    """
    index: dict[tuple[int, ...], int] = {}
    order: list[tuple[int, ...]] = []

    def state(key: tuple[int, ...]) -> int:
        s = index.get(key)
        if s is None:
            count_states(1)
            s = index[key] = len(order)
            order.append(key)
        return s

    state(tuple(p.start for p in parts))
    widths = [p.num_states + 1 for p in parts]
    rows = []
    i = 0
    while i < len(order):
        cols = [p.transitions[s].astype(np.int64) if s >= 0 else np.full(256, -1, dtype=np.int64)
                for p, s in zip(parts, order[i])]
        live = np.zeros(256, dtype=bool)
        code = np.zeros(256, dtype=np.int64)
        for col, w in zip(cols, widths):
            live |= col >= 0
            code = code * w + (col + 1)
        row = np.full(256, -1, dtype=np.int32)
        if live.any():
            uniq, inv = unique(code[live], return_inverse=True)
            targets = []
            for c in uniq.tolist():
                key = []
                for w in reversed(widths):
                    key.append(c % w - 1)
                    c //= w
                targets.append(state(tuple(reversed(key))))
            row[live] = np.asarray(targets, dtype=np.int32)[inv.reshape(-1)]
        rows.append(row)
        i += 1
    tags = np.full(len(order), -1, dtype=np.int64)
    for s, key in enumerate(order):
        hits = [j for j, (p, q) in enumerate(zip(parts, key)) if q >= 0 and p.accepting[q]]
        if len(hits) > 1:
            raise ValueError("tagged_union: the parts are not disjoint")
        if hits:
            tags[s] = hits[0]
    return ByteDFA(np.stack(rows), tags >= 0, 0), tags


def split(item: ByteDFA, cond: ByteDFA) -> Tagged:
    """``item``'s texts, each accepting state tagged 1 when ``cond`` accepts its texts, else 0: the union
    of ``item - cond`` (tag 0) and ``item & cond`` (tag 1), each minimized first (:func:`tagged_union`)."""
    try:
        miss = difference(item, cond)
    except SchemaError:  # every item matches
        whole = D.minimize(item)
        return whole, np.where(whole.accepting, 1, -1).astype(np.int64)
    try:
        hit = intersect(item, cond)
    except SchemaError:  # no item matches
        return miss, np.where(miss.accepting, 0, -1).astype(np.int64)
    return tagged_union([miss, hit])


def tagged_texts(texts: list[tuple[bytes, int]]) -> Tagged:
    """The trie of ``(text, tag)`` pairs (a text once; its end state tagged). Raises ValueError when one
    text is given two tags."""
    rows: list[dict[int, int]] = [{}]
    tag_of: dict[int, int] = {}
    for text, tag in texts:
        s = insert_text(rows, 0, text)
        if tag_of.setdefault(s, tag) != tag:
            raise ValueError(f"tagged_texts: {text!r} has two tags")
    count_states(len(rows))
    trans = np.full((len(rows), 256), -1, dtype=np.int32)
    for s, row in enumerate(rows):
        if row:
            trans[s, list(row)] = list(row.values())
    tags = np.full(len(rows), -1, dtype=np.int64)
    for s, t in tag_of.items():
        tags[s] = t
    return ByteDFA(trans, tags >= 0, 0), tags


def assemble(start: Hashable, slot: Callable[[Any], Tagged | None], after: Callable[[Any, int], Any],
             closes: Callable[[Any], bool]) -> ByteDFA:
    """The automaton of ``[`` items ``]`` read by a control machine (see the module docstring).

    ``start``: the control state before any item; ``slot(q)``: the tagged automaton of the next item in
    control state ``q``, or None when no item may follow; ``after(q, t)``: the control state once an item
    of tag ``t`` is read in ``q``, or None when such an item is not allowed there; ``closes(q)``: whether
    ``]`` may follow in ``q``. Control states are hashable and explored from ``start``; each one with a
    slot holds one copy of its automaton. Not minimized. Counts each copy against the compile budget as
    its control state is found, before anything is built; raises Clash when an item automaton continues with ``,`` or ``]`` after a
    complete item (never for JSON values).
    """
    slots: dict[Any, Tagged | None] = {}

    def slot_of(q):
        if q not in slots:
            slots[q] = slot(q)
        return slots[q]

    order, moves = _explore(start, slot_of, after, closes)
    return _layout(start, order, moves, slots, closes)


def _explore(start: Hashable, slot_of: Callable[[Any], Tagged | None], after: Callable[[Any, int], Any],
             closes: Callable[[Any], bool]) -> tuple[list[Any], dict[Any, list[tuple[int, Any]]]]:
    """The control states that hold a copy (breadth first from ``start``) and, for each, the moves out of its
    copy's tags: (tag, next control state), those leading nowhere (no slot, no ``]``) left out. Counts
    each copy against the compile budget as it is found (a long count stops at the limit)."""
    order: list[Any] = []
    moves: dict[Any, list[tuple[int, Any]]] = {}
    seen = {start}
    queue = deque([start])
    while queue:
        q = queue.popleft()
        s = slot_of(q)
        if s is None:
            continue
        count_states(s[0].num_states)  # its copy, counted as it is found (a long count stops at the limit)
        order.append(q)
        out = []
        for t in unique(s[1][s[1] >= 0]).tolist():
            q2 = after(q, t)
            if q2 is None or (slot_of(q2) is None and not closes(q2)):
                continue
            out.append((t, q2))
            if q2 not in seen:
                seen.add(q2)
                queue.append(q2)
        moves[q] = out
    return order, moves


def _layout(start: Hashable, order: list[Any], moves: dict[Any, list[tuple[int, Any]]],
            slots: dict[Any, Tagged | None], closes: Callable[[Any], bool]) -> ByteDFA:
    """The automaton of :func:`assemble` from the explored control states (``order``, ``moves``) and their
    copies (``slots``): the fixed states around ``[``, ``,`` and ``]``, then one block per copy, each item's
    end wired to the next copy or to ``]``. Raises Clash as :func:`assemble`."""
    entries = [q for q in dict.fromkeys(q2 for q in order for _, q2 in moves[q]) if q in moves]
    # layout: 0 before "[", 1 after "[", 2 the accepting end after "]", then for each control state entered
    # after a comma: the state after "," and the state after ", "; then the copies
    fixed = 3 + 2 * len(entries)
    count_states(fixed)
    comma = {q: 3 + 2 * j for j, q in enumerate(entries)}
    assembly = Assembly()
    assembly.fresh(fixed)
    offset = {q: assembly.copy(slots[q][0]) for q in order}
    trans = assembly.table()
    acc = np.zeros(len(trans), dtype=bool)
    acc[2] = True
    trans[0, ord("[")] = 1

    def enter(row_state: int, q) -> None:  # row_state reads the first item of q
        if q in offset:
            trans[row_state] = trans[offset[q] + slots[q][0].start]

    enter(1, start)
    if closes(start):  # "[]"
        if trans[1, ord("]")] >= 0:
            raise Clash()
        trans[1, ord("]")] = 2
    for q in entries:
        trans[comma[q], ord(" ")] = comma[q] + 1
        enter(comma[q] + 1, q)
    for q in order:
        _, tags = slots[q]
        for t, q2 in moves[q]:
            row = np.full(256, -1, dtype=np.int32)
            if q2 in offset:
                row[ord(",")] = comma[q2]
            if closes(q2):
                row[ord("]")] = 2
            merge_rows(trans, np.flatnonzero(tags == t) + offset[q], row)
    return ByteDFA(trans, acc, 0)


def counted(prefix: list[Tagged], rest: Tagged | None, lo: int, hi: int | None, cmin: int = 0,
            cmax: int | None = None) -> ByteDFA:
    """An array of ``prefix`` items by position then ``rest`` items (None: no more), ``lo``..``hi`` items in
    all (``hi`` None: no bound), with between ``cmin`` and ``cmax`` (None: no bound) items of tag 1.

    The items are tagged automata (tag 1: the item matches ``contains``; :func:`plain` items are all tag 0).
    Control states are (items written, tag-1 items), the first capped where only the tail item is left
    and nothing more is counted, the second at ``cmax`` (past it: no move) or, without ``cmax``, at
    ``cmin``; states that can no longer reach ``cmin`` matches are not built. Raises as :func:`assemble`.
    """
    cap = hi
    if rest is None:
        cap = len(prefix) if cap is None else min(cap, len(prefix))
    tail = max(len(prefix), lo)  # with no cap, positions from here on are all alike
    top = cmin if cmax is None else cmax

    def slot(q):
        i, _ = q
        if cap is not None and i >= cap:
            return None
        return prefix[i] if i < len(prefix) else rest

    def after(q, t):
        i, c = q
        c += t
        if cmax is not None and c > cmax:
            return None
        c = min(c, top)
        i += 1
        if cap is None:
            i = min(i, tail)
        elif c + (cap - i) < cmin:
            return None
        return i, c

    def closes(q):
        i, c = q
        return i >= lo and c >= cmin

    return assemble((0, 0), slot, after, closes)


#: Item counts more than this many past the positions that must be copied are counted by a counter where
#: the compile uses counters (:mod:`.counters`).
LOOP_COUNT = 64


def counted_loop(items: list[ByteDFA], rest: ByteDFA, lo: int, extra: int, k: int) -> ByteDFA:
    """The marked automaton (:mod:`.counters`) of an array of ``items`` by position (copies: ``items[i]``
    is the automaton of position ``i``), then up to ``extra`` more ``rest`` items counted by counter ``k``
    (bound ``extra``): ``[ R_k item0, item1, ... (N_k , rest)* ]`` with at least ``lo`` <= len(items)
    items; the advance comes before the comma of each counted item after the first (the comma commits to
    it). One copy per position and one of ``rest``; raises Clash as :func:`assemble`."""
    from .counters import next_byte, reset_byte

    parts = items + [rest]
    sizes = [p.num_states for p in parts]
    count_states(sum(sizes) + 6)
    fixed = 7  # 0 before "[", 1 after "[", 2 end, 3 after the reset, 4 after a loop comma, 5 after ", ",
    # 6 after the advance that a loop comma follows (the comma commits to one more item, so it is counted)
    offs = np.cumsum([fixed] + sizes[:-1]).tolist()
    trans = np.concatenate([np.full((fixed, 256), -1, dtype=np.int32)]
                           + [np.where(p.transitions >= 0, p.transitions + o, -1).astype(np.int32)
                              for p, o in zip(parts, offs)])
    acc = np.zeros(len(trans), dtype=bool)
    acc[2] = True
    extra_rows = []  # per position i >= 1: the states after "," and after ", " before item i
    for i in range(1, len(items)):
        extra_rows.append(len(trans) + 2 * (i - 1))
    if extra_rows:
        trans = np.concatenate([trans, np.full((2 * len(extra_rows), 256), -1, dtype=np.int32)])
        acc = np.concatenate([acc, np.zeros(2 * len(extra_rows), dtype=bool)])
    trans[0, ord("[")] = 1
    trans[1, reset_byte(k)] = 3
    loop_start = offs[-1] + rest.start

    def enter(state: int, i: int) -> None:  # ``state`` reads the first item of position i
        start = trans[offs[i] + parts[i].start].copy()
        merge_rows(trans, np.array([state]), start)

    trans[6, ord(",")] = 4
    trans[4, ord(" ")] = 5
    enter(5, len(items))
    for j, r in enumerate(extra_rows):
        trans[r, ord(" ")] = r + 1
        enter(r + 1, j + 1)
    if items:
        enter(3, 0)
    else:  # the first item of the loop: advanced as it begins
        trans[3, next_byte(k)] = loop_start
    if lo == 0:
        merge_rows(trans, np.array([3]), _row({ord("]"): 2}))
    for i, p in enumerate(parts):
        ends = np.flatnonzero(p.accepting) + offs[i]
        row = {}
        if i + 1 >= lo or i == len(items):
            row[ord("]")] = 2
        if i + 1 < len(items):
            row[ord(",")] = extra_rows[i]
        else:
            row[next_byte(k)] = 6
        merge_rows(trans, ends, _row(row))
    return ByteDFA(trans, acc, 0)


def _row(moves: dict[int, int]) -> np.ndarray:
    row = np.full(256, -1, dtype=np.int32)
    for b, t in moves.items():
        row[b] = t
    return row


def distinct(tables: list[dict[int, list[bytes]]], rest: dict[int, list[bytes]] | None, lo: int,
             hi: int | None, matching: frozenset[int] = frozenset(), cmin: int = 0,
             cmax: int | None = None) -> ByteDFA:
    """An array of distinct values: position ``i`` takes one of the values of ``tables[i]`` (then of
    ``rest``; None: no more items), each a value id -> its texts; ``lo``..``hi`` items; between ``cmin``
    and ``cmax`` of them in ``matching`` (the values that match ``contains``).

    The control state is the set of value ids used (the position is its size); each holds the trie of the
    values left at its position, each value's texts tagged with its id. The caller bounds the number of
    sets (at most sum over j <= hi of C(K, j) for K values). Raises as :func:`assemble`.
    """
    tries: dict[frozenset[int], Tagged | None] = {}

    def table(i: int) -> dict[int, list[bytes]] | None:
        if hi is not None and i >= hi:
            return None
        return tables[i] if i < len(tables) else rest

    def slot(used: frozenset[int]):
        if used not in tries:
            values = table(len(used))
            left = [(text, v) for v, texts in (values or {}).items() if v not in used for text in texts]
            tries[used] = tagged_texts(left) if left else None
        return tries[used]

    def after(used: frozenset[int], v: int):
        out = used | {v}
        if cmax is not None and len(out & matching) > cmax:
            return None
        return out

    def closes(used: frozenset[int]) -> bool:
        return len(used) >= lo and len(used & matching) >= cmin

    return assemble(frozenset(), slot, after, closes)


def finite_texts(dfa: ByteDFA, limit: int) -> list[bytes] | None:
    """The texts of ``dfa`` in byte order, or None when its language is infinite or holds more than
    ``limit`` texts (``dfa`` is trimmed first; counted with a pass over its states in topological order)."""
    try:
        d = D.trim(dfa)
    except SchemaError:
        return []
    n = d.num_states
    if n > 50 * limit + 1000:  # too large to hold only ``limit`` short texts worth listing
        return None
    t = d.transitions
    succ = [np.flatnonzero(t[s] >= 0) for s in range(n)]
    indeg = np.zeros(n, dtype=np.int64)
    for s in range(n):
        np.add.at(indeg, t[s, succ[s]], 1)
    topo, queue = [], deque(np.flatnonzero(indeg == 0).tolist())
    while queue:
        s = queue.popleft()
        topo.append(s)
        for nxt in t[s, succ[s]].tolist():
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                queue.append(nxt)
    if len(topo) < n:  # a cycle: infinitely many texts
        return None
    words = np.zeros(n, dtype=np.int64)
    for s in reversed(topo):
        words[s] = min(limit + 1, int(d.accepting[s]) + int(words[t[s, succ[s]]].sum()))
    if words[d.start] > limit:
        return None
    out: list[bytes] = []
    stack = [(d.start, b"")]
    while stack:  # depth first, bytes in increasing order
        s, text = stack.pop()
        if d.accepting[s]:
            out.append(text)
        stack.extend((int(t[s, b]), text + bytes([b])) for b in reversed(succ[s].tolist()))
    return out


def shortest(dfa: ByteDFA) -> int | None:
    """The length of the shortest text ``dfa`` accepts (breadth first from the start), None when none."""
    seen = np.zeros(dfa.num_states, dtype=bool)
    frontier = np.array([dfa.start])
    seen[dfa.start] = True
    depth = 0
    while len(frontier):
        if dfa.accepting[frontier].any():
            return depth
        nxt = dfa.transitions[frontier].reshape(-1)
        nxt = unique(nxt[nxt >= 0])
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
        depth += 1
    return None


def value_key(value: Any) -> Hashable:
    """A hashable key equal for JSON values JSON Schema calls equal (``uniqueItems``, ``enum``): numbers by
    value (``1`` and ``1.0`` alike), ``true``/``false`` apart from ``1``/``0``, arrays item by item, objects
    by their members whatever the order."""
    if isinstance(value, bool) or value is None:
        return ("c", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(value_key(v) for v in value))
    return ("o", frozenset((k, value_key(v)) for k, v in value.items()))


def text_key(text: bytes) -> Hashable:
    """:func:`value_key` of the JSON text ``text`` (UTF-8)."""
    return value_key(json.loads(text.decode("utf-8")))
