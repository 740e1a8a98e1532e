"""ECMA-262 patterns searched in linear time: the check after generation never backtracks.

jsonschema reads ``pattern`` and ``patternProperties`` (and, through them, ``additionalProperties`` and
``unevaluatedProperties``) with Python's backtracking :mod:`re`, whose time can grow exponentially with the
text: ``(x+x+)+y`` against 28 ``x`` and ``z xxy`` took 12.6 s, four times longer for every two more
characters. Here each pattern is written for RE2 (google-re2, Cox's automata-based engine: time linear in the
text, https://github.com/google/re2) and :func:`install` makes jsonschema search with it.

The pattern is parsed by Python's own regex parser (``re._parser``, as the grammar's reader does; ECMA-262's
``\\p{..}``, ``\\d \\w \\s`` are first written out by :func:`~.patterns.python_pattern`), then written in RE2's
syntax with ECMA-262's meanings where Python's differ: ``.`` is any code point but the line terminators
``\\n \\r \\u2028 \\u2029``; ``$`` is the end of the text only (Python's also matches before a final
``\\n``); ``\\b`` is an ASCII word boundary. Every character is written as a code point (``\\x{..}``), so no
syntax of one dialect leaks into the other. RE2 takes repeat counts up to 1,000, nested ones included
(their product); a larger count is written as a chain of smaller repeats of the same text (``a{0,2500}`` as
``(?:a){0,1000}(?:a){0,1000}(?:a){0,500}``), the same language.

What RE2 cannot decide in linear time (backreferences, lookahead and lookbehind, atomic groups, possessive
repeats, conditionals) raises :class:`UncheckablePattern` when the pattern is read: the catalog reader
refuses such a schema (:func:`~.catalog.check_schema`); nothing falls back to a backtracking engine. A lone
surrogate in a text (JSON allows ``"\\ud800"``) is searched as U+FFFD, which UTF-8 can carry.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

try:  # Python 3.11+
    import re._constants as C
    import re._parser as P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C
    import sre_parse as P

import re2

from .intervals import Interval, complement, normalize
from .patterns import python_pattern

__all__ = ["UncheckablePattern", "install", "linear_regex", "re2_syntax", "search"]

#: RE2's largest repeat count (and largest product of nested counts).
MAX_REPEAT = 1000
#: The memory RE2 may use for one pattern's program and automata, bytes (its default is 8 MiB; a class of
#: 1,000 copies, such as ``\\p{L}{1,1000}``, 1.2 million instructions, takes more). Past it RE2 refuses the
#: pattern at once (``\\p{L}{1,10000}``: under a second, where 256 MiB took 26 s to compile).
MAX_MEM = 32 * 2**20
#: Compiled patterns kept: at most this many, and this many program instructions in all (about 16 bytes each).
CACHE = 1024
CACHE_INSTRUCTIONS = 4_000_000
#: The most copies a repeat may stand for, nested counts multiplied (``^a{99999999}$`` would take seconds and
#: hundreds of MB for RE2 to refuse); past it the pattern is refused with the catalog.
MAX_COPIES = 10_000

#: ECMA-262's line terminators, which ``.`` does not match (section 22.2.2.7, without the ``s`` flag).
_LINE_TERMINATORS: list[Interval] = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
#: ECMA-262's ``\\d``, ``\\w`` and ``\\s`` (section 22.2.2.9) for categories Python's parser leaves in a class.
_CATEGORIES: dict[Any, list[Interval]] = {
    C.CATEGORY_DIGIT: [(0x30, 0x39)],
    C.CATEGORY_WORD: [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    C.CATEGORY_SPACE: [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                       (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)],
}
_CATEGORIES[C.CATEGORY_NOT_DIGIT] = complement(_CATEGORIES[C.CATEGORY_DIGIT])
_CATEGORIES[C.CATEGORY_NOT_WORD] = complement(_CATEGORIES[C.CATEGORY_WORD])
_CATEGORIES[C.CATEGORY_NOT_SPACE] = complement(_CATEGORIES[C.CATEGORY_SPACE])
_UNSUPPORTED = {C.GROUPREF: "a backreference", C.GROUPREF_EXISTS: "a conditional group",
                C.ATOMIC_GROUP: "an atomic group", C.POSSESSIVE_REPEAT: "a possessive repeat"}
_SURROGATE = re.compile("[\ud800-\udfff]")  # one class, no repeat: a linear scan


class UncheckablePattern(ValueError):
    """A pattern the linear-time check cannot read (see the module docstring); the message names it and why."""


def _code(cp: int) -> str:
    return f"\\x{{{cp:X}}}"


def _set(runs: list[Interval]) -> str:
    """An RE2 class of exactly the code points ``runs`` (an empty class matches nothing)."""
    inside = "".join(_code(a) if a == b else f"{_code(a)}-{_code(b)}" for a, b in runs)
    return f"[{inside}]" if runs else "[^\\x{0}-\\x{10FFFF}]"


def _class(items: list) -> list[Interval]:
    """The code points of a parsed class (``IN``'s items)."""
    runs: list[Interval] = []
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            runs.append((av, av))
        elif op is C.RANGE:
            runs.append(av)
        elif op is C.CATEGORY and av in _CATEGORIES:
            runs.extend(_CATEGORIES[av])
        else:
            raise UncheckablePattern(f"the class item {op} {av}")
    runs = normalize(runs)
    return complement(runs) if negate else runs


def _case(text: str, flags: int) -> str:
    return f"(?i:{text})" if flags & C.SRE_FLAG_IGNORECASE else text


def _repeat(lo: int, hi: int | None, body: str, outer: int) -> str:
    """``body`` repeated ``lo`` to ``hi`` times (None: unbounded) under repeats whose counts multiply to
    ``outer``, in chunks RE2 takes (each count times ``outer`` at most :data:`MAX_REPEAT`)."""
    group = f"(?:{body})"
    step = max(1, MAX_REPEAT // outer)
    if lo <= step and (hi is None or hi <= step):
        if (lo, hi) == (0, None):
            return group + "*"
        if (lo, hi) == (1, None):
            return group + "+"
        if (lo, hi) == (0, 1):
            return group + "?"
        return group + (f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
    out = []
    for count in [step] * (lo // step) + ([lo % step] if lo % step else []):
        out.append(group if count == 1 else f"{group}{{{count}}}")
    if hi is None:
        out.append(group + "*")
    else:
        rest = hi - lo
        for count in [step] * (rest // step) + ([rest % step] if rest % step else []):
            out.append(f"{group}?" if count == 1 else f"{group}{{0,{count}}}")
    return "".join(out)


def _cost(lo: int, hi: int) -> int:
    """What a repeat multiplies the counts nested in it by (RE2 bounds their product)."""
    return max(1, hi if hi != C.MAXREPEAT else lo)


def _write(items, flags: int, outer: int) -> str:
    """RE2 text of parsed ``items`` under ``flags``, inside repeats whose counts multiply to ``outer``."""
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(_case(_code(av), flags))
        elif op is C.NOT_LITERAL:
            out.append(_case(_set(complement([(av, av)])), flags))
        elif op is C.ANY:
            out.append(_set([(0, 0x10FFFF)] if flags & C.SRE_FLAG_DOTALL else complement(_LINE_TERMINATORS)))
        elif op is C.IN:
            out.append(_case(_set(_class(av)), flags))
        elif op is C.BRANCH:
            out.append("(?:" + "|".join(_write(alt, flags, outer) for alt in av[1]) + ")")
        elif op is C.SUBPATTERN:
            _, add, remove, sub = av
            out.append("(?:" + _write(sub, (flags | add) & ~remove, outer) + ")")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            if outer * _cost(lo, hi) > MAX_COPIES:
                raise UncheckablePattern(f"a repeat of {outer * _cost(lo, hi):,} copies (at most {MAX_COPIES:,})")
            step = max(1, MAX_REPEAT // outer)
            inner = outer * (min(step, _cost(lo, hi)))
            body = _write(sub, flags, inner)
            out.append(_repeat(lo, None if hi == C.MAXREPEAT else hi, body, outer))
        elif op is C.AT:
            multiline = flags & C.SRE_FLAG_MULTILINE
            out.append({C.AT_BEGINNING: "(?m:^)" if multiline else "\\A", C.AT_END: "(?m:$)" if multiline else "\\z",
                        C.AT_BEGINNING_STRING: "\\A", C.AT_END_STRING: "\\z", C.AT_BOUNDARY: "\\b",
                        C.AT_NON_BOUNDARY: "\\B"}.get(av) or _refuse(f"the anchor {av}"))
        elif op in (C.ASSERT, C.ASSERT_NOT):
            raise UncheckablePattern("a lookahead" if av[0] == 1 else "a lookbehind")
        elif op in _UNSUPPORTED:
            raise UncheckablePattern(_UNSUPPORTED[op])
        else:
            raise UncheckablePattern(f"{op}")
    return "".join(out)


def _refuse(what: str) -> str:
    raise UncheckablePattern(what)


def re2_syntax(pattern: str) -> str:
    """``pattern`` (ECMA-262, as JSON Schema writes it) in RE2's syntax with ECMA-262's meaning (see the module
    docstring). Raises UncheckablePattern for what RE2 cannot decide in linear time, or for a pattern no
    parser reads."""
    try:
        parsed = P.parse(python_pattern(pattern))
    except (re.error, ValueError, OverflowError, RecursionError) as exc:  # ValueError: UnknownProperty
        raise UncheckablePattern(f"pattern {pattern!r} cannot be read: {exc}") from None
    try:
        return _write(parsed.data, parsed.state.flags, 1)
    except UncheckablePattern as exc:
        raise UncheckablePattern(f"pattern {pattern!r} holds {exc}, which the check after generation cannot "
                                 "decide in linear time") from None
    except RecursionError:
        raise UncheckablePattern(f"pattern {pattern!r} is nested too deeply") from None


_compiled: OrderedDict[str, Any] = OrderedDict()
_lock = threading.Lock()


def linear_regex(pattern: str) -> "re2._Regexp":
    """``pattern`` compiled by RE2, cached (least recently used out past :data:`CACHE` patterns or
    :data:`CACHE_INSTRUCTIONS` instructions). Raises UncheckablePattern as :func:`re2_syntax` does, or when
    RE2 refuses the result (past :data:`MAX_MEM`)."""
    with _lock:
        if pattern in _compiled:
            _compiled.move_to_end(pattern)
            return _compiled[pattern]
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.log_errors = False
    try:
        regex = re2.compile(re2_syntax(pattern), options)
    except re2.error as exc:
        why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise UncheckablePattern(f"pattern {pattern!r} is too large for the check after generation ({why})") \
            from None
    with _lock:
        _compiled[pattern] = regex
        while len(_compiled) > 1 and (len(_compiled) > CACHE or sum(r.programsize for r in _compiled.values())
                                      > CACHE_INSTRUCTIONS):
            _compiled.popitem(last=False)
    return regex


def search(pattern: str, text: str) -> bool:
    """True when ``pattern`` (ECMA-262) matches somewhere in ``text``, decided in time linear in ``text``.
    Raises UncheckablePattern (:func:`linear_regex`)."""
    if _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
    return linear_regex(pattern).search(text) is not None


class _LinearRe:
    """What jsonschema's keyword modules use of :mod:`re` (``re.search``), with :func:`search`; any other
    attribute is :mod:`re`'s own."""

    @staticmethod
    def search(pattern: str, text: str) -> bool:
        return search(pattern, text)

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)


def install() -> None:
    """Make jsonschema search patterns with :func:`search` (idempotent): the ``re`` of its keyword modules
    (``pattern``, ``patternProperties``, and the key lookups of ``additionalProperties`` and
    ``unevaluatedProperties``) becomes :class:`_LinearRe`. The ``regex`` format's check of a schema keeps
    Python's :mod:`re` (it compiles a pattern, never searches a text)."""
    import jsonschema._keywords
    import jsonschema._legacy_keywords
    import jsonschema._utils

    for module in (jsonschema._keywords, jsonschema._legacy_keywords, jsonschema._utils):
        if getattr(module, "re", None) is re:
            module.re = _LinearRe()
