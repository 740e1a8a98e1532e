"""Objects: extra members (patternProperties, additionalProperties schemas), allOf layers, propertyNames,
min/maxProperties, dependencies and unevaluatedProperties, each with exact verdicts; then property tests
against jsonschema, and the JSON Schema Test Suite files of these keywords.

Layout rules of the grammar (stated exclusions): named keys (``properties`` in declaration order, then
``required`` names not declared) come first, in that order, then the extra keys; extra keys only where
``patternProperties`` or an ``additionalProperties`` schema allows them, or in a map (no property declared).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, Draft7Validator

from callmaybe.compiler.grammar import compile_grammar, schema_dfa
from callmaybe.compiler.automata.lexical import canonical
from callmaybe.compiler.limits import CompileLimitError, CompileLimits
from callmaybe.compiler.schema.objects import MAX_DEPENDENCIES, MAX_REGIONS
from callmaybe.core.catalog import parse_catalog
from callmaybe.core.errors import SchemaError

from ..conftest import shared_path


def verdicts(schema: Any, values: list[Any]) -> list[bool]:
    """The DFA's verdict on each value written canonically; every accepted value must be valid (jsonschema,
    draft 7 for ``dependencies``, else 2020-12)."""
    dfa, _ = schema_dfa(schema)
    got = [dfa.accepts(canonical(v).encode("utf-8")) for v in values]
    validator = (Draft7Validator if "dependencies" in json.dumps(schema) else Draft202012Validator)(schema)
    for v, ok in zip(values, got):
        assert not ok or validator.is_valid(v), f"accepted the invalid {v!r}"
    return got


def notes_of(schema: Any) -> list[str]:
    return [f"{n.kind}: {n}" for n in schema_dfa(schema)[1]]


# --------------------------------------------------------------------------------------------------------------
# issue 13 item 5: patternProperties with additionalProperties false
# --------------------------------------------------------------------------------------------------------------

X_ONLY = {"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "string"}},
          "additionalProperties": False}


def test_pattern_properties_with_additional_false_take_matching_keys():
    assert verdicts(X_ONLY, [
        {}, {"x-a": "s"}, {"x-abc": "s", "x-d": ""}, {"x-a": 1}, {"x-": "s"}, {"x-A": "s"}, {"y-a": "s"},
        {"x-a": "s", "y": "t"}, {"x-ab1": "s"},
    ]) == [True, True, True, False, False, False, False, False, False]
    assert notes_of(X_ONLY) == ["not enforced: schema 'schema': patternProperties (extra keys are not "
                                "checked for repeats)"]


def test_pattern_properties_beside_declared_properties():
    schema = {"type": "object", "properties": {"id": {"type": "integer"}},
              "patternProperties": {"^x-": {"type": "boolean"}}, "additionalProperties": False, "required": ["id"]}
    assert verdicts(schema, [
        {"id": 1}, {"id": 1, "x-a": True}, {"id": 1, "x-a": True, "x-b": False}, {"x-a": True, "id": 1},
        {"id": 1, "x-a": 1}, {"id": 1, "y": True}, {"x-a": True},
    ]) == [True, True, True, False, False, False, False]


def test_declared_property_matching_a_pattern_meets_both():
    schema = {"type": "object", "properties": {"x-n": {"type": "integer"}},
              "patternProperties": {"^x-": {"type": ["integer", "string"], "minimum": 5}}}
    assert verdicts(schema, [{"x-n": 7}, {"x-n": 3}, {"x-n": 7, "x-m": 9}, {"x-n": 7, "x-m": 2},
                             {"x-n": 7, "x-m": "s"}, {"x-n": "s"}]) == [True, False, True, False, True, False]


# --------------------------------------------------------------------------------------------------------------
# issue 13 item 11: allOf branches (through $ref) merge into one object
# --------------------------------------------------------------------------------------------------------------

BASE = {"type": "object", "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
        "required": ["name", "type"]}
EXTENDED = {"$defs": {"base": BASE},
            "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"generated": {"type": "boolean"}}}]}
NAMED = {"name": "a", "type": "Int32"}


def test_allof_branches_merge_their_properties():
    assert verdicts(EXTENDED, [
        NAMED, {**NAMED, "generated": True}, {**NAMED, "generated": "yes"}, {"name": "a"},
        {"generated": True, **NAMED}, {**NAMED, "other": 1},
    ]) == [True, True, False, False, False, False]
    assert notes_of(EXTENDED) == []


def test_allof_branch_with_additional_false_refuses_the_other_branch_keys():
    closed = {"$defs": {"base": {**BASE, "additionalProperties": False}}, "allOf": EXTENDED["allOf"]}
    assert verdicts(closed, [NAMED, {**NAMED, "generated": True}]) == [True, False]
    # the same through a $ref beside properties, and with the branches the other way round
    beside = {"$defs": {"base": {**BASE, "additionalProperties": False}}, "$ref": "#/$defs/base",
              "properties": {"generated": {"type": "boolean"}}}
    assert verdicts(beside, [NAMED, {**NAMED, "generated": True}]) == [True, False]
    flipped = {"$defs": closed["$defs"], "allOf": [{"properties": {"generated": {"type": "boolean"}}},
                                                   {"$ref": "#/$defs/base"}]}
    assert verdicts(flipped, [NAMED, {"generated": True, **NAMED}]) == [True, False]


def test_allof_branch_with_additional_schema_constrains_the_other_branch_keys():
    schema = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                         "additionalProperties": {"type": "string"}},
                        {"properties": {"b": {}, "c": {"type": "integer"}}}]}
    # b and c are additional for the first branch: strings; c must also be an integer: impossible
    assert verdicts(schema, [{"a": 1}, {"a": 1, "b": "s"}, {"a": 1, "b": 2}, {"a": 1, "c": 3},
                             {"a": 1, "d": "s"}]) == [True, True, False, False, True]


def test_allof_pattern_branches_take_each_other_additional():
    schema = {"allOf": [
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "additionalProperties": False},
        {"patternProperties": {"y$": {"maxLength": 2}}, "additionalProperties": {"type": "string"}},
    ]}
    # "xy" matches both patterns: a string of at most 2; "xa" only the first: a string (the second branch's
    # additionalProperties); "ay" only the second: refused by the first branch
    assert verdicts(schema, [{"xy": "ab"}, {"xy": "abc"}, {"xa": "abc"}, {"xa": 1}, {"ay": "a"}, {}]) == [
        True, False, True, False, False, True]
    assert notes_of(schema) == ["not enforced: schema 'schema': patternProperties (extra keys are not checked "
                                "for repeats)"]


def test_allof_parameters_through_the_catalog():
    params = {"type": "object", "$defs": {"base": BASE}, "allOf": EXTENDED["allOf"]}
    fns = parse_catalog([{"name": "f", "parameters": params}], "t")
    assert fns[0].parameters["unevaluatedProperties"] is False
    assert "additionalProperties" not in fns[0].parameters
    dfa = compile_grammar(fns).dfa
    calls = [NAMED, {**NAMED, "generated": True}, {**NAMED, "other": 1}]
    assert [dfa.accepts(canonical({"name": "f", "parameters": p}).encode()) for p in calls] == [True, True, False]
    for p in calls[:2]:  # the check after generation agrees
        assert Draft202012Validator(fns[0].parameters).is_valid(p)
    assert not Draft202012Validator(fns[0].parameters).is_valid(calls[2])
    # a required name that only an allOf branch declares
    fns = parse_catalog([{"name": "f", "parameters": {**params, "required": ["generated"]}}], "t")
    dfa = compile_grammar(fns).dfa
    assert [dfa.accepts(canonical({"name": "f", "parameters": p}).encode()) for p in calls] == [False, True, False]


# --------------------------------------------------------------------------------------------------------------
# issue 13 item 12 (objects): patternProperties with boolean schemas, additionalProperties schemas
# --------------------------------------------------------------------------------------------------------------


def test_pattern_properties_with_boolean_schemas():
    schema = {"patternProperties": {"f.*": True, "b.*": False}}
    assert verdicts(schema, [{}, {"foo": 1}, {"bar": 2}, {"foo": 1, "bar": 2}, {"foobar": 1}, {"quux": 3}]) == [
        True, True, False, False, False, True]


def test_additional_properties_schema_opens_extra_keys():
    schema = {"type": "object", "properties": {"foo": {}, "bar": {}}, "additionalProperties": {"type": "boolean"}}
    assert verdicts(schema, [{"foo": 1, "bar": 2, "quux": True}, {"foo": 1, "bar": 2, "quux": 12},
                             {"quux": True, "foo": 1}, {"q": True, "r": False}]) == [True, False, False, True]


def test_declared_properties_stay_closed_without_an_additional_schema():
    for extra in ({}, {"additionalProperties": True}):
        schema = {"type": "object", "properties": {"foo": {}}, **extra}
        assert verdicts(schema, [{"foo": 1}, {"foo": 1, "bar": 2}]) == [True, False]


def test_extra_keys_are_written_canonically():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}, "propertyNames": {"maxLength": 3}}
    dfa, _ = schema_dfa(schema)
    assert dfa.accepts('{"a\\nb": 1}'.encode()) and dfa.accepts('{"é": 1}'.encode())
    assert not dfa.accepts('{"\\u0041": 1}'.encode())  # "A" spelled as an escape
    assert not dfa.accepts('{"\\/": 1}'.encode())


def test_required_names_not_declared_follow_patterns_and_additional():
    schema = {"type": "object", "properties": {"a": {}}, "required": ["x-k"],
              "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    assert verdicts(schema, [{"x-k": 1}, {"a": 0, "x-k": 1}, {"x-k": "s"}, {"a": 0}]) == [True, True, False, False]
    refused = {"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": False}
    with pytest.raises(SchemaError, match="admits no value"):
        schema_dfa(refused)


def test_a_map_with_required_names_keeps_other_keys():
    schema = {"type": "object", "required": ["id"], "additionalProperties": {"type": "integer"}}
    assert verdicts(schema, [{"id": 1}, {"id": 1, "n": 2}, {"n": 2}, {"id": "s"}, {"n": 2, "id": 1}]) == [
        True, True, False, False, False]


# --------------------------------------------------------------------------------------------------------------
# propertyNames
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("names, accepted, refused", [
    ({"maxLength": 3}, [{}, {"foo": 1}, {"a": 1, "bc": 2}], [{"foob": 1}]),
    ({"pattern": "^a+$"}, [{"a": 1}, {"aa": 1, "aaa": 2}], [{"aaA": 1}, {"b": 1}]),
    ({"enum": ["foo", "bar"]}, [{"foo": 1}, {"bar": 2, "foo": 1}], [{"baz": 1}]),
    ({"const": "foo"}, [{"foo": 1}], [{"bar": 1}]),
    (False, [{}], [{"foo": 1}]),
    ({"type": "integer"}, [{}], [{"1": 1}]),
])
def test_property_names_restrict_map_keys(names, accepted, refused):
    schema = {"type": "object", "propertyNames": names}
    assert verdicts(schema, accepted) == [True] * len(accepted)
    assert verdicts(schema, refused) == [False] * len(refused)


def test_property_names_drop_declared_properties_and_refuse_required_ones():
    schema = {"type": "object", "properties": {"ok": {}, "too_long": {}}, "propertyNames": {"maxLength": 3}}
    assert verdicts(schema, [{"ok": 1}, {"ok": 1, "too_long": 2}, {"too_long": 2}]) == [True, False, False]
    with pytest.raises(SchemaError, match="admits no value"):
        schema_dfa({**schema, "required": ["too_long"]})


# --------------------------------------------------------------------------------------------------------------
# minProperties / maxProperties
# --------------------------------------------------------------------------------------------------------------

OPTIONAL3 = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                              "c": {"type": "integer"}}}


@pytest.mark.parametrize("bounds, sizes", [
    ({"minProperties": 2}, [2, 3]),
    ({"maxProperties": 1}, [0, 1]),
    ({"minProperties": 1, "maxProperties": 2}, [1, 2]),
    ({"minProperties": 1.0, "maxProperties": 2.0}, [1, 2]),
    ({"maxProperties": 0}, [0]),
    ({"minProperties": 3}, [3]),
])
def test_counts_over_optional_members(bounds, sizes):
    schema = {**OPTIONAL3, **bounds}
    subsets = [dict(c) for n in range(4) for c in itertools.combinations([("a", 1), ("b", 2), ("c", 3)], n)]
    got = verdicts(schema, subsets)
    assert got == [len(s) in sizes for s in subsets]


def test_counts_with_extra_members():
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
              "additionalProperties": {"type": "string"}, "minProperties": 2, "maxProperties": 3}
    assert verdicts(schema, [{"id": 1}, {"id": 1, "a": "x"}, {"id": 1, "a": "x", "b": "y"},
                             {"id": 1, "a": "x", "b": "y", "c": "z"}]) == [False, True, True, False]


def test_counts_past_the_cap_are_noted():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 100}
    assert "not enforced: schema 'schema': maxProperties (above 64)" in notes_of(schema)


def test_impossible_counts_are_unsatisfiable():
    for schema in ({**OPTIONAL3, "minProperties": 4}, {**OPTIONAL3, "minProperties": 2, "maxProperties": 1},
                   {**OPTIONAL3, "required": ["a", "b"], "maxProperties": 1}):
        with pytest.raises(SchemaError, match="admits no value"):
            schema_dfa(schema)


# --------------------------------------------------------------------------------------------------------------
# dependentRequired, dependentSchemas, draft 7 dependencies
# --------------------------------------------------------------------------------------------------------------

FOO_BAR = {"type": "object", "properties": {"foo": {}, "bar": {}, "baz": {}}}


def test_dependent_required_forward_and_backward():
    later = {**FOO_BAR, "dependentRequired": {"foo": ["bar"]}}  # an earlier key needs a later one
    earlier = {**FOO_BAR, "dependentRequired": {"bar": ["foo"]}}  # a later key needs an earlier one
    values = [{}, {"foo": 1}, {"bar": 2}, {"foo": 1, "bar": 2}, {"baz": 3}, {"foo": 1, "baz": 3}]
    assert verdicts(later, values) == [True, False, True, True, True, False]
    assert verdicts(earlier, values) == [True, True, False, True, True, True]
    draft7 = {**FOO_BAR, "dependencies": {"foo": ["bar"]}}
    assert verdicts(draft7, values) == verdicts(later, values)


def test_dependent_required_on_a_required_key_is_required():
    schema = {**FOO_BAR, "required": ["foo"], "dependentRequired": {"foo": ["baz"]}}
    assert verdicts(schema, [{"foo": 1}, {"foo": 1, "baz": 3}, {"foo": 1, "bar": 2, "baz": 3}]) == [
        False, True, True]


def test_dependent_schemas():
    schema = {**FOO_BAR, "dependentSchemas": {"bar": {"properties": {"foo": {"type": "integer"},
                                                                    "bar": {"type": "integer"}}}}}
    assert verdicts(schema, [{"foo": "x"}, {"foo": 1, "bar": 2}, {"foo": "x", "bar": 2}, {"foo": 1, "bar": "y"},
                             {"bar": 2}]) == [True, True, False, False, True]
    forbidden = {**FOO_BAR, "dependentSchemas": {"bar": False}}
    assert verdicts(forbidden, [{"foo": 1}, {"bar": 2}, {"foo": 1, "bar": 2}]) == [True, False, False]
    draft7 = {**FOO_BAR, "dependencies": {"bar": {"required": ["baz"]}}}
    assert verdicts(draft7, [{"bar": 2}, {"bar": 2, "baz": 3}, {"baz": 3}]) == [False, True, True]


def test_a_dependent_schema_of_a_forbidden_key_leaves_the_object_as_it_was():
    """Found by the property test: every declared property false makes the object a map of other keys; the
    dependent schema of a key that cannot appear merged ``false`` with ``false`` into ``allOf`` (a schema that
    looked declared), which closed the map."""
    plain = {"type": "object", "properties": {"b": False, "x-a": False}}
    dependent = {**plain, "dependentSchemas": {"b": {"required": ["x-a"]}}}
    for schema in (plain, dependent):
        assert verdicts(schema, [{"a": 0}, {}, {"b": 1}, {"x-a": 1}]) == [True, True, False, False]


def test_dependencies_past_the_limit_are_noted():
    names = [f"k{i}" for i in range(MAX_DEPENDENCIES + 2)]
    schema = {"type": "object", "properties": {n: {"type": "null"} for n in names},
              "dependentRequired": {n: [names[0]] for n in names[1:]}}
    notes = notes_of(schema)
    assert f"not enforced: schema 'schema': dependentRequired (more than {MAX_DEPENDENCIES} dependencies)" in notes
    dfa, _ = schema_dfa(schema)
    assert not dfa.accepts(b'{"k1": null}') and dfa.accepts(b'{"k0": null, "k1": null}')


# --------------------------------------------------------------------------------------------------------------
# unevaluatedProperties
# --------------------------------------------------------------------------------------------------------------


def test_unevaluated_properties_with_allof_and_ref():
    schema = {"$defs": {"base": {"properties": {"a": {"type": "integer"}}}},
              "type": "object", "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"b": {"type": "integer"}}}],
              "unevaluatedProperties": False}
    assert verdicts(schema, [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "c": 3}, {"a": "s"}]) == [True, True, False, False]
    assert notes_of(schema) == []


def test_unevaluated_properties_schema_applies_to_other_keys():
    schema = {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {"type": "integer"}},
              "unevaluatedProperties": {"type": "string"}}
    assert verdicts(schema, [{"a": 1, "x1": 2, "y": "s"}, {"a": 1, "y": 2}, {"x1": "s"}]) == [True, False, False]


def test_unevaluated_properties_with_anyof_branches():
    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"],
              "anyOf": [{"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                        {"properties": {"c": {"type": "integer"}}, "required": ["c"]}],
              "unevaluatedProperties": False}
    # keys two matching branches evaluate between them ({"b", "c"}) are evaluated: every set of branches
    # that may match together carries its own layer
    assert verdicts(schema, [{"a": 1, "b": 2}, {"a": 1, "c": 3}, {"a": 1}, {"a": 1, "b": 2, "d": 4},
                             {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": "x"}]) == [
        True, True, False, False, True, False]
    assert not any("unevaluatedProperties (with anyOf" in n for n in notes_of(schema))
    wide = {"type": "object", "anyOf": [{"properties": {k: {"type": "integer"}}, "required": [k]} for k in "bcdef"],
            "unevaluatedProperties": False}
    assert verdicts(wide, [{"b": 1}, {"b": 1, "c": 2}]) == [True, False]
    assert any("unevaluatedProperties (with anyOf of more than 4 branches" in n for n in notes_of(wide))


def test_nested_unevaluated_properties_see_their_own_branch_only():
    schema = {"type": "object", "properties": {"foo": {"type": "string"}},
              "allOf": [{"unevaluatedProperties": False}], "unevaluatedProperties": True}
    assert verdicts(schema, [{}, {"foo": "x"}]) == [True, False]


# --------------------------------------------------------------------------------------------------------------
# notes and limits
# --------------------------------------------------------------------------------------------------------------


def test_untranslatable_pattern_applies_to_every_key_with_a_note():
    # a word boundary: the grammar cannot translate it, the check after generation (RE2) reads it (a lookahead
    # would be refused by the catalog reader: it cannot be checked in linear time, issue 30 item 11)
    schema = {"type": "object", "patternProperties": {"\\ba": {"type": "integer"}},
              "additionalProperties": {"type": "integer"}}
    notes = notes_of(schema)
    assert any(n.startswith("limited: schema 'schema': patternProperties (pattern '\\\\ba' cannot be translated")
               for n in notes)
    assert verdicts(schema, [{"ab": 1}, {"b": 2}, {"ab": "s"}]) == [True, True, False]


def test_too_many_pattern_regions_are_refused():
    patterns = {c: {"type": "integer", "minimum": i} for i, c in enumerate("abcdefg")}  # searches: they overlap
    with pytest.raises(CompileLimitError, match=f"more than {MAX_REGIONS}"):
        schema_dfa({"type": "object", "patternProperties": patterns})


def test_many_optional_members_with_counts_stop_at_the_states_limit():
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(60)},
              "minProperties": 30, "maxProperties": 40}
    with pytest.raises(CompileLimitError, match="states"):
        schema_dfa(schema, limits=CompileLimits(states=50_000))


# --------------------------------------------------------------------------------------------------------------
# property tests: random object schemas and instances against jsonschema plus the layout rules
# --------------------------------------------------------------------------------------------------------------

KEYS = ["a", "b", "x-a", "x-bb", "ya", "ab", "é", 'q"', "a\nb"]
# patterns whose Python meaning on these keys is the ECMA-262 one
PATTERNS = ["^x-", "a$", "b", "^[a-z]+$"]
LEAVES = [{"type": "integer"}, {"type": "integer", "minimum": 0, "maximum": 5}, {"type": "string", "maxLength": 2},
          {"type": "boolean"}, {"type": "null"}, {"enum": [1, "s"]}, {"type": ["string", "null"]}]
VALUES = [0, 3, 7, -1, "s", "abc", "", True, None, 1]

leaves = st.sampled_from(LEAVES)


@st.composite
def object_parts(draw, with_required: bool = True) -> dict:
    """The object keywords of one schema (or one allOf branch)."""
    out: dict[str, Any] = {}
    declared = draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True))
    if declared:
        out["properties"] = {k: draw(st.one_of(leaves, st.just(False))) if draw(st.integers(0, 6)) == 0
                             else draw(leaves) for k in declared}
    if with_required and draw(st.booleans()):
        out["required"] = draw(st.lists(st.sampled_from(declared + ["b", "x-a"]), max_size=2, unique=True))
    if draw(st.booleans()):
        out["patternProperties"] = {p: draw(st.one_of(leaves, st.just(False), st.just(True)))
                                    for p in draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2,
                                                           unique=True))}
    extra = draw(st.sampled_from(["absent", "absent", "false", "true", "schema"]))
    if extra == "false":
        out["additionalProperties"] = False
    elif extra == "true":
        out["additionalProperties"] = True
    elif extra == "schema":
        out["additionalProperties"] = draw(leaves)
    return out


@st.composite
def object_schemas(draw) -> dict:
    schema: dict[str, Any] = {"type": "object", **draw(object_parts())}
    if draw(st.integers(0, 3)) == 0:
        schema["allOf"] = [draw(object_parts(False))]
    if draw(st.integers(0, 3)) == 0:
        lo = draw(st.integers(0, 2))
        if draw(st.booleans()):
            schema["minProperties"] = lo
        if draw(st.booleans()):
            schema["maxProperties"] = draw(st.integers(lo, lo + 2))
    if draw(st.integers(0, 4)) == 0:
        schema["propertyNames"] = draw(st.sampled_from([{"maxLength": 2}, {"pattern": "^[a-z-]+$"},
                                                        {"enum": ["a", "b", "x-a"]}]))
    named = list(schema.get("properties", {}))
    if len(named) >= 2 and draw(st.integers(0, 3)) == 0:
        k, dep = draw(st.permutations(named))[:2]
        if draw(st.booleans()):
            schema["dependentRequired"] = {k: [dep]}
        else:
            schema["dependentSchemas"] = {k: {"required": [dep]} if draw(st.booleans())
                                          else {"properties": {dep: draw(leaves)}}}
    return schema


def _layout_allows(schema: dict, keys: list[str]) -> bool:
    """True when ``keys`` (in their order) are in the grammar's layout for ``schema`` (see the module
    docstring). A dependent schema ``K: S`` (``K`` not required) splits the object as the grammar does
    (:meth:`~callmaybe.compiler.schema.objects.ObjectCompiler.dependencies`): without ``K``, the layout of
    ``properties: {K: false}`` (the names ``S`` declares still declared, any value) merged in; with it, of
    ``required: [K]`` and ``S`` merged in. A property that only the first alternative forbids still closes the
    object in the second."""
    parts = [schema, *schema.get("allOf", [])]
    required = {k for part in parts for k in part.get("required", [])}
    for name, dep in schema.get("dependentSchemas", {}).items():
        declared = dep.get("properties", {}) if isinstance(dep, dict) else {}
        if name in keys or name in required:
            parts += [{"required": [name]}, dep if isinstance(dep, dict) else {}]
        else:
            parts.append({"properties": {name: False, **{n: True for n in declared if n != name}}})
    named: list[str] = []
    for part in parts:
        named.extend(k for k in part.get("properties", {}) if k not in named)
    for part in parts:
        named.extend(k for k in part.get("required", []) if k not in named)
    patterns = [p for part in parts for p in part.get("patternProperties", {})]
    extras_by_schema = any(isinstance(part.get("additionalProperties"), dict) for part in parts)
    # a property one part forbids (``false``) is forbidden in the merged schema, whatever the others say
    forbidden = {k for part in parts for k, v in part.get("properties", {}).items() if v is False}
    declared = any(k not in forbidden for part in parts for k in part.get("properties", {}))
    map_open = not declared and all(part.get("additionalProperties", True) is not False for part in parts)
    positions = [named.index(k) for k in keys if k in named]
    first_extra = next((i for i, k in enumerate(keys) if k not in named), len(keys))
    if positions != sorted(positions) or any(k in named for k in keys[first_extra:]):
        return False
    return all(any(re.search(p, k) for p in patterns) or extras_by_schema or map_open
               for k in keys[first_extra:])


def test_a_property_that_allof_forbids_leaves_the_object_open_to_other_keys():
    # hypothesis's example: ``b`` is an integer in one part and ``false`` in another, so no property is
    # declared and the object is a map of any keys (of at most two characters); ``_layout_allows`` agrees
    schema = {"type": "object", "properties": {"b": {"type": "integer"}}, "allOf": [{"properties": {"b": False}}],
              "propertyNames": {"maxLength": 2}}
    dfa, _ = schema_dfa(schema)
    values = [{"a": 0}, {"b": 0}, {"abc": 0}, {}]
    assert [dfa.accepts(canonical(v).encode("utf-8")) for v in values] == [True, False, False, True]
    assert [Draft202012Validator(schema).is_valid(v) for v in values] == [True, False, False, True]
    assert _layout_allows(schema, ["a"]) is True


def test_a_dependent_schema_that_cannot_hold_leaves_the_object_without_its_key_open():
    # hypothesis's example: ``a`` needs ``x-a``, which is ``false``: ``a`` never appears, and the object
    # without it declares no property (``a`` and ``x-a`` both forbidden there), so it is a map of keys of at
    # most two characters; ``{"b": 0}`` is valid (no ``a``: the dependent schema does not apply)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "x-a": False},
              "propertyNames": {"maxLength": 2}, "dependentSchemas": {"a": {"required": ["x-a"]}}, "allOf": [{}]}
    dfa, _ = schema_dfa(schema)
    values = [{"b": 0}, {"a": 0}, {}, {"x-a": 0}, {"ab": 1, "b": 2}, {"abc": 1}]
    assert [dfa.accepts(canonical(v).encode("utf-8")) for v in values] == [True, False, True, False, True, False]
    assert [Draft202012Validator(schema).is_valid(v) for v in values] == [True, False, True, False, True, False]
    assert [_layout_allows(schema, list(v)) for v in values] == [True, True, True, True, True, True]
    # with a dependent schema that can hold and a property left declared, the object is closed either way
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "ya": {}},
              "dependentSchemas": {"a": {"properties": {"x-a": {"type": "integer"}}}}}
    dfa, _ = schema_dfa(schema)
    values = [{"b": 0}, {"a": 0, "b": 0}, {"a": 0}, {"a": 0, "x-a": 1}, {"x-a": 1}, {"ya": 1, "a": 0}]
    assert [dfa.accepts(canonical(v).encode("utf-8")) for v in values] == [False, False, True, True, True, False]
    assert [_layout_allows(schema, list(v)) for v in values] == [False, False, True, True, True, False]


def test_a_property_forbidden_in_one_layer_and_true_in_another_declares_nothing():
    # hypothesis's second example: without ``a``, the dependent schema's names are declared ``true`` in a
    # layer of their own (``patternProperties`` keeps the layers apart) while ``properties`` forbids ``x-a``:
    # no property is declared, so the object is a map (the grammar counted ``x-a: true`` as declared and
    # refused the valid ``{"b": 0}``; without the pattern the layers merged and it was a map already)
    schema = {"type": "object", "properties": {"a": False, "x-a": False}, "patternProperties": {"^x-": False},
              "dependentSchemas": {"a": {"properties": {"x-a": {"type": "integer"}}}}}
    dfa, _ = schema_dfa(schema)
    values = [{"b": 0}, {"a": 0}, {"x-a": 0}, {"x-b": 0}, {}, {"b": 0, "c": "s"}]
    assert [dfa.accepts(canonical(v).encode("utf-8")) for v in values] == [True, False, False, False, True, True]
    assert [Draft202012Validator(schema).is_valid(v) for v in values] == [True, False, False, False, True, True]
    assert _layout_allows(schema, ["b"]) is True


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=object_schemas(), data=st.data())
def test_random_objects_agree_with_jsonschema(schema, data):
    validator = Draft202012Validator(schema)
    try:
        dfa, notes = schema_dfa(schema)
    except SchemaError:
        dfa = None
    named = [k for part in [schema, *schema.get("allOf", [])] for k in [*part.get("properties", {}),
                                                                       *part.get("required", [])]]
    fitting = {k: [v for v in VALUES if not any(e.absolute_path and e.absolute_path[0] == k
                                                   for e in validator.iter_errors({k: v}))] or VALUES
               for k in KEYS}
    for i in range(25):
        keys = data.draw(st.lists(st.sampled_from(KEYS + named * 2), min_size=min(i, 1), max_size=4, unique=True),
                         label=f"keys {i}")
        if data.draw(st.booleans(), label=f"in order {i}"):  # named keys first, in order, then the others
            keys = sorted(keys, key=lambda k: named.index(k) if k in named else len(named))
        value = {k: data.draw(st.sampled_from(fitting[k] if i % 2 else VALUES), label=f"{k!r}") for k in keys}
        expected = validator.is_valid(value) and _layout_allows(schema, keys)
        got = dfa is not None and dfa.accepts(canonical(value).encode("utf-8"))
        assert got == expected, f"{canonical(value)}: accepted {got}, expected {expected}"


# --------------------------------------------------------------------------------------------------------------
# the JSON Schema Test Suite files of these keywords
# --------------------------------------------------------------------------------------------------------------

SUITE_FILES = [f"draft2020-12/{name}.json" for name in (
    "additionalProperties", "patternProperties", "properties", "required", "minProperties", "maxProperties",
    "dependentRequired", "dependentSchemas", "propertyNames", "unevaluatedProperties", "allOf")] + [
    "draft7/dependencies.json"]
# refusals of valid instances for reasons outside this module (group, test): what is left when the layout
# rules (key order, undeclared keys) and the notes are accounted for
OTHER_AREAS = {
    ("unevaluatedProperties with $dynamicRef", "with no unevaluated properties"): "$dynamicRef to another document",
    ("dependent subschema incompatible with root", "matches dependency"):
        "bar is declared only by the dependent schema: undeclared for the object itself (closed)",
    ("dynamic evalation inside nested refs", "*"):
        "nested oneOf of untyped branches, each subtracted loosely: past the states limit (refused)",
}


def _names_in(schema: Any) -> set[str]:
    """Every property name a schema declares or requires anywhere in it."""
    out: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("properties", "dependentSchemas", "dependentRequired", "dependencies") \
                    and isinstance(value, dict):
                out |= set(value)
            if key == "required" and isinstance(value, list):
                out |= {v for v in value if isinstance(v, str)}
            out |= _names_in(value)
    elif isinstance(schema, list):
        for value in schema:
            out |= _names_in(value)
    return out


def _explained(schema: Any, dfa, notes, value: Any, valid: bool, group: str, test: str) -> str | None:
    """Why the DFA's verdict on ``value`` differs from the suite's, or None when nothing explains it."""
    if not valid:  # accepted an invalid instance: only where a keyword is left to the check after generation
        return "not enforced" if any(n.kind == "not enforced" for n in notes) else None
    if not isinstance(value, dict):
        return "no type: arrays are not inferred" if isinstance(schema, dict) and "type" not in schema else None
    if dfa is not None and any(dfa.accepts(canonical(dict(p)).encode()) for p in
                               itertools.permutations(value.items())):
        return "key order"
    if any(k not in _names_in(schema) for k in value):
        return "undeclared key"
    if any(n.kind == "limited" and n.keyword == "unevaluatedProperties" for n in notes):
        return "limited (noted)"
    return OTHER_AREAS.get((group, test)) or OTHER_AREAS.get((group, "*"))


@pytest.mark.parametrize("name", SUITE_FILES)
def test_json_schema_test_suite_agrees(name):
    groups = json.loads(shared_path("data", "json_schema_test_suite", *name.split("/")).read_text())
    unexplained = []
    for group in groups:
        try:
            dfa, notes = schema_dfa(group["schema"])
        except SchemaError:
            dfa, notes = None, []
        for t in group["tests"]:
            got = dfa is not None and dfa.accepts(canonical(t["data"]).encode("utf-8"))
            if got != t["valid"] and not _explained(group["schema"], dfa, notes, t["data"], t["valid"],
                                                    group["description"], t["description"]):
                unexplained.append((group["description"], t["description"], t["valid"]))
    assert unexplained == []
