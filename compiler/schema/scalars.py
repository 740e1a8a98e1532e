"""Keywords of the scalar types: ``enum``/``const`` (exact literal sets), strings (``format``, ``pattern``,
``minLength``/``maxLength``), integers and numbers (``minimum``/``maximum``, their exclusive forms and
``multipleOf``, built by :mod:`.numbers`).
Each function returns the grammar node of the values allowed, or None when the keywords admit none."""

from __future__ import annotations

import math
import sys
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
from fractions import Fraction
from typing import Any

import jsonschema

from ...core.patterns import python_schema
from .diagnostics import SchemaContext
from .keywords import ANNOTATIONS, is_number
from ..limits import CompileLimitError
from ..automata.lexical import LOOSE_INTEGRAL, WIDE_EXPONENT, canonical
from ..automata.nodes import LOOSE_REQUIRED, ArrayNode, Leaf, Literals, MembersNode, Node, alt
from .numbers import MAX_REMAINDERS, NONE, ONE_DIGIT, NumberNode, NumberSpec, _ranges, _step_of, number_dfa, plan
from .strings import string_node


def enum(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The literal node of ``const``/``enum`` values that also satisfy the schema's other keywords (checked
    with jsonschema), each written as canonical JSON; integral numbers also in their other spelling (1 and
    1.0). None when no value is left; raises SchemaError when ``enum`` is not a list."""
    if "const" in schema:
        values = [schema["const"]]
    else:
        values = schema["enum"]
        if not isinstance(values, list):
            raise ctx.error(path, "'enum' must be a list")
    rest = {k: v for k, v in schema.items() if k not in ("enum", "const") and k not in ANNOTATIONS}
    if "enum" in schema and "const" in schema:
        values = [v for v in values if v in schema["enum"]]
    if rest:
        # check each value against its sibling keywords (with the root's definitions for $ref)
        try:
            cls = jsonschema.validators.validator_for(ctx.root)
            validator = cls({**ctx.python_definitions(), **python_schema(rest)},  # formats asserted
                            format_checker=cls.FORMAT_CHECKER)
            values = [v for v in values if validator.is_valid(v)]
        except Exception:  # a sibling keyword jsonschema cannot evaluate: keep every value
            ctx.note("not enforced", path, "enum", "sibling keywords not checked")
    if not values:
        return None
    if ctx.loose:
        return alt([loose_value(v) for v in values])
    texts = []
    for v in values:
        texts.append(canonical(v))
        # JSON Schema compares numbers by value: 1 and 1.0 are the same enum value (the other spelling
        # only where it is the same value exactly: 2**60 + 1 has no double)
        if isinstance(v, float) and v.is_integer():
            texts.append(canonical(int(v)))
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) <= sys.float_info.max and float(v) == v:
            texts.append(canonical(float(v)))
    return Literals(list(dict.fromkeys(texts)))


#: Significant digits of the decimal bounds of a loose number (:func:`_reads_as`).
_LOOSE_DIGITS = 20


def _reads_as(d: float) -> tuple[Decimal, Decimal]:
    """The decimals that json.loads reads as the double ``d`` (finite), and a little more: from the midpoint
    with the double below to the midpoint with the double above, rounded outwards to :data:`_LOOSE_DIGITS`
    significant digits (the exact midpoints have up to 1,074 digits; rounding outwards only widens)."""
    x = Fraction(d)
    down, up = math.nextafter(d, -math.inf), math.nextafter(d, math.inf)
    lo = (x + Fraction(down)) / 2 if math.isfinite(down) else x
    hi = (x + Fraction(up)) / 2 if math.isfinite(up) else x
    context = Context(prec=_LOOSE_DIGITS)
    with localcontext(context, rounding=ROUND_FLOOR):
        below = Decimal(lo.numerator) / Decimal(lo.denominator)
    with localcontext(context, rounding=ROUND_CEILING):
        above = Decimal(hi.numerator) / Decimal(hi.denominator)
    return below, above


def _loose_floats(lo: float, hi: float) -> list[Node]:
    """The loose nodes of the point and exponent texts whose double lies in [``lo``, ``hi``]: the point and
    one-digit exponent forms within the decimals that read as a double there (:func:`_reads_as`), and every
    text in the other exponent forms (:data:`~..automata.lexical.WIDE_EXPONENT`, of any value: exactly they
    cost about 1,500 states a value, and only unbounded numbers are written so)."""
    below, above = _reads_as(lo)[0], _reads_as(hi)[1]
    return [NumberNode(NumberSpec(None, (below, above), ONE_DIGIT, None)), Leaf(WIDE_EXPONENT)]


def loose_value(value: Any) -> Node:
    """A loose node of one ``const``/``enum`` value: every text the grammar may write whose value jsonschema
    finds equal to it, and more. A string has one text (canonical, :mod:`..automata.lexical`); a number is
    equal to every number json.loads reads as the same value (``1``, ``1.0``, ``1e0``,
    ``0.99999999999999999999`` for 1; an int exactly, a float by the decimals that read as its double) in
    the integer, point and one-digit exponent forms, and a float stands for every number in the other
    exponent forms (:func:`_loose_floats`: ``10e-1``, ``0.1e1``, of any value); an object's members come
    in any order (the first :data:`LOOSE_REQUIRED` required, the others optional), each value loose in turn, as
    an array's items are."""
    if value is None or isinstance(value, (bool, str)):
        return Literals([canonical(value)])
    if isinstance(value, (int, float)) and (isinstance(value, int) or math.isfinite(value)):
        parts: list[Node] = []
        if isinstance(value, int) or value.is_integer():
            parts.append(NumberNode(NumberSpec((int(value), int(value)), None, NONE, None)))
        try:
            exact = float(value) == value  # a float always; an int within a double's precision
        except OverflowError:
            exact = False
        return alt(parts + (_loose_floats(float(value), float(value)) if exact else []))
    if isinstance(value, list):
        if not value:
            return Literals(["[]"])
        items = [loose_value(v) for v in value]
        return ArrayNode(items, None, len(items), len(items))
    if isinstance(value, dict):
        if not value:
            return Literals(["{}"])
        pairs = [(Literals([canonical(k)]), loose_value(v)) for k, v in value.items()]
        return MembersNode(pairs, [i < LOOSE_REQUIRED for i in range(len(pairs))])
    return Literals([canonical(value)])




def string(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The node of a string: ``format``, ``pattern`` and ``minLength``/``maxLength`` (in decoded code points)
    enforced together (:func:`.strings.string_node`); what is not enforced is noted. None when the lengths
    admit no string; raises SchemaError for malformed lengths."""
    return string_node(ctx, schema, path)


def bounds(schema: dict[str, Any]) -> tuple[Any, bool, Any, bool]:
    """(lower, exclusive, upper, exclusive) across draft 4 (boolean) and draft 6+ (number) spellings; a bound
    that is absent or not a number is None."""
    lo, hi = schema.get("minimum"), schema.get("maximum")
    lo_x = hi_x = False
    emin, emax = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if emin is True:
        lo_x = True
    elif is_number(emin) and (lo is None or emin >= lo):
        lo, lo_x = emin, True
    if emax is True:
        hi_x = True
    elif is_number(emax) and (hi is None or emax <= hi):
        hi, hi_x = emax, True
    if lo is not None and not is_number(lo):
        lo = None
    if hi is not None and not is_number(hi):
        hi = None
    return lo, lo_x, hi, hi_x


def _multiple(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Any:
    """The ``multipleOf`` of ``schema`` (int or float > 0), or None; raises SchemaError when malformed."""
    if "multipleOf" not in schema:
        return None
    q = schema["multipleOf"]
    if not is_number(q) or not q > 0 or (isinstance(q, float) and not math.isfinite(q)):
        raise ctx.error(path, f"malformed multipleOf ({q!r}): a number above 0 is expected")
    return q


def _numeric(ctx: SchemaContext, schema: dict[str, Any], path: list[str], integer: bool) -> Node | None:
    """The node of an integer (``integer``) or a number within its bounds and ``multipleOf``, exactly as
    :mod:`.numbers` describes; what is not enforced is noted. None when no value fits."""
    lo, lo_x, hi, hi_x = bounds(schema)
    if ctx.loose:
        return _loose_numeric(ctx, lo, lo_x, hi, hi_x, _multiple(ctx, schema, path), integer, path)
    try:
        found = plan(lo, lo_x, hi, hi_x, _multiple(ctx, schema, path), integer)
        empty = number_dfa(found.spec) is None
    except CompileLimitError as exc:
        raise CompileLimitError(f"{ctx.where(path)}: {exc}") from None
    for keyword, detail in found.notes:
        ctx.note("not enforced", path, keyword, detail)
    return None if empty else NumberNode(found.spec)


#: A float ``multipleOf`` whose double is n / 2**k with n below this is told apart on integer texts when loose.
_SMALL_STEP = 1 << 10


def _loose_integers(lo: int | None, hi: int | None, q: Any) -> list[Node]:
    """The loose nodes of the integer texts in [``lo``, ``hi``] (None: unbounded) that jsonschema may find
    multiples of ``q`` (None: no step). An int ``q``: its multiples (Python's ``%`` is exact). A float ``q``
    that is n / 2**k with a small n (1.5, 3.0, 0.25: n < :data:`_SMALL_STEP`): its decimal multiples within
    C = min(2**53, 2**42 * q), every integer beyond: there ``float(v)`` is v and v / q is within 2**42, where
    a double's spacing is at most 2**-10, below the distance 1/n of a quotient that is no integer from the
    nearest integer, so the division jsonschema makes answers exactly. Any other float: every integer."""
    step, cap = None, None
    if q is not None and (isinstance(q, int) or q.as_integer_ratio()[0] < _SMALL_STEP):
        a, s, _ = _step_of(q)
        step = (a, s) if a * (s + 3) <= MAX_REMAINDERS else None
        cap = None if isinstance(q, int) or step is None else min(2**53, math.floor(2**42 * q))
    ranges = [(lo, hi, step)]
    if cap is not None:  # the multiples within the cap, every integer beyond it
        ranges = [(lo if lo is None else max(lo, -cap), cap if hi is None else min(hi, cap), step),
                  (lo, -cap - 1 if hi is None else min(hi, -cap - 1), None),
                  (cap + 1 if lo is None else max(lo, cap + 1), hi, None)]
    out = []
    for a, b, st in ranges:
        if a is not None and b is not None and a > b:
            continue
        spec = NumberSpec((a, b), None, NONE, st)
        if number_dfa(spec) is not None:
            out.append(NumberNode(spec))
    return out


def _loose_numeric(ctx: SchemaContext, lo: Any, lo_x: bool, hi: Any, hi_x: bool, q: Any, integer: bool,
                   path: list[str]) -> Node | None:
    """The loose node of an integer or a number within bounds and a multiple of ``q``: every text the grammar
    may write whose value jsonschema finds valid, and more. Integer texts are compared exactly, and kept to
    the multiples of ``q`` where jsonschema's verdict is known (:func:`_loose_integers`); for an integer, or a
    multiple of an integral ``q``, every other text that may read as an integral double
    (:data:`~..automata.lexical.LOOSE_INTEGRAL`); for a number, the point and one-digit exponent texts within
    the bounds widened to every decimal that reads as a double within them (:func:`_reads_as`), the
    multiples of another ``q`` among them not told apart (``not: {multipleOf: 0.5}`` subtracts every number
    that is not an integer text), and every text in the other exponent forms
    (:data:`~..automata.lexical.WIDE_EXPONENT`). None when none is left."""
    try:
        spec = _ranges(lo, lo_x, hi, hi_x, False)
    except CompileLimitError as exc:
        raise CompileLimitError(f"{ctx.where(path)}: {exc}") from None
    parts: list[Node] = []
    if spec.integers is not None:
        parts += _loose_integers(*spec.integers, q)
    integral_step = isinstance(q, int) or (isinstance(q, float) and q.is_integer())
    if integer or (integral_step and spec.floats is not None):
        parts.append(Leaf(LOOSE_INTEGRAL))  # a multiple of an integer is integral
    elif spec.floats is not None:
        parts += _loose_floats(float(spec.floats[0]), float(spec.floats[1]))
    return alt(parts)


def integer(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The node of an integer (any number of digits) within its bounds and a multiple of ``multipleOf``,
    exactly (:mod:`.numbers`). None when no integer fits; raises SchemaError for a malformed ``multipleOf``."""
    return _numeric(ctx, schema, path, True)


def number(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The node of a number within its bounds and a multiple of ``multipleOf``, exactly on the forms of
    :mod:`.numbers` (any finite double as json.dumps writes it, any integer). None when no number fits;
    raises SchemaError for a malformed ``multipleOf``."""
    return _numeric(ctx, schema, path, False)
