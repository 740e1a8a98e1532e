"""The automaton of an object with extra members and counted members (:class:`OpenObject`), and the tagged
automata it dispatches keys with.

An object is written ``{`` then its named members in declaration order (each optional one may be left out),
then any number of extra members, then ``}``, with ``", "`` between members and ``": "`` after each key. Its
automaton is made of *slots*: a slot ``(i, c, mask)`` is the point between members where named members ``i..``
may still come, ``c`` members have been written (saturated once it no longer matters) and ``mask`` holds
what the dependencies still need to know of the members before ``i``. At a slot the next
key is read by a *dispatch* automaton: a DFA over key texts (JSON strings with their quotes) whose accepting
states are *tagged* with what the key starts (named member ``j``, or extra-key region ``r``); after the key
and ``": "`` comes one copy of that member's value automaton, whose end leads to the next slot. Extra keys
are classified once into regions (:func:`classify`), each with its own value automaton.

Tags are kept through products of automata (:func:`tagged_product`, the product construction over reachable
tuples of states, each tuple's tag taken from its parts), never through minimization, which would merge two
keys' end states whose futures as keys are the same. Key automata accept JSON strings only, which end at
their closing quote: nothing continues a key, so a tagged end state takes the ``": "`` of its member
without a clash.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core.errors import SchemaError
from . import counters, native
from .assembly import Assembly
from .compose import literals, merge_rows
from .dfa import ByteDFA
from ..limits import count_states
from .reach import bfs_order, coreachable
from .nodes import Node
from .syntax import object_regex
from .unique import unique_rows


@dataclass
class Tagged:
    """A DFA whose states carry tags: ``tags`` is int32 (states,), -1 for no tag. Only tagged states are
    accepting in the sense of the caller (``dfa.accepting`` is kept equal to ``tags >= 0``)."""

    dfa: ByteDFA
    tags: np.ndarray


def tagged_literals(texts: list[bytes], tags: list[int]) -> Tagged:
    """The trie of ``texts``, the end state of ``texts[k]`` tagged ``tags[k]``; raises ValueError when two
    texts are equal or one is a prefix of another with another tag (their ends would collide)."""
    trie = literals(texts)
    out = np.full(trie.num_states, -1, dtype=np.int32)
    for text, tag in zip(texts, tags):
        s = trie.state_after(text)
        if out[s] >= 0 and out[s] != tag:
            raise ValueError(f"two keys end in the same state: {text!r}")
        out[s] = tag
    return Tagged(trie, out)


def tagged_product(parts: list[Tagged], need_first: bool = False,
                   combine=None) -> Tagged:
    """The product of tagged automata over their reachable tuples of states (a dead part is -1 in a tuple).

    Default (``combine`` None): the union of the parts' languages, a tuple tagged with the one tag among its
    parts (two parts tagged in the same tuple: ValueError, their languages were meant to be disjoint).
    ``combine(tags)`` (a list of the parts' tags in a tuple, -1 for none or dead) gives the tuple's tag
    instead. ``need_first``: only tuples whose first part is live are built (its language bounds the
    result). Each tuple counts one state against the compile budget. Not minimized. Built in C where it can be
    (:func:`.native.tuples`: the same tuples, numbered alike; JSONSchemaStore's compose-spec: 299 products, 0.55
    -> 0.10 s with the tags), else in numpy.

    Source: the product construction (Rabin and Scott, 1959), over reachable tuples only.
    """
    if combine is not None and any(counters.uses_markers(p.dfa.transitions) for p in parts):
        raise counters.CounterClash("a counted repetition in a key that several patterns classify")
    got = native.tuples([(p.dfa.transitions, p.dfa.start) for p in parts], need_first)
    if got is not None:
        trans, order = got
        count_states(len(trans))
    else:
        trans, order = _tuples(parts, need_first)
    parts_tags = np.stack([np.where(order[:, j] >= 0, p.tags[np.maximum(order[:, j], 0)], -1)
                           for j, p in enumerate(parts)], axis=1)  # (tuples, parts)
    if combine is not None:
        tags = np.array([combine(row) for row in parts_tags.tolist()], dtype=np.int32).reshape(-1)
    else:
        if ((parts_tags >= 0).sum(axis=1) > 1).any():
            raise ValueError("tagged languages overlap")
        tags = parts_tags.max(axis=1).astype(np.int32)
    return Tagged(ByteDFA(trans, tags >= 0, 0), tags)


def _tuples(parts: list[Tagged], need_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`tagged_product`'s tuples in numpy: ``(transitions int32 (tuples, 256), tuples int64 (tuples,
    parts))``, each tuple counted against the compile budget as it is built."""
    index: dict[tuple[int, ...], int] = {}
    order: list[tuple[int, ...]] = []

    def state(tup):
        s = index.get(tup)
        if s is None:
            count_states(1)
            s = len(order)
            index[tup] = s
            order.append(tup)
        return s

    state(tuple(p.dfa.start for p in parts))
    # breadth first, one level of new tuples at a time: every transition of the level in one numpy pass, a
    # dictionary lookup only per distinct target tuple (row -1 of each table: the dead part)
    dead = np.full((1, 256), -1, dtype=np.int64)
    tables = [np.concatenate([p.dfa.transitions.astype(np.int64), dead]) for p in parts]
    rows = []
    lo, hi = 0, 1
    while lo < hi:
        level = np.asarray(order[lo:hi], dtype=np.int64).reshape(hi - lo, len(parts))
        cols = np.stack([tables[j][level[:, j]] for j in range(len(parts))], axis=2)  # (tuples, 256, parts)
        live = cols[:, :, 0] >= 0 if need_first else (cols >= 0).any(axis=2)
        row = np.full((hi - lo, 256), -1, dtype=np.int32)
        if live.any():
            uniq, inv = unique_rows(cols[live])
            targets = [state(tuple(u)) for u in uniq.tolist()]
            row[live] = np.asarray(targets, dtype=np.int32)[inv.reshape(-1)]
        rows.append(row)
        lo, hi = hi, len(order)
    return np.concatenate(rows), np.asarray(order, dtype=np.int64).reshape(len(order), len(parts))


def trim_tagged(t: Tagged) -> Tagged | None:
    """``t`` without the states that reach no tagged state nor are reached (renumbered breadth-first), or
    None when no tagged state is reachable."""
    trans = t.dfa.transitions
    alive = coreachable(trans, t.tags >= 0)
    if not alive[t.dfa.start]:
        return None
    trans = np.where((trans >= 0) & alive[np.maximum(trans, 0)], trans, -1)
    old = bfs_order(trans, t.dfa.start)
    remap = np.full(t.dfa.num_states + 1, -1, dtype=np.int32)
    remap[old] = np.arange(len(old), dtype=np.int32)
    tags = t.tags[old].copy()
    return Tagged(ByteDFA(remap[trans[old]].astype(np.int32), tags >= 0, 0), tags)


def classify(universe: ByteDFA, patterns: list[ByteDFA], named: list[bytes]) -> Tagged | None:
    """The extra keys of an object, classified by the patterns they match.

    ``universe``: the key texts allowed at all (JSON strings, e.g. every string or those ``propertyNames``
    admits); ``patterns``: the key texts each ``patternProperties`` pattern matches; ``named``: the key texts
    of named members, which are never extra keys. Returns the tagged DFA of the extra keys, each end state
    tagged with the bit mask of the patterns its key matches (bit ``i``: ``patterns[i]``), or None when no
    extra key is left. Raises CompileLimitError past the ``states`` budget.
    """
    parts = [Tagged(universe, np.where(universe.accepting, 0, -1).astype(np.int32))]
    for p in patterns:
        parts.append(Tagged(p, np.where(p.accepting, 0, -1).astype(np.int32)))
    if named:
        parts.append(tagged_literals(named, [0] * len(named)))

    def combine(tags: list[int]) -> int:
        if tags[0] < 0 or (named and tags[-1] >= 0):
            return -1
        mask = 0
        for i in range(len(patterns)):
            if tags[1 + i] >= 0:
                mask |= 1 << i
        return mask

    return trim_tagged(tagged_product(parts, need_first=True, combine=combine))


def retag(t: Tagged, mapping: dict[int, int]) -> Tagged | None:
    """``t`` with each tag replaced by ``mapping[tag]`` (a tag not in ``mapping`` is dropped), trimmed; None
    when no tag is left."""
    tags = np.array([mapping.get(int(x), -1) if x >= 0 else -1 for x in t.tags], dtype=np.int32)
    return trim_tagged(Tagged(ByteDFA(t.dfa.transitions, tags >= 0, t.dfa.start), tags))


@dataclass(eq=False)
class OpenObject(Node):
    """An object: named ``members`` ``(JSON-encoded key, value node, required)`` in order (optional ones may be
    left out), then extra members whose keys ``keys`` classifies into regions (tag ``r``: the value follows
    ``regions[r]``; None: no extra members), ``lo``..``hi`` members in all (``hi`` None: no bound), and the
    ``dependencies`` among named members hold.

    Extra keys are not checked for repeats (a key may come twice among the extras; the compiler notes it).
    :attr:`regex` is a description (``<object ...>``), never compiled.
    """

    opens = 1

    members: list[tuple[str, Node, bool]]
    keys: Tagged | None = None
    regions: list[Node] = field(default_factory=list)
    lo: int = 0
    hi: int | None = None
    #: ``(k, [l, ...])``: when member ``k`` is present, members ``l`` are too (``dependentRequired``).
    dependencies: list[tuple[int, list[int]]] = field(default_factory=list)

    @property
    def regex(self) -> str:
        parts = [object_regex([(k, v.regex, r) for k, v, r in self.members])]
        if self.keys is not None:
            parts.append("then extra members " + ", ".join(f"<key {r}>: {v.regex}" for r, v in enumerate(self.regions)))
        if self.lo or self.hi is not None:
            parts.append(f"{self.lo}..{'' if self.hi is None else self.hi} members")
        for k, ls in self.dependencies:
            parts.append(f"{self.members[k][0]} needs " + ", ".join(self.members[j][0] for j in ls))
        return "<object " + "; ".join(parts) + ">"

    def children(self) -> list[Node]:
        return [v for _, v, _ in self.members] + list(self.regions)

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return _Builder(self, timings).build()


def _edit(trans: np.ndarray, edits: list[tuple[int, int, int]]) -> None:
    """Set each transition ``(state, byte, target)`` of ``edits`` in ``trans`` (int32 (states, 256)); raises
    SchemaError where a state already has another target on that byte, or two edits give it two."""
    if not edits:
        return
    e = np.array(edits, dtype=np.int64)
    states, byte, target = e[:, 0], e[:, 1], e[:, 2]
    keys = states * 256 + byte
    order = np.argsort(keys, kind="stable")
    k, t = keys[order], target[order]
    now = trans.reshape(-1)[keys]
    if ((k[1:] == k[:-1]) & (t[1:] != t[:-1])).any() or ((now >= 0) & (now != target)).any():
        raise SchemaError("object automaton: two transitions on one byte")
    trans[states, byte] = target


class _Builder:
    """Builds the automaton of one :class:`OpenObject` (see the module docstring).

    A slot is ``(i, c, mask)``: named members ``i..`` may still come, ``c`` members are written (saturated),
    ``mask`` holds the presence of the members written before ``i`` that a dependency with a member not yet
    decided needs (bit ``j``: member ``j``). Which choices keep the dependencies satisfiable is decided by
    propagating them as Horn clauses (Dowling and Gallier, 1984) over the members still open.
    """

    def __init__(self, obj: OpenObject, timings):
        self.obj = obj
        self.timings = timings
        n = self.n = len(obj.members)
        self.required = [r for _, _, r in obj.members]
        self.keys = [k.encode("utf-8") for k, _, _ in obj.members]
        self.extras = obj.keys is not None
        # the count saturates where it stops mattering: at hi, else at lo (at least 1: "none yet" or not)
        self.top = obj.hi if obj.hi is not None else max(obj.lo, 1)
        self.req_after = [0] * (n + 1)
        self.req_mask = [0] * (n + 1)  # the required members from i on
        for i in range(n - 1, -1, -1):
            self.req_after[i] = self.req_after[i + 1] + (1 if self.required[i] else 0)
            self.req_mask[i] = self.req_mask[i + 1] | ((1 << i) if self.required[i] else 0)
        # dependencies: (k, mask of its l's, mask of all its members)
        self.deps = [(k, sum(1 << j for j in ls), (1 << k) | sum(1 << j for j in ls)) for k, ls in obj.dependencies]
        self.needed = [0] * (n + 1)  # the members before i whose presence a dependency still needs at i
        for i in range(n + 1):
            for _, _, every in self.deps:
                if every >> i:
                    self.needed[i] |= every & ((1 << i) - 1)
        self.states = Assembly()
        self.values: dict[int, ByteDFA] = {}
        self.dispatch_cache: dict[tuple, Tagged | None] = {}

    # -- states -------------------------------------------------------------------------------------------

    def add(self, dfa: ByteDFA) -> int:
        """Copy ``dfa`` in (no state accepting); returns the offset of its states."""
        count_states(dfa.num_states)
        return self.states.copy(dfa)

    def fresh(self, k: int) -> int:
        """``k`` new states without transitions; returns the first."""
        count_states(k)
        return self.states.fresh(k)

    # -- slots --------------------------------------------------------------------------------------------

    def counts_ok(self, i: int, c: int) -> bool:
        """True when slot ``(i, c)`` can still end in ``}`` within the counts."""
        hi, lo = self.obj.hi, self.obj.lo
        if hi is not None and c + self.req_after[i] > hi:
            return False
        most = float("inf") if self.extras else c + (self.n - i)
        return most >= lo

    def satisfiable(self, since: int, upto: int, present: int) -> bool:
        """Whether the dependencies with a member at or after ``since`` can hold once members before ``upto``
        are decided (present: the bits of ``present``; the others absent) and the later ones are free
        (required ones present): the least set of members the required ones force (Horn propagation) must
        not hold a decided absent one."""
        if not self.deps:
            return True
        forced = present | self.req_mask[upto]
        changed = True
        while changed:
            changed = False
            for k, ls, every in self.deps:
                if every >> since and forced >> k & 1 and forced | ls != forced:
                    forced |= ls
                    changed = True
        return not forced & ~present & ((1 << upto) - 1)

    def after(self, c: int) -> int:
        """The count after one more member."""
        return c + 1 if self.obj.hi is not None else min(c + 1, self.top)

    def choices(self, slot: tuple[int, int, int]):
        """At ``slot``: (the named members that may come next with the slot after each, the slot after an
        extra member or None, whether ``}`` may come)."""
        i, c, mask = slot
        first_req = next((j for j in range(i, self.n) if self.required[j]), None)
        can_add = self.obj.hi is None or c < self.obj.hi
        last = first_req if first_req is not None else self.n - 1
        nxt = self.after(c)
        named = []
        for j in range(i, last + 1):
            full = mask | (1 << j)
            if can_add and self.counts_ok(j + 1, nxt) and self.satisfiable(i, j + 1, full):
                named.append((j, (j + 1, nxt, full & self.needed[j + 1])))
        done = first_req is None and self.satisfiable(i, self.n, mask)  # the named members are over
        extra = None
        if can_add and done and self.extras and self.counts_ok(self.n, nxt):
            extra = (self.n, nxt, 0)
        close = done and c >= self.obj.lo
        return named, extra, close

    def dispatch(self, named: list[int], extra: bool) -> Tagged | None:
        """The tagged automaton of the keys that may come next: named member ``j`` tagged ``j``, an extra key
        of region ``r`` tagged ``n + r``."""
        key = (tuple(named), extra)
        if key in self.dispatch_cache:
            return self.dispatch_cache[key]
        parts = []
        if named:
            parts.append(tagged_literals([self.keys[j] for j in named], named))
        if extra:
            k = self.obj.keys
            parts.append(Tagged(k.dfa, np.where(k.tags >= 0, k.tags + self.n, -1).astype(np.int32)))
        out = None
        if len(parts) == 1:
            out = parts[0]
        elif parts:
            out = tagged_product(parts)
        self.dispatch_cache[key] = out
        return out

    def value(self, tag: int) -> ByteDFA:
        if tag not in self.values:
            node = self.obj.members[tag][1] if tag < self.n else self.obj.regions[tag - self.n]
            self.values[tag] = node.dfa(self.timings)
        return self.values[tag]

    def build(self) -> ByteDFA:
        first = (0, 0, 0)
        if not self.counts_ok(0, 0) or not self.satisfiable(0, 0, 0):
            raise SchemaError("the object admits no member count within its bounds (empty language)")
        start, accept = self.fresh(1), self.fresh(1)
        entry: dict[tuple[int, int, int], int] = {first: self.fresh(1)}  # slot -> its entry state
        pending = [first]
        copies: dict[tuple[int, tuple], tuple[int, ByteDFA]] = {}  # (tag, next slot) -> value copy
        edits: list[tuple[int, int, int]] = [(start, ord("{"), entry[first])]  # (state, byte, target)
        merges: list[tuple[int, int]] = []  # (state, other): the state also reads what the other reads
        ends: list[tuple[np.ndarray, tuple]] = []  # a value copy's end states, the slot after it
        while pending:
            slot = pending.pop()
            e = entry[slot]
            named, extra, close = self.choices(slot)
            if close:
                edits.append((e, ord("}"), accept))
            following = dict(named)
            d = self.dispatch([j for j, _ in named], extra is not None)
            if d is None:
                continue
            off = self.add(d.dfa)
            if slot[1] == 0:  # no member yet: the entry reads the first key at once
                merges.append((e, off + d.dfa.start))
            else:
                sep = self.fresh(1)
                edits.append((e, ord(","), sep))
                edits.append((sep, ord(" "), off + d.dfa.start))
            for q in np.flatnonzero(d.tags >= 0):
                tag = int(d.tags[q])
                nxt = following[tag] if tag < self.n else extra
                if (tag, nxt) not in copies:
                    v = self.value(tag)
                    copies[(tag, nxt)] = (self.add(v), v)
                    ends.append((np.flatnonzero(v.accepting) + copies[(tag, nxt)][0], nxt))
                    if nxt not in entry:
                        entry[nxt] = self.fresh(1)
                        pending.append(nxt)
                v_off, v = copies[(tag, nxt)]
                colon = self.fresh(1)
                edits.append((off + int(q), ord(":"), colon))
                edits.append((colon, ord(" "), v_off + v.start))
        trans = self.states.table()
        acc = np.zeros(self.states.size, dtype=bool)
        acc[accept] = True
        _edit(trans, edits)
        for s, other in merges:
            merge_rows(trans, np.array([s]), trans[other].copy())
        for states, nxt in ends:  # after a value: the ", " or "}" of the next slot
            if len(states):
                merge_rows(trans, states, trans[entry[nxt]].copy())
        return ByteDFA(trans, acc, start)
