"""Integers and numbers within bounds (``minimum``, ``maximum`` and their exclusive forms, draft 4's boolean
ones too) and multiples of ``multipleOf``: which texts to accept (:func:`plan`) and their automaton
(:func:`number_dfa`, built by the readers of :mod:`..automata.digits`; :class:`NumberNode` in a grammar).

Forms. A number is written ``-?`` and a magnitude in one of three forms (:mod:`..automata.digits`):

* an integer ``0|[1-9][0-9]*`` of any number of digits (json.loads reads a Python int, never infinity; a
  runaway is the runtime's token budget's concern); ``-0`` too (the value 0, as ``-0.0`` is);
* a point form ``I.F``: at most 16 digits before the point, any after; after ``0.`` at most 20 zeros
  before the first nonzero digit, or zeros only (Python's repr writes the doubles in [1e-4, 1e16) so:
  ``2.0``, ``0.0001``, ``-0.0``);
* an exponent form: one nonzero digit and maybe a fraction, then ``[eE][+-]?X`` with any exponent digits
  (repr's ``1e+100``, ``1.5e-07``). An unbounded number also takes an exponent after any integer or point
  form of at most 16 integer digits (``12.5e-3``, ``0.5e1``, ``0e5``), at most 292 after two or more
  integer digits and 308 after ``0.``: those values stay below 1e308, so that the largest double is
  reached by one digit before the point only (``1.7976931348623157e308``). With bounds each such mantissa
  length would need its own comparison of the exponent (about 300 states for [0, 100] against 30), so
  bounded numbers write repr's exponent form only (``1.25e-2``, not ``12.5e-3``).

Every double as json.dumps writes it and every integer is in these forms; not written (layout
exclusions): a point or an exponent after 17 integer digits, ``0.`` and 21 zeros before a digit,
``12.5e300`` (write ``1.25e301``), ``12.5e-3`` with bounds. An integer schema takes integer texts only
(``3.0`` is a layout exclusion).

Values, as jsonschema sees them after json.loads. An integer text is a Python int, compared exactly with
the bounds: it is accepted in [ceil(lo), floor(hi)] (exclusive: floor(lo) + 1, ceil(hi) - 1). A point or
exponent text is the double nearest its decimal value v; it is accepted when FL <= v <= FH, FL being the
repr of the least double that meets the lower bound and FH that of the greatest that meets the upper
bound, clipped to the largest double 1.7976931348623157e308 (:data:`DBL_MAX`). Rounding to the nearest
double is monotone and repr(d) reads back as d, so FL <= v <= FH implies that v's double meets both
bounds and is finite (sound); the canonical text repr(x) of a valid x is never below FL nor above FH
(complete on canonical texts). So ``exclusiveMinimum: 0`` means FL = 5e-324 (``1e-400`` reads as 0.0),
``maximum: 0.1`` admits ``0.1`` and ``0.09`` but not ``0.10000000000000001``, and an unbounded number
admits ``1.7976931348623157e+308``, not ``1.8e308`` nor ``1e309``.

Multiples (``multipleOf`` q). The decimal of q (an int, or a float's repr) is a / 10**s; v is a multiple
iff v * 10**s is an integer divisible by a (:func:`~..automata.digits.multiples`, intersected with the range).
Exponent forms are not written under ``multipleOf`` (the canonical forms of multiples up to 2**53 are
integer or point forms, except multiples below 1e-4: ``1e-05`` for q = 1e-05 is not accepted).
jsonschema divides doubles, so to agree with it: for an int q, point texts stay within 2**53 (where a
decimal integer is its double); for a float q whose double is exactly its decimal (0.25, 1.5, 2.0:
q = c * 2**k with c odd), integer texts stay within 2**53 * 2**k, where each multiple j * q is an exact
double and its division by q is exact, and point texts also within 2**53 / 10**s, where a double's
spacing is below 2 / 10**s, so that repr writes each multiple exactly (1234567890123456.75, a multiple
of 0.25, is written 1234567890123456.8). A q whose double is not its decimal (0.1, 0.01) is read as its
decimal, and jsonschema's float division rejects some of those multiples (0.3 / 0.1 is
2.9999999999999996): noted as not enforced, except for an integer schema where every integer multiple
within 2**53 passes that division (0.1, 0.01, 1e-08: see :func:`_exact_on_integers`). Integer texts stay
within 2**53 under such a step (past 1.8e308 jsonschema's division raises an error). A step whose
remainder automaton would need more than :data:`MAX_REMAINDERS` states, or whose product with the range
more than :data:`MAX_PRODUCT`, is not enforced either (noted; the bounds still are).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import SchemaError
from ..automata import dfa as D
from ..automata.compose import is_empty, product
from ..automata.dfa import ByteDFA
from ..automata.digits import ExponentForm, IntegerForm, PointForm, Signed, Union, explore, multiples
from ..automata.lexical import INTEGER, NUMBER, canonical
from ..limits import CompileLimitError
from ..automata.nodes import LEAF_CACHE, Node
from ..automata.ranges import integer_range

#: The largest finite double, as a decimal.
DBL_MAX = Decimal(repr(sys.float_info.max))
#: Integers up to 2**53 are exact doubles.
EXACT = 2**53
#: ``multipleOf`` a / 10**s is enforced when a * (s + 3) is at most this (the remainder automaton's size).
MAX_REMAINDERS = 10_000
#: ... and when its minimal automaton's states times the range's are at most this (their product's bound).
MAX_PRODUCT = 20_000
#: The most digits of an integer bound: its automaton has about two states per digit, and minimizing it takes
#: a round per digit (400 digits: 0.4 s; 4,000: 30 s). Every double has at most 309 integer digits.
MAX_BOUND_DIGITS = 400


@dataclass(frozen=True)
class NumberSpec:
    """The texts to accept. ``integers``: (lo, hi) of integer texts (ints, None = unbounded), or None for
    none; ``floats``: [lo, hi] of point (and exponent) texts as decimals, or None for none; ``exponents``:
    which exponent forms are written, :data:`NONE`, :data:`ONE_DIGIT` (after one nonzero digit) or
    :data:`ANY` (after any integer or point form); ``step``: (a, s) for ``multipleOf`` a / 10**s, or None."""

    integers: tuple[int | None, int | None] | None
    floats: tuple[Decimal, Decimal] | None
    exponents: str
    step: tuple[int, int] | None

    def describe(self) -> str:
        """A description of the texts, also their cache key: ``integer [0, ] | point [0.0, 1E+2] | multipleOf
        25E-2`` (an empty side is unbounded)."""
        parts = []
        if self.integers is not None:
            lo, hi = self.integers
            parts.append(f"integer [{'' if lo is None else lo}, {'' if hi is None else hi}]")
        if self.floats is not None:
            parts.append(f"{self.exponents} [{self.floats[0]}, {self.floats[1]}]")
        if self.step is not None:
            a, s = self.step
            parts.append(f"multipleOf {a}E-{s}")
        return " | ".join(parts) or "no number"


#: No exponent form, then exponents after one nonzero digit, after any mantissa (:attr:`NumberSpec.exponents`).
NONE, ONE_DIGIT, ANY = "point", "exponent after one digit", "exponent after any mantissa"
#: The unbounded number (:data:`~..automata.lexical.NUMBER`).
UNBOUNDED = NumberSpec((None, None), (-DBL_MAX, DBL_MAX), ANY, None)
#: Every integer (:data:`~..automata.lexical.INTEGER`).
INTEGERS = NumberSpec((None, None), None, NONE, None)


@dataclass(frozen=True)
class Plan:
    """:func:`plan`'s answer: the ``spec`` to build and ``notes``, (keyword, detail) of what is not enforced."""

    spec: NumberSpec
    notes: tuple[tuple[str, str], ...] = ()


def _least_double(x: Any, strict: bool) -> float:
    """The least double d with d >= x (d > x when ``strict``); x an int or a float; may be +-inf."""
    if isinstance(x, float):
        d = x
    else:
        try:
            d = float(x)
        except OverflowError:
            d = math.inf if x > 0 else -math.inf
    while d < x or (strict and d == x):
        d = math.nextafter(d, math.inf)
    return d


def _greatest_double(x: Any, strict: bool) -> float:
    """The greatest double d with d <= x (d < x when ``strict``)."""
    return -_least_double(-x, strict)


def _step_of(q: Any) -> tuple[int, int, bool]:
    """(a, s, exact): the decimal of ``q`` (an int, or a float's repr) is a / 10**s with a not divisible by
    10 when s > 0; ``exact`` when q's double is that decimal (always for an int)."""
    if isinstance(q, int):
        return q, 0, True
    dq = Decimal(repr(q))
    _, digits, exp = dq.as_tuple()
    a = int("".join(map(str, digits)))
    while exp < 0 and a % 10 == 0:
        a //= 10
        exp += 1
    exact = Decimal(q) == dq
    return (a * 10**exp, 0, exact) if exp >= 0 else (a, -exp, exact)


def _exact_cap(q: float) -> Fraction:
    """2**53 * 2**k for q = c * 2**k (c odd): within it, every multiple of q is an exact double and so is
    its quotient by q."""
    num, den = q.as_integer_ratio()
    odd = num >> ((num & -num).bit_length() - 1)
    return Fraction(EXACT) * Fraction(num, den) / odd


def _decimal(x: Fraction) -> Decimal:
    """A power of two (a Fraction) exactly as a decimal."""
    if x >= 1:
        return Decimal(x.numerator // x.denominator)
    k = x.denominator.bit_length() - 1
    return Decimal(f"{5**k}E-{k}")


def _jsonschema_rejects(q: float, integer: bool) -> str | None:
    """The text of the least decimal multiple of ``q`` among the first thousand (integers only when
    ``integer``) that jsonschema's float division rejects, or None."""
    a, s, _ = _step_of(q)
    dq = Decimal(repr(q))
    unit = a // math.gcd(a, 10**s)  # the least integer multiple
    for k in range(1, 1001):
        x: Any = unit * k if integer else float(dq * k)
        quotient = x / q
        if math.isfinite(quotient) and int(quotient) != quotient:
            return canonical(x)
    return None


def _exact_on_integers(q: float) -> bool:
    """True when jsonschema's float division by ``q`` accepts every integer n <= 2**53 that is a multiple of
    q's decimal d: for q < 1 whose double is within d * 2**-54 of d, n / q is within half a spacing of the
    integer n / d (or at least 2**53, where every double is an integer)."""
    d = Fraction(Decimal(repr(q)))
    return q < 1 and abs(Fraction(q) - d) / Fraction(q) < Fraction(1, 2**54)


def _ranges(lo: Any, lo_x: bool, hi: Any, hi_x: bool, integer: bool) -> NumberSpec:
    """The spec of the bounds alone (see the module docstring). Non-finite bounds: -inf below and +inf
    above are no bound, NaN is none (jsonschema's comparisons with it never fail), +inf below and -inf
    above admit no value. Raises CompileLimitError for an integer bound past :data:`MAX_BOUND_DIGITS`."""
    if isinstance(lo, float) and (math.isnan(lo) or lo == -math.inf):
        lo = None
    if isinstance(hi, float) and (math.isnan(hi) or hi == math.inf):
        hi = None
    if (lo is not None and lo == math.inf) or (hi is not None and hi == -math.inf):
        return NumberSpec(None, None, NONE, None)
    ilo = None if lo is None else (math.floor(lo) + 1 if lo_x else math.ceil(lo))
    ihi = None if hi is None else (math.ceil(hi) - 1 if hi_x else math.floor(hi))
    for bound in (ilo, ihi):
        if bound is not None and abs(bound).bit_length() > MAX_BOUND_DIGITS * 3.33:
            raise CompileLimitError(f"a bound of about {int(abs(bound).bit_length() / 3.3219):,} digits: at most "
                                    f"{MAX_BOUND_DIGITS} are compiled (a few automaton states each)")
    flo = -DBL_MAX if lo is None else max(Decimal(repr(_least_double(lo, lo_x))), -DBL_MAX)
    fhi = DBL_MAX if hi is None else min(Decimal(repr(_greatest_double(hi, hi_x))), DBL_MAX)
    integers = None if ilo is not None and ihi is not None and ilo > ihi else (ilo, ihi)
    floats = None if integer or flo > fhi else (flo, fhi)
    exponents = NONE if floats is None else ANY if lo is None and hi is None else ONE_DIGIT
    return NumberSpec(integers, floats, exponents, None)


def _capped(spec: NumberSpec, icap: int | None, fcap: Decimal) -> NumberSpec:
    """``spec`` with integer texts within [-icap, icap] (None: as they are), the others within [-fcap, fcap]
    and no exponent forms."""
    integers, floats = spec.integers, spec.floats
    if integers is not None and icap is not None:
        lo, hi = integers
        lo, hi = -icap if lo is None else max(lo, -icap), icap if hi is None else min(hi, icap)
        integers = (lo, hi) if lo <= hi else None
    if floats is not None:
        lo, hi = max(floats[0], -fcap), min(floats[1], fcap)
        floats = (lo, hi) if lo <= hi else None
    return NumberSpec(integers, floats, NONE, None)


def plan(lo: Any, lo_x: bool, hi: Any, hi_x: bool, multiple: Any, integer: bool) -> Plan:
    """What an ``integer`` (True) or a ``number`` within the bounds (``lo``/``hi``: int, float or None;
    ``lo_x``/``hi_x``: exclusive) that is a multiple of ``multiple`` (an int or a finite float > 0, or None)
    accepts, as the module docstring describes, with notes of what is not enforced: a ``multipleOf`` past
    :data:`MAX_REMAINDERS` or :data:`MAX_PRODUCT` (then only the bounds are), or one whose double is not its
    decimal. Builds the automata it sizes (cached in :data:`~..automata.nodes.LEAF_CACHE`). Raises CompileLimitError
    for an integer bound of more than :data:`MAX_BOUND_DIGITS` digits."""
    spec = _ranges(lo, lo_x, hi, hi_x, integer)
    if multiple is None:
        return Plan(spec)
    a, s, exact = _step_of(multiple)
    if a * (s + 3) > MAX_REMAINDERS:
        return Plan(spec, (("multipleOf", f"{multiple!r} needs more than {MAX_REMAINDERS:,} remainder states"),))
    notes = []
    if isinstance(multiple, int):
        capped = _capped(spec, None, Decimal(EXACT))
    elif exact:
        cap = _exact_cap(multiple)
        capped = _capped(spec, math.floor(cap), min(_decimal(cap), Decimal(EXACT).scaleb(-s)))
    else:  # integers within 2**53: past 1.8e308 jsonschema's division raises instead of answering
        capped = _capped(spec, EXACT, DBL_MAX)
        if not (integer and _exact_on_integers(multiple)):
            bad = _jsonschema_rejects(multiple, integer)
            notes.append(("multipleOf", f"{multiple!r} is not a binary fraction: its decimal multiples are "
                          "allowed, and jsonschema's float division rejects some" + (f" ({bad})" if bad else "")))
    ranged = number_dfa(capped)
    if ranged is not None and ranged.num_states * _multiples_dfa(a, s).num_states > MAX_PRODUCT:
        return Plan(spec, (("multipleOf", f"{multiple!r} with these bounds needs more than {MAX_PRODUCT:,} "
                            "automaton states"),))
    return Plan(replace(capped, step=(a, s)), tuple(notes))


# ---------------------------------------------------------------------------------------------------------
# building


def _magnitudes(spec: NumberSpec, negative: bool):
    """The reader of the magnitudes of the positive texts (or, ``negative``, of the negative ones) of a
    spec without step, or None when there are none."""
    readers: list = []
    if spec.integers is not None:
        lo, hi = spec.integers
        if negative:  # -m in [lo, hi] with m >= 0 ("-0" is the value 0)
            lo, hi = (0 if hi is None else max(-hi, 0)), (None if lo is None else -lo)
        else:
            lo = 0 if lo is None else max(lo, 0)
        if hi is None or lo <= hi:
            readers.append(IntegerForm(lo, hi))
    if spec.floats is not None:
        lo, hi = spec.floats
        if negative:  # -v in [lo, hi]; a bound -0.0 is the magnitude 0
            lo, hi = max(hi.copy_negate(), Decimal(0)), (Decimal(0) if lo == 0 else lo.copy_negate())
        else:
            lo = max(lo, Decimal(0))
        if lo <= hi:
            readers.append(PointForm(lo, hi))
            if spec.exponents != NONE:
                readers.append(ExponentForm(lo, hi, spec.exponents == ANY))
    if not readers:
        return None
    return readers[0] if len(readers) == 1 else Union(readers)


_EMPTY = ByteDFA(np.full((1, 256), -1, dtype=np.int32), np.zeros(1, dtype=bool), 0)


def _build(spec: NumberSpec) -> ByteDFA:
    """The minimal DFA of ``spec``'s texts (:data:`_EMPTY` when there are none)."""
    if spec.step is not None:
        ranged = number_dfa(replace(spec, step=None))
        if ranged is None:
            return _EMPTY
        both = product(ranged, _multiples_dfa(*spec.step), "and")
        return _EMPTY if is_empty(both) else D.minimize(both)
    positive, negative = _magnitudes(spec, False), _magnitudes(spec, True)
    if positive is None and negative is None:
        return _EMPTY
    dfa = explore(Signed(positive, negative))
    return _EMPTY if is_empty(dfa) else D.minimize(dfa)


def _multiples_dfa(a: int, s: int) -> ByteDFA:
    """The minimal DFA of :func:`~..automata.digits.multiples` (cached)."""
    return LEAF_CACHE.get(f"<multiples of {a}E-{s}>", build=lambda: D.minimize(multiples(a, s)))


def regex_of(spec: NumberSpec) -> str | None:
    """A regex (interegular's dialect) of exactly ``spec``'s texts where a short one is known: the
    unbounded number and integer (:mod:`..automata.lexical`) and integer ranges without a step (:mod:`..automata.ranges`);
    else None."""
    if spec == UNBOUNDED:
        return NUMBER
    if spec == INTEGERS:
        return INTEGER
    if spec.floats is None and spec.step is None and spec.integers is not None:
        return integer_range(*spec.integers)
    return None


def number_dfa(spec: NumberSpec) -> ByteDFA | None:
    """The minimal byte DFA of the texts ``spec`` allows, or None when it allows none. Kept in
    :data:`~..automata.nodes.LEAF_CACHE` under its regex or description (shared: callers never modify the arrays);
    counted against the compile budget when built under one. Raises CompileLimitError past
    :data:`~..automata.digits.MAX_EXPLORED` reader states."""
    dfa = LEAF_CACHE.get(regex_of(spec) or f"<{spec.describe()}>", build=lambda: _build(spec))
    return None if dfa is _EMPTY else dfa


@dataclass(eq=False)
class NumberNode(Node):
    """The grammar node of an integer or a number (``spec``), its automaton built directly. Its ``regex`` is a
    true regex where :func:`regex_of` knows one (so other engines can compile the call's regex), else a
    description ``<...>`` (then :meth:`regular` is False)."""

    spec: NumberSpec

    @property
    def regex(self) -> str:
        return regex_of(self.spec) or f"<{self.spec.describe()}>"

    def regular(self) -> bool:
        return regex_of(self.spec) is not None

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        dfa = number_dfa(self.spec)
        if dfa is None:
            raise SchemaError("the schema accepts no value (empty language)")
        return dfa
