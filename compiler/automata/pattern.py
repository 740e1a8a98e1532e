"""JSON Schema ``pattern`` (ECMA-262 with the ``u`` flag) -> automaton over the JSON-encoded string content.

A pattern constrains the *decoded* string, while the grammar runs over JSON text, where ``"``, ``\\`` and
control characters appear escaped. The pattern is parsed with Python's own regex parser (``re._parser``,
close to ECMA-262 for the syntax schemas use) after a pass that rewrites what Python spells otherwise or
lacks: ``\\p{...}``/``\\P{...}`` Unicode property classes (:mod:`.unicode`) become placeholder characters,
``\\u{1F600}`` and surrogate-pair escapes ``\\uD83D\\uDE00`` become one code point, ``(?<name>`` becomes
``(?P<name>``. The parse is then written over JSON text as a sequence of regex syntax and *character sets*
(:class:`Chars`: the code points one character of the text may be), every character class split into the
characters that appear as themselves and those that appear as their canonical JSON escape (``\\"``,
``\\\\``, ``\\n``, ``\\u001f`` ...). A pattern is a search, not a full match: unless anchored with
``^``/``$`` (at the ends of the pattern, or of each of its top-level alternatives) it is padded with "any
string content" on that side.

Two renderings of the same sequence:

* :func:`pattern_regex`: interegular's dialect with explicit classes (the regex recorded in the index
  header, and what a composition falls back to);
* :func:`pattern_dfa`: the byte DFA of the whole JSON string. The character sets are first split into
  *atoms* (the classes of code points that every set either holds whole or not at all), each atom is one
  character for interegular, and the byte expansion maps it back to its intervals (``atoms`` of
  :func:`~.dfa.from_regex`): interegular expands a class one character at a time, so ``\\p{L}`` (131,756
  code points) would otherwise take seconds.

Raises :class:`PatternError` for what cannot be translated exactly: backreferences, lookaround, anchors
other than at the ends, word boundaries, inline flags, unknown Unicode properties, repeat counts above
64 (256 where the schema affords them: :mod:`.long_counts`); where the compile uses counters
(:mod:`.counters`), the optional repeats of ``{m,n}`` more than 64 past ``m`` are counted by one, at any ``n``.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections import OrderedDict

import numpy as np

try:  # Python 3.11+
    import re._constants as C
    import re._parser as P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C
    import sre_parse as P

from . import dfa as D
from . import counters, long_counts
from .dfa import ByteDFA
from ...core.intervals import SURROGATES, Interval, complement, normalize, subtract
from .lexical import escape
from .unicode import UnknownProperty, property_set


class PatternError(ValueError):
    """A pattern that cannot be compiled exactly."""


class Chars(tuple):
    """One character of JSON text: the sorted disjoint code-point intervals it may be (a tuple of pairs)."""


_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
# ECMA-262 WhiteSpace and LineTerminator
_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
          (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
# ECMA-262 LineTerminator: what ``.`` does not match
_LINE_TERMINATORS = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
# characters JSON text escapes: the control characters, '"' and '\'
_SPECIAL = sorted(set(range(0x20)) | {0x22, 0x5C})

Piece = list  # of str (regex syntax) and Chars


# ---------------------------------------------------------------------------------------------------------
# reading the pattern


_ESCAPE = re.compile(r"\\u\{([0-9A-Fa-f]+)\}|\\u([Dd][89ABab][0-9A-Fa-f]{2})\\u([Dd][C-Fc-f][0-9A-Fa-f]{2})"
                     r"|\\u([0-9A-Fa-f]{4})")


def _escaped(pattern: str) -> set[int]:
    """The code points ``pattern`` spells as escapes (``\\u{10FFFD}``, ``\\uDBFF\\uDFFD``, ``\\u00e9``), so that no
    placeholder is one of them."""
    out = set()
    for m in _ESCAPE.finditer(pattern):
        if m.group(1):
            out.add(int(m.group(1), 16))
        elif m.group(2):
            out.add(0x10000 + ((int(m.group(2), 16) - 0xD800) << 10) + int(m.group(3), 16) - 0xDC00)
        else:
            out.add(int(m.group(4), 16))
    return out


def _prepare(pattern: str) -> tuple[str, dict[int, list[Interval]]]:
    """Rewrite ECMA-262 spellings Python's parser lacks (see the module docstring). Returns the rewritten
    pattern and the placeholder code points that stand for property classes (code point -> intervals).
    Raises PatternError for an unknown property or a malformed escape."""
    out: list[str] = []
    props: dict[str, int] = {}  # "\p{..}" text -> placeholder
    classes: dict[int, list[Interval]] = {}
    used = {ord(c) for c in pattern} | _escaped(pattern)
    free = (cp for cp in range(0x10FFFD, 0x10F000, -1) if cp not in used)
    i, n = 0, len(pattern)

    def code(cp: int) -> str:
        return f"\\U{cp:08x}"

    while i < n:
        ch = pattern[i]
        if ch != "\\" or i + 1 >= n:
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                out.append("(?P<")
                i += 3
                continue
            out.append(ch)
            i += 1
            continue
        nxt = pattern[i + 1]
        if nxt in "pP":
            close = pattern.find("}", i + 2)
            if not pattern.startswith("{", i + 2) or close < 0:
                raise PatternError(f"malformed property escape at {i} in {pattern!r}")
            text = pattern[i + 3 : close]
            try:
                runs = property_set(text)
            except UnknownProperty as exc:
                raise PatternError(str(exc)) from None
            key = nxt + text
            if key not in props:
                props[key] = next(free)
                classes[props[key]] = complement(runs) if nxt == "P" else runs
            out.append(code(props[key]))
            i = close + 1
        elif nxt == "u" and pattern.startswith("{", i + 2):
            close = pattern.find("}", i + 3)
            digits = pattern[i + 3 : close] if close > 0 else ""
            try:
                cp = int(digits, 16)
            except ValueError:
                raise PatternError(f"malformed \\u{{...}} escape at {i} in {pattern!r}") from None
            if not digits.isalnum() or cp > 0x10FFFF:
                raise PatternError(f"malformed \\u{{...}} escape at {i} in {pattern!r}")
            out.append(code(cp))
            i = close + 1
        elif nxt == "u" and _surrogate_pair(pattern, i):
            hi, lo = int(pattern[i + 2 : i + 6], 16), int(pattern[i + 8 : i + 12], 16)
            out.append(code(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)))
            i += 12
        elif nxt == "U":
            raise PatternError("\\U is not an ECMA-262 escape")
        else:
            out.append(pattern[i : i + 2])
            i += 2
    return "".join(out), classes


def _surrogate_pair(pattern: str, i: int) -> bool:
    """True when ``pattern[i:]`` starts with a high and a low surrogate escape ``\\uD8xx\\uDCxx``."""
    text = pattern[i : i + 12]
    if len(text) < 12 or text[6:8] != "\\u":
        return False
    try:
        hi, lo = int(text[2:6], 16), int(text[8:12], 16)
    except ValueError:
        return False
    return 0xD800 <= hi <= 0xDBFF and 0xDC00 <= lo <= 0xDFFF


def _category(cat) -> list[Interval]:
    table = {
        C.CATEGORY_DIGIT: _DIGIT, C.CATEGORY_WORD: _WORD, C.CATEGORY_SPACE: _SPACE,
        C.CATEGORY_NOT_DIGIT: complement(_DIGIT), C.CATEGORY_NOT_WORD: complement(_WORD),
        C.CATEGORY_NOT_SPACE: complement(_SPACE),
    }
    if cat not in table:
        raise PatternError(f"unsupported character category {cat}")
    return table[cat]


class _Reader:
    """The translation of one parsed pattern (``classes``: the placeholders of property classes)."""

    def __init__(self, classes: dict[int, list[Interval]], counted: bool = False, uncapped: bool = False,
                 max_copies: int | None = None):
        self.classes = classes
        self.max_copies = max_copies  # refuse a long repeat whose copies would pass this many characters
        self.counted = counted  # long repeats with counters (:mod:`.counters`)
        self.uncapped = uncapped  # long repeats written as they are (the regex of a counted pattern)

    def literal(self, cp: int) -> list[Interval]:
        return self.classes.get(cp, [(cp, cp)])

    def class_ranges(self, items) -> list[Interval]:
        negate = False
        ranges: list[Interval] = []
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                ranges.extend(self.literal(av))
            elif op is C.RANGE:
                if av[0] in self.classes or av[1] in self.classes:
                    raise PatternError("a property class cannot bound a range")
                ranges.append(av)
            elif op is C.CATEGORY:
                ranges.extend(_category(av))
            else:
                raise PatternError(f"unsupported construct in a character class: {op}")
        ranges = normalize(ranges)
        return complement(ranges) if negate else ranges

    def translate(self, items) -> Piece:
        out: Piece = []
        for op, av in items:
            if op is C.LITERAL:
                out += _char_set(self.literal(av)) if av in self.classes else _text_char(av)
            elif op is C.NOT_LITERAL:
                out += _char_set(complement(self.literal(av)))
            elif op is C.ANY:
                out += _char_set(complement(_LINE_TERMINATORS))
            elif op is C.IN:
                out += _char_set(self.class_ranges(av))
            elif op is C.BRANCH:
                out += _alternation([self.translate(b) for b in av[1]])
            elif op is C.SUBPATTERN:
                if av[1] or av[2]:
                    raise PatternError("inline flags are not ECMA-262")
                out += ["(?:", *self.translate(av[-1]), ")"]
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                out += self.repeat(*av)
            elif op is C.AT:
                raise PatternError(f"anchor {av} inside the pattern is not supported")
            else:
                raise PatternError(f"unsupported construct {op}")
        return out

    def repeat(self, lo: int, hi: int, body) -> Piece:
        """``body`` repeated ``lo`` to ``hi`` times (``hi`` C.MAXREPEAT: no bound). A long optional part is
        counted (:meth:`counted_repeat`) where the compile uses counters, written as the repeat itself for
        the header's regex (``uncapped``), else copied. Raises PatternError for a count above
        :func:`~.long_counts.cap` or copies past ``max_copies`` characters (sets of the piece)."""
        if hi is not C.MAXREPEAT and hi - lo > long_counts.SHORT_COUNT and (self.counted or self.uncapped):
            if self.counted:
                return self.counted_repeat(lo, hi, self.translate(body))
            if lo > long_counts.cap():  # the regex of the header: the repeat as written
                raise PatternError(f"a repeat count {long_counts.why_not(lo)}")
            return ["(?:", *self.translate(body), ")", f"{{{lo},{hi}}}"]
        top = lo if hi is C.MAXREPEAT else max(lo, hi)
        if top > long_counts.cap():
            raise PatternError(f"a repeat count {long_counts.why_not(top)}")
        inner = self.translate(body)
        chars = sum(1 for t in inner if isinstance(t, Chars))
        if self.max_copies is not None and top > long_counts.SHORT_COUNT and top * chars > self.max_copies:
            raise PatternError(f"a repeat count {top} of a part of {chars} characters (its copies would "
                               f"pass {self.max_copies:,} characters)")
        long_counts.use(top)
        if hi is C.MAXREPEAT:
            count = "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
        elif lo == hi:
            count = f"{{{lo}}}"
        else:
            count = f"{{{lo},{hi}}}"
        return ["(?:", *inner, ")", count]

    def counted_repeat(self, lo: int, hi: int, body: Piece) -> Piece:
        """``body{lo,hi}`` with the ``hi - lo`` optional repeats counted by a counter: ``lo`` copies, the
        reset marker, then ``(N body)*`` (marker characters, which the byte expansion makes marker bytes).
        Raises PatternError when ``lo`` is above :func:`~.long_counts.cap`."""
        if lo > long_counts.cap():
            raise PatternError(f"a repeat count {long_counts.why_not(lo)}")
        long_counts.use(lo)
        inner = frozenset(MARKER_OF[t] // 2 for t in body if isinstance(t, str) and t in MARKER_OF)
        k = counters.counter(("repeat", tuple(body), lo, hi), hi - lo, avoid=frozenset(inner))
        head = ["(?:", *body, ")", f"{{{lo}}}"] if lo else []
        return head + [MARKER_CHARS[2 * k], "(?:", MARKER_CHARS[2 * k + 1], "(?:", *body, "))*"]

    def search(self, items, start: bool = False, end: bool = False) -> Piece:
        """The pattern as a search: anchors at the ends of ``items`` (or of each top-level alternative)
        kept, any string content on each unanchored side."""
        items = list(items)
        if items and items[0][0] is C.AT and items[0][1] in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
            start, items = True, items[1:]
        if items and items[-1][0] is C.AT and items[-1][1] in (C.AT_END, C.AT_END_STRING):
            end, items = True, items[:-1]
        if len(items) == 1 and _has_anchor(items):
            op, av = items[0]
            if op is C.BRANCH:
                return _alternation([self.search(b, start, end) for b in av[1]])
            if op is C.SUBPATTERN and not (av[1] or av[2]):
                return self.search(av[-1], start, end)
        return ([] if start else _any_content()) + self.translate(items) + ([] if end else _any_content())


def _has_anchor(items) -> bool:
    """True when an alternative or group at the top of ``items`` starts or ends with an anchor."""
    for op, av in items:
        if op is C.AT:
            return True
        if op is C.BRANCH and any(b and (_has_anchor(b[:1]) or _has_anchor(b[-1:])) for b in av[1]):
            return True
        if op is C.SUBPATTERN and av[-1] and (_has_anchor(av[-1][:1]) or _has_anchor(av[-1][-1:])):
            return True
    return False


# ---------------------------------------------------------------------------------------------------------
# pieces of JSON text


def _alternation(pieces: list[Piece]) -> Piece:
    out: Piece = ["(?:"]
    for k, p in enumerate(pieces):
        if k:
            out.append("|")
        out += p
    return out + [")"]


def _literal_text(text: str) -> Piece:
    """The characters of ``text`` (JSON text, e.g. an escape ``\\n``), each a one-point set."""
    return [Chars(((ord(c), ord(c)),)) for c in text]


def _text_char(cp: int) -> Piece:
    """Code point ``cp`` as canonical JSON text (itself, or its escape)."""
    if cp in _SPECIAL:
        return _literal_text(json.dumps(chr(cp))[1:-1])
    if SURROGATES[0] <= cp <= SURROGATES[1]:
        raise PatternError("a lone surrogate matches no string the grammar writes")
    return [Chars(((cp, cp),))]


def _char_set(ranges: list[Interval]) -> Piece:
    """One code point of ``ranges`` as canonical JSON text: the plain ones as one set, each special one as
    its escape. Raises PatternError when nothing is left."""
    plain = subtract(ranges, *SURROGATES)
    escaped = []
    for s in _SPECIAL:
        if any(a <= s <= b for a, b in ranges):
            escaped.append(s)
            plain = subtract(plain, s, s)
    alternatives = ([[Chars(normalize(plain))]] if plain else []) + ([_escapes(escaped)] if escaped else [])
    if not alternatives:
        raise PatternError("a character class that matches nothing")
    return alternatives[0] if len(alternatives) == 1 else _alternation(alternatives)


def _any_content() -> Piece:
    """Any string content in its canonical spelling (lexical.STRING_CHAR as a piece), repeated: each
    character as :func:`_text_char` writes it."""
    plain = Chars(subtract(complement([(s, s) for s in _SPECIAL]), *SURROGATES))
    return _alternation([[plain], _escapes(_SPECIAL)]) + ["*"]


def _escapes(cps: list[int]) -> Piece:
    """The canonical escapes of the special code points ``cps`` (``\\n``, ``\\u001f``) as one piece, their
    common beginnings written once: ``\\(?:[nt]|u00(?:0[0-7]|1f))``, not ``\\n|\\t|\\u0000|...``. The same
    language; interegular builds the factored form of all 34 in ~4 ms against ~50-90 ms for the flat
    alternation (every pattern that is not anchored at both ends is padded with it). A new list each call
    (callers extend it); the factoring is made once per set of code points (statamic: 560 calls)."""
    return list(_escapes_of(tuple(cps)))


@functools.lru_cache(maxsize=256)
def _escapes_of(cps: tuple[int, ...]) -> tuple:
    """:func:`_escapes`' piece as a tuple (its items, str and :class:`Chars`, are immutable)."""
    return tuple(_factored([json.dumps(chr(cp))[1:-1] for cp in cps]))


def _factored(texts: list[str]) -> Piece:
    """The texts (non-empty, none a prefix of another) as a piece in which texts sharing a first character
    share its set: the texts that end after it are one set, the others are factored again after it."""
    ends: list[int] = []
    after: dict[str, list[str]] = {}
    for t in texts:
        if len(t) == 1:
            ends.append(ord(t))
        else:
            after.setdefault(t[0], []).append(t[1:])
    alternatives = [[Chars(normalize([(c, c) for c in sorted(ends)]))]] if ends else []
    for first, rests in after.items():
        if ord(first) in ends:
            raise ValueError(f"escape texts are prefix-free: {first!r}")
        alternatives.append([Chars(((ord(first), ord(first)),))] + _factored(rests))
    return alternatives[0] if len(alternatives) == 1 else _alternation(alternatives)


# ---------------------------------------------------------------------------------------------------------
# rendering


def _lit(cp: int) -> str:
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    ch = chr(cp)
    return "\\" + ch if ch in "\\]^-[" else ch


def _class_item(a: int, b: int) -> str:
    return _lit(a) if a == b else f"{_lit(a)}-{_lit(b)}"


def _class_text(chars: Chars) -> str:
    """A set as interegular class text; written as its complement when that is shorter (interegular expands
    a positive class one character at a time, but a negated one is a single "anything else" symbol)."""
    if len(chars) == 1 and chars[0][0] == chars[0][1]:
        return escape(chr(chars[0][0]))
    outside = [(x, y) for x, y in complement(chars) if not (SURROGATES[0] <= x and y <= SURROGATES[1])]
    if sum(y - x + 1 for x, y in outside) < sum(y - x + 1 for x, y in chars):
        body = "".join(_class_item(x, y) for x, y in outside)
        return f"[^{body}]" if body else "[\\s\\S]"
    return "[" + "".join(_class_item(x, y) for x, y in chars) + "]"


def _atoms(sets: list[Chars]) -> list[tuple[list[Interval], np.ndarray]]:
    """The atoms of ``sets``: the classes of code points that lie in the same sets, each as (its intervals,
    bool (len(sets),) membership); code points in no set are left out. Computed over the elementary
    segments between the sets' interval ends."""
    cuts = sorted({a for s in sets for a, _ in s} | {b + 1 for s in sets for _, b in s})
    index = {c: k for k, c in enumerate(cuts)}
    member = np.zeros((len(cuts), len(sets)), dtype=bool)  # segment [cuts[k], cuts[k+1]) in set j
    for j, s in enumerate(sets):
        cover = np.zeros(len(cuts) + 1, dtype=np.int32)
        for a, b in s:
            cover[index[a]] += 1
            cover[index[b + 1]] -= 1
        member[:, j] = np.cumsum(cover)[:-1] > 0
    groups: dict[bytes, list[Interval]] = OrderedDict()
    rows: dict[bytes, np.ndarray] = {}
    for k in range(len(cuts) - 1):
        row = member[k]
        if row.any():
            key = np.packbits(row).tobytes()
            groups.setdefault(key, []).append((cuts[k], cuts[k + 1] - 1))
            rows[key] = row
    return [(normalize(runs), rows[key]) for key, runs in groups.items()]


# Characters that stand for atoms in the regex given to interegular: CJK ideographs, never regex syntax.
_ATOM_BASE = 0x4E00


def _render(piece: Piece, atoms: bool) -> tuple[str, dict[str, list[Interval]] | None]:
    """``piece`` as interegular regex text: sets as explicit classes, or (``atoms``) as classes of atom
    characters with the atoms' intervals."""
    if not atoms:
        return "".join(t if isinstance(t, str) else _class_text(t) for t in piece), None
    sets = list(dict.fromkeys(t for t in piece if isinstance(t, Chars)))
    table = _atoms(sets)
    reps = [chr(_ATOM_BASE + k) for k in range(len(table))]
    text_of = {}
    for j, s in enumerate(sets):
        mine = [reps[k] for k, (_, row) in enumerate(table) if row[j]]
        text_of[s] = mine[0] if len(mine) == 1 else "[" + "".join(mine) + "]"
    regex = "".join(t if isinstance(t, str) else text_of[t] for t in piece)
    return regex, {reps[k]: runs for k, (runs, _) in enumerate(table)}


#: Characters that stand for the counter markers (:mod:`.counters`) in the regex given to interegular,
#: and the index of each among the markers (counter k: reset 2k, next 2k + 1).
MARKER_CHARS = tuple(chr(0xF0000 + i) for i in range(len(counters.MARKER_BYTES)))
MARKER_OF = {c: i for i, c in enumerate(MARKER_CHARS)}


def _piece(pattern: str, counted: bool = False, uncapped: bool = False, max_copies: int | None = None) -> Piece:
    """The pattern as a search over JSON string content (a piece); ``counted``: long repeats with counters
    (marker characters in the piece); ``uncapped``: long repeats as written. Raises PatternError."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern must be a string, not {type(pattern).__name__}")
    text, classes = _prepare(pattern)
    try:
        parsed = P.parse(text)
    except Exception as exc:
        raise PatternError(f"cannot parse pattern {pattern!r}: {exc}") from None
    if parsed.state.flags & ~(C.SRE_FLAG_UNICODE):
        raise PatternError("inline flags are not ECMA-262")
    return _Reader(classes, counted, uncapped, max_copies).search(list(parsed))


def pattern_regex(pattern: str, counted: bool = False, max_copies: int | None = None) -> str:
    """The regex (interegular's dialect) of the JSON string content whose decoded value matches ``pattern``
    (a search). ``counted``: the regex of a pattern whose automaton counts long repeats with counters
    (:func:`pattern_dfa` in an attempt that uses them), the repeats written as they are, past the caps.
    ``max_copies``: refuse a repeat past :data:`~.long_counts.SHORT_COUNT` whose copies would pass this many
    characters (sets) of the piece (``.{1,256}``: 10 characters a copy; its key automaton 2,563 character states).
    Raises PatternError for unsupported constructs or a pattern Python cannot parse."""
    return _render(_piece(pattern, uncapped=counted, max_copies=max_copies), atoms=False)[0]


_CACHE: OrderedDict[tuple, ByteDFA] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 256


def pattern_piece(pattern: str, counted: bool = False) -> Piece:
    """The pattern translated over JSON string content, for :func:`pattern_dfa`; ``counted``: long repeats
    with counters of the running attempt (:mod:`.counters`). Raises PatternError; CounterClash where
    ``counted`` and the counters are all taken."""
    return _piece(pattern, counted)


def pattern_dfa(pattern: str, timings: dict[str, float] | None = None, piece: Piece | None = None) -> ByteDFA:
    """The minimal byte DFA of the JSON strings (quotes included) whose decoded value matches ``pattern``,
    built through atoms (see the module docstring); kept per process for the last 256 patterns (shared:
    never modified). ``timings``: as in :func:`~.dfa.from_regex`; ``piece``: the translation to build
    (:func:`pattern_piece`; default: translated now, long repeats counted where the attempt uses counters).
    Raises PatternError as :func:`pattern_regex`, CompileLimitError past a compile limit."""
    if piece is None:
        piece = _piece(pattern, counters.active())
    key = (pattern, tuple(t for t in piece if isinstance(t, str) and t in MARKER_OF))  # the counters it uses
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    quote = Chars(((0x22, 0x22),))
    regex, atoms = _render([quote, *piece, quote], atoms=True)
    raw = {c: counters.MARKER_BYTES[i] for c, i in MARKER_OF.items() if c in regex}
    dfa = D.from_regex(regex, timings, atoms, raw)
    with _CACHE_LOCK:
        _CACHE[key] = dfa
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return dfa
