"""JSON Schema ``pattern`` -> regex over the JSON-encoded string content (the text between the quotes).

A pattern constrains the *decoded* string, while the grammar runs over JSON text, where ``"``, ``\\`` and
control characters appear escaped. The pattern is parsed with Python's own regex parser (``re._parser``,
close to ECMA-262 for the syntax schemas use), then written back in interegular's dialect with every
character class split into the characters that appear as themselves and those that appear as their
canonical JSON escape (``\\"``, ``\\\\``, ``\\n``, ``\\u001f`` ...). A pattern is a search, not a full match:
unless anchored with ``^``/``$`` it is padded with "any string content" on that side.

Raises :class:`PatternError` for what cannot be translated exactly: backreferences, lookaround, anchors
other than at the ends, word boundaries.
"""

from __future__ import annotations

import json

try:  # Python 3.11+
    import re._constants as C
    import re._parser as P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C
    import sre_parse as P

from .intervals import SURROGATES, complement, normalize, subtract
from .lexical import STRING_CHAR, escape

#: Counted repeats above this are not enforced (the automaton would grow with the count).
MAX_REPEAT = 64


class PatternError(ValueError):
    """A pattern that cannot be compiled exactly."""


_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
# ECMA-262 WhiteSpace and LineTerminator
_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
          (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]


def _category(cat) -> list[tuple[int, int]]:
    table = {
        C.CATEGORY_DIGIT: _DIGIT, C.CATEGORY_WORD: _WORD, C.CATEGORY_SPACE: _SPACE,
        C.CATEGORY_NOT_DIGIT: complement(_DIGIT), C.CATEGORY_NOT_WORD: complement(_WORD),
        C.CATEGORY_NOT_SPACE: complement(_SPACE),
    }
    if cat not in table:
        raise PatternError(f"unsupported character category {cat}")
    return table[cat]


def _class_ranges(items) -> list[tuple[int, int]]:
    negate = False
    ranges = []
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            ranges.append((av, av))
        elif op is C.RANGE:
            ranges.append(av)
        elif op is C.CATEGORY:
            ranges.extend(_category(av))
        else:
            raise PatternError(f"unsupported construct in a character class: {op}")
    ranges = normalize(ranges)
    return complement(ranges) if negate else ranges


_SPECIAL = set(range(0x20)) | {0x22, 0x5C}


def _only_surrogates(lo: int, hi: int) -> bool:
    """True when [lo, hi] holds surrogates only (no UTF-8 text has them; interegular need not see them)."""
    return SURROGATES[0] <= lo and hi <= SURROGATES[1]


def _chars(ranges) -> str:
    """Regex of one character of ``ranges`` as it appears in canonical JSON text."""
    plain, escaped = [], []
    for a, b in ranges:
        cps = [(a, b)]
        for s in sorted(_SPECIAL):
            if a <= s <= b:
                escaped.append(s)
                cps = subtract(cps, s, s)
        plain.extend((x, y) for x, y in cps if not _only_surrogates(x, y))
    parts = []
    if plain:
        plain = normalize(plain)
        # a class is written as its complement when that is shorter: interegular expands a positive class
        # one character at a time, but a negated one stays a single "anything else" symbol
        outside = [(x, y) for x, y in complement(plain) if not _only_surrogates(x, y)]
        if sum(y - x + 1 for x, y in outside) < sum(y - x + 1 for x, y in plain):
            body = "".join(_class_item(x, y) for x, y in outside)
            parts.append(f"[^{body}]" if body else "[\\s\\S]")
        else:
            body = "".join(_class_item(x, y) for x, y in plain)
            parts.append(f"[{body}]")
    for s in escaped:
        parts.append(escape(json.dumps(chr(s))[1:-1]))
    if not parts:
        raise PatternError("a character class that matches nothing")
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _lit(cp: int) -> str:
    ch = chr(cp)
    if ch in "\\]^-[":
        return "\\" + ch
    return ch


def _class_item(a: int, b: int) -> str:
    return _lit(a) if a == b else f"{_lit(a)}-{_lit(b)}"


def _translate(items) -> str:
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(escape(json.dumps(chr(av), ensure_ascii=False)[1:-1]))
        elif op is C.NOT_LITERAL:
            out.append(_chars(complement([(av, av)])))
        elif op is C.ANY:
            out.append(_chars(complement([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])))
        elif op is C.IN:
            out.append(_chars(_class_ranges(av)))
        elif op is C.BRANCH:
            out.append("(?:" + "|".join(_translate(b) for b in av[1]) + ")")
        elif op is C.SUBPATTERN:
            out.append("(?:" + _translate(av[-1]) + ")")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            lo, hi, body = av
            if lo > MAX_REPEAT or (hi is not C.MAXREPEAT and hi > MAX_REPEAT):
                raise PatternError(f"a repeat count above {MAX_REPEAT}")
            inner = "(?:" + _translate(body) + ")"
            if hi is C.MAXREPEAT:
                out.append(inner + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"))
            elif lo == hi:
                out.append(inner + f"{{{lo}}}")
            else:
                out.append(inner + f"{{{lo},{hi}}}")
        elif op is C.AT:
            raise PatternError(f"anchor {av} inside the pattern is not supported")
        else:
            raise PatternError(f"unsupported construct {op}")
    return "".join(out)


def pattern_regex(pattern: str) -> str:
    """The regex of the JSON string content whose decoded value matches ``pattern`` (a search).

    Raises PatternError for unsupported constructs or a pattern Python cannot parse.
    """
    try:
        items = list(P.parse(pattern))
    except Exception as exc:
        raise PatternError(f"cannot parse pattern {pattern!r}: {exc}") from None
    start = bool(items) and items[0][0] is C.AT and items[0][1] in (C.AT_BEGINNING, C.AT_BEGINNING_STRING)
    if start:
        items = items[1:]
    end = bool(items) and items[-1][0] is C.AT and items[-1][1] in (C.AT_END, C.AT_END_STRING)
    if end:
        items = items[:-1]
    body = _translate(items)
    any_content = STRING_CHAR + "*"
    return ("" if start else any_content) + body + ("" if end else any_content)
