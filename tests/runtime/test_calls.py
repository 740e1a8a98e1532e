"""The check after generation (runtime.decoding.calls.to_call): parse, validate with the format checker, type numbers."""

import json

import jsonschema
import pytest

from callmaybe.core.catalog import parse_catalog
from callmaybe.runtime.decoding.calls import InvalidCall, schema_error, to_call

FNS = {f.name: f for f in parse_catalog([
    {"name": "ping", "parameters": {"type": "object", "properties": {"ip": {"type": "string", "format": "ipv4"}},
                                    "required": ["ip"]}},
    {"name": "meet", "parameters": {"type": "object", "properties": {
        "day": {"type": "string", "format": "date"}, "n": {"type": "number"}}, "required": ["day"]}},
], "test")}


def call(name, **parameters):
    return json.dumps({"name": name, "parameters": parameters})


def test_unenforced_format_is_checked_after_generation():
    with pytest.raises(InvalidCall) as exc:
        to_call(call("ping", ip="300.1.2.3"), FNS)
    assert str(exc.value) == "arguments do not match ping's schema: '300.1.2.3' is not a 'ipv4'"
    assert to_call(call("ping", ip="10.0.0.1"), FNS) == {"name": "ping", "parameters": {"ip": "10.0.0.1"}}


def test_dates_are_checked_with_leap_years():
    assert to_call(call("meet", day="2024-02-29", n=2), FNS) == {"name": "meet",
                                                                 "parameters": {"day": "2024-02-29", "n": 2.0}}
    with pytest.raises(InvalidCall, match="'2023-02-29' is not a 'date'"):
        to_call(call("meet", day="2023-02-29"), FNS)


def test_a_check_jsonschema_cannot_make_is_an_error_entry_not_a_crash():
    """A 401-digit integer against a float ``multipleOf``: jsonschema's division overflows (it raised
    OverflowError through the run); an integer past Python's 4,300-digit limit: json.loads raises a ValueError
    that is no JSONDecodeError. Both found by a break test of ``not: {multipleOf: 1.5}``, whose grammar writes any
    integer."""
    fns = {f.name: f for f in parse_catalog([{"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "number", "not": {"multipleOf": 1.5, "minimum": 1, "exclusiveMaximum": 100}}}}}], "t")}
    with pytest.raises(InvalidCall) as exc:
        to_call('{"name": "f", "parameters": {"n": 1' + "0" * 400 + "}}", fns)
    assert str(exc.value) == "arguments cannot be checked against f's schema: int too large to convert to float"
    with pytest.raises(InvalidCall, match=r"^output is not JSON \(Exceeds the limit \(4300 digits\)"):
        to_call('{"name": "f", "parameters": {"n": 1' + "0" * 5000 + "}}", fns)
    assert to_call('{"name": "f", "parameters": {"n": 2}}', fns) == {"name": "f", "parameters": {"n": 2.0}}


def test_schema_error_messages():
    assert schema_error({"ip": "1.2.3.4"}, FNS["ping"].parameters) is None
    assert schema_error({}, FNS["ping"].parameters) == "'ip' is a required property"
    with pytest.raises(jsonschema.SchemaError):
        schema_error(1, {"type": "strin"})
    bad = {"bad": parse_catalog([{"name": "bad", "parameters": {"type": "object"}}], "t")[0]}
    bad["bad"].parameters["properties"] = {"x": {"type": "strin"}}
    with pytest.raises(InvalidCall, match="^bad's schema is not valid JSON Schema: "):
        to_call(call("bad", x=1), bad)


def test_unicode_property_classes_in_a_catalog_load_and_are_checked_after_generation():
    # issue 13 item 12: a pattern with \p{Letter} was refused at load (jsonschema reads patterns with re)
    fns = {f.name: f for f in parse_catalog([
        {"name": "greet", "parameters": {"who": {"type": "string", "pattern": "^\\p{Letter}+$"},
                                         "tags": {"type": "object", "patternProperties": {"^\\p{Lu}": {"type": "integer"}},
                                                  "additionalProperties": False}}},
    ], "test")}
    assert to_call(call("greet", who="Zoë", tags={"Ä": 1}), fns) == {
        "name": "greet", "parameters": {"who": "Zoë", "tags": {"Ä": 1}}}
    with pytest.raises(InvalidCall) as exc:
        to_call(call("greet", who="Zoë2", tags={}), fns)
    assert str(exc.value) == "arguments do not match greet's schema: 'Zoë2' does not match '^\\\\p{Letter}+$'"
    with pytest.raises(InvalidCall, match="'ä' does not match any of the regexes: '\\^\\\\\\\\p\\{Lu\\}'"):
        to_call(call("greet", who="Zoë", tags={"ä": 1}), fns)


def test_a_property_class_the_check_cannot_read_is_refused_at_load_by_name():
    from callmaybe.core.errors import CatalogError

    with pytest.raises(CatalogError) as exc:
        parse_catalog([{"name": "g", "parameters": {"s": {"type": "string", "pattern": "^\\p{Greek}+$"}}}], "cat.json")
    assert str(exc.value) == ("cat.json: function 0 (g): pattern '^\\\\p{Greek}+$': \\p{Greek} is not a property "
                              "the check after generation knows (general categories, Any, ASCII and Assigned)")


def test_the_check_reads_shorthand_classes_as_ecma_262_does_and_names_patterns_as_written():
    # \D and \S are wider in ECMA-262 than in Python's re (ASCII digits, ECMA white space): the grammar and the
    # check must agree
    assert schema_error("\u0663a", {"type": "string", "pattern": "^\\D\\p{L}$"}) is None
    assert schema_error("\u001ca", {"type": "string", "pattern": "^\\S\\p{L}$"}) is None
    assert schema_error("\u0663", {"type": "string", "pattern": "^\\d+$"}) == "'\u0663' does not match '^\\\\d+$'"
    nested = {"type": "object", "properties": {"x": {"type": "object", "patternProperties": {
        "^\\p{Lu}": {"type": "string", "pattern": "^\\p{Ll}+$"}}, "additionalProperties": False}}}
    assert schema_error({"x": {"A": "AB"}}, nested) == "'AB' does not match '^\\\\p{Ll}+$'"
    two = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^\\p{L}$"},
                                            "y": {"type": "string", "pattern": "^\\p{Letter}$"}}}
    assert schema_error({"x": "ab"}, two) == "'ab' does not match '^\\\\p{L}$'"
    assert schema_error({"y": "ab"}, two) == "'ab' does not match '^\\\\p{Letter}$'"
    from callmaybe.core.errors import CatalogError

    with pytest.raises(CatalogError) as exc:
        parse_catalog([{"name": "f", "parameters": {"x": {"type": "string", "pattern": "^(\\p{L}$"}}}], "c.json")
    assert str(exc.value) == "c.json: function 0 (f): invalid JSON Schema at 'properties/x/pattern': '^(\\\\p{L}$' is not a 'regex'"
