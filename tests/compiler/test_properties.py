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
texts, ``pattern`` follows ECMA-262 (``\\d`` is ASCII, ``$`` is the end of the string). Texts whose number
tokens exceed the caps (15 integer digits, 15 fraction digits, 2 exponent digits) must be rejected.

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
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError

from callmaybe.compiler import dfa as D
from callmaybe.compiler.grammar import schema_dfa
from callmaybe.compiler.ranges import LIMIT, integer_range
from callmaybe.core.errors import SchemaError

# --------------------------------------------------------------------------------------------------------------
# canonical texts, caps, layout
# --------------------------------------------------------------------------------------------------------------


def canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _no_constants(name: str):
    raise ValueError(f"not JSON: {name}")


# A number within the caps, written independently of callmaybe.compiler.lexical.
CAPPED_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?(?:[eE][+-]?[0-9]{1,2})?")
# JSON tokens that carry a value: strings and numbers (valid JSON text assumed).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?', re.S)


def _skeleton(text: str) -> str:
    """The layout of a JSON text: every string replaced by ``"s"``, every number by ``0``."""
    return _TOKEN.sub(lambda m: '"s"' if m.group().startswith('"') else "0", text)


def _number_tokens(text: str) -> list[str]:
    return [m.group() for m in _TOKEN.finditer(text) if not m.group().startswith('"')]


def within_caps(value: Any) -> bool:
    """True when every number of ``value`` written canonically is within the caps."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, (int, float)):
        return bool(CAPPED_NUMBER.fullmatch(json.dumps(value)))
    if isinstance(value, list):
        return all(within_caps(v) for v in value)
    return all(within_caps(v) for v in value.values())


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    return False


def classify(text: str) -> tuple[str, Any]:
    """(kind, value) of a text: "json" (not JSON), "layout" (not the canonical layout), "caps" (a number token
    past the caps), "surrogate" (a lone surrogate escape), "canonical" (the canonical text of its value) or
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
    if not all(CAPPED_NUMBER.fullmatch(t) for t in _number_tokens(text)):
        return "caps", value
    return ("canonical" if text == again else "spelling"), value


# --------------------------------------------------------------------------------------------------------------
# the oracle: jsonschema 2020-12 plus the grammar's documented design rules
# --------------------------------------------------------------------------------------------------------------

# ECMA-262 meaning of the fixed patterns the strategy uses (Python's re differs: \d is Unicode, $ matches
# before a final newline). (regex, search?)
PATTERNS = {
    "^[a-z]+$": (re.compile(r"[a-z]+"), False),
    "^\\d{3}-\\d{4}$": (re.compile(r"[0-9]{3}-[0-9]{4}"), False),
    "ab": (re.compile(r"ab"), True),
    "^[\"\\\\a-z]+$": (re.compile(r'["\\a-z]+'), False),
    "^[é日😀]{1,3}$": (re.compile(r"[é日😀]{1,3}"), False),
    "^(?:x|\\.)y?$": (re.compile(r"(?:x|\.)y?"), False),
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
    number below 1e15 (JSON Schema compares numbers by value), the other spelling (1 and 1.0)."""
    out = {canonical(value)}
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        out.add(canonical(int(value)))
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**15:
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


Oracle = jsonschema.validators.extend(
    Draft202012Validator,
    validators={"properties": _properties, "enum": _enum, "const": _const, "pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)
    ),
)


def oracle_errors(schema: Any, value: Any) -> list[ValidationError]:
    return list(Oracle(schema, format_checker=Draft202012Validator.FORMAT_CHECKER).iter_errors(value))


def _known_deviation(errors: list[ValidationError]) -> bool:
    """Errors that are known deviations reported separately (see the regression tests at the end): a ``date`` on
    February 29 of a common year (accepted by the grammar, no note), and the year 0000 (valid RFC 3339,
    refused by Python's date.fromisoformat, which jsonschema uses)."""
    def known(e: ValidationError) -> bool:
        if e.validator == "format" and e.validator_value == "date" and isinstance(e.instance, str):
            return e.instance[5:] == "02-29" or e.instance.startswith("0000")
        if e.validator in ("anyOf", "oneOf"):  # the branch errors are in the context
            return bool(e.context) and any(known(c) for c in e.context)
        return False
    return bool(errors) and all(known(e) for e in errors)


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
FORMATS = ["date", "time", "date-time", "uuid", "email", "uri"]
DEF_NAMES = ["d0", "a/b", "t~x", "Ünï"]

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


@st.composite
def integer_schemas(draw) -> dict:
    """An integer schema with satisfiable bounds (some exclusive, some half-integers, some negative)."""
    schema: dict[str, Any] = {"type": "integer"}
    scale = draw(st.sampled_from([10, 1000, 10**6, 10**14]))
    a = draw(st.integers(-scale, scale))
    b = draw(st.integers(a, min(a + draw(st.sampled_from([0, 3, 50, scale])), LIMIT)))
    a = max(a, -LIMIT)
    if draw(st.booleans()):  # lower bound a
        kind = draw(st.sampled_from(["minimum", "exclusiveMinimum", "half", "both"]))
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
        kind = draw(st.sampled_from(["maximum", "exclusiveMaximum", "half", "both"]))
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
def string_schemas(draw) -> dict:
    schema: dict[str, Any] = {"type": "string"}
    kind = draw(st.sampled_from(["plain", "lengths", "lengths", "format", "pattern"]))
    if kind == "lengths":
        lo = draw(st.integers(0, 3))
        if draw(st.booleans()):
            schema["minLength"] = lo
        if draw(st.booleans()):
            schema["maxLength"] = draw(st.integers(lo, lo + 3))
    elif kind == "format":
        schema["format"] = draw(st.sampled_from(FORMATS))
    elif kind == "pattern":
        schema["pattern"] = draw(st.sampled_from(sorted(PATTERNS)))
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
        string_schemas(), integer_schemas(), st.just({"type": "number"}), st.just({"type": "boolean"}),
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
_URI_CHARS = string.ascii_letters + string.digits + "-._~:/@!$&'()*+,;=?#[]"


@st.composite
def times(draw) -> str:
    h, m, s = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
    frac = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,9}", fullmatch=True)))
    zone = draw(st.one_of(st.just("Z"), st.builds(lambda sign, zh, zm: f"{sign}{zh:02d}:{zm:02d}",
                                                    st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59))))
    return f"{h:02d}:{m:02d}:{s:02d}{frac}{zone}"


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
        lambda scheme, rest, pct: scheme + ":" + rest + pct,
        st.from_regex(r"[a-z][a-z0-9+.-]{0,5}", fullmatch=True),
        st.text(_URI_CHARS, min_size=1, max_size=12),
        st.sampled_from(["", "%20", "%C3%A9"]),
    ),
}

PATTERN_VALUES = {
    "^[a-z]+$": st.from_regex(r"[a-z]+", fullmatch=True),
    "^\\d{3}-\\d{4}$": st.from_regex(r"[0-9]{3}-[0-9]{4}", fullmatch=True),
    "ab": st.builds(lambda a, b: a + "ab" + b, st.text(string_chars, max_size=3), st.text(string_chars, max_size=3)),
    "^[\"\\\\a-z]+$": st.text('"\\abcxyz', min_size=1, max_size=5),
    "^[é日😀]{1,3}$": st.text("é日😀", min_size=1, max_size=3),
    "^(?:x|\\.)y?$": st.sampled_from(["x", ".", "xy", ".y"]),
}


def _int_bounds(schema: dict) -> tuple[int, int]:
    lo, hi = -LIMIT, LIMIT
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
numbers = st.one_of(st.integers(-LIMIT, LIMIT), st.integers(-100, 100), finite_floats,
                    st.decimals(places=3, min_value=-1000, max_value=1000, allow_nan=False).map(float))


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
    if t == "number":
        return numbers
    if t == "integer":
        lo, hi = _int_bounds(schema)
        return st.one_of(st.integers(lo, hi), st.integers(lo, min(hi, lo + 5)), st.integers(max(lo, hi - 5), hi))
    if t == "string":
        if "format" in schema:
            return FORMAT_VALUES[schema["format"]]
        if "pattern" in schema:
            return PATTERN_VALUES[schema["pattern"]]
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength", lo + 6)
        return st.text(string_chars, min_size=lo, max_size=hi)
    if t == "array":
        return array_instances(schema, root)
    return object_instances(schema, root)


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
        return st.one_of(*base, st.sampled_from(variants + [None, 0, "", [], {}]))
    t = schema["type"]
    if isinstance(t, list):
        return st.one_of(*base, *[near({**schema, "type": x}, root, depth + 1) for x in t])
    if t in ("null", "boolean"):
        return st.one_of(*base, st.sampled_from([None, True, False, 0, 1, "true", "null", [], {}]))
    if t == "integer":
        lo, hi = _int_bounds(schema)
        edges = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, -1, LIMIT + 1]
        return st.one_of(*base, st.sampled_from(edges), st.sampled_from(edges).map(float),
                         st.sampled_from(edges).map(lambda x: x + 0.5), st.just(True))
    if t == "number":
        return st.one_of(*base, numbers, st.sampled_from([True, "1", None]))
    if t == "string":
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength", lo + 3)
        extra = [st.text(string_chars, min_size=max(lo - 1, 0), max_size=hi + 2), st.integers(-3, 3)]
        if "pattern" in schema:
            extra.append(st.from_regex(r"[a-z0-9.xy-]{0,9}\n?", fullmatch=True))
            extra.append(st.text("0123456789-٣", max_size=9))
        if "format" in schema:
            extra.append(st.text("0123456789-:TZ.+@abc/", max_size=12))
        return st.one_of(*base, *extra)
    if t == "array":
        return near_arrays(schema, root, depth)
    return near_objects(schema, root, depth)


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
    if kind in ("json", "layout", "caps"):
        assert not got, f"accepted a text that is not canonical JSON within the caps ({kind}): {text!r}"
        return kind
    if kind == "surrogate":
        return kind
    errors = oracle_errors(schema, value)
    if _known_deviation(errors):
        return kind
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
    for value in instances:
        assert not oracle_errors(schema, value), "the instance generator produced an invalid instance"
        assert plain.is_valid(value)
    try:
        dfa, notes = compiled(schema)
    except SchemaError as exc:  # every generated schema has valid instances within the caps
        capped = [v for v in instances if within_caps(v)]
        if capped:
            pytest.fail(f"SchemaError for a satisfiable schema (valid: {canonical(capped[0])}): {exc}")
        assume(False)
    assert notes == [], "the generated schemas use enforced keywords only"
    exact = not _contains_key(schema, "format")

    texts = []
    for value in instances:
        if not within_caps(value):
            continue
        text = canonical(value)
        assert dfa.accepts(text.encode("utf-8")), f"rejected the valid instance {text!r}"
        texts.append(text)

    for i in range(6):
        value = data.draw(near(schema, root), label=f"near {i}")
        if within_caps(value):
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

    params = {"p": schema, "é q\"": {"type": "integer", "minimum": -3, "maximum": 3}}
    fns = parse_catalog([{"name": "f", "parameters": params}], "test")
    grammar = compile_grammar(fns)
    obj = fns[0].parameters
    call_schema = {"type": "object", "properties": {"name": {"const": "f"}, "parameters": obj},
                   "required": ["name", "parameters"]}
    exact = not _contains_key(schema, "format")
    for i in range(4):
        value = data.draw(valid(obj, obj), label=f"valid {i}")
        if not within_caps(value):
            continue
        text = canonical({"name": "f", "parameters": value})
        assert grammar.dfa.accepts(text.encode()), text
        for j in range(2):
            check_text(grammar.dfa, call_schema, data.draw(mutated(text), label=f"mutation {i}.{j}"), exact=exact)
        near_value = data.draw(near(obj, obj), label=f"near {i}")
        if within_caps(near_value):
            check_text(grammar.dfa, call_schema, canonical({"name": "f", "parameters": near_value}), exact=exact)


# --------------------------------------------------------------------------------------------------------------
# explicit examples: strings, escapes, code points, UTF-8
# --------------------------------------------------------------------------------------------------------------


def accepts(schema: Any, text: str | bytes) -> bool:
    dfa, _ = compiled(schema)
    return dfa.accepts(text.encode("utf-8") if isinstance(text, str) else text)


@pytest.mark.parametrize("text", [
    r'"\""', r'"\\"', r'"\/"', r'"\u00e9"', r'"\ud83d\ude00"', r'"\b\f\n\r\t"', '"é"', '"😀"', '"\u2028"',
    '"\x7f"', '""', r'"\u0000"', r'"a\\\"b"',
])
def test_string_escapes_accepted(text):
    assert accepts({"type": "string"}, text)
    assert json.loads(text) is not None


@pytest.mark.parametrize("text", [
    '"\n"', '"\x00"', '"\x1f"', '"\t"', '"\r"', r'"\x41"', r'"\u12"', r'"\u12G4"', r'"\a"', r'"\U0041"',
    '"\\"', '"a"b"', "'a'", '"a', 'a"',
])
@pytest.mark.parametrize("schema", [{"type": "string"}, {"type": "string", "maxLength": 5},
                                    {"type": "string", "pattern": "ab"}, {"type": ["string", "null"]}])
def test_raw_control_characters_and_bad_escapes_rejected(text, schema):
    assert not accepts(schema, text)


@pytest.mark.parametrize("text, ok", [
    (r'"\ud83d\ude00"', True), (r'"\uD83D\uDE00"', True), ('"😀"', True), ('"é"', True), (r'"\u00e9"', True),
    ('"a"', True), (r'"\""', True),
    ('""', True), ('"ab"', False), (r'"\ud83d\ude00a"', False), ('"😀😀"', False), (r'"\ud83d"', False),
    (r'"\ude00"', False), (r'"\ude00\ud83d"', False), ('"e\u0301"', False),
])
def test_max_length_counts_code_points(text, ok):
    assert accepts({"type": "string", "maxLength": 1}, text) is ok


@pytest.mark.parametrize("text, ok", [
    (r'"\ud83d\ude00"', False), ('"😀😀"', True), (r'"\ud83d\ude00\ud83d\ude00"', True), (r'"\ud83d\ude00x"', True),
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


def test_number_bounds_are_noted_not_enforced():
    dfa, notes = schema_dfa({"type": "number", "minimum": 0, "maximum": 1})
    assert dfa.accepts(b"5.5")
    assert not dfa.accepts(b"-1")  # the sign is enforced
    assert {n.keyword for n in notes if n.kind == "not enforced"} == {"minimum", "maximum"}


# --------------------------------------------------------------------------------------------------------------
# integer ranges
# --------------------------------------------------------------------------------------------------------------

_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")


def _window(lo: int | None, hi: int | None) -> set[int]:
    points = {0, LIMIT, -LIMIT, LIMIT + 1, -LIMIT - 1}
    for p in (lo, hi):
        if p is not None:
            points |= set(range(p - 25, p + 26)) | {-p}
    for k in range(1, 16):
        for base in (10**k, -(10**k)):
            points |= {base - 1, base, base + 1}
    if lo is not None and hi is not None and hi - lo < 400:
        points |= set(range(lo - 3, hi + 4))
    return points


def _check_range(lo: int | None, hi: int | None, use_dfa: bool = False) -> None:
    rx = integer_range(lo, hi)
    elo = -LIMIT if lo is None else max(lo, -LIMIT)
    ehi = LIMIT if hi is None else min(hi, LIMIT)
    if elo > ehi:
        assert rx is None, (lo, hi, rx)
        return
    assert rx is not None, (lo, hi)
    compiled_rx = re.compile(rx)
    dfa = D.from_regex(rx) if use_dfa else None
    for n in _window(lo, hi):
        expected = elo <= n <= ehi
        assert bool(compiled_rx.fullmatch(str(n))) is expected, (lo, hi, n, rx)
        if dfa is not None:
            assert dfa.accepts(str(n).encode()) is expected, (lo, hi, n)
    for bad in ("", "-", "00", "01", "-01", "+1", "1.0", "1e3", " 1", "- 1"):
        assert not compiled_rx.fullmatch(bad), (lo, hi, bad)
    assert not compiled_rx.fullmatch("-0"), (lo, hi)  # zero is written "0" only


bounds = st.one_of(
    st.none(), st.integers(-60, 60), st.integers(-(10**6), 10**6), st.integers(-(10**16), 10**16),
    st.sampled_from([0, -1, 1, 9, 10, 99, 100, -9, -10, -100, 999, 1000, LIMIT, -LIMIT, LIMIT + 1, -LIMIT - 1]),
    st.integers(1, 15).map(lambda k: 10**k - 1), st.integers(1, 15).map(lambda k: -(10**k)),
)


@settings(max_examples=400, deadline=None)
@given(lo=bounds, hi=bounds)
def test_integer_range_brute_force(lo, hi):
    _check_range(lo, hi)


@settings(max_examples=40, deadline=None)
@given(lo=st.one_of(st.none(), st.integers(-3000, 3000)), hi=st.one_of(st.none(), st.integers(-3000, 3000)))
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
    ({"type": "integer", "minimum": -(10**15)}, [-LIMIT, LIMIT], [-(10**15)]),
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


def test_date_format_never_produces_february_29():
    dfa, notes = schema_dfa({"type": "string", "format": "date"})
    assert dfa.accepts(b'"2024-02-28"') and dfa.accepts(b'"2023-04-30"')
    assert not dfa.accepts(b'"2023-02-29"') and not dfa.accepts(b'"2024-02-29"')
    assert not dfa.accepts(b'"2023-04-31"')


def test_enum_numbers_compare_by_value():
    assert accepts({"enum": [1.0]}, "1")
    assert accepts({"const": 1}, "1.0")


def test_any_value_nesting_is_limited_with_a_note():
    dfa, notes = schema_dfa({})
    assert dfa.accepts(b"[[1]]") and not dfa.accepts(b"[[[1]]]")
    assert [(n.kind, n.keyword, n.detail) for n in notes] == [("limited", "any value", "nested at most 2 deep")]
