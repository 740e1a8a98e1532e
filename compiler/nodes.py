"""Grammar nodes: what the schema compiler builds, each with its regex and its byte DFA.

The schema compiler (:mod:`.schema`) produces a tree of nodes; each node knows its regex text (recorded in
the index header, and what interegular would parse) and builds its byte DFA by composing its children's
DFAs (:mod:`.compose`), without determinizing one big regex:

* leaves (:class:`Leaf`: strings, numbers, formats, patterns) go through interegular once per distinct
  regex and are kept in :data:`LEAF_CACHE`; literal sets (:class:`Literals`: enum values, keys) become a
  byte trie directly;
* alternatives (:class:`Alt`) are joined by the product construction;
* objects, arrays and maps (:class:`ObjectNode`, :class:`ArrayNode`, :class:`MapNode`) are one copy of each
  member's automaton with literal tries between them.

When a composition clashes (:class:`~.compose.Clash`), the node falls back to interegular on its own regex.
Each node records ``at``, the place of its schema (a JSON pointer such as ``'#/properties/p'``), which a
compile limit exceeded while building its automaton names (:mod:`.limits`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from . import dfa as D
from . import limits
from ..core.errors import SchemaError
from .compose import Clash, difference, exactly_one, intersect, literals, seq, structure, union_all
from .dfa import ByteDFA
from .lexical import alternation, escape
from .syntax import array_regex, map_regex, object_regex


class LeafCache:
    """The minimal byte DFAs of regexes, kept per process and bounded (least recently used dropped first).

    Building a leaf (interegular's determinization, then the UTF-8 expansion) is the costly part of a compile,
    and catalogs repeat the same scalar regexes; the cache makes them once per process. The cached automata
    are shared: callers never modify their arrays. A miss builds outside the lock, so two threads missing
    on the same regex may both build it (the same automaton). ``maxsize``: the most regexes kept.
    """

    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._dfas: OrderedDict[str, ByteDFA] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, regex: str, timings: dict[str, float] | None = None,
            build: Callable[[], ByteDFA] | None = None) -> ByteDFA:
        """The minimal byte DFA of ``regex`` (see :func:`~.dfa.from_regex`), built on a miss.

        ``timings`` (if given) accumulates the seconds of a build under "automaton" and "byte expansion"; a
        hit adds nothing. ``build`` (if given) makes the automaton instead of interegular: for automata built
        directly (:mod:`.numbers`), keyed by their regex or description. Raises SchemaError for a regex
        interegular cannot parse (not cached).
        """
        with self._lock:
            dfa = self._dfas.get(regex)
            if dfa is not None:
                self._dfas.move_to_end(regex)
                return dfa
        dfa = D.from_regex(regex, timings) if build is None else build()
        with self._lock:
            self._dfas[regex] = dfa
            self._dfas.move_to_end(regex)
            while len(self._dfas) > self.maxsize:
                self._dfas.popitem(last=False)
        return dfa

    def clear(self) -> None:
        """Forget every cached automaton (the next compile is a cold one, as in a fresh process)."""
        with self._lock:
            self._dfas.clear()

    def __len__(self) -> int:
        return len(self._dfas)


#: The process-wide cache of leaf automata that every node uses. ``LEAF_CACHE.clear()`` empties it.
LEAF_CACHE = LeafCache()


class Node:
    """A grammar node: ``regex`` (interegular dialect) and :meth:`dfa` (a byte DFA)."""

    regex: str
    #: The place of this node's schema (a JSON pointer), set by the schema compiler; None when not known.
    at: str | None = None

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        """This node's byte DFA composed from its children; raises Clash when they cannot be joined."""
        raise NotImplementedError

    def children(self) -> list[Node]:
        """The nodes this one is composed of (none for a leaf)."""
        return []

    def regular(self) -> bool:
        """True when :attr:`regex` is a regex interegular can compile (False when this node or one below is
        an intersection, difference or direct automaton, whose regex text is a description)."""
        return all(c.regular() for c in self.children())

    def dfa(self, timings: dict[str, float] | None = None) -> ByteDFA:
        """This node's byte DFA (not necessarily trimmed or minimal: callers minimize), composed from its
        children, or from its regex if composition clashes. ``timings``: as in :meth:`LeafCache.get`, for
        every leaf built on the way. Raises SchemaError when a leaf regex cannot be compiled or its language
        is empty, CompileLimitError past a compile limit (:mod:`.limits`)."""
        with limits.place(self.at):
            try:
                return self.build(timings)
            except Clash:
                if not self.regular():
                    raise SchemaError(f"the automata at {self.at or '#'} cannot be joined "
                                      "(a value's continuation collides with what follows it)") from None
                return LEAF_CACHE.get(self.regex, timings)


@dataclass(eq=False)
class Leaf(Node):
    """A scalar compiled from its regex by interegular (cached per regex in :data:`LEAF_CACHE`)."""

    regex: str

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return LEAF_CACHE.get(self.regex, timings)


@dataclass(eq=False)
class Literals(Node):
    """A finite set of literal texts (canonical JSON of enum/const values)."""

    texts: list[str]

    @property
    def regex(self) -> str:
        return alternation([escape(t) for t in self.texts])

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return D.minimize(literals([t.encode("utf-8") for t in self.texts]))


@dataclass(eq=False)
class Alt(Node):
    """Any one of several nodes."""

    parts: list[Node]

    @property
    def regex(self) -> str:
        return alternation([p.regex for p in self.parts])

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return union_all([p.dfa(timings) for p in self.parts])

    def children(self) -> list[Node]:
        return list(self.parts)


@dataclass(eq=False)
class ObjectNode(Node):
    """An object whose members ``(key text, value node, required)`` appear in order, optional ones may be
    left out. ``key text`` is the JSON-encoded key (with its quotes)."""

    members: list[tuple[str, Node, bool]]

    @property
    def regex(self) -> str:
        return object_regex([(k, v.regex, r) for k, v, r in self.members])

    def children(self) -> list[Node]:
        return [v for _, v, _ in self.members]

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        n = len(self.members)
        req = [r for _, _, r in self.members]
        keys = [f"{k}: ".encode("utf-8") for k, _, _ in self.members]

        def choices(after: int, sep: bytes):
            out = []
            for j in range(after + 1, n):
                out.append((sep + keys[j], j))
                if req[j]:
                    break
            else:
                out.append((b"}", None))
            return out

        entry = choices(-1, b"")
        boundaries = [choices(i, b", ") for i in range(n)]
        items = [v.dfa(timings) for _, v, _ in self.members]
        return structure(b"{", items, boundaries, entry)


@dataclass(eq=False)
class ArrayNode(Node):
    """An array: ``prefix`` items by position, then ``rest`` items (None: no more), ``lo``..``hi`` items."""

    prefix: list[Node]
    rest: Node | None
    lo: int
    hi: int | None

    @property
    def regex(self) -> str:
        return array_regex([p.regex for p in self.prefix], None if self.rest is None else self.rest.regex,
                           self.lo, self.hi)

    def children(self) -> list[Node]:
        return self.prefix + ([] if self.rest is None else [self.rest])

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        cap = self.hi
        if self.rest is None:
            cap = len(self.prefix) if cap is None else min(cap, len(self.prefix))
        count = cap if cap is not None else max(len(self.prefix), self.lo)
        nodes = [self.prefix[i] if i < len(self.prefix) else self.rest for i in range(count)]
        loop = cap is None  # a tail item that repeats after the explicit positions
        if loop:
            nodes.append(self.rest)
        tail = count if loop else None

        def after(i: int):  # choices once i + 1 items are written (i = -1: none yet)
            sep = b", " if i >= 0 else b""
            out = []
            if i + 1 < count:
                out.append((sep, i + 1))
            elif loop:
                out.append((sep, tail))
            if i + 1 >= self.lo:
                out.append((b"]", None))
            return out

        entry = after(-1)
        boundaries = [after(i) for i in range(count)]
        if loop:
            boundaries.append([(b", ", tail), (b"]", None)])
        built: dict[int, ByteDFA] = {}  # the rest item repeats: its automaton is built once and copied
        items = [built[id(n)] if id(n) in built else built.setdefault(id(n), n.dfa(timings)) for n in nodes]
        return structure(b"[", items, boundaries, entry)


@dataclass(eq=False)
class MapNode(Node):
    """An object of any string keys with values of ``value``: ``{}`` or ``{K: V, ...}``."""

    key: Node
    value: Node

    @property
    def regex(self) -> str:
        return map_regex(self.key.regex, self.value.regex)

    def children(self) -> list[Node]:
        return [self.key, self.value]

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        pair = seq([self.key.dfa(timings), literals([b": "]), self.value.dfa(timings)])
        return structure(b"{", [pair], [[(b", ", 0), (b"}", None)]], [(b"", 0), (b"}", None)])


# ---------------------------------------------------------------------------------------------------------
# Boolean combinations (closure of regular languages under intersection and difference) and automata built
# directly. Their ``regex`` is a description in an extended notation that interegular does not read:
# ``(?:A)&(?:B)`` (both), ``(?:A)-(?:B)`` (A but not B), ``(?^:A|B)`` (exactly one), ``<name>`` (an
# automaton built directly); the index header records it, and composition never falls back to it.


@dataclass(eq=False)
class Both(Node):
    """Texts every part accepts: the intersection of the parts' languages (``allOf`` of value languages, a
    length with a pattern or format, a range with ``multipleOf``)."""

    parts: list[Node]

    @property
    def regex(self) -> str:
        return "&".join(f"(?:{p.regex})" for p in self.parts)

    def children(self) -> list[Node]:
        return list(self.parts)

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        out = self.parts[0].dfa(timings)
        for p in self.parts[1:]:
            out = intersect(out, p.dfa(timings))
        return out


@dataclass(eq=False)
class Minus(Node):
    """Texts ``keep`` accepts and ``drop`` does not (``not``, the ``else`` side of ``if``)."""

    keep: Node
    drop: Node

    @property
    def regex(self) -> str:
        return f"(?:{self.keep.regex})-(?:{self.drop.regex})"

    def children(self) -> list[Node]:
        return [self.keep, self.drop]

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return difference(self.keep.dfa(timings), self.drop.dfa(timings))


@dataclass(eq=False)
class OneOf(Node):
    """Texts exactly one part accepts (JSON Schema ``oneOf``, exclusive)."""

    parts: list[Node]

    @property
    def regex(self) -> str:
        return "(?^:" + "|".join(p.regex for p in self.parts) + ")"

    def children(self) -> list[Node]:
        return list(self.parts)

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return exactly_one([p.dfa(timings) for p in self.parts])


@dataclass(eq=False)
class Automaton(Node):
    """A language given by an automaton built directly (``make()`` returns its byte DFA), for those no
    short regex writes (a remainder automaton for ``multipleOf``, a counter). ``name`` describes it in
    :attr:`regex` as ``<name>``."""

    name: str
    make: Callable[[], ByteDFA]

    @property
    def regex(self) -> str:
        return f"<{self.name}>"

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return self.make()
