"""Property-based tests of the schema -> byte DFA compiler against jsonschema as the oracle.

A hypothesis strategy generates schemas from the supported set (strings with lengths, formats and patterns;
integers with inclusive/exclusive bounds; numbers; booleans; null; enum/const of tricky JSON values; arrays
with ``items``/``prefixItems``/``minItems``/``maxItems``; objects with special-character keys, required
subsets, ``dependentRequired`` and ``minProperties``/``maxProperties``; ``anyOf``; type lists; ``$ref`` into ``$defs``). For each schema it checks, on the byte DFA of
:func:`callmaybe.compiler.grammar.schema_dfa`:

* every jsonschema-valid instance (generated from the schema, keys in declaration order), written in the
  canonical layout, is accepted;
* "near" instances (valid ones perturbed: wrong types, off-by-one bounds and lengths, missing, extra and
  reordered keys, other literals) get the oracle's verdict;
* mutated canonical texts (a character dropped, inserted or swapped, a digit changed, an escape broken,
  whitespace added) are rejected whenever they are not the canonical text of a valid instance.

The oracle is jsonschema's Draft 2020-12 validator with its format checker, extended with the documented
design rules of the grammar (see :data:`Oracle`): integers are spelled without fraction or exponent, objects
are closed to their declared properties and emit them in declaration order, enum/const compare canonical
texts, ``pattern`` follows ECMA-262 (``\\d`` is ASCII, ``$`` is the end of the string), ``multipleOf`` is read
on decimals with the limits of :mod:`callmaybe.compiler.schema.numbers` (no exponent form; within 2**53 where
jsonschema's float division must be exact). Texts whose number tokens are outside the number forms
(at most 16 digits before a point or an exponent, at most 20 zeros after ``0.`` before a digit, the
exponent at most 292 after two or more integer digits and 308 after ``0.``, nothing above the largest
double) must be rejected.

Texts that are valid JSON in the canonical layout but spell a token non-canonically (``\\/``, ``\\u00e9``,
``1.50``, ``1E2``) are outside the canonical set: for them only soundness is checked (accepted => valid).
Format keywords are enforced by regexes stricter than their RFCs, so for schemas with ``format`` the
equality is checked in the sound direction and on generated values only.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import string
import sys
import unicodedata
from decimal import Decimal
from fractions import Fraction
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError

from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.grammar import schema_dfa
from callmaybe.compiler.automata.ranges import integer_range
from callmaybe.core.errors import SchemaError

# --------------------------------------------------------------------------------------------------------------
# canonical texts, number forms, layout
# --------------------------------------------------------------------------------------------------------------


def canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _no_constants(name: str):
    raise ValueError(f"not JSON: {name}")


# The number forms, written independently of callmaybe.compiler.automata.lexical: an integer (-0 included), a point form
# (at most 16 digits before the point), either then an exponent (at most 16 digits before it).
_NUMBER_FORM = re.compile(r"(-?0|-?[1-9][0-9]*)|-?(0|[1-9][0-9]{0,15})(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")
DBL_MAX = Decimal(repr(sys.float_info.max))


def in_forms(token: str) -> bool:
    """True when a number token is in the number forms (``-0``, the value 0, among them: issue 30, item 13):
    after ``0.`` at most 20 zeros come before the first nonzero digit (or only zeros); the exponent is at most
    292 after two or more integer digits, 308 after ``0.``; the value is at most the largest double."""
    m = _NUMBER_FORM.fullmatch(token)
    if not m:
        return False
    if m.group(1) is not None:
        return True
    whole, frac, exp = m.group(2), m.group(3), m.group(4)
    if frac is None and exp is None:
        return False
    if frac is not None and whole == "0" and frac.strip("0") and len(frac) - len(frac.lstrip("0")) > 20:
        return False
    if exp is not None and Decimal(token) != 0 and not exp.startswith("-"):
        if int(exp) > (292 if len(whole) >= 2 else 308 if whole == "0" else 10**9):
            return False
    return abs(Decimal(token)) <= DBL_MAX
# JSON tokens that carry a value: strings and numbers (valid JSON text assumed).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?', re.S)


def _skeleton(text: str) -> str:
    """The layout of a JSON text: every string replaced by ``"s"``, every number by ``0``."""
    return _TOKEN.sub(lambda m: '"s"' if m.group().startswith('"') else "0", text)


def _number_tokens(text: str) -> list[str]:
    return [m.group() for m in _TOKEN.finditer(text) if not m.group().startswith('"')]


def within_forms(value: Any) -> bool:
    """True when every number of ``value`` written canonically is in the number forms (always: json.dumps
    writes every double and every integer in them)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, (int, float)):
        return in_forms(json.dumps(value))
    if isinstance(value, list):
        return all(within_forms(v) for v in value)
    return all(within_forms(v) for v in value.values())


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    return False


def classify(text: str) -> tuple[str, Any]:
    """(kind, value) of a text: "json" (not JSON), "layout" (not the canonical layout), "forms" (a number token
    outside the number forms), "surrogate" (a lone surrogate escape), "canonical" (the canonical text of its value) or
    "spelling" (canonical layout, some string or number spelled otherwise, e.g. ``\\/`` or ``1.50``)."""
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except ValueError:
        return "json", None
    if _has_surrogate(value):
        return "surrogate", value
    again = canonical(value)
    if _skeleton(text) != _skeleton(again):
        return "layout", value
    if not all(in_forms(t) for t in _number_tokens(text)):
        return "forms", value
    return ("canonical" if text == again else "spelling"), value


# --------------------------------------------------------------------------------------------------------------
# the oracle: jsonschema 2020-12 plus the grammar's documented design rules
# --------------------------------------------------------------------------------------------------------------

class _Letters:
    """``^\\p{L}{lo,hi}$`` judged with unicodedata (Python's re has no ``\\p``)."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi

    def fullmatch(self, text: str) -> bool:
        return self.lo <= len(text) <= self.hi and all(unicodedata.category(c).startswith("L") for c in text)


# ECMA-262 meaning of the fixed patterns the strategy uses (Python's re differs: \d is Unicode, $ matches
# before a final newline). (regex, search?)
PATTERNS = {
    "^[a-z]+$": (re.compile(r"[a-z]+"), False),
    "^\\d{3}-\\d{4}$": (re.compile(r"[0-9]{3}-[0-9]{4}"), False),
    "ab": (re.compile(r"ab"), True),
    "^[\"\\\\a-z]+$": (re.compile(r'["\\a-z]+'), False),
    "^[é日😀]{1,3}$": (re.compile(r"[é日😀]{1,3}"), False),
    "^(?:x|\\.)y?$": (re.compile(r"(?:x|\.)y?"), False),
    "^\\p{L}{1,3}$": (_Letters(1, 3), False),
}

_base_properties = Draft202012Validator.VALIDATORS["properties"]


def _properties(validator, properties, instance, schema):
    yield from _base_properties(validator, properties, instance, schema)
    if not validator.is_type(instance, "object") or not properties:
        return
    declared = list(properties)
    extra = [k for k in instance if k not in properties]
    if extra:
        yield ValidationError(f"undeclared properties {extra} (objects are closed)")
        return
    order = [declared.index(k) for k in instance]
    if order != sorted(order):
        yield ValidationError(f"properties {list(instance)} not in declaration order")


def _spellings(value: Any) -> set[str]:
    """The texts the grammar accepts for one enum/const value: its canonical text and, for an integral
    number (JSON Schema compares numbers by value), the other spelling of the same value (1 and 1.0; none
    for an int with no double, 2**60 + 1)."""
    out = {canonical(value)}
    if isinstance(value, float) and value.is_integer():
        out.add(canonical(int(value)))
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) <= sys.float_info.max:
        if float(value) == value:
            out.add(canonical(float(value)))
    return out


def _enum(validator, enums, instance, schema):
    if canonical(instance) not in set().union(*(_spellings(e) for e in enums)):
        yield ValidationError(f"{instance!r} is not one of {enums!r} (canonical texts)")


def _const(validator, const, instance, schema):
    if canonical(instance) not in _spellings(const):
        yield ValidationError(f"{instance!r} is not {const!r} (canonical texts)")


def _pattern(validator, pattern, instance, schema):
    if not validator.is_type(instance, "string"):
        return
    rx, search = PATTERNS[pattern]
    if not (rx.search(instance) if search else rx.fullmatch(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_base_multiple_of = Draft202012Validator.VALIDATORS["multipleOf"]


def multiple_limit(q: Any, instance: Any) -> str | None:
    """Why the grammar does not write ``instance`` under ``multipleOf: q`` although it may be a multiple (the
    documented limits of callmaybe.compiler.schema.numbers, for an int q or a float q whose double is its
    decimal), or None."""
    if isinstance(instance, float) and "e" in repr(instance):
        return "no exponent form under multipleOf"
    if isinstance(q, int):
        return "a point form past 2**53" if isinstance(instance, float) and abs(instance) > 2**53 else None
    num, den = q.as_integer_ratio()
    odd = num >> ((num & -num).bit_length() - 1)
    cap = Fraction(2**53) * Fraction(num, den) / odd
    if isinstance(instance, float):
        digits = -Decimal(repr(q)).normalize().as_tuple().exponent
        cap = min(cap, Fraction(2**53) / 10 ** max(digits, 0))
    return f"past {float(cap)}" if abs(Fraction(instance)) > cap else None


def _multiple_of(validator, q, instance, schema):
    if validator.is_type(instance, "number") and not isinstance(instance, bool):
        why = multiple_limit(q, instance)
        if why:  # past the grammar's limits (jsonschema's float division overflows on an int past 1.8e308)
            yield ValidationError(f"{instance!r}: {why}")
            return
    yield from _base_multiple_of(validator, q, instance, schema)


Oracle = jsonschema.validators.extend(
    Draft202012Validator,
    validators={"properties": _properties, "enum": _enum, "const": _const, "pattern": _pattern,
                "multipleOf": _multiple_of},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)
    ),
)


def oracle_errors(schema: Any, value: Any) -> list[ValidationError]:
    return list(Oracle(schema, format_checker=Draft202012Validator.FORMAT_CHECKER).iter_errors(value))


# --------------------------------------------------------------------------------------------------------------
# schema strategy
# --------------------------------------------------------------------------------------------------------------

TRICKY_STRINGS = [
    "", "a", 'q"uote', "back\\slash", "slash/", "new\nline", "tab\t", "nul\x00", "\x1f", "del\x7f", "é", "日本",
    "😀", "\u2028", ".*+?()[]{}|^$-", "\\d", "\\u0041", "a b", "\ufeff", "Ω≈ç",
]
TRICKY_KEYS = [
    "a", "b", "key with space", 'q"', "b\\s", "t\tab", "é", "日本", "😀", ".*", "$ref", "", "x-y", "a/b",
]
FORMATS = ["date", "time", "date-time", "duration", "uuid", "email", "ipv4", "ipv6", "hostname", "uri",
           "uri-reference", "json-pointer", "relative-json-pointer"]
DEF_NAMES = ["d0", "a/b", "t~x", "Ünï"]
# the longest value of each format the generators below usually make
FORMAT_LENGTHS = {"date": 10, "time": 30, "date-time": 40, "duration": 24, "uuid": 36, "email": 40, "ipv4": 15,
                  "ipv6": 45, "hostname": 63, "uri": 45, "uri-reference": 12, "json-pointer": 16,
                  "relative-json-pointer": 12}
# the shortest and longest (None: no bound) values of each pattern
PATTERN_LENGTHS = {"^[a-z]+$": (1, None), "^\\d{3}-\\d{4}$": (8, 8), "ab": (2, None), "^[\"\\\\a-z]+$": (1, None),
                   "^[é日😀]{1,3}$": (1, 3), "^(?:x|\\.)y?$": (1, 2), "^\\p{L}{1,3}$": (1, 3)}

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.sampled_from([0, -1, 10**14, -(10**15) + 1, 1.5, -0.25, 1e-7, 2.5e10, 0.1, 3.0, -0.0]),
    st.sampled_from(TRICKY_STRINGS),
    st.text(max_size=4),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(TRICKY_KEYS), inner, max_size=3),
    max_leaves=6,
)


def _unique_by_text(values: list[Any]) -> list[Any]:
    out, seen = [], set()
    for v in values:
        if canonical(v) not in seen:
            seen.add(canonical(v))
            out.append(v)
    return out


#: Steps of ``multipleOf`` the generated schemas use: ints, and floats whose double is their decimal.
STEPS = [1, 2, 3, 5, 7, 10, 12, 60, 100, 0.5, 0.25, 1.5, 2.0, 0.125]


@st.composite
def integer_schemas(draw) -> dict:
    """An integer schema with satisfiable bounds (some exclusive, some half-integers, some negative, some past
    int64), sometimes a ``multipleOf`` (a multiple lies in the range)."""
    schema: dict[str, Any] = {"type": "integer"}
    scale = draw(st.sampled_from([10, 1000, 10**6, 10**14, 10**19, 10**30]))
    a = draw(st.integers(-scale, scale))
    b = draw(st.integers(a, a + draw(st.sampled_from([0, 3, 50, scale]))))
    if draw(st.integers(0, 3)) == 0:
        q = draw(st.sampled_from([x for x in STEPS if isinstance(x, int)]))
        schema["multipleOf"] = q
        a = a - a % q  # a multiple, kept in range below
        b = max(b, a)
    halves = ["half"] if max(abs(a), abs(b)) < 2**52 else []  # a + 0.5 is a double below 2**52 only
    if draw(st.booleans()):  # lower bound a
        kind = draw(st.sampled_from(["minimum", "exclusiveMinimum", *halves, "both"]))
        if kind == "minimum":
            schema["minimum"] = a
        elif kind == "exclusiveMinimum":
            schema["exclusiveMinimum"] = a - 1
        elif kind == "half":
            schema["minimum"] = a - 0.5
        else:
            schema["minimum"] = a - draw(st.integers(0, 5))
            schema["exclusiveMinimum"] = a - 1
    if draw(st.booleans()):  # upper bound b
        kind = draw(st.sampled_from(["maximum", "exclusiveMaximum", *halves, "both"]))
        if kind == "maximum":
            schema["maximum"] = b
        elif kind == "exclusiveMaximum":
            schema["exclusiveMaximum"] = b + 1
        elif kind == "half":
            schema["exclusiveMaximum"] = b + 0.5
        else:
            schema["maximum"] = b + draw(st.integers(0, 5))
            schema["exclusiveMaximum"] = b + 1
    return schema


@st.composite
def number_schemas(draw) -> dict:
    """A number schema: bounds of every kind (ints, floats such as -273.15 and 0.1, exclusive, tiny, huge)
    around a value c that stays valid, sometimes a ``multipleOf`` whose double is its decimal (c is then a
    multiple, within the limits of the grammar)."""
    schema: dict[str, Any] = {"type": "number"}
    centres = [0, 0.0, 1, -273.15, 0.1, -2.5e10, 12345678.9]
    q = draw(st.sampled_from(STEPS)) if draw(st.integers(0, 2)) == 0 else None
    if q is None:
        centres += [1e-300, 1e300, 2**53, 5e-324, -1e-5, sys.float_info.max]
    c = draw(st.sampled_from(centres))
    if q is not None:
        schema["multipleOf"] = q
        m = round(Decimal(repr(float(c))) / Decimal(repr(q))) * Decimal(repr(q))
        c = int(m) if isinstance(q, int) and draw(st.booleans()) else float(m)
    below, above = (draw(st.sampled_from([0, 1e-9, 0.5, 3, 1e20])) for _ in range(2))
    lo, hi = c - below, c + above
    if math.isinf(hi):
        hi = sys.float_info.max
    lo, hi = (int(x) if draw(st.booleans()) and float(x).is_integer() else x for x in (lo, hi))
    if draw(st.booleans()):
        if draw(st.booleans()):
            schema["minimum"] = lo
        else:
            schema["exclusiveMinimum"] = lo if lo < c else math.nextafter(float(c), -math.inf)
    if draw(st.booleans()):
        if draw(st.booleans()):
            schema["maximum"] = hi
        else:
            schema["exclusiveMaximum"] = hi if hi > c else math.nextafter(float(c), math.inf)
    return schema


@st.composite
def string_schemas(draw) -> dict:
    schema: dict[str, Any] = {"type": "string"}
    kind = draw(st.sampled_from(["plain", "lengths", "lengths", "format", "pattern", "pattern lengths",
                                 "format lengths"]))
    if kind == "lengths":
        lo = draw(st.integers(0, 3))
        if draw(st.booleans()):
            schema["minLength"] = lo
        if draw(st.booleans()):
            schema["maxLength"] = draw(st.integers(lo, lo + 3))
    if kind in ("format", "format lengths"):
        schema["format"] = draw(st.sampled_from(FORMATS))
    if kind == "format lengths":  # lengths that most values of the format meet
        schema["minLength"] = draw(st.sampled_from([0, 1]))
        schema["maxLength"] = FORMAT_LENGTHS[schema["format"]] + draw(st.integers(0, 5))
    if kind in ("pattern", "pattern lengths"):
        schema["pattern"] = draw(st.sampled_from(sorted(PATTERNS)))
    if kind == "pattern lengths":  # lengths that some values of the pattern meet
        least, most = PATTERN_LENGTHS[schema["pattern"]]
        lo = draw(st.integers(least, least + 2))
        schema["minLength"] = lo
        schema["maxLength"] = draw(st.integers(lo, lo + 3)) if most is None else min(most, lo + 3)
        if schema["maxLength"] < lo:
            del schema["minLength"]
    return schema


@st.composite
def literal_schemas(draw) -> dict:
    if draw(st.booleans()):
        return {"const": draw(json_values)}
    values = _unique_by_text(draw(st.lists(json_values, min_size=1, max_size=4)))
    return {"enum": values}


@st.composite
def type_list_schemas(draw) -> dict:
    types = draw(st.sampled_from([["string", "null"], ["integer", "null"], ["boolean", "string"],
                                  ["number", "boolean"], ["null", "integer", "string"]]))
    schema: dict[str, Any] = {"type": types}
    if "string" in types and draw(st.booleans()):
        schema["maxLength"] = draw(st.integers(0, 3))
    if "integer" in types and draw(st.booleans()):
        schema["minimum"] = draw(st.integers(-20, 20))
    return schema


def ref_to(name: str) -> dict:
    """A ``$ref`` to ``$defs/<name>`` (JSON pointer escapes ``~0`` and ``~1``)."""
    return {"$ref": "#/$defs/" + name.replace("~", "~0").replace("/", "~1")}


def leaf_schemas(refs: list[str]) -> st.SearchStrategy:
    leaves = [
        string_schemas(), integer_schemas(), number_schemas(), st.just({"type": "boolean"}),
        st.just({"type": "null"}), literal_schemas(), type_list_schemas(),
    ]
    if refs:
        leaves.append(st.sampled_from(refs).map(ref_to))
    return st.one_of(*leaves)


def tree_schemas(depth: int, refs: list[str]) -> st.SearchStrategy:
    leaf = leaf_schemas(refs)
    if depth == 0:
        return leaf
    child = tree_schemas(depth - 1, refs)
    composites = [array_schemas(child), object_schemas(child), anyof_schemas(child)]
    if refs:
        composites.append(st.sampled_from(refs).map(ref_to))
    return st.one_of(leaf, *composites)


@st.composite
def array_schemas(draw, child) -> dict:
    schema: dict[str, Any] = {"type": "array"}
    if draw(st.integers(0, 3)) == 0:
        schema["prefixItems"] = draw(st.lists(child, min_size=1, max_size=3))
        schema["items"] = draw(st.one_of(st.just(False), child))
        if schema["items"] is False:
            n = len(schema["prefixItems"])
            lo = draw(st.integers(0, n))
            if lo:
                schema["minItems"] = lo
            return schema
    else:
        schema["items"] = draw(child)
    lo = draw(st.integers(0, 2))
    if draw(st.booleans()):
        schema["minItems"] = lo
    if draw(st.booleans()):
        schema["maxItems"] = draw(st.integers(max(lo, 1) if "minItems" in schema else 0, lo + 3))
    return schema


def member_sets(schema: dict) -> list[list[str]]:
    """The sets of keys (in declaration order) an object of ``schema`` may have: the required ones, the
    ``dependentRequired`` lists and ``minProperties``/``maxProperties`` honoured."""
    keys = list(schema["properties"])
    required = set(schema.get("required", []))
    deps = schema.get("dependentRequired", {})
    lo, hi = schema.get("minProperties", 0), schema.get("maxProperties", len(keys))
    out = []
    for n in range(len(keys) + 1):
        for subset in itertools.combinations(keys, n):
            chosen = set(subset)
            if required <= chosen and lo <= n <= hi and all(set(deps[k]) <= chosen for k in chosen if k in deps):
                out.append(list(subset))
    return out


@st.composite
def object_schemas(draw, child) -> dict:
    keys = draw(st.lists(st.sampled_from(TRICKY_KEYS), min_size=1, max_size=4, unique=True))
    props = {k: draw(child) for k in keys}
    required = [k for k in keys if draw(st.booleans())]
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required or draw(st.booleans()):
        schema["required"] = required
    if len(keys) >= 2 and draw(st.integers(0, 3)) == 0:  # a dependency between two members, either way
        k, dep = draw(st.permutations(keys))[:2]
        schema["dependentRequired"] = {k: [dep]}
    if draw(st.integers(0, 3)) == 0:  # counts that some member set meets
        sizes = sorted({len(m) for m in member_sets(schema)})
        lo = draw(st.sampled_from(sizes))
        if draw(st.booleans()):
            schema["minProperties"] = lo
        if draw(st.booleans()):
            schema["maxProperties"] = draw(st.sampled_from([n for n in sizes if n >= lo]))
    return schema


@st.composite
def anyof_schemas(draw, child) -> dict:
    if draw(st.integers(0, 2)) == 0:
        # a type list beside anyOf: each branch keeps one of its types (a branch whose type is outside the
        # list is a known bug, see test_anyof_branch_with_disjoint_type_is_dropped)
        branches = draw(st.lists(st.one_of(string_schemas(), integer_schemas(), st.just({"type": "null"}),
                                           st.just({"type": "boolean"})), min_size=2, max_size=3))
        types = list(dict.fromkeys(b["type"] for b in branches))
        if draw(st.booleans()):
            types.append(draw(st.sampled_from(["number", "array"])))
        return {"type": types, "anyOf": branches}
    return {"anyOf": draw(st.lists(child, min_size=2, max_size=3))}


@st.composite
def schemas(draw) -> dict:
    """A root schema; sometimes with ``$defs`` (a def may refer to an earlier def) referenced from the body."""
    defs: dict[str, Any] = {}
    for name in DEF_NAMES[: draw(st.integers(0, 3))]:
        defs[name] = draw(tree_schemas(1, list(defs)))
    body = dict(draw(tree_schemas(2, list(defs))))
    if defs:
        body["$defs"] = defs
    return body


# --------------------------------------------------------------------------------------------------------------
# instance strategies
# --------------------------------------------------------------------------------------------------------------

string_chars = st.one_of(
    st.characters(codec="utf-8"), st.sampled_from(list('"\\/\n\r\t\b\f\x00\x1f\x7f\u2028\u2029éß日本😀\ufeff'))
)


def resolve(root: dict, ref: str) -> Any:
    node: Any = root
    for token in filter(None, ref[1:].split("/")):
        node = node[token.replace("~1", "/").replace("~0", "~")]
    return node


_ATOM = string.ascii_letters + string.digits + "!#$%&'*+-/=?^_`{|}~"
_LABEL = st.from_regex(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,8}[A-Za-z0-9])?", fullmatch=True)


@st.composite
def times(draw) -> str:
    h, m, s = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
    frac = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,9}", fullmatch=True)))
    zone = draw(st.one_of(st.just("Z"), st.builds(lambda sign, zh, zm: f"{sign}{zh:02d}:{zm:02d}",
                                                    st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59))))
    return f"{h:02d}:{m:02d}:{s:02d}{frac}{zone}"


def _ipv6(groups: list[int], at: int | None, v4: str | None) -> str:
    """An IPv6 address: ``groups`` (hextets), compressed with ``::`` from position ``at`` over a run of zero
    groups (or a run the compression stands for), the last two groups optionally written as ``v4``."""
    words = [f"{g:x}" for g in groups]
    if v4 is not None:
        words = words[:6] + [v4]
    if at is None:
        return ":".join(words)
    cut = min(at, len(words) - 1)
    return ":".join(words[:cut]) + "::" + ":".join(words[cut + 1:])


_OCTETS = st.integers(0, 255).map(str)
_IPV4 = st.builds(lambda a, b, c, d: f"{a}.{b}.{c}.{d}", _OCTETS, _OCTETS, _OCTETS, _OCTETS)
_N = st.integers(0, 999).map(str)


@st.composite
def durations(draw) -> str:
    units = draw(st.sampled_from(["Y", "YM", "YMD", "M", "MD", "D", "W", ""]))
    date = "".join(draw(_N) + u for u in units)
    if units == "W":
        return "P" + date
    t = draw(st.sampled_from(["H", "HM", "HMS", "M", "MS", "S"] + ([""] if date else [])))
    return "P" + date + ("T" + "".join(draw(_N) + u for u in t) if t else "")


FORMAT_VALUES = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "time": times(),
    "date-time": st.builds(lambda d, t: d.isoformat() + "T" + t, st.dates(), times()),
    "uuid": st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper()),
    "email": st.builds(
        lambda local, labels: ".".join(local) + "@" + ".".join(labels),
        st.lists(st.text(_ATOM, min_size=1, max_size=5), min_size=1, max_size=2),
        st.lists(_LABEL, min_size=2, max_size=3),
    ),
    "uri": st.builds(
        lambda scheme, host, path, query: f"{scheme}://{host}{path}{query}",
        st.from_regex(r"[a-z][a-z0-9+.-]{0,5}", fullmatch=True),
        st.one_of(_LABEL, _IPV4, st.just("[::1]"), st.just("user@h:80")),
        st.lists(st.text(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@", max_size=4), max_size=3)
        .map(lambda p: "".join("/" + x for x in p)),
        st.sampled_from(["", "?q=1", "#frag", "?a=%20&b#c/d"]),
    ) | st.sampled_from(["urn:isbn:0451450523", "mailto:a@b.c", "a:", "x:/p?q"]),
    "uri-reference": st.sampled_from(["", "/a/b", "?q", "#f", "a/b", "//h/p", "http://h/p", "../x"]),
    "duration": durations(),
    "ipv4": _IPV4,
    "ipv6": st.builds(_ipv6, st.lists(st.integers(0, 0xFFFF), min_size=8, max_size=8),
                      st.one_of(st.none(), st.integers(0, 7)), st.one_of(st.none(), _IPV4))
    .filter(lambda v: v.count("::") <= 1),
    "hostname": st.lists(_LABEL, min_size=1, max_size=4).map(".".join).filter(lambda v: len(v) <= 63),
    "json-pointer": st.lists(st.text(string_chars, max_size=3).map(lambda t: t.replace("~", "~0").replace("/", "~1")),
                             max_size=3).map(lambda p: "".join("/" + x for x in p)),
    "relative-json-pointer": st.builds(lambda n, tail: f"{n}{tail}", st.integers(0, 20),
                                       st.sampled_from(["", "#", "/a", "/a~1b/0"])),
}

PATTERN_VALUES = {
    "^[a-z]+$": st.from_regex(r"[a-z]+", fullmatch=True),
    "^\\d{3}-\\d{4}$": st.from_regex(r"[0-9]{3}-[0-9]{4}", fullmatch=True),
    "ab": st.builds(lambda a, b: a + "ab" + b, st.text(string_chars, max_size=3), st.text(string_chars, max_size=3)),
    "^[\"\\\\a-z]+$": st.text('"\\abcxyz', min_size=1, max_size=5),
    "^[é日😀]{1,3}$": st.text("é日😀", min_size=1, max_size=3),
    "^(?:x|\\.)y?$": st.sampled_from(["x", ".", "xy", ".y"]),
    "^\\p{L}{1,3}$": st.text(st.characters(categories=["Lu", "Ll", "Lt", "Lm", "Lo"]), min_size=1, max_size=3),
}


#: Far enough to stand for "unbounded" when drawing integers.
FAR = 10**40


def _int_bounds(schema: dict) -> tuple[int, int]:
    lo, hi = -FAR, FAR
    if "minimum" in schema:
        lo = max(lo, math.ceil(schema["minimum"]))
    if "exclusiveMinimum" in schema:
        lo = max(lo, math.floor(schema["exclusiveMinimum"]) + 1)
    if "maximum" in schema:
        hi = min(hi, math.floor(schema["maximum"]))
    if "exclusiveMaximum" in schema:
        hi = min(hi, math.ceil(schema["exclusiveMaximum"]) - 1)
    return lo, hi


finite_floats = st.floats(allow_nan=False, allow_infinity=False)
numbers = st.one_of(st.integers(-FAR, FAR), st.integers(-100, 100), finite_floats,
                    st.sampled_from([2**63 - 1, -(2**63), 2512292042121000001, 1e100, 1.7976931348623157e308, 5e-324,
                                     1e-5, 1.5e-7, -0.0, 2.0]),
                    st.decimals(places=3, min_value=-1000, max_value=1000, allow_nan=False).map(float))


def _number_bounds(schema: dict) -> tuple[float, float, bool, bool]:
    """(lo, hi, lo exclusive, hi exclusive) of a number schema (the tighter of each pair; +-inf: none)."""
    lo, lo_x, hi, hi_x = -math.inf, False, math.inf, False
    if "minimum" in schema:
        lo = schema["minimum"]
    if "exclusiveMinimum" in schema and schema["exclusiveMinimum"] >= lo:
        lo, lo_x = schema["exclusiveMinimum"], True
    if "maximum" in schema:
        hi = schema["maximum"]
    if "exclusiveMaximum" in schema and schema["exclusiveMaximum"] <= hi:
        hi, hi_x = schema["exclusiveMaximum"], True
    return lo, hi, lo_x, hi_x


@st.composite
def number_instances(draw, schema: dict) -> Any:
    """A valid instance of a number schema (for the oracle: jsonschema and the grammar's documented limits);
    None when the draw misses (filtered)."""
    lo, hi, lo_x, hi_x = _number_bounds(schema)
    q = schema.get("multipleOf")
    if q is None:
        flo, fhi = float(max(lo, -sys.float_info.max)), float(min(hi, sys.float_info.max))
        if flo < lo:  # an int bound with no double: the doubles within it
            flo = math.nextafter(flo, math.inf)
        if fhi > hi:
            fhi = math.nextafter(fhi, -math.inf)
        if flo > fhi:
            return draw(numbers)
        kind = draw(st.integers(0, 3))
        if kind == 0:
            return draw(st.floats(flo, fhi, exclude_min=lo_x and flo == lo, exclude_max=hi_x and fhi == hi))
        if kind == 1:  # the doubles at and next to the bounds (the next one past the largest double is inf)
            near = [flo, fhi, math.nextafter(flo, math.inf), math.nextafter(fhi, -math.inf), float(flo), float(fhi)]
            return draw(st.sampled_from([x for x in near if math.isfinite(x)]))
        if kind == 2 and not math.isinf(lo):
            return draw(st.integers(math.ceil(lo), math.ceil(lo) + 3))
        return draw(numbers)
    # multiples k * q near a bound or near zero, as ints or floats
    dq = Decimal(repr(q))
    anchor = draw(st.sampled_from([lo, hi, 0]))
    anchor = 0 if math.isinf(anchor) else anchor
    k = int(Decimal(repr(float(anchor))) / dq) + draw(st.integers(-3, 3))
    value = Decimal(k) * dq
    if value == value.to_integral_value() and draw(st.booleans()):
        return int(value)
    return float(value)


def valid(schema: Any, root: dict) -> st.SearchStrategy:
    """Instances valid for ``schema`` (keys in declaration order; numbers may exceed the caps)."""
    if "$ref" in schema:
        return valid(resolve(root, schema["$ref"]), root)
    if "anyOf" in schema:
        return st.one_of(*[valid(s, root) for s in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema["type"]
    if isinstance(t, list):
        return st.one_of(*[valid({**schema, "type": x}, root) for x in t])
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t in ("number", "integer", "string"):
        return valid_scalar(schema, t)
    if t == "array":
        return array_instances(schema, root)
    return object_instances(schema, root)


def valid_scalar(schema: dict, t: str) -> st.SearchStrategy:
    """Instances valid for ``schema`` of type ``t``: a number, an integer or a string."""
    if t == "number":
        if not set(schema) & {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}:
            return numbers
        return number_instances(schema).filter(lambda v: not oracle_errors(schema, v))
    if t == "integer":
        lo, hi = _int_bounds(schema)
        if "multipleOf" in schema:
            q = schema["multipleOf"]
            return st.integers(-(-lo // q), hi // q).map(lambda k: k * q)
        return st.one_of(st.integers(lo, hi), st.integers(lo, min(hi, lo + 5)), st.integers(max(lo, hi - 5), hi))
    if t == "string":
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength", lo + 6)
        if "format" in schema or "pattern" in schema:
            values = FORMAT_VALUES[schema["format"]] if "format" in schema else PATTERN_VALUES[schema["pattern"]]
            if "minLength" in schema or "maxLength" in schema:
                values = values.filter(lambda v: lo <= len(v) <= hi)
            return values
        return st.text(string_chars, min_size=lo, max_size=hi)
    raise AssertionError(t)


@st.composite
def array_instances(draw, schema: dict, root: dict) -> list:
    prefix = schema.get("prefixItems", [])
    items = schema.get("items", True)
    lo = schema.get("minItems", 0)
    if items is False:
        hi = len(prefix)
    else:
        hi = min(schema.get("maxItems", lo + 3), max(lo, len(prefix)) + 3)
    n = draw(st.integers(lo, hi))
    return [draw(valid(prefix[i] if i < len(prefix) else items, root)) for i in range(n)]


@st.composite
def object_instances(draw, schema: dict, root: dict) -> dict:
    keys = draw(st.sampled_from(member_sets(schema)))
    return {key: draw(valid(schema["properties"][key], root)) for key in keys}


def near(schema: Any, root: dict, depth: int = 0) -> st.SearchStrategy:
    """Instances close to ``schema``'s boundary: valid ones, perturbed ones and other JSON values."""
    base = [valid(schema, root), json_values]
    if depth > 3:
        return st.one_of(*base)
    if "$ref" in schema:
        return near(resolve(root, schema["$ref"]), root, depth + 1)
    if "anyOf" in schema:
        return st.one_of(*base, *[near(s, root, depth + 1) for s in schema["anyOf"]])
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return st.one_of(*base, st.sampled_from(value_variants(values) + [None, 0, "", [], {}]))
    t = schema["type"]
    if isinstance(t, list):
        return st.one_of(*base, *[near({**schema, "type": x}, root, depth + 1) for x in t])
    if t in ("null", "boolean"):
        return st.one_of(*base, st.sampled_from([None, True, False, 0, 1, "true", "null", [], {}]))
    if t in ("integer", "number", "string"):
        return near_scalar(schema, t, base)
    if t == "array":
        return near_arrays(schema, root, depth)
    return near_objects(schema, root, depth)


def value_variants(values: list) -> list:
    """Values near each of ``values`` (a ``const`` or an ``enum``): edited, retyped, reordered."""
    variants = []
    for v in values:
        if isinstance(v, str):
            variants += [v + "x", v[:-1], v.upper(), v.replace("\\", "/")]
        elif isinstance(v, bool):
            variants += [not v, int(v)]
        elif isinstance(v, (int, float)):
            variants += [v + 1, float(v), -v, str(v)]
        elif isinstance(v, list):
            variants += [v[:-1], v + [None], list(reversed(v))]
        elif isinstance(v, dict):
            variants += [dict(reversed(list(v.items()))), {**v, "extra": 1}, dict(list(v.items())[:-1])]
    return variants


def near_scalar(schema: dict, t: str, base: list) -> st.SearchStrategy:
    """Instances close to the boundary of ``schema`` of type ``t`` (an integer, a number or a string), and
    ``base``'s."""
    if t == "integer":
        lo, hi = _int_bounds(schema)
        edges = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, -1, 2**63, -(2**63) - 1]
        q = schema.get("multipleOf", 1)
        edges += [lo - q, lo + q, hi - q, hi + q]
        return st.one_of(*base, st.sampled_from(edges), st.sampled_from(edges).map(float),
                         st.sampled_from(edges).map(lambda x: x + 0.5), st.just(True))
    if t == "number":
        lo, hi, _, _ = _number_bounds(schema)
        edges = [x for x in (lo, hi) if not math.isinf(x)]
        edges += [math.nextafter(float(x), d) for x in edges for d in (math.inf, -math.inf)]
        q = schema.get("multipleOf")
        if q is not None:
            edges += [x + d for x in edges[:2] for d in (q, -q, q / 2)]
        return st.one_of(*base, numbers, st.sampled_from(edges or [0]), st.sampled_from([True, "1", None]))
    if t == "string":
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength", lo + 3)
        extra = [st.text(string_chars, min_size=max(lo - 1, 0), max_size=hi + 2), st.integers(-3, 3)]
        if "pattern" in schema:
            extra.append(st.from_regex(r"[a-z0-9.xy-]{0,9}\n?", fullmatch=True))
            extra.append(st.text("0123456789-٣", max_size=9))
        if "format" in schema:
            extra.append(st.text("0123456789-:TZ.+@abc/", max_size=12))
            extra.append(st.text("0123456789abcdefABCDEF:.-~/#%[]@PTYMDWHS", max_size=14))
            extra.append(FORMAT_VALUES[schema["format"]].map(lambda v: v[:-1]))
            extra.append(FORMAT_VALUES[schema["format"]].map(lambda v: v + "0"))
        return st.one_of(*base, *extra)
    raise AssertionError(t)


@st.composite
def near_arrays(draw, schema: dict, root: dict, depth: int) -> list:
    prefix = schema.get("prefixItems", [])
    items = schema.get("items", True)
    lo = schema.get("minItems", 0)
    hi = schema.get("maxItems", max(lo, len(prefix)) + 2)
    n = draw(st.integers(max(lo - 1, 0), hi + 1))
    out = []
    for i in range(n):
        sub = prefix[i] if i < len(prefix) else (items if items is not False else {"type": "null"})
        out.append(draw(near(sub, root, depth + 1) if draw(st.integers(0, 3)) == 0 else valid(sub, root)))
    return out


@st.composite
def near_objects(draw, schema: dict, root: dict, depth: int) -> dict:
    required = schema.get("required", [])
    items = []
    for key, sub in schema["properties"].items():
        present = key in required or draw(st.booleans())
        if key in required and draw(st.integers(0, 5)) == 0:
            present = False
        if present:
            value = draw(near(sub, root, depth + 1) if draw(st.integers(0, 3)) == 0 else valid(sub, root))
            items.append((key, value))
    action = draw(st.sampled_from(["none", "none", "extra", "shuffle"]))
    if action == "extra":
        items.insert(draw(st.integers(0, len(items))), (draw(st.sampled_from(TRICKY_KEYS + ["zz"])), None))
    elif action == "shuffle":
        items = draw(st.permutations(items))
    return dict(items)


# --------------------------------------------------------------------------------------------------------------
# mutations
# --------------------------------------------------------------------------------------------------------------

INSERTS = list('"\\ ,:{}[]0123456789-+.eEtfnul/xé😀\n\t\x00') + ["\\u", "\\ud83d", ", ", ": "]


@st.composite
def mutated(draw, text: str) -> str:
    for _ in range(draw(st.integers(1, 2))):
        n = len(text)
        op = draw(st.sampled_from(["drop", "insert", "swap", "digit", "escape", "space"]))
        special = [j for j, c in enumerate(text) if c in '"\\,:{}[]-.eE0123456789']
        i = draw(st.integers(0, max(n - 1, 0)) | st.sampled_from(special or [0]))
        if op == "drop" and n:
            text = text[:i] + text[i + 1:]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(INSERTS)) + text[i:]
        elif op == "swap" and n > 1:
            i = min(i, n - 2)
            text = text[:i] + text[i + 1] + text[i] + text[i + 2:]
        elif op == "digit":
            digits = [j for j, c in enumerate(text) if c.isdigit()]
            if digits:
                j = draw(st.sampled_from(digits))
                text = text[:j] + draw(st.sampled_from("0123456789")) + text[j + 1:]
        elif op == "escape":
            slashes = [j for j, c in enumerate(text) if c == "\\"]
            if slashes:
                j = draw(st.sampled_from(slashes))
                text = text[:j + 1] + draw(st.sampled_from(["x", "", "u12", "U", "'", "a", "ud800"])) + text[j + 2:]
        elif op == "space":
            candidates = [j + 1 for j, c in enumerate(text) if c in ",:[]{}"] + [0, n]
            j = draw(st.sampled_from(candidates))
            text = text[:j] + draw(st.sampled_from([" ", "\n", "\t", "  ", "\r\n"])) + text[j:]
    return text


# --------------------------------------------------------------------------------------------------------------
# the properties
# --------------------------------------------------------------------------------------------------------------

_DFAS: dict[str, Any] = {}


def test_the_oracle_takes_minus_zero_as_a_spelling_of_zero():
    """The oracle's number forms follow issue 30, item 13 (``-0`` is written wherever 0 is valid): hypothesis
    found ``-0`` for an integer in [-3, 3] accepted by the grammar and called outside the forms by the oracle."""
    text = '{"name": "f", "parameters": {"p": null, "\u00e9 q\\"": -0}}'
    assert [in_forms(t) for t in ("-0", "0", "-00", "-01")] == [True, True, False, False]
    assert classify(text) == ("spelling", {"name": "f", "parameters": {"p": None, "\u00e9 q\"": 0}})
    dfa, _ = compiled({"type": "object", "properties": {"p": {"type": "integer", "minimum": -3, "maximum": 3}},
                       "required": ["p"], "additionalProperties": False})
    assert [dfa.accepts(t.encode()) for t in ('{"p": -0}', '{"p": 0}', '{"p": -4}')] == [True, True, False]


def compiled(schema: Any):
    key = json.dumps(schema)
    if key not in _DFAS:
        try:
            _DFAS[key] = schema_dfa(schema)
        except SchemaError as exc:
            _DFAS[key] = exc
    got = _DFAS[key]
    if isinstance(got, SchemaError):
        raise got
    return got


def _contains_key(node: Any, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(_contains_key(v, key) for k, v in node.items() if k not in ("enum", "const"))
    if isinstance(node, list):
        return any(_contains_key(v, key) for v in node)
    return False


def check_text(dfa: D.ByteDFA, schema: dict, text: str, *, exact: bool) -> str:
    """Check the DFA's verdict on ``text`` against the oracle; returns the text's kind.

    ``exact``: the verdict must equal the oracle's for canonical texts (else only: accepted => valid).
    """
    got = dfa.accepts(text.encode("utf-8"))
    kind, value = classify(text)
    if kind in ("json", "layout", "forms"):
        assert not got, f"accepted a text that is not canonical JSON in the number forms ({kind}): {text!r}"
        return kind
    if kind == "surrogate":
        return kind
    errors = oracle_errors(schema, value)
    if got:
        assert not errors, f"accepted {text!r}, which is invalid: {errors[0].message}"
    elif kind == "canonical" and exact:
        assert errors, f"rejected {text!r}, the canonical text of a valid instance"
    return kind


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.data())
def test_generated_schemas_agree_with_jsonschema(data):
    schema = data.draw(schemas(), label="schema")
    root = schema
    instances = [data.draw(valid(schema, root), label=f"valid {i}") for i in range(4)]
    plain = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    python_re = "\\p{" not in json.dumps(schema)  # Python's re (plain jsonschema) has no \p{..}
    for value in instances:
        assert not oracle_errors(schema, value), "the instance generator produced an invalid instance"
        assert not python_re or plain.is_valid(value)
    try:
        dfa, notes = compiled(schema)
    except SchemaError as exc:  # every generated schema has valid instances
        pytest.fail(f"SchemaError for a satisfiable schema (valid: {canonical(instances[0])}): {exc}")
    assert notes == [], "the generated schemas use enforced keywords only"
    exact = not _contains_key(schema, "format")

    texts = []
    for value in instances:
        assert within_forms(value)
        text = canonical(value)
        assert dfa.accepts(text.encode("utf-8")), f"rejected the valid instance {text!r}"
        texts.append(text)

    for i in range(6):
        value = data.draw(near(schema, root), label=f"near {i}")
        check_text(dfa, schema, canonical(value), exact=exact)

    for i, text in enumerate(texts):
        for j in range(3):
            check_text(dfa, schema, data.draw(mutated(text), label=f"mutation {i}.{j}"), exact=exact)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=tree_schemas(1, []), data=st.data())
def test_parameters_of_a_function_are_closed_and_ordered(schema, data):
    """The same properties, through the catalog path (``{"name": .., "parameters": {...}}`` call DFA)."""
    from callmaybe.core.catalog import parse_catalog
    from callmaybe.compiler.grammar import compile_grammar

    # a catalog's patterns are checked with Python's re at load (core.catalog.check_schema), which has no \p{..}
    assume("\\p{" not in json.dumps(schema))
    params = {"p": schema, "é q\"": {"type": "integer", "minimum": -3, "maximum": 3}}
    fns = parse_catalog([{"name": "f", "parameters": params}], "test")
    grammar = compile_grammar(fns)
    obj = fns[0].parameters
    call_schema = {"type": "object", "properties": {"name": {"const": "f"}, "parameters": obj},
                   "required": ["name", "parameters"]}
    exact = not _contains_key(schema, "format")
    for i in range(4):
        value = data.draw(valid(obj, obj), label=f"valid {i}")
        text = canonical({"name": "f", "parameters": value})
        assert grammar.dfa.accepts(text.encode()), text
        for j in range(2):
            check_text(grammar.dfa, call_schema, data.draw(mutated(text), label=f"mutation {i}.{j}"), exact=exact)
        near_value = data.draw(near(obj, obj), label=f"near {i}")
        check_text(grammar.dfa, call_schema, canonical({"name": "f", "parameters": near_value}), exact=exact)


# --------------------------------------------------------------------------------------------------------------
# explicit examples: strings, escapes, code points, UTF-8
# --------------------------------------------------------------------------------------------------------------


def accepts(schema: Any, text: str | bytes) -> bool:
    dfa, _ = compiled(schema)
    return dfa.accepts(text.encode("utf-8") if isinstance(text, str) else text)


@pytest.mark.parametrize("text", [
    r'"\""', r'"\\"', '"/"', r'"\b\f\n\r\t"', '"é"', '"😀"', '"\u2028"', '"\x7f"', '""', r'"\u0000"', r'"\u001f"',
    r'"a\\\"b"',
])
def test_string_escapes_accepted(text):
    assert accepts({"type": "string"}, text)
    assert json.loads(text) is not None


@pytest.mark.parametrize("text", [
    '"\n"', '"\x00"', '"\x1f"', '"\t"', '"\r"', r'"\x41"', r'"\u12"', r'"\u12G4"', r'"\a"', r'"\U0041"',
    '"\\"', '"a"b"', "'a'", '"a', 'a"', r'"\/"', r'"\u00e9"', r'"\ud83d\ude00"', r'"\u0041"', r'"\u001F"',
])
@pytest.mark.parametrize("schema", [{"type": "string"}, {"type": "string", "maxLength": 5},
                                    {"type": "string", "pattern": "ab"}, {"type": ["string", "null"]}])
def test_raw_control_characters_and_bad_escapes_rejected(text, schema):
    assert not accepts(schema, text)


@pytest.mark.parametrize("text, ok", [
    (r'"\ud83d\ude00"', False), (r'"\uD83D\uDE00"', False), ('"😀"', True), ('"é"', True), (r'"\u00e9"', False),
    ('"a"', True), (r'"\""', True), (r'"\u001f"', True), (r'"\n"', True),
    ('""', True), ('"ab"', False), (r'"\ud83d\ude00a"', False), ('"😀😀"', False), (r'"\ud83d"', False),
    (r'"\ude00"', False), (r'"\ude00\ud83d"', False), ('"e\u0301"', False),
])
def test_max_length_counts_code_points(text, ok):
    assert accepts({"type": "string", "maxLength": 1}, text) is ok


@pytest.mark.parametrize("text, ok", [
    (r'"\ud83d\ude00"', False), ('"😀😀"', True), (r'"\ud83d\ude00\ud83d\ude00"', False), ('"😀x"', True),
    (r'"\u001f\n"', True), (r'"\u001f"', False),
    (r'"\\\\"', True), (r'"\\"', False), ('"日本"', True), ('"日"', False),
])
def test_min_length_counts_code_points(text, ok):
    assert accepts({"type": "string", "minLength": 2}, text) is ok


def test_utf8_split_inside_characters():
    data = '"日本😀"'.encode("utf-8")
    for schema in ({"type": "string"}, {"type": "string", "maxLength": 3}, {"type": "string", "minLength": 3},
                   {"const": "日本😀"}, {"type": "string", "pattern": "^[日本😀]+$"}):
        dfa, _ = compiled(schema)
        s = dfa.start
        for k, b in enumerate(data):
            s = int(dfa.transitions[s, b])
            assert s >= 0, (schema, k)
            if k < len(data) - 1:
                assert not dfa.accepting[s], (schema, k)
        assert dfa.accepting[s], schema
    # a truncated character, an overlong form, a surrogate in UTF-8 and a stray continuation byte
    for bad in (b'"\xe6\x97"', b'"\xc0\xaf"', b'"\xed\xa0\x80"', b'"\x80"', b'"\xf4\x90\x80\x80"'):
        assert not accepts({"type": "string"}, bad)
        assert not accepts({"type": "string", "maxLength": 3}, bad)
    assert not accepts({"type": "string", "maxLength": 2}, '"日本😀"')


@pytest.mark.parametrize("value", TRICKY_STRINGS + [1e300, -1.7976931348623157e308, 5e-324, 12345678901234567890,
                                                     [1, [2, {"k": None}]], {"a\"b": ["é", {}]}, True, None])
def test_enum_literals_round_trip(value):
    """Every literal, however large or escaped, is accepted exactly in its canonical text."""
    schema = {"enum": [value, "other"]}
    text = canonical(value)
    assert accepts(schema, text)
    assert not accepts(schema, text + " ")
    ascii_text = json.dumps(value, separators=(", ", ": "))
    if ascii_text != text:  # non-ASCII written as \uXXXX: another spelling, not the literal
        assert not accepts(schema, ascii_text)


def test_keys_in_declaration_order_only():
    schema = {"type": "object", "properties": {"b": {"type": "null"}, "a": {"type": "null"}}, "required": ["a"]}
    assert accepts(schema, '{"b": null, "a": null}')
    assert accepts(schema, '{"a": null}')
    assert not accepts(schema, '{"a": null, "b": null}')
    assert not accepts(schema, '{"b": null}')
    assert not accepts(schema, '{"a": null, "c": null}')
    assert not accepts(schema, '{"b":null, "a":null}')


def test_ref_with_pointer_escapes():
    schema = {"$defs": {"a/b": {"type": "integer", "minimum": 1}, "t~x": {"$ref": "#/$defs/a~1b"}},
              "type": "array", "items": {"$ref": "#/$defs/t~0x"}}
    assert accepts(schema, "[1, 2]")
    assert not accepts(schema, "[0]")
    assert jsonschema.Draft202012Validator(schema).is_valid([1, 2])


def test_recursive_ref_is_unrolled_with_a_note():
    schema = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
              "$ref": "#/$defs/node"}
    dfa, notes = schema_dfa(schema)
    assert dfa.accepts(b'{"next": {"next": {}}}')
    assert [n.kind for n in notes] == ["unrolled"]


def test_number_bounds_are_enforced():
    dfa, notes = schema_dfa({"type": "number", "minimum": 0, "maximum": 1})
    assert not dfa.accepts(b"5.5") and not dfa.accepts(b"-1")
    assert dfa.accepts(b"0.5") and dfa.accepts(b"1") and dfa.accepts(b"1e-05")
    assert notes == []


# --------------------------------------------------------------------------------------------------------------
# integer ranges
# --------------------------------------------------------------------------------------------------------------

_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")


INT64 = (-(2**63), 2**63 - 1)


def _window(lo: int | None, hi: int | None) -> set[int]:
    points = {0, *INT64, INT64[0] - 1, INT64[1] + 1, 2512292042121000001, 10**40 + 7, -(10**40) - 7}
    for p in (lo, hi):
        if p is not None:
            points |= set(range(p - 25, p + 26)) | {-p}
    for k in range(1, 25):
        for base in (10**k, -(10**k)):
            points |= {base - 1, base, base + 1}
    if lo is not None and hi is not None and hi - lo < 400:
        points |= set(range(lo - 3, hi + 4))
    return points


def _check_range(lo: int | None, hi: int | None, use_dfa: bool = False) -> None:
    """The regex of [lo, hi] (None: unbounded) against Python's comparison on a window of integers; with
    ``use_dfa``, also its byte DFA, which must be the very automaton the number readers build."""
    rx = integer_range(lo, hi)
    if lo is not None and hi is not None and lo > hi:
        assert rx is None, (lo, hi, rx)
        return
    assert rx is not None, (lo, hi)
    compiled_rx = re.compile(rx)
    dfa = D.from_regex(rx) if use_dfa else None
    if dfa is not None:
        from callmaybe.compiler.schema.numbers import NONE, NumberSpec, _build

        direct = _build(NumberSpec((lo, hi), None, NONE, None))
        assert (direct.transitions.tolist(), direct.accepting.tolist()) == (dfa.transitions.tolist(),
                                                                             dfa.accepting.tolist())
    for n in _window(lo, hi):
        expected = (lo is None or lo <= n) and (hi is None or n <= hi)
        assert bool(compiled_rx.fullmatch(str(n))) is expected, (lo, hi, n, rx)
        if dfa is not None:
            assert dfa.accepts(str(n).encode()) is expected, (lo, hi, n)
    for bad in ("", "-", "00", "01", "-01", "+1", "1.0", "1e3", " 1", "- 1"):
        assert not compiled_rx.fullmatch(bad), (lo, hi, bad)
    zero = (lo is None or lo <= 0) and (hi is None or 0 <= hi)
    assert bool(compiled_rx.fullmatch("-0")) is zero, (lo, hi)  # "-0" is the value 0 (issue 30, item 13)


bounds = st.one_of(
    st.none(), st.integers(-60, 60), st.integers(-(10**6), 10**6), st.integers(-(10**16), 10**16),
    st.integers(-(10**30), 10**30),
    st.sampled_from([0, -1, 1, 9, 10, 99, 100, -9, -10, -100, 999, 1000, *INT64, INT64[0] - 1, INT64[1] + 1]),
    st.integers(1, 24).map(lambda k: 10**k - 1), st.integers(1, 24).map(lambda k: -(10**k)),
)


@settings(max_examples=400, deadline=None)
@given(lo=bounds, hi=bounds)
def test_integer_range_brute_force(lo, hi):
    _check_range(lo, hi)


@settings(max_examples=40, deadline=None)
@given(lo=st.one_of(st.none(), st.integers(-3000, 3000), st.sampled_from(INT64)),
       hi=st.one_of(st.none(), st.integers(-3000, 3000), st.sampled_from(INT64)))
def test_integer_range_through_the_byte_dfa(lo, hi):
    _check_range(lo, hi, use_dfa=True)


def test_integer_range_exhaustive_small():
    values = list(range(-120, 121, 7)) + [None]
    for lo in values:
        for hi in values:
            _check_range(lo, hi)


@pytest.mark.parametrize("schema, inside, outside", [
    ({"type": "integer", "exclusiveMinimum": 2.5}, [3, 4], [2, 1]),
    ({"type": "integer", "minimum": -2.5, "maximum": 2.5}, [-2, 0, 2], [-3, 3]),
    ({"type": "integer", "minimum": 5, "exclusiveMinimum": 5}, [6], [5]),
    ({"type": "integer", "minimum": 5, "exclusiveMinimum": 3}, [5], [4]),
    ({"type": "integer", "maximum": -10, "exclusiveMaximum": -12}, [-13], [-12, -10]),
    ({"type": "integer", "minimum": -(10**15)}, [-(10**15), 10**15, 10**40], [-(10**15) - 1, -(10**40)]),
    ({"type": "integer", "minimum": INT64[0], "maximum": INT64[1]}, [*INT64, 2512292042121000001],
     [INT64[0] - 1, INT64[1] + 1, 10**19]),
])
def test_integer_bounds(schema, inside, outside):
    for n in inside:
        assert accepts(schema, str(n)), n
    for n in outside:
        assert not accepts(schema, str(n)), n


# --------------------------------------------------------------------------------------------------------------
# once-reported library bugs, kept as regression tests
# --------------------------------------------------------------------------------------------------------------


def test_nested_enum_with_sibling_keyword():
    schema = {"type": "object", "properties": {"a": {"enum": ["x", "yy"], "maxLength": 1}}, "required": ["a"]}
    assert accepts(schema, '{"a": "x"}')


def test_enum_items_with_sibling_keyword():
    assert accepts({"type": "array", "items": {"enum": ["x", "y"], "minLength": 1}}, '["x"]')


def _compiles_within(schema: Any, seconds: float) -> bool:
    """True when schema_dfa(schema) finishes within ``seconds`` (in a child process, killed at the limit)."""
    import subprocess
    import sys

    code = "import json, sys; from callmaybe.compiler.grammar import schema_dfa; schema_dfa(json.loads(sys.argv[1]))"
    try:
        subprocess.run([sys.executable, "-c", code, json.dumps(schema)], check=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_wide_pattern_classes_compile_quickly():
    assert _compiles_within({"type": "string", "pattern": "^[^@]+@.$"}, 8.0)


def test_anyof_branch_with_disjoint_type_is_dropped():
    schema = {"type": ["string", "null"], "anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert jsonschema.Draft202012Validator(schema).is_valid("x")
    assert accepts(schema, '"x"')
    assert not accepts(schema, "null") and not accepts(schema, "1")


def test_date_format_february_29_in_leap_years_only():
    dfa, notes = schema_dfa({"type": "string", "format": "date"})
    assert notes == []
    assert dfa.accepts(b'"2024-02-28"') and dfa.accepts(b'"2023-04-30"')
    assert dfa.accepts(b'"2000-02-29"') and dfa.accepts(b'"2024-02-29"')
    assert not dfa.accepts(b'"2023-02-29"') and not dfa.accepts(b'"1900-02-29"')
    assert not dfa.accepts(b'"2023-04-31"') and not dfa.accepts(b'"0000-01-01"')


def test_enum_numbers_compare_by_value():
    assert accepts({"enum": [1.0]}, "1")
    assert accepts({"const": 1}, "1.0")


def test_any_value_nesting_is_limited_with_a_note():
    dfa, notes = schema_dfa({})
    assert dfa.accepts(b"[[1]]") and not dfa.accepts(b"[[[1]]]")
    assert [(n.kind, n.keyword, n.detail) for n in notes] == [("limited", "any value", "nested at most 2 deep")]


# --------------------------------------------------------------------------------------------------------------
# arrays: contains with minContains/maxContains, uniqueItems, unevaluatedItems, counts, and their pairs
# --------------------------------------------------------------------------------------------------------------

# item schemas whose language is a small finite set (uniqueItems enforced) and infinite or large ones (noted)
FINITE_ITEMS = [{"enum": [1, 2, "a", True]}, {"type": "boolean"}, {"enum": [0, 1.5, None, [1], {"k": 1}, "é"]},
                {"type": "integer", "minimum": 0, "maximum": 3}, {"type": ["boolean", "null"]}]
OTHER_ITEMS = [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": -3, "maximum": 9},
               {"type": ["integer", "string"]}, {"type": "number"}]
CONTAINS = [{"const": 1}, {"type": "string"}, {"type": "integer", "minimum": 1}, {"enum": ["a", True, 2]}, True,
            {"type": "boolean"}]


@st.composite
def keyword_array_schemas(draw) -> dict:
    """An array schema with one of the item forms (``items``; ``prefixItems`` then ``items`` or ``false``;
    ``prefixItems`` then ``unevaluatedItems``) and some of ``minItems``, ``maxItems``, ``uniqueItems``,
    ``contains``, ``minContains``, ``maxContains``."""
    pool = FINITE_ITEMS + OTHER_ITEMS
    schema: dict[str, Any] = {"type": "array"}
    form = draw(st.integers(0, 2))
    if form == 0:
        schema["items"] = draw(st.sampled_from(pool))
    else:
        schema["prefixItems"] = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2))
        tail = draw(st.one_of(st.just(False), st.sampled_from(pool)))
        schema["items" if form == 1 else "unevaluatedItems"] = tail
    if draw(st.booleans()):
        schema["minItems"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        schema["maxItems"] = draw(st.integers(schema.get("minItems", 0), 4))
    if draw(st.booleans()):
        schema["uniqueItems"] = True
    if draw(st.booleans()):
        schema["contains"] = draw(st.sampled_from(CONTAINS))
        if draw(st.booleans()):
            schema["minContains"] = draw(st.integers(0, 2))
        if draw(st.booleans()):
            schema["maxContains"] = draw(st.integers(schema.get("minContains", 0), 3))
    if draw(st.integers(0, 2)) == 0:  # some keywords moved into allOf entries (merged by the compiler)
        parts: list[dict[str, Any]] = [{}, {}]
        for key in [k for k in schema if k != "type"]:
            where = draw(st.integers(0, 2))
            if where:
                parts[where - 1][key] = schema.pop(key)
        schema["allOf"] = [p for p in parts if p] or [{}]
    return schema


def _item_pool(schema: dict) -> list[st.SearchStrategy]:
    subs = []
    for part in [schema] + schema.get("allOf", []):
        subs += list(part.get("prefixItems", []))
        for key in ("items", "unevaluatedItems", "contains"):
            if isinstance(part.get(key), dict):
                subs.append(part[key])
    # integral floats: the other spelling of 1, 2, 0 (equal values for uniqueItems and contains)
    return [valid(s, schema) for s in subs] + [json_scalars, st.sampled_from([1.0, 2.0, 0.0, 3.0, -0.0])]


def _without(schema: dict, keywords: set[str]) -> dict:
    """``schema`` without ``keywords``, in it and in its allOf entries (``contains`` noted: every
    ``contains`` group but the first, which is enforced, is left out)."""
    if "contains" in keywords:  # the first contains in merge order is kept: that of the schema, else of
        keep = schema if "contains" in schema else next(p for p in schema["allOf"] if "contains" in p)
    else:
        keep = None
    groups = {"contains", "minContains", "maxContains"}
    out = {}
    for k, v in schema.items():
        if k in keywords - {"contains"} or ("contains" in keywords and k in groups and schema is not keep):
            continue
        if k == "allOf":
            v = [{kk: vv for kk, vv in p.items() if kk not in keywords - {"contains"}
                  and not ("contains" in keywords and kk in groups and p is not keep)} for p in v]
        out[k] = v
    return out


def _broken_arrays(text: str) -> list[str]:
    """Texts next to the canonical text of an array that are not JSON or not in the canonical layout."""
    inner = text[1:-1]
    out = ["[, " + inner + "]", text[:-1] + ", ]", "[" + inner + " ]", "[ " + inner + "]"]
    if ", " in inner:
        out += ["[" + inner.replace(", ", ",", 1) + "]", "[" + inner.replace(", ", ", , ", 1) + "]"]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_array_keywords_agree_with_jsonschema(data):
    """On the canonical texts of arrays built from the item, ``contains`` and other values: accepted exactly
    when valid; on those texts mutated: accepted only when valid. A keyword noted as not enforced is left out
    of the schema the verdicts are checked against (the check after generation enforces it)."""
    schema = data.draw(keyword_array_schemas(), label="schema")
    pool = _item_pool(schema)
    arrays = [data.draw(st.lists(st.one_of(*pool), max_size=5), label=f"array {i}") for i in range(8)]
    try:
        dfa, notes = compiled(schema)
    except SchemaError:
        assert all(oracle_errors(schema, a) for a in arrays), "SchemaError for a schema with a valid array"
        return
    noted = {n.keyword for n in notes if n.kind == "not enforced"}
    assert noted <= {"uniqueItems", "maxContains", "contains", "unevaluatedItems"}, noted
    checked = _without(schema, noted)
    for value in arrays:
        text = canonical(value)
        valid_full = not oracle_errors(schema, value)
        got = dfa.accepts(text.encode("utf-8"))
        if got:
            assert not oracle_errors(checked, value), f"accepted {text}, which is invalid"
        if valid_full:
            assert got, f"rejected {text}, a valid array"
        for broken in _broken_arrays(text):
            assert not dfa.accepts(broken.encode("utf-8")), f"accepted {broken!r}"
        for j in range(2):
            check_text(dfa, checked, data.draw(mutated(text), label=f"mutation {j}"), exact=False)
