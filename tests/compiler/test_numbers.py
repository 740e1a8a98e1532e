"""Integers and numbers (:mod:`callmaybe.compiler.schema.numbers`): bounds, ``multipleOf`` and the number forms,
against jsonschema (Draft 2020-12, as the runtime checks calls after json.loads).

Every accepted text must be valid for jsonschema (sound, on any text); the canonical text (json.dumps) of
every valid value must be accepted (complete), except the documented limits: an integer schema takes
integer texts only (``3.0``), and under ``multipleOf`` exponent forms are not written and values stay within
2**53 where jsonschema's float division must be exact (see :func:`limit`).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.schema import numbers as N
from callmaybe.compiler.grammar import schema_dfa
from callmaybe.compiler.automata.lexical import INTEGER, NUMBER, canonical
from callmaybe.compiler.limits import CompileLimitError
from callmaybe.compiler.automata.nodes import LEAF_CACHE
from callmaybe.core.errors import SchemaError

DBL_MAX = sys.float_info.max
INT64 = (-(2**63), 2**63 - 1)
_DFAS: dict[str, Any] = {}


def compiled(schema: Any):
    key = json.dumps(schema)
    if key not in _DFAS:
        _DFAS[key] = schema_dfa(schema)
    return _DFAS[key]


def accepts(schema: Any, text: str) -> bool:
    return compiled(schema)[0].accepts(text.encode())


def valid(schema: Any, value: Any) -> bool:
    """jsonschema's verdict; False where it raises (an int past 1.8e308 divided by a float ``multipleOf``)."""
    try:
        return Draft202012Validator(schema).is_valid(value)
    except OverflowError:
        return False


def limit(schema: dict, value: Any) -> bool:
    """True when the grammar leaves ``value`` out by design although jsonschema may take it (the module
    docstring): a float for an integer schema; under ``multipleOf`` an exponent form or a value past the
    exactness bound."""
    if schema.get("type") == "integer" and isinstance(value, float):
        return True
    q = schema.get("multipleOf")
    if q is None:
        return False
    if isinstance(value, float) and "e" in repr(value):
        return True
    if isinstance(q, int):
        return isinstance(value, float) and abs(value) > 2**53
    num, den = q.as_integer_ratio()
    odd = num >> ((num & -num).bit_length() - 1)
    cap = Fraction(2**53) * Fraction(num, den) / odd
    if isinstance(value, float):
        places = max(-Decimal(repr(q)).normalize().as_tuple().exponent, 0)
        cap = min(cap, Fraction(2**53) / 10**places)
    return abs(Fraction(value)) > cap


def decimal_multiple(schema: dict, value: Any) -> bool:
    """True when the canonical text of ``value`` is a multiple of the decimal of ``multipleOf`` (or there is
    none). jsonschema also takes some values that are not (2**53 + 1 for 2.0: its double is even)."""
    q = schema.get("multipleOf")
    if q is None:
        return True
    ratio = Fraction(Decimal(canonical(value))) / Fraction(Decimal(repr(q) if isinstance(q, float) else q))
    return ratio.denominator == 1


def check_value(schema: dict, value: Any) -> None:
    """The canonical text of ``value``: accepted => valid; valid and a decimal multiple => accepted, outside
    the design limits."""
    text = canonical(value)
    got = accepts(schema, text)
    ok = valid(schema, value)
    if got:
        assert ok, f"accepted {text}, invalid for {schema}"
    elif ok and decimal_multiple(schema, value):
        assert limit(schema, value), f"rejected {text}, valid for {schema}"


def respellings(value: float) -> list[str]:
    """Other texts of the decimal of ``repr(value)`` in the forms: the point moved within the mantissa and
    the exponent moved to match (``0.0125``: ``1.25e-2``, ``12.5e-3``, ``0.125e-1``, ``125e-4``), repr's
    form first (none for 0)."""
    v = Decimal(repr(value))
    if v == 0:
        return ["", "0e0", "0.0e5"] if not v.is_signed() else ["", "-0e0", "-0.0e5"]
    sign = "-" if v < 0 else ""
    sig = "".join(map(str, v.as_tuple().digits)).strip("0") or "0"
    e = v.adjusted()  # v = sig[0].sig[1:] * 10**e
    out = [f"{sign}{sig[0]}{'.' + sig[1:] if len(sig) > 1 else ''}e{e}", f"{sign}0.{sig}e{e + 1}"]
    if len(sig) >= 2 and e - 1 <= 292:
        out.append(f"{sign}{sig[:2]}{'.' + sig[2:] if len(sig) > 2 else ''}e{e - 1}")
    if len(sig) <= 16 and e - len(sig) + 1 <= 292:
        out.append(f"{sign}{sig}e{e - len(sig) + 1}")
    return [t for t in out if Decimal(t) == v and not (t.lstrip("-").startswith("0.") and e + 1 > 308)]


def check_respellings(schema: dict, value: Any) -> None:
    """Every spelling of the same decimal gets the verdict of the canonical text (acceptance depends on the
    decimal value alone within the forms; with bounds, exponents come after one digit only)."""
    if isinstance(value, float) and "multipleOf" not in schema and schema.get("type") == "number":
        want = accepts(schema, canonical(value))
        texts = respellings(value)
        bounded = any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
        for text in texts[:1] if bounded else texts:
            if text:
                assert accepts(schema, text) is want, (text, canonical(value), schema)
        if bounded:
            assert not any(accepts(schema, t) for t in texts[1:] if not t.lstrip("-")[1:2] in ("", ".", "e"))


def check_text(schema: dict, text: str) -> None:
    """Any text: accepted => JSON whose value is valid (and finite)."""
    if accepts(schema, text):
        value = json.loads(text)
        assert not (isinstance(value, float) and math.isinf(value)), text
        assert valid(schema, value), f"accepted {text}, invalid for {schema}"


# --------------------------------------------------------------------------------------------------------------
# the issue's examples, exact verdicts
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, ok", [
    ("1", False), ("1.0", False), ("1.5", False), ("0", False), ("0.0", False), ("-0.0", False), ("0.5", True),
    ("0.9999999999999999", True), ("1e-05", True), ("5e-324", True), ("1e-400", False), ("1e+00", False),
    ("0.5e0", False), ("5e-1", True), ("1.0e0", False), ("9.99e-1", True), ("0e0", False), ("0.0e5", False),
    ("0.99999999999999999", False),  # reads as 1.0
])
def test_open_unit_interval(text, ok):
    schema = {"type": "object", "properties": {"p": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}}}
    assert accepts(schema, '{"p": ' + text + "}") is ok
    if text != "0.5e0":  # valid, and with bounds an exponent comes after one nonzero digit only
        assert valid(schema, json.loads('{"p": ' + text + "}")) is ok


@pytest.mark.parametrize("text, ok", [
    ("-300", False), ("-273.16", False), ("-273.15", True), ("-273.150", True), ("-273.14", True), ("0", True),
    ("-2.7315e+02", True), ("-2.7316e2", False), ("-27315e-2", False), ("-0.27315e3", False),
    ("-273.15000e0", False), ("-2.7315000e2", True), ("1e+308", True), ("1.7976931348623157e+308", True),
    ("1e309", False), ("-273", True), ("-274", False),
])
def test_minimum_below_zero(text, ok):
    assert accepts({"type": "number", "minimum": -273.15}, text) is ok


@pytest.mark.parametrize("schema, text, ok", [
    ({"type": "integer", "multipleOf": 5}, "7", False),
    ({"type": "integer", "multipleOf": 5}, "10", True),
    ({"type": "integer", "multipleOf": 5}, "-15", True),
    ({"type": "integer", "multipleOf": 5}, "0", True),
    ({"type": "integer", "multipleOf": 5}, "12345678901234567890", True),
    ({"type": "integer", "multipleOf": 5}, "12345678901234567891", False),
    ({"type": "integer", "multipleOf": 5}, "10.0", False),
    ({"type": "number", "multipleOf": 0.25}, "2.7", False),
    ({"type": "number", "multipleOf": 0.25}, "2.5", True),
    ({"type": "number", "multipleOf": 0.25}, "2.50", True),
    ({"type": "number", "multipleOf": 0.25}, "2.75", True),
    ({"type": "number", "multipleOf": 0.25}, "2.125", False),
    ({"type": "number", "multipleOf": 0.25}, "100.0", True),
    ({"type": "number", "multipleOf": 0.25}, "3", True),
    ({"type": "number", "multipleOf": 0.25}, "-0.0", True),
    ({"type": "number", "multipleOf": 0.25}, "2.5e0", False),  # no exponent form under multipleOf
    ({"type": "number", "multipleOf": 5}, "10.0", True),
    ({"type": "number", "multipleOf": 5}, "10.5", False),
    ({"type": "number", "multipleOf": 5}, "123456789012345678900", True),
    ({"type": "number", "multipleOf": 1.5}, "4.5", True),
    ({"type": "number", "multipleOf": 1.5}, "-4.5", True),
    ({"type": "number", "multipleOf": 1.5}, "35", False),
])
def test_multiple_of(schema, text, ok):
    assert accepts(schema, text) is ok
    assert compiled(schema)[1] == []
    if ok:
        assert valid(schema, json.loads(text))


@pytest.mark.parametrize("text", [
    "2512292042121000001", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
    "-" + "9" * 60,
])
def test_integers_have_any_number_of_digits(text):
    """The order id 2512292042121000001 is written whole, not cut to 251229204212100."""
    for schema in ({"type": "integer"}, {"type": "number"}, {"type": ["integer", "null"]}):
        assert accepts(schema, text)
    assert accepts({"type": "integer", "minimum": INT64[0], "maximum": INT64[1]}, text) is (
        INT64[0] <= int(text) <= INT64[1])


@pytest.mark.parametrize("text, ok", [
    ("1e100", True), ("1e+100", True), ("1E100", True), ("1e+308", True), ("1e308", True), ("1e+0308", True),
    ("1.7976931348623157e+308", True), ("1.7976931348623157e308", True), ("1.79769313486231570000e+308", True),
    ("1.7976931348623158e+308", False), ("1.8e308", False), ("2e308", False), ("1e309", False),
    ("-1.7976931348623157e+308", True), ("-1e309", False), ("5e-324", True), ("1e-400", True),
    ("2.0", True), ("-0.0", True), ("1.5e-07", True), ("123456789012345678901", True), ("0.0001", True),
    ("1234567890123456.5", True), ("12345678901234567.5", False), ("9" * 400, True), ("9" * 400 + ".5", False),
    ("0." + "0" * 20 + "1", True), ("0." + "0" * 21 + "1", False), ("0." + "0" * 40, True), ("-0", True),
    ("12e3", True), ("0.5e1", True), ("-12.5e-3", True), ("0e5", True), ("-0.0e-3", True), ("12.5e292", True),
    ("12.5e293", False), ("0.5e308", True), ("0.5e309", False), ("0.e5", False), ("1.e5", False),
    ("01", False), ("1.", False), (".5", False), ("1e", False), ("+1", False), ("1e+-5", False), ("1e5.0", False),
])
def test_unbounded_number(text, ok):
    assert accepts({"type": "number"}, text) is ok
    if ok:
        value = json.loads(text)
        assert isinstance(value, int) or math.isfinite(value)


def test_every_float64_repr_is_a_form():
    for x in (DBL_MAX, -DBL_MAX, 5e-324, 2.2250738585072014e-308, 1e16, 9999999999999998.0, 1e-4, 9.9e-5, 0.1,
              1 / 3, 2**53, 2.0**63, 1e22, 1e23):
        assert accepts({"type": "number"}, canonical(x)), canonical(x)


def test_number_regex_is_the_readers_automaton():
    """lexical.NUMBER and INTEGER (regexes, for the index header and other engines) and the automata built
    directly are one language: equal minimal DFAs."""
    for regex, spec in ((NUMBER, N.UNBOUNDED), (INTEGER, N.INTEGERS)):
        a, b = D.from_regex(regex), N._build(spec)
        assert (a.transitions.tolist(), a.accepting.tolist()) == (b.transitions.tolist(), b.accepting.tolist())


def test_plain_scalars_compile_in_milliseconds():
    for schema in ({"type": "number"}, {"type": "integer"}, {"type": "number", "minimum": 0}):
        LEAF_CACHE.clear()
        t = time.perf_counter()
        dfa, _ = schema_dfa(schema)
        assert time.perf_counter() - t < 0.5
        assert dfa.num_states < 120


# --------------------------------------------------------------------------------------------------------------
# notes and errors
# --------------------------------------------------------------------------------------------------------------


def test_bounds_and_steps_are_enforced_without_notes():
    for schema in ({"type": "number", "minimum": 0, "exclusiveMaximum": 1e300},
                   {"type": "integer", "maximum": 1.5, "multipleOf": 7}, {"type": "number", "multipleOf": 1.5}):
        assert compiled(schema)[1] == []


def test_decimal_step_is_noted():
    """0.1 is not a binary fraction: its decimal multiples are accepted, and jsonschema rejects 0.3."""
    dfa, notes = schema_dfa({"type": "number", "multipleOf": 0.1})
    assert [(n.kind, n.keyword) for n in notes] == [("not enforced", "multipleOf")]
    assert "(0.3)" in notes[0].detail
    assert dfa.accepts(b"0.3") and dfa.accepts(b"0.2") and dfa.accepts(b"7") and not dfa.accepts(b"0.35")
    assert not valid({"multipleOf": 0.1}, 0.3)


def test_large_step_is_noted_and_bounds_stay():
    dfa, notes = schema_dfa({"type": "integer", "minimum": 0, "multipleOf": 10**9 + 7})
    assert [(n.kind, n.keyword) for n in notes] == [("not enforced", "multipleOf")]
    assert dfa.accepts(b"5") and not dfa.accepts(b"-5")


@pytest.mark.parametrize("q", [0, -1, "5", True, None])
def test_malformed_step(q):
    with pytest.raises(SchemaError, match="multipleOf"):
        schema_dfa({"type": "number", "multipleOf": q})


@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5},
    {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1},
    {"type": "number", "minimum": 2e308},
    {"type": "integer", "minimum": 0.5, "maximum": 0.7},
])
def test_no_value_in_range(schema):
    with pytest.raises(SchemaError, match="no value"):
        schema_dfa(schema)
    optional = {"type": "object", "properties": {"a": schema, "b": {"type": "null"}}}
    assert accepts(optional, '{"b": null}') and not accepts(optional, '{"a": 1}')


def test_huge_steps_past_the_product_bound_are_noted():
    _, notes = schema_dfa({"type": "number", "multipleOf": 997})
    assert [(n.kind, n.keyword) for n in notes] == [("not enforced", "multipleOf")]
    assert "automaton states" in notes[0].detail


def test_exploration_backstop(monkeypatch):
    from callmaybe.compiler.automata import digits

    monkeypatch.setattr(digits, "MAX_EXPLORED", 10)
    LEAF_CACHE.clear()
    with pytest.raises(CompileLimitError, match="more than 10 states"):
        N._build(N.NumberSpec((0, 10**30), None, N.NONE, None))
    with pytest.raises(CompileLimitError, match="parameter 'n': a number's automaton needs more than 10 states"):
        schema_dfa({"type": "object", "properties": {"n": {"type": "integer", "maximum": 10**30}}})
    LEAF_CACHE.clear()


def test_a_hostile_bound_is_refused_not_hung():
    """A bound of 1,000 digits would take seconds to minimize (4,000: 30 s): refused at once."""
    t = time.perf_counter()
    with pytest.raises(CompileLimitError, match="parameter 'n': a bound of about 1,000 digits: at most 400"):
        schema_dfa({"type": "object", "properties": {"n": {"type": "number", "maximum": 10**1000}}})
    assert time.perf_counter() - t < 1
    assert accepts({"type": "integer", "maximum": 10**399}, "9" * 399)


@pytest.mark.parametrize("value, texts, not_texts", [
    (1e16, ["1e+16", "10000000000000000"], ["10000000000000000.0"]),
    (2**53, ["9007199254740992", "9007199254740992.0"], []),
    (2**60 + 1, ["1152921504606846977"], ["1.152921504606847e+18"]),
    (1.0, ["1.0", "1"], []),
    (1e300, ["1e+300", str(int(1e300))], []),
])
def test_enum_numbers_in_both_spellings_when_exact(value, texts, not_texts):
    """An integral number in an enum is also accepted in its other spelling, when that is the same value."""
    dfa, _ = schema_dfa({"enum": [value]})
    for t in texts:
        assert dfa.accepts(t.encode()), t
        assert valid({"enum": [value]}, json.loads(t))
    for t in not_texts:
        assert not dfa.accepts(t.encode()), t


def test_the_runtime_keeps_integers_without_a_double():
    """A number field holding an int is written as a float only where the double is the same value."""
    from callmaybe.runtime.decoding.calls import type_numbers

    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    assert type_numbers({"x": 2}, schema) == {"x": 2.0} and isinstance(type_numbers({"x": 2}, schema)["x"], float)
    for n in (2**53 + 1, 10**400, 2512292042121000001):
        assert type_numbers({"x": n}, schema) == {"x": n} and isinstance(type_numbers({"x": n}, schema)["x"], int)


# --------------------------------------------------------------------------------------------------------------
# properties against jsonschema
# --------------------------------------------------------------------------------------------------------------

SPECIAL = [0, 0.0, -0.0, 1, -1, 0.1, -273.15, 0.5, 1.5, 2**53, 2**53 + 1, 2.0**63, INT64[0], INT64[1], 5e-324,
           -5e-324, 1e-300, 2.2250738585072014e-308, 1e16, 1e22, 1e300, DBL_MAX, -DBL_MAX, 10**400, -(10**400),
           12345678.9, 1e-5, 0.0001]
bound_values = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**20), 10**20),
    st.decimals(places=2, min_value=-1000, max_value=1000, allow_nan=False).map(float),
)


@st.composite
def bounded(draw, type_: str) -> dict:
    schema: dict[str, Any] = {"type": type_}
    for low in (True, False):
        if draw(st.booleans()):
            key = draw(st.sampled_from(["minimum", "exclusiveMinimum"] if low else ["maximum", "exclusiveMaximum"]))
            schema[key] = draw(bound_values)
    return schema


def near_values(schema: dict) -> st.SearchStrategy:
    """Values near the schema's bounds and steps: the bounds, their neighbouring doubles and integers,
    multiples around them, and any number."""
    points = [v for k, v in schema.items() if k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")]
    out: list[Any] = list(SPECIAL)
    for p in points:
        f = float(p) if abs(p) <= DBL_MAX else (DBL_MAX if p > 0 else -DBL_MAX)
        out += [p, f, math.nextafter(f, math.inf), math.nextafter(f, -math.inf)]
        if math.isfinite(f) and abs(f) < 1e300:
            out += [math.floor(p), math.ceil(p), math.floor(p) - 1, math.ceil(p) + 1]
    q = schema.get("multipleOf")
    if q is not None:
        dq = Decimal(repr(q))
        for p in points + [0]:
            if abs(p) < 1e17:
                k = int(Decimal(repr(float(p))) / dq)
                for j in range(k - 2, k + 3):
                    m = Decimal(j) * dq
                    out += [float(m)] + ([int(m)] if m == m.to_integral_value() else [])
    out = [x for x in out if not (isinstance(x, float) and math.isinf(x))]
    return st.one_of(st.sampled_from(out), st.floats(allow_nan=False, allow_infinity=False),
                     st.integers(-(10**25), 10**25))


@st.composite
def number_texts(draw) -> str:
    """Texts of numbers in every spelling (forms or not, finite or not)."""
    sign = draw(st.sampled_from(["", "-"]))
    mantissa = draw(st.sampled_from(["0", "1", "9", "17976931348623157", "5", "2", "12", "273"]) |
                    st.from_regex(r"[1-9][0-9]{0,25}", fullmatch=True))
    point = draw(st.sampled_from(["", ".0", ".5", ".15", ".7976931348623157", ".7976931348623158", ".25"]) |
                 st.from_regex(r"\.[0-9]{1,25}", fullmatch=True))
    if len(mantissa) > 1 and draw(st.booleans()) and point:  # 1.7976931348623157 and the like
        point, mantissa = "." + mantissa[1:] + point[1:], mantissa[0]
    exponent = draw(st.sampled_from(["", "", "e308", "e+308", "e307", "e309", "E-324", "e-325", "e-05", "e2", "e0",
                                     "e292", "e+0293", "e-0", "e0308", "e290"]) |
                    st.from_regex(r"[eE][+-]?[0-9]{1,4}", fullmatch=True))
    return sign + mantissa + point + exponent


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(data=st.data())
def test_number_bounds_agree_with_jsonschema(data):
    schema = data.draw(bounded("number"), label="schema")
    try:
        compiled(schema)
    except SchemaError:  # no number in range: no double satisfies the bounds
        assert not any(valid(schema, x) for x in (0, 1, -1, *SPECIAL))
        return
    assert compiled(schema)[1] == []
    for i in range(10):
        value = data.draw(near_values(schema), label=f"value {i}")
        check_value(schema, value)
        check_respellings(schema, value)
    for i in range(10):
        check_text(schema, data.draw(number_texts(), label=f"text {i}"))


@SETTINGS
@given(data=st.data())
def test_integer_bounds_agree_with_jsonschema(data):
    schema = data.draw(bounded("integer"), label="schema")
    if data.draw(st.booleans()):
        schema["multipleOf"] = data.draw(st.sampled_from([1, 2, 3, 5, 7, 10, 12, 60, 100, 128, 0.5, 0.25, 1.5, 2.0]))
    try:
        compiled(schema)
    except SchemaError:
        return
    notes = compiled(schema)[1]
    if notes:  # a step whose product with a range of hundreds of digits is past the bound
        assert [(n.keyword, "automaton states" in n.detail) for n in notes] == [("multipleOf", True)]
        return
    for i in range(10):
        check_value(schema, data.draw(near_values(schema), label=f"value {i}"))
    for i in range(5):
        check_text(schema, data.draw(number_texts(), label=f"text {i}"))


@SETTINGS
@given(data=st.data())
def test_number_steps_agree_with_jsonschema(data):
    schema = {"type": "number", "multipleOf": data.draw(st.sampled_from([1, 2, 5, 7, 10, 25, 0.5, 0.25, 1.5, 0.125,
                                                                         2.0, 0.75, 6.25]))}
    if data.draw(st.booleans()):
        schema.update(data.draw(bounded("number")))
        schema["type"] = "number"
    try:
        compiled(schema)
    except SchemaError:
        return
    notes = compiled(schema)[1]
    if notes:  # a step whose product with a range of hundreds of digits is past the bound
        assert [(n.keyword, "automaton states" in n.detail) for n in notes] == [("multipleOf", True)]
        return
    for i in range(12):
        check_value(schema, data.draw(near_values(schema), label=f"value {i}"))
    for i in range(8):
        check_text(schema, data.draw(number_texts(), label=f"text {i}"))


@SETTINGS
@given(x=st.floats(allow_nan=False, allow_infinity=False) | st.integers() | st.sampled_from(SPECIAL))
def test_unbounded_accepts_every_value(x):
    assert accepts({"type": "number"}, canonical(x))
    assert accepts({"type": "integer"}, canonical(x)) is isinstance(x, int)


@SETTINGS
@given(text=number_texts())
def test_unbounded_number_texts(text):
    """A text is accepted iff it is in the forms and, read as a decimal, at most the largest double."""
    got = accepts({"type": "number"}, text)
    value = json.loads(text)
    integer = "." not in text and "e" not in text.lower()
    form = integer or _point_form(text) or _exponent_form(text)
    if form and not integer and len(text.lstrip("-").split(".")[0].lower().split("e")[0]) > 16:
        form = False  # at most 16 integer digits before a point or an exponent
    in_range = integer or abs(Decimal(text)) <= Decimal(repr(DBL_MAX))
    assert got is bool(form and in_range), text
    if got:
        assert isinstance(value, int) or math.isfinite(value)


def _point_form(text: str) -> bool:
    body = text.lstrip("-")
    if "e" in body.lower() or "." not in body:
        return False
    i, f = body.split(".")
    if not f or (len(i) > 1 and i[0] == "0") or len(i) > 16:
        return False
    return i != "0" or not f.strip("0") or len(f) - len(f.lstrip("0")) <= 20


def _exponent_form(text: str) -> bool:
    """A mantissa in the integer or point forms, then an exponent: up to 292 after 2+ integer digits, 308
    after ``0.`` (the value at most the largest double otherwise, checked by the caller)."""
    body = text.lstrip("-").lower()
    if "e" not in body:
        return False
    m, _, x = body.partition("e")
    digits = x.lstrip("+-")
    if not digits.isdigit() or len(x) - len(digits) > 1 or not (m.isdigit() and (m == "0" or m[0] != "0")
                                                               or _point_form(m)):
        return False
    whole = m.split(".")[0]
    if Decimal(m) == 0 or x.startswith("-"):
        return True
    return int(digits) <= (292 if len(whole) >= 2 else 308 if whole == "0" else 10**9)


def test_decimal_step_accepts_its_decimal_multiples():
    """For a step whose double is not its decimal, the decimal multiples (noted: jsonschema's division
    rejects some)."""
    schema = {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 2}
    for k in range(0, 201):
        assert accepts(schema, str(Decimal(k) / 100)), k
    for text in ("0.005", "0.011", "2.01", "-0.01", "1.999"):
        assert not accepts(schema, text)


# --------------------------------------------------------------------------------------------------------------
# the JSON Schema Test Suite
# --------------------------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CALLMAYBE_SHARED", REPO.parent / "shared"))
SUITE = SHARED / "data" / "json_schema_test_suite" / "draft2020-12"


def suite_cases() -> list[tuple[str, Any, Any, bool]]:
    """(label, schema, data, valid) of the suite's tests of the number keywords and number types."""
    base = SUITE
    out = []
    for name in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "type"):
        path = base / f"{name}.json"
        if not path.exists():
            continue
        for group in json.loads(path.read_text()):
            schema = group["schema"]
            if name == "type" and schema.get("type") not in ("integer", "number"):
                continue
            for t in group["tests"]:
                out.append((f"{name}: {group['description']}: {t['description']}", schema, t["data"], t["valid"]))
    return out


@pytest.mark.parametrize("label, schema, data, ok", suite_cases() or [pytest.param(None, None, None, None,
                                                                                    marks=pytest.mark.skip)])
def test_json_schema_test_suite(label, schema, data, ok):
    """accepted == valid, except an integral float for an integer schema (``1.0``: a layout exclusion)."""
    schema = {k: v for k, v in schema.items() if k != "$schema"}
    got = accepts(schema, canonical(data))
    if got != ok:
        assert schema.get("type") == "integer" and isinstance(data, float) and ok, label


@pytest.mark.parametrize("schema", [{"type": "number"}, {"type": "integer"}, {"type": "number", "minimum": 0},
                                    {"type": "integer", "maximum": 0}, {"type": "number", "multipleOf": 0.5},
                                    {"type": "integer", "minimum": -3, "maximum": 3, "multipleOf": 3}])
def test_minus_zero_is_the_value_zero(schema, tmp_path):
    """Issue 30, item 13: ``{"value": -0}`` was rejected for ``{"type": "number"}`` while ``-0.0`` and
    ``-0e0`` passed; ``-0`` is valid JSON, the value 0, accepted wherever 0 is."""
    from callmaybe.compiler.build import match_texts

    path = tmp_path / "value.json"
    path.write_text(json.dumps({"type": "object", "properties": {"value": schema}, "required": ["value"]}))
    texts = ['{"value": -0}', '{"value": -0.0}', '{"value": 0}', '{"value": -00}']
    assert [r["accepted"] for r in match_texts(path, None, texts)] == [True, schema["type"] == "number", True, False]
    assert not accepts({"type": "integer", "minimum": 1}, "-0")
    assert not accepts({"type": "number", "exclusiveMaximum": 0}, "-0")
