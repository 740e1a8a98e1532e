"""Byte DFAs of number texts built directly: readers that compare the digits with decimal bounds as they are
read, and the remainder automaton of ``multipleOf`` (used by :mod:`..schema.numbers`, which says what to build).

A reader is a deterministic function of its state (small Python tuples): ``start``, ``step(state, char)``
(the next state, or None: dead) and ``accept(state)``. :func:`explore` enumerates the states reachable
from the start over the bytes of :data:`ALPHABET`, breadth first, into a byte DFA. Comparing a text with a
bound digit by digit is the schoolbook comparison of decimals: a longer integer part is larger, else the
first differing digit decides, a missing digit being 0.

The forms read (magnitudes; the sign is :class:`Signed`'s):

* :class:`IntegerForm`: ``0|[1-9][0-9]*``;
* :class:`PointForm`: ``I.F``, ``I`` of at most :data:`POINT_DIGITS` digits, ``F`` of any; after ``0.`` at
  most :data:`LEADING_ZEROS` zeros come before the first nonzero digit, or ``F`` is zeros only;
* :class:`ExponentForm`: ``M[eE][+-]?X``, M an integer or point form (or only one nonzero digit and a
  fraction), ``X`` any digits (leading zeros allowed) up to :data:`WIDE_EXPONENT` after two or more
  integer digits and :data:`SMALL_EXPONENT` after ``0.``.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from .dfa import ByteDFA
from ..limits import CompileLimitError, count_states

#: Digits at most before the point of a point form (Python's repr writes every double below 1e16 so).
POINT_DIGITS = 16
#: Zeros at most between ``0.`` and the first nonzero digit of a point form (repr writes down to 0.0001).
LEADING_ZEROS = 20
#: The largest exponent after a mantissa of two or more integer digits (the value stays below 1e308).
WIDE_EXPONENT = 292
#: The largest exponent after a mantissa ``0.F`` (the value stays below 1e308).
SMALL_EXPONENT = 308
#: Reader states explored at most for one automaton: a backstop (:mod:`..schema.numbers` stays far below).
MAX_EXPLORED = 100_000
#: The bytes of number texts.
ALPHABET = "0123456789.-+eE"
_DIGITS = "0123456789"


# ---------------------------------------------------------------------------------------------------------
# comparing the digits read with a bound


def split(b: Decimal) -> tuple[str, str]:
    """(integer digits, fraction digits without trailing zeros) of a decimal >= 0 (-0.0 included): 273.15 ->
    ("273", "15")."""
    i, _, f = format(b.copy_abs(), "f").partition(".")
    return i.lstrip("0") or "0", f.rstrip("0")


class Compare:
    """Compares a magnitude ``I[.F]`` (``I`` without leading zeros) with a decimal bound ``b >= 0`` as it is
    read. States: ``("i", n, rel)``: n integer digits read, ``rel`` the order of those digits against the
    bound's first n; ``("i+",)``: more integer digits than the bound's; ``("f", j)``: equal so far, j
    fraction digits read; ``("=", r)``: decided, r in (-1, 1)."""

    def __init__(self, b: Decimal):
        self.int, self.frac = split(b)

    start = ("i", 0, 0)

    def digit(self, st: tuple, d: str) -> tuple:
        """The state after the digit ``d``."""
        kind = st[0]
        if kind == "i":
            n, rel = st[1], st[2]
            if n == len(self.int):
                return ("i+",)
            if rel == 0:
                c = self.int[n]
                rel = (d > c) - (d < c)
            return ("i", n + 1, rel)
        if kind == "f":
            j = st[1]
            if j < len(self.frac):
                c = self.frac[j]
                return ("f", j + 1) if d == c else ("=", 1 if d > c else -1)
            return st if d == "0" else ("=", 1)
        return st  # "i+" or decided

    def point(self, st: tuple) -> tuple:
        """The state once the integer part ends."""
        if st[0] == "i+":
            return ("=", 1)
        if st[0] != "i":
            return st
        n, rel = st[1], st[2]
        if n < len(self.int):
            return ("=", -1)
        return ("f", 0) if rel == 0 else ("=", rel)

    def result(self, st: tuple) -> int:
        """-1, 0 or 1: the text read so far against the bound."""
        st = self.point(st)
        if st[0] == "f":
            return 0 if st[1] >= len(self.frac) else -1
        return st[1]

    @staticmethod
    def out_of_range(lo: tuple, hi: tuple) -> bool:
        """True when states ``lo`` (against the lower bound) and ``hi`` (the upper) already exclude the value
        whatever follows (a decided comparison, or an integer part longer than the upper bound's)."""
        return hi[0] == "i+" or (hi[0] == "=" and hi[1] > 0) or (lo[0] == "=" and lo[1] < 0)


class Always:
    """A comparison decided from the start: ``order`` whatever is read (a bound no text of the form crosses)."""

    def __init__(self, order: int):
        self.start = ("=", order)

    def digit(self, st: tuple, d: str) -> tuple:
        return st

    def point(self, st: tuple) -> tuple:
        return st

    def result(self, st: tuple) -> int:
        return st[1]


class CompareInteger:
    """Compares a digit string that may have leading zeros (an exponent) with an integer ``n >= 0``. States:
    ``("z",)`` zeros only so far; else as :class:`Compare`'s integer part."""

    def __init__(self, n: int):
        self.int = str(n)

    start = ("z",)

    def digit(self, st: tuple, d: str) -> tuple:
        if st[0] == "z":
            if d == "0":
                return st
            st = ("i", 0, 0)
        if st[0] == "i+":
            return st
        n, rel = st[1], st[2]
        if n == len(self.int):
            return ("i+",)
        if rel == 0:
            c = self.int[n]
            rel = (d > c) - (d < c)
        return ("i", n + 1, rel)

    def result(self, st: tuple) -> tuple[int, bool]:
        """(order against n, True when the digits read are all zeros)."""
        if st[0] == "z":
            return (0 if self.int == "0" else -1), True
        if st[0] == "i+":
            return 1, False
        n, rel = st[1], st[2]
        return (-1 if n < len(self.int) else rel), False


# ---------------------------------------------------------------------------------------------------------
# readers of the forms


class IntegerForm:
    """Integers ``0|[1-9][0-9]*`` in [lo, hi] (ints >= 0; hi None: unbounded). States ``(kind, lo, hi)``:
    kind "0" (the text is ``0``) or "n", and the comparisons with the bounds."""

    def __init__(self, lo: int, hi: int | None):
        self.lo = Always(1) if lo == 0 else Compare(Decimal(lo))
        self.hi = Always(-1) if hi is None else Compare(Decimal(hi))
        self.start = ("^",)

    def step(self, st: tuple, ch: str) -> tuple | None:
        if ch not in _DIGITS or st[0] == "0":
            return None
        if st[0] == "^":
            kind, lo, hi = ("0" if ch == "0" else "n"), self.lo.start, self.hi.start
        else:
            kind, lo, hi = st
        lo, hi = self.lo.digit(lo, ch), self.hi.digit(hi, ch)
        return None if hi[0] == "i+" else (kind, lo, hi)

    def accept(self, st: tuple) -> bool:
        return st[0] != "^" and self.lo.result(st[1]) >= 0 and self.hi.result(st[2]) <= 0


class PointForm:
    """Point forms ``I.F`` (see the module docstring) with a value in [lo, hi] (decimals >= 0). States
    ``("I", k, lo, hi)`` in the integer part (k digits; k = 0 for ``0``) and ``("F", z, any, lo, hi)`` in
    the fraction (z: the zeros read after ``0.`` while only zeros, else None; any: a digit was read)."""

    def __init__(self, lo: Decimal, hi: Decimal):
        self.lo = Always(1) if lo == 0 else Compare(lo)
        self.hi = Always(-1) if hi >= 10**POINT_DIGITS else Compare(hi)
        self.start = ("^",)

    def step(self, st: tuple, ch: str) -> tuple | None:
        kind = st[0]
        if kind == "^":
            if ch not in _DIGITS:
                return None
            nxt = ("I", 0 if ch == "0" else 1, self.lo.digit(self.lo.start, ch), self.hi.digit(self.hi.start, ch))
        elif kind == "I":
            _, k, lo, hi = st
            if ch == ".":
                nxt = ("F", 0 if k == 0 else None, False, self.lo.point(lo), self.hi.point(hi))
            elif ch not in _DIGITS or k == 0 or k == POINT_DIGITS:
                return None
            else:
                nxt = ("I", k + 1, self.lo.digit(lo, ch), self.hi.digit(hi, ch))
        else:
            if ch not in _DIGITS:
                return None
            _, z, _, lo, hi = st
            if z is not None:
                if ch == "0":
                    z = min(z + 1, LEADING_ZEROS + 1)
                elif z > LEADING_ZEROS:
                    return None
                else:
                    z = None
            nxt = ("F", z, True, self.lo.digit(lo, ch), self.hi.digit(hi, ch))
        return None if Compare.out_of_range(nxt[-2], nxt[-1]) else nxt

    def accept(self, st: tuple) -> bool:
        return st[0] == "F" and st[2] and self.lo.result(st[3]) >= 0 and self.hi.result(st[4]) <= 0


class _Significant:
    """Compares the significant digits D of a mantissa (read from its first nonzero digit) with a bound's
    ``sig`` (no leading or trailing zeros): 0.D against 0.S. States ``("s", j)``: equal so far, j digits
    read; ``("d", r)``: decided."""

    start = ("s", 0)

    def __init__(self, sig: str):
        self.sig = sig

    def digit(self, st: tuple, d: str) -> tuple:
        if st[0] == "d":
            return st
        j = st[1]
        if j < len(self.sig):
            c = self.sig[j]
            return ("s", j + 1) if d == c else ("d", 1 if d > c else -1)
        return st if d == "0" else ("d", 1)

    def result(self, st: tuple) -> int:
        if st[0] == "d":
            return st[1]
        return 0 if st[1] >= len(self.sig) else -1


class _Scaled:
    """A bound b > 0 written 0.S * 10**q (S its significant digits)."""

    def __init__(self, b: Decimal):
        self.mantissa = _Significant("".join(map(str, b.as_tuple().digits)).strip("0"))
        self.q = b.adjusted() + 1


def _order(negative: bool, zero: bool, c: int, t: int) -> int:
    """The order of an exponent x against t, from x's sign (``negative``), whether its digits are all zeros
    (``zero``) and ``c``, the order of |x| against |t|."""
    if t >= 0:
        if zero:
            return 0 if t == 0 else -1
        return -1 if negative else c
    return 1 if zero or not negative else -c


class ExponentForm:
    """Exponent forms ``M[eE][+-]?X`` with a value in [lo, hi] (decimals >= 0). With ``any_mantissa`` the
    mantissa M is an integer or point form (:class:`PointForm`'s limits), else one nonzero digit and maybe a
    fraction (repr's form: ``1.5e-07``). The exponent X has any digits, and stays at most
    :data:`WIDE_EXPONENT` after two or more integer digits and :data:`SMALL_EXPONENT` after ``0.`` (those
    values stay below 1e308, so that the largest double needs no comparison but after one digit). A
    mantissa 0.D * 10**p (p: its integer digits, or minus the zeros after ``0.``) times 10**X is compared
    with a bound 0.S * 10**q: p + X against q first, then D against S. Each p compares X with its own
    target, so any mantissa costs states: about 300 for [0, 100] against 30 for one digit.

    States ``("m", kind, n, dotted, any, sig, lo, hi)`` in the mantissa (kind "I": n integer digits, the
    first nonzero; kind "0": n zeros after ``0.`` while ``sig`` is False; lo, hi: D against each bound's S)
    and ``("x", zero, mlo, tlo, mhi, thi, cap, signed, negative, any, xlo, xhi, xcap)`` in the exponent
    (zero: the mantissa is 0; mlo: D against lo's S; tlo = q - p; xlo: |X| against |tlo|; likewise hi; a
    bound of None is met whatever follows)."""

    def __init__(self, lo: Decimal, hi: Decimal, any_mantissa: bool):
        self.any_mantissa = any_mantissa
        self.lo = None if lo == 0 else _Scaled(lo)  # None: every value is above
        self.hi = None if hi == 0 else _Scaled(hi)  # None: only a zero mantissa is below
        self.wide = hi >= Decimal(10) ** 308  # the capped mantissas never reach hi
        self._ints: dict[int, CompareInteger] = {}
        self.start = ("^",)

    def _int(self, n: int) -> CompareInteger:
        if n not in self._ints:
            self._ints[n] = CompareInteger(n)
        return self._ints[n]

    @staticmethod
    def _feed(bound: _Scaled | None, st: tuple | None, d: str) -> tuple | None:
        return None if bound is None or st is None else bound.mantissa.digit(st, d)

    def step(self, st: tuple, ch: str) -> tuple | None:
        kind = st[0]
        if kind == "^":
            if ch not in _DIGITS or (ch == "0" and not self.any_mantissa):
                return None
            lo = None if self.lo is None else _Significant.start
            hi = None if self.hi is None or (ch == "0" and self.wide) else _Significant.start
            if ch == "0":
                return ("m", "0", 0, False, False, False, lo, hi)
            return ("m", "I", 1, False, False, True, self._feed(self.lo, lo, ch), self._feed(self.hi, hi, ch))
        if kind == "m":
            return self._mantissa(st, ch)
        return self._exponent(st, ch)

    def _mantissa(self, st: tuple, ch: str) -> tuple | None:
        _, kind, n, dotted, any_, sig, lo, hi = st
        if ch == "." and not dotted:
            return ("m", kind, n, True, False, sig, lo, hi)
        if ch in _DIGITS:
            if not dotted:
                if kind == "0" or n == POINT_DIGITS or not self.any_mantissa:
                    return None
                n += 1
                if n == 2 and self.wide:
                    hi = None  # capped: below 1e308
            elif kind == "0" and not sig:
                if ch == "0":
                    return ("m", kind, min(n + 1, LEADING_ZEROS + 1), True, True, False, lo, hi)
                if n > LEADING_ZEROS:
                    return None
                sig = True
            return ("m", kind, n, dotted, True, sig, self._feed(self.lo, lo, ch), self._feed(self.hi, hi, ch))
        if ch not in "eE" or (dotted and not any_):
            return None
        if kind == "0" and not sig:  # a zero mantissa: the value is 0 whatever the exponent
            return ("x", True, None, None, None, None, None, False, False, False, None, None, None)
        if self.hi is None:
            return None
        p = n if kind == "I" else -n
        cap = SMALL_EXPONENT if kind == "0" else (WIDE_EXPONENT if n >= 2 else None)
        mlo = tlo = xlo = mhi = thi = xhi = None
        if self.lo is not None:
            mlo, tlo, xlo = self.lo.mantissa.result(lo), self.lo.q - p, CompareInteger.start
        if hi is not None:
            mhi, thi, xhi = self.hi.mantissa.result(hi), self.hi.q - p, CompareInteger.start
        return ("x", False, mlo, tlo, mhi, thi, cap, False, False, False, xlo, xhi,
                None if cap is None else CompareInteger.start)

    def _exponent(self, st: tuple, ch: str) -> tuple | None:
        _, zero, mlo, tlo, mhi, thi, cap, signed, negative, any_, xlo, xhi, xcap = st
        if ch in "+-" and not signed and not any_:
            return ("x", zero, mlo, tlo, mhi, thi, cap, True, ch == "-", False, xlo, xhi, xcap)
        if ch not in _DIGITS:
            return None
        if xlo is not None:
            xlo = self._int(abs(tlo)).digit(xlo, ch)
        if xhi is not None:
            xhi = self._int(abs(thi)).digit(xhi, ch)
        if xcap is not None:
            xcap = self._int(cap).digit(xcap, ch)
        return ("x", zero, mlo, tlo, mhi, thi, cap, True, negative, True, xlo, xhi, xcap)

    def accept(self, st: tuple) -> bool:
        if st[0] != "x" or not st[9]:
            return False
        _, zero, mlo, tlo, mhi, thi, cap, _, negative, _, xlo, xhi, xcap = st
        if zero:
            return self.lo is None
        if xcap is not None and not negative and self._int(cap).result(xcap)[0] > 0:
            return False
        if xlo is not None:
            c, allzero = self._int(abs(tlo)).result(xlo)
            if (_order(negative, allzero, c, tlo) or mlo) < 0:
                return False
        if xhi is not None:
            c, allzero = self._int(abs(thi)).result(xhi)
            if (_order(negative, allzero, c, thi) or mhi) > 0:
                return False
        return True


class Union:
    """Texts any of ``readers`` accepts (their states side by side, None where dead)."""

    def __init__(self, readers: list):
        self.readers = readers
        self.start = tuple(r.start for r in readers)

    def step(self, st: tuple, ch: str) -> tuple | None:
        out = tuple(None if s is None else r.step(s, ch) for r, s in zip(self.readers, st))
        return None if all(s is None for s in out) else out

    def accept(self, st: tuple) -> bool:
        return any(s is not None and r.accept(s) for r, s in zip(self.readers, st))


class Signed:
    """``positive`` texts, or ``-`` then ``negative`` texts (either reader may be None: none)."""

    def __init__(self, positive, negative):
        self.positive, self.negative = positive, negative
        self.start = ("±",)

    def step(self, st: tuple, ch: str) -> tuple | None:
        if st[0] == "±":
            if ch == "-":
                return None if self.negative is None else ("-", self.negative.start)
            if self.positive is None:
                return None
            s = self.positive.step(self.positive.start, ch)
            return None if s is None else ("+", s)
        reader = self.positive if st[0] == "+" else self.negative
        s = reader.step(st[1], ch)
        return None if s is None else (st[0], s)

    def accept(self, st: tuple) -> bool:
        return st[0] != "±" and (self.positive if st[0] == "+" else self.negative).accept(st[1])


def explore(reader) -> ByteDFA:
    """The reader's states reachable from its start, breadth first, as a byte DFA (not minimized; start 0).
    Counts them against the compile budget; raises CompileLimitError past :data:`MAX_EXPLORED`."""
    index = {reader.start: 0}
    order = [reader.start]
    edges: list[tuple[int, int, int]] = []
    i = 0
    while i < len(order):
        st = order[i]
        for ch in ALPHABET:
            nxt = reader.step(st, ch)
            if nxt is None:
                continue
            j = index.get(nxt)
            if j is None:
                if len(order) >= MAX_EXPLORED:
                    raise CompileLimitError(f"a number's automaton needs more than {MAX_EXPLORED:,} states")
                j = index[nxt] = len(order)
                order.append(nxt)
            edges.append((i, ord(ch), j))
        i += 1
    count_states(len(order), leaf=True)
    trans = np.full((len(order), 256), -1, dtype=np.int32)
    if edges:
        e = np.array(edges, dtype=np.int64)
        trans[e[:, 0], e[:, 1]] = e[:, 2]
    return ByteDFA(trans, np.array([reader.accept(s) for s in order], dtype=bool), 0)


# ---------------------------------------------------------------------------------------------------------
# multiples


def multiples(a: int, s: int) -> ByteDFA:
    """The texts ``-?[0-9]+(\\.[0-9]+)?`` whose value v is a multiple of a / 10**s: v * 10**s is an integer
    divisible by a (fraction digits past the s-th are zeros). Not minimized; 2 + a * (s + 3) states: the
    start, after ``-``, the integer part's remainders ``I(r)``, the fraction's ``F(r, f)`` (f <= s digits
    read) and ``Z(r)`` (zeros past the s-th), built with numpy: digit d after remainder r leaves
    (10r + d) mod a. Counts the states against the compile budget."""
    n = 2 + a * (s + 3)
    count_states(n, leaf=True)
    trans = np.full((n, 256), -1, dtype=np.int32)
    r = np.arange(a)
    digits = np.arange(10)
    nxt = (10 * r[:, None] + digits[None, :]) % a  # (a, 10)
    zero = ord("0")
    columns = zero + digits[None, :]

    def integer(rem):
        return 2 + rem

    def fraction(rem, f):
        return 2 + a + f * a + rem

    def zeros(rem):
        return 2 + a * (s + 2) + rem

    trans[0, ord("-")] = 1
    trans[0, zero:zero + 10] = integer(digits % a)
    trans[1, zero:zero + 10] = integer(digits % a)
    trans[integer(r)[:, None], columns] = integer(nxt)
    trans[integer(r), ord(".")] = fraction(r, 0)
    for f in range(s):
        trans[fraction(r, f)[:, None], columns] = fraction(nxt, f + 1)
    trans[fraction(r, s), zero] = zeros(r)
    trans[zeros(r), zero] = zeros(r)
    accepting = np.zeros(n, dtype=bool)
    accepting[integer(r)] = (r * pow(10, s, a)) % a == 0
    for f in range(1, s + 1):
        accepting[fraction(r, f)] = (r * pow(10, s - f, a)) % a == 0
    accepting[zeros(r)] = r % a == 0
    return ByteDFA(trans, accepting, 0)
