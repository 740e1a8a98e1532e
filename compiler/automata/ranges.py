"""Exact regexes for integer ranges: ``minimum``/``maximum`` (inclusive or exclusive) as digit patterns.

A range [lo, hi] of non-negative integers is split into spans of equal digit count, and each span into a
prefix shared by lo and hi followed by at most three branches (lo's first digit, the digits strictly
between, hi's first digit), recursively; the textbook construction behind tools such as
``to-regex-range``. An unbounded side adds ``[1-9][0-9]{n,}`` for every length past the bound's (integers
have any number of digits: runaway digits are the runtime's token budget's concern, not the grammar's).
Negative ranges are the mirror image behind a ``-``; zero is written ``0`` and ``-0`` (valid JSON, the value 0).
"""

from __future__ import annotations


def _digit_class(a: int, b: int) -> str:
    if a == b:
        return str(a)
    if a == 0 and b == 9:
        return "[0-9]"
    return f"[{a}-{b}]"


def _any_digits(n: int) -> str:
    if n == 0:
        return ""
    return "[0-9]" if n == 1 else f"[0-9]{{{n}}}"


def _same_length(lo: str, hi: str) -> list[str]:
    """Alternatives matching every digit string of len(lo) == len(hi) between lo and hi (inclusive)."""
    n = len(lo)
    if n == 0:
        return [""]
    if lo == hi:
        return [lo]
    if lo[0] == hi[0]:
        return [lo[0] + rest for rest in _same_length(lo[1:], hi[1:])]
    if lo[1:] == "0" * (n - 1) and hi[1:] == "9" * (n - 1):
        return [_digit_class(int(lo[0]), int(hi[0])) + _any_digits(n - 1)]
    out = []
    a, b = int(lo[0]), int(hi[0])
    if lo[1:] == "0" * (n - 1):
        start = a
    else:
        out += [lo[0] + rest for rest in _same_length(lo[1:], "9" * (n - 1))]
        start = a + 1
    if hi[1:] == "9" * (n - 1):
        end = b
    else:
        end = b - 1
    if start <= end:
        out.append(_digit_class(start, end) + _any_digits(n - 1))
    if hi[1:] != "9" * (n - 1):
        out += [hi[0] + rest for rest in _same_length("0" * (n - 1), hi[1:])]
    return out


def _nonnegative(lo: int, hi: int | None) -> list[str]:
    """Alternatives for the integers in [lo, hi] (hi None: unbounded), 0 <= lo <= hi, written without
    leading zeros."""
    out = []
    longest = len(str(lo)) if hi is None else len(str(hi))
    for digits in range(len(str(lo)), longest + 1):
        a = max(lo, 10 ** (digits - 1) if digits > 1 else 0)
        b = 10**digits - 1 if hi is None else min(hi, 10**digits - 1)
        if a <= b:
            out += _same_length(str(a), str(b))
    if hi is None:  # every longer integer
        out.append(f"[1-9][0-9]{{{longest},}}")
    return out


def integer_range(lo: int | None, hi: int | None) -> str | None:
    """The regex of the integers in [lo, hi] (None = unbounded on that side), exact at any size; None if
    the range is empty."""
    if lo is not None and hi is not None and lo > hi:
        return None
    parts = []
    if hi is None or hi >= 0:
        parts += _nonnegative(0 if lo is None else max(lo, 0), hi)
    least = 0 if hi is None else max(-hi, 0)  # the magnitudes m with -m in [lo, hi]: "-0" included
    if lo is None or least <= -lo:
        parts += ["-" + p for p in _nonnegative(least, None if lo is None else -lo)]
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"
