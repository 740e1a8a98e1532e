"""Grammar nodes: what the schema compiler builds, each with its regex and its byte DFA.

The schema compiler (:mod:`..schema.compiler`) produces a tree of nodes; each node knows its regex text (recorded in
the index header, and what interegular would parse) and builds its byte DFA by composing its children's
DFAs (:mod:`.compose`), without determinizing one big regex:

* leaves (:class:`Leaf`: strings, numbers, formats, patterns) go through interegular once per distinct
  regex and are kept in :data:`LEAF_CACHE`; literal sets (:class:`Literals`: enum values, keys) become a
  byte trie directly;
* alternatives (:class:`Alt`) are joined by the product construction;
* objects and maps (:class:`ObjectNode`, :class:`MapNode`) are one copy of each member's automaton with
  literal tries between them; arrays (:class:`ArrayNode`, :class:`DistinctArrayNode`) one copy of the item
  automaton per control state of :mod:`.arrays` (items counted, ``contains`` matches, values used).

When a composition clashes (:class:`~.compose.Clash`), the node falls back to interegular on its own regex.
Each node records ``at``, the place of its schema (a JSON pointer such as ``'#/properties/p'``), which a
compile limit exceeded while building its automaton names (:mod:`..limits`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import weakref
from collections import OrderedDict
from decimal import Decimal
from fractions import Fraction
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import arrays, counters
from . import dfa as D
from .. import limits
from ...core.errors import SchemaError
from .compose import (
    Clash, difference, exactly_one, intersect, is_empty, literals, members_any_order, seq, structure, union_all,
)
from .dfa import ByteDFA
from .lexical import alternation, escape
from .syntax import array_regex, array_repeats_long, map_regex, members_regex, object_regex, object_repeats_long, shared


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
        directly (:mod:`..schema.numbers`), keyed by their regex or description. Raises SchemaError for a regex
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


#: Per compile (its budget, :func:`~..limits.current`): structural key (:func:`structural_key`) -> the DFA
#: of a node already built. Equal keys mean equal languages, so a sub-language that several branches of a
#: schema share (the same ``oneOf`` merged into each ``anyOf`` option, "any value" in every loose object) is
#: built once per compile. The automata are shared read-only.
_COMPOSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _digest(value: Any) -> str | None:
    """A text that determines ``value`` (a node field) exactly, or None when one part cannot be described
    (a function)."""
    if isinstance(value, Node):
        return structural_key(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return repr(value)
    if isinstance(value, (Decimal, Fraction)):
        return f"{type(value).__name__}({value})"
    if isinstance(value, (list, tuple)):
        parts = [_digest(v) for v in value]
        return None if any(p is None for p in parts) else "[" + ",".join(parts) + "]"
    if isinstance(value, frozenset):
        parts = sorted(_digest(v) or "" for v in value)
        return "{" + ",".join(parts) + "}"
    if isinstance(value, dict):
        parts = [(_digest(k), _digest(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in parts):
            return None
        return "{" + ",".join(f"{k}:{v}" for k, v in parts) + "}"
    if isinstance(value, np.ndarray):
        return f"a{value.dtype}{value.shape}" + hashlib.blake2b(np.ascontiguousarray(value).tobytes(),
                                                                digest_size=16).hexdigest()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [_digest(getattr(value, f.name)) for f in dataclasses.fields(value)]
        return None if any(f is None for f in fields) else f"{type(value).__name__}({','.join(fields)})"
    return None


def structural_key(node: Node) -> str | None:
    """A short key (a BLAKE2b digest, computed once per node) equal for two nodes only when their languages
    are equal: a Merkle digest of the node's class and dataclass fields, nodes among them by their own keys
    (so each node costs its own fields, whatever the size below it); for a leaf whose automaton a function
    builds (:class:`~.leaves.FastLeaf`), its regex, which says its language. None for a node that holds a
    function and no regex (an :class:`Automaton`): such nodes are not shared."""
    known = node.__dict__.get("_key", False)
    if known is not False:
        return known
    text: str | None = None
    if dataclasses.is_dataclass(node):
        fields = [_digest(getattr(node, f.name)) for f in dataclasses.fields(node)]
        text = None if any(f is None for f in fields) else f"{type(node).__name__}({','.join(fields)})"
    if text is None and not node.children() and node.regular():  # a leaf built by a function: its regex
        text = "regex:" + node.regex
    key = None if text is None else hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                                     digest_size=20).hexdigest()
    node.__dict__["_key"] = key
    return key


def text_nesting(text: str) -> int:
    """How deep the JSON text ``text`` nests: the most brackets open at once, outside strings."""
    depth = top = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            top = max(top, depth)
        elif c in "]}":
            depth -= 1
    return top


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

    #: Brackets this node's values open around its children's (1 for arrays and objects).
    opens = 0

    def nesting(self) -> int:
        """How deep its values nest at most: open brackets (arrays, objects) one inside another."""
        known = self.__dict__.get("_nesting")
        if known is None:
            known = self.__dict__["_nesting"] = self.opens + max((c.nesting() for c in self.children()), default=0)
        return known

    def dfa(self, timings: dict[str, float] | None = None) -> ByteDFA:
        """This node's byte DFA (not necessarily trimmed or minimal: callers minimize), composed from its
        children, or from its regex if composition clashes. ``timings``: as in :meth:`LeafCache.get`, for
        every leaf built on the way. Raises SchemaError when a leaf regex cannot be compiled or its language
        is empty, CompileLimitError past a compile limit (:mod:`..limits`)."""
        built = self.__dict__.get("_built")
        if built is not None:
            return built
        budget = limits.current()
        key = structural_key(self) if budget is not None else None
        memo = _COMPOSED.setdefault(budget, {}) if key is not None else None
        if memo is not None and key in memo:
            built = memo[key]
            self.__dict__["_built"] = built
            return built
        with limits.place(self.at):
            try:
                built = self.build(timings)
            except Clash:
                if counters.active():  # the regex may hold long counts: compile again without counters
                    raise counters.CounterClash(f"the automata at {self.at or '#'} cannot be joined") from None
                if not self.regular():
                    raise SchemaError(f"the automata at {self.at or '#'} cannot be joined "
                                      "(a value's continuation collides with what follows it)") from None
                built = LEAF_CACHE.get(self.regex, timings)
        self.__dict__["_built"] = built  # a node is built once (the schema compiler may build it early)
        if memo is not None:
            memo[key] = built
        return built


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

    def nesting(self) -> int:
        return max((text_nesting(t) for t in self.texts), default=0)

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


def alt(parts: list[Node]) -> Node | None:
    """None for no parts, the part itself for one, else their :class:`Alt`."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Alt(parts)


@dataclass(eq=False)
class ObjectNode(Node):
    """An object whose members ``(key text, value node, required)`` appear in order, optional ones may be
    left out. ``key text`` is the JSON-encoded key (with its quotes)."""

    opens = 1

    members: list[tuple[str, Node, bool]]

    @property
    def regex(self) -> str:
        return object_regex([(k, v.regex, r) for k, v, r in self.members])

    def children(self) -> list[Node]:
        return [v for _, v, _ in self.members]

    def regular(self) -> bool:
        return super().regular() and not object_repeats_long([(k, v.regex, r) for k, v, r in self.members])

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
    """An array: ``prefix`` items by position, then ``rest`` items (None: no more), ``lo``..``hi`` items;
    with ``contains``, between ``cmin`` and ``cmax`` (None: no bound) of them in its language.

    Built by :func:`~.arrays.counted`: one copy of the item automaton per count that matters (so the size
    is linear in ``hi``, the compile limit on states bounding it), each item split by ``contains`` when
    given (:func:`~.arrays.split`). With ``contains`` the regex is a description (``&<contains ...>``).
    """

    opens = 1

    prefix: list[Node]
    rest: Node | None
    lo: int
    hi: int | None
    contains: Node | None = None
    cmin: int = 0
    cmax: int | None = None
    counter: int | None = None  # counts the items past max(len(prefix), lo) (compiler/automata/counters.py)

    @property
    def regex(self) -> str:
        plain = array_regex([p.regex for p in self.prefix], None if self.rest is None else self.rest.regex,
                            self.lo, self.hi)
        if self.contains is None:
            return plain
        top = "" if self.cmax is None else self.cmax
        return f"(?:{plain})&<contains {self.cmin}..{top} of (?:{self.contains.regex})>"

    def children(self) -> list[Node]:
        return self.prefix + [n for n in (self.rest, self.contains) if n is not None]

    def regular(self) -> bool:
        return self.contains is None and super().regular() and not array_repeats_long(
            [p.regex for p in self.prefix], None if self.rest is None else self.rest.regex, self.lo, self.hi)

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        cond = None if self.contains is None else self.contains.dfa(timings)
        built: dict[int, arrays.Tagged] = {}  # the rest item repeats: its automaton is built once

        def tagged(n: Node) -> arrays.Tagged:
            if id(n) not in built:  # (split minimizes; a plain item is copied as built, as structure() did)
                item = n.dfa(timings)
                built[id(n)] = arrays.plain(item) if cond is None else arrays.split(item, cond)
            return built[id(n)]

        if self.counter is not None:  # the items past ``tail``: counted, not copied
            tail = max(len(self.prefix), self.lo)
            rest = self.rest.dfa(timings)
            items = [p.dfa(timings) for p in self.prefix] + [rest] * (tail - len(self.prefix))
            return arrays.counted_loop(items, rest, self.lo, self.hi - tail, self.counter)
        return arrays.counted([tagged(p) for p in self.prefix], None if self.rest is None else tagged(self.rest),
                              self.lo, self.hi, self.cmin, self.cmax)


@dataclass(eq=False)
class DistinctArrayNode(Node):
    """An array of distinct values (``uniqueItems``) where each position's item language is a finite set of
    values: ``tables[i]`` for position ``i``, then ``rest`` (None: no more), each a value id -> the texts
    of that value (one value may have several texts: ``1`` and ``1.0``); ``lo``..``hi`` items; between
    ``cmin`` and ``cmax`` of them among the value ids ``matching`` (``contains``).

    Built by :func:`~.arrays.distinct` (the control state is the set of values used). The regex is a
    description (``&<distinct>``).
    """

    def nesting(self) -> int:
        tables = self.tables + ([self.rest] if self.rest is not None else [])
        return 1 + max((text_nesting(t) for table in tables for texts in table.values() for t in texts), default=0)

    tables: list[dict[int, list[str]]]
    rest: dict[int, list[str]] | None
    lo: int
    hi: int | None
    matching: frozenset[int] = frozenset()
    cmin: int = 0
    cmax: int | None = None

    @property
    def regex(self) -> str:
        def alt(table):
            return alternation([escape(t) for texts in table.values() for t in texts])

        plain = array_regex([alt(t) for t in self.tables], None if self.rest is None else alt(self.rest),
                            self.lo, self.hi)
        out = f"(?:{plain})&<distinct>"
        if self.cmin or self.cmax is not None:
            top = "" if self.cmax is None else self.cmax
            out += f"&<contains {self.cmin}..{top} of {len(self.matching)} values>"
        return out

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        def encoded(table):
            return {v: [t.encode("utf-8") for t in texts] for v, texts in table.items()}

        return arrays.distinct([encoded(t) for t in self.tables], None if self.rest is None else encoded(self.rest),
                               self.lo, self.hi, self.matching, self.cmin, self.cmax)


@dataclass(eq=False)
class MapNode(Node):
    """An object of any string keys with values of ``value``: ``{}`` or ``{K: V, ...}``. ``more``: other
    ``(key, value)`` pairs a member may be instead (keys of each pair its own language: a member's value
    follows the schema of the pair its key belongs to)."""

    opens = 1

    key: Node
    value: Node
    more: list[tuple[Node, Node]] = None

    @property
    def regex(self) -> str:
        if not self.more:
            return map_regex(self.key.regex, self.value.regex)
        return members_regex(self._pair())

    def _pair(self) -> str:
        return alternation([f"(?:{k.regex}): (?:{v.regex})" for k, v in [(self.key, self.value)] + self.more])

    def children(self) -> list[Node]:
        return [self.key, self.value] + [n for pair in (self.more or []) for n in pair]

    def regular(self) -> bool:
        pair = self._pair() if self.more else f"{self.key.regex}: {self.value.regex}"
        return super().regular() and not shared(pair)

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        pairs = [(self.key, self.value)] + list(self.more or [])
        pair = union_all([seq([k.dfa(timings), literals([b": "]), v.dfa(timings)]) for k, v in pairs])
        return structure(b"{", [pair], [[(b", ", 0), (b"}", None)]], [(b"", 0), (b"}", None)])


# ---------------------------------------------------------------------------------------------------------
# Boolean combinations (closure of regular languages under intersection and difference) and automata built
# directly. Their ``regex`` is a description in an extended notation that interegular does not read:
# ``(?:A)&(?:B)`` (both), ``(?:A)-(?:B)`` (A but not B), ``(?^:A|B)`` (exactly one), ``<name>`` (an
# automaton built directly); the index header records it, and composition never falls back to it. Arrays,
# maps and objects that would repeat a long part's regex describe themselves the same way
# (:data:`~.syntax.SHARED_TEXT`), and are not :meth:`~Node.regular` then.


def _or_none(node: Node | None, timings: dict[str, float] | None) -> ByteDFA | None:
    """``node``'s automaton, or None when there is no node or its language is empty (a branch whose pattern,
    format and length cannot meet: subtracting it removes nothing)."""
    if node is None:
        return None
    try:
        built = node.dfa(timings)
    except D.EmptyLanguage:
        return None
    return None if is_empty(built) else built


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
        drop = _or_none(self.drop, timings)
        return self.keep.dfa(timings) if drop is None else difference(self.keep.dfa(timings), drop)


@dataclass(eq=False)
class OneOf(Node):
    """Texts exactly one part accepts (JSON Schema ``oneOf``, exclusive). ``loose``: for each part, a node
    whose language contains the part's (its schema compiled loosely), subtracted from the other parts
    (see :func:`~.compose.exactly_one`); a part may be None (admits no value) where its loose node is not."""

    parts: list[Node | None]
    loose: list[Node | None]

    @property
    def regex(self) -> str:
        return "(?^:" + "|".join("(?!)" if p is None else p.regex for p in self.parts) + ")"

    def children(self) -> list[Node]:
        return [p for p in self.parts + self.loose if p is not None]

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        parts = [_or_none(p, timings) for p in self.parts]
        if all(p is None for p in parts):
            raise D.EmptyLanguage("the schema accepts no value (empty language)")
        return exactly_one(parts, [_or_none(p, timings) for p in self.loose])


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


#: How many ``required`` members a loose object tracks (a :class:`MembersNode`'s states grow like two to this
#: power); the rest are not required there, which only widens the loose language.
LOOSE_REQUIRED = 4


@dataclass(eq=False)
class MembersNode(Node):
    """An object of members in any order and number (a loose object, :meth:`~..schema.compiler.SchemaCompiler.loose_object`):
    each member is one of ``pairs`` ``(key, value)`` (keys disjoint), and every pair marked in ``required``
    appears at least once (see :func:`~.compose.members_any_order`)."""

    opens = 1

    pairs: list[tuple[Node, Node]]
    required: list[bool]

    @property
    def regex(self) -> str:
        need = [k.regex for (k, _), r in zip(self.pairs, self.required) if r]
        pair = alternation([f"(?:{k.regex}): (?:{v.regex})" for k, v in self.pairs])
        return "<members " + pair + (" requiring " + ", ".join(need) if need else "") + ">"

    def children(self) -> list[Node]:
        return [n for pair in self.pairs for n in pair]

    def regular(self) -> bool:
        return False

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        pairs = [seq([k.dfa(timings), literals([b": "]), v.dfa(timings)]) for k, v in self.pairs]
        return members_any_order(pairs, self.required)


_ANY_VALUES: dict[int, ByteDFA] = {}
_ANY_LOCK = threading.Lock()


@dataclass(eq=False)
class AnyValue(Node):
    """Any JSON value nested at most ``depth`` deep; ``tree`` is its composition (alternatives of the scalars,
    arrays and maps), built once per process and depth and shared (callers never modify the arrays)."""

    depth: int
    tree: Node

    def nesting(self) -> int:
        return self.depth

    @property
    def regex(self) -> str:
        return self.tree.regex

    def children(self) -> list[Node]:
        return [self.tree]

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        with _ANY_LOCK:
            known = _ANY_VALUES.get(self.depth)
        if known is None:
            known = D.minimize(self.tree.dfa(timings))
            with _ANY_LOCK:
                _ANY_VALUES[self.depth] = known
        return known
