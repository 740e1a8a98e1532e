"""Sets of Unicode code points as sorted lists of inclusive intervals ``(lo, hi)``.

Shared by the compiler's regex -> byte DFA expansion (``compiler.automata.dfa``: the code points of each interegular
symbol, split by UTF-8 lead byte) and its JSON Schema ``pattern`` translation (``compiler.automata.pattern``:
character classes, their negation and the characters JSON escapes), and by the Unicode property tables
(:mod:`.unicode`). Code points run from 0 to :data:`MAX_CODE_POINT` (U+10FFFF); the
surrogates U+D800-U+DFFF are code points but not scalar values, so UTF-8 cannot encode them (RFC 3629).
"""

from __future__ import annotations

import bisect

MAX_CODE_POINT = 0x10FFFF
#: The surrogate code points (lo, hi), which have no UTF-8 encoding.
SURROGATES = (0xD800, 0xDFFF)

Interval = tuple[int, int]


def normalize(ranges) -> list[Interval]:
    """``ranges`` (any order, possibly overlapping) sorted, with overlapping and adjacent ones merged."""
    out: list[Interval] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def complement(ranges) -> list[Interval]:
    """The code points 0..U+10FFFF outside ``ranges`` (any order), as sorted disjoint intervals."""
    out, prev = [], -1
    for a, b in normalize(ranges):
        if a > prev + 1:
            out.append((prev + 1, a - 1))
        prev = b
    if prev < MAX_CODE_POINT:
        out.append((prev + 1, MAX_CODE_POINT))
    return out


def subtract(ranges, lo: int, hi: int) -> list[Interval]:
    """Each interval of ``ranges`` without the points of [lo, hi], in the same order (an interval that
    contains [lo, hi] is split in two; nothing is merged or sorted)."""
    out: list[Interval] = []
    for a, b in ranges:
        if b < lo or a > hi:
            out.append((a, b))
        else:
            if a < lo:
                out.append((a, lo - 1))
            if b > hi:
                out.append((hi + 1, b))
    return out


def restrict(targeted: list[tuple[int, int, int]], starts: list[int], lo: int, hi: int) -> tuple:
    """The part of ``targeted`` inside [lo, hi], shifted so that ``lo`` becomes 0.

    ``targeted``: sorted, disjoint ``(lo, hi, target)`` triples (a target state per interval); ``starts``:
    their ``lo`` values, for a binary search. Returns a tuple of ``(lo, hi, target)`` (hashable: the byte
    expansion memoizes on it).
    """
    out = []
    i = max(bisect.bisect_right(starts, lo) - 1, 0)
    while i < len(targeted) and targeted[i][0] <= hi:
        a, b, t = targeted[i]
        if b >= lo:
            out.append((max(a, lo) - lo, min(b, hi) - lo, t))
        i += 1
    return tuple(out)
