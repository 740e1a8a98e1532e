"""``oneOf`` of branches that only require names (:mod:`callmaybe.compiler.schema.exclusive`): the object
schemas each branch is written as, and the same automaton as the general ``oneOf`` (products with each other
branch's loose language) on schemas of every shape around it."""

from __future__ import annotations

import numpy as np
import pytest

from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.automata.lexical import canonical
from callmaybe.compiler.grammar import schema_dfa
from callmaybe.compiler.schema import compiler as schema_compiler
from callmaybe.compiler.schema.exclusive import MAX_CHOICES, exclusive_required, hitting_sets


def obj(required, absent):
    return {"type": "object", "required": required, "properties": {k: False for k in absent}}


def test_two_names_exclude_each_other():
    assert exclusive_required([{"required": ["tabs"]}, {"required": ["sections"], "description": "old"}]) == [
        [obj(["tabs"], ["sections"])], [obj(["sections"], ["tabs"])]]


def test_branches_of_several_names_lack_one_of_each_other():
    # glaiveai2k's shapes: a circle, a rectangle, a triangle
    split = exclusive_required([{"required": ["radius"]}, {"required": ["length", "width"]},
                                {"required": ["base", "height"]}])
    assert split == [
        [obj(["radius"], ["length", "base"]), obj(["radius"], ["length", "height"]),
         obj(["radius"], ["width", "base"]), obj(["radius"], ["width", "height"])],
        [obj(["length", "width"], ["radius", "base"]), obj(["length", "width"], ["radius", "height"])],
        [obj(["base", "height"], ["radius", "length"]), obj(["base", "height"], ["radius", "width"])],
    ]


def test_a_branch_requiring_more_admits_nothing_alone():
    # every object with a and b has a: the second branch never holds alone; names repeated count once
    assert exclusive_required([{"required": ["a"]}, {"required": ["a", "b", "a"]}]) == [
        [obj(["a"], ["b"])], []]
    assert exclusive_required([{"required": ["a"]}, {"required": ["a"]}]) == [[], []]


def test_minimal_hitting_sets_only():
    # {a, b} and {b, c} hold {b}: only {a, c} and {b} are minimal
    assert hitting_sets([["a", "b"], ["b", "c"]], 16) == [["a", "c"], ["b"]]
    assert hitting_sets([], 16) == [[]]
    assert hitting_sets([["a"], []], 16) == []
    assert hitting_sets([["a", "b"], ["c", "d"]], 3) is None


@pytest.mark.parametrize("branches", [
    [{"required": ["a"]}],  # one branch: the oneOf is that branch
    [{"required": ["a"]}, {"required": ["b"], "properties": {"b": {"type": "string"}}}],
    [{"required": ["a"]}, {"required": []}],
    [{"required": ["a"]}, {"$ref": "#/$defs/b"}],
    [{"required": ["a"]}, True],
    [{"required": ["a"]}, {"required": "b"}],
    [{"required": [f"k{i}", f"m{i}"]} for i in range(5)],  # 2^4 choices for each of 5 branches
])
def test_other_shapes_are_left_to_the_general_one_of(branches):
    assert exclusive_required(branches) is None
    assert MAX_CHOICES == 16


SCHEMAS = {
    "properties": {"type": "object", "properties": {"title": {"type": "string"}, "tabs": {"type": "integer"},
                                                    "sections": {"type": "boolean"}},
                   "oneOf": [{"required": ["tabs"]}, {"required": ["sections"]}]},
    "closed": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "additionalProperties": False, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    "patterns": {"type": "object", "patternProperties": {"^[ab]$": {"type": "integer"}},
                 "additionalProperties": False, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    "no type": {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    "object or string": {"type": ["object", "string"], "properties": {"a": {"type": "null"}},
                         "additionalProperties": False, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    "shapes": {"type": "object", "properties": {k: {"type": "number"} for k in
                                                ("radius", "length", "width", "base", "height")},
               "additionalProperties": False,
               "oneOf": [{"required": ["radius"]}, {"required": ["length", "width"]},
                         {"required": ["base", "height"]}]},
    "subset": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "additionalProperties": False, "oneOf": [{"required": ["a"]}, {"required": ["a", "b"]}]},
    "with not": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                 "additionalProperties": False, "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                 "not": {"properties": {"a": {"const": 1}}, "required": ["a"]}},
    "counted": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                                 "c": {"type": "integer"}},
                "additionalProperties": False, "maxProperties": 2,
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
}


def minimal(schema):
    return D.minimize(schema_dfa(schema)[0])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_same_automaton_as_the_general_one_of(name, monkeypatch):
    rewritten = minimal(SCHEMAS[name])
    monkeypatch.setattr(schema_compiler, "exclusive_required", lambda *a: None)
    general = minimal(SCHEMAS[name])
    assert np.array_equal(rewritten.transitions, general.transitions)
    assert np.array_equal(rewritten.accepting, general.accepting)


def verdicts(schema, values):
    dfa, _ = schema_dfa(schema)
    return [dfa.accepts(canonical(v).encode()) for v in values]


def test_exact_verdicts():
    assert verdicts(SCHEMAS["properties"], [{"tabs": 1}, {"title": "t", "sections": True},
                                            {"tabs": 1, "sections": True}, {"title": "t"}, "tabs"]) == \
        [True, True, False, False, False]
    assert verdicts(SCHEMAS["shapes"], [{"radius": 1}, {"length": 1, "width": 2}, {"radius": 1, "length": 2},
                                        {"radius": 1, "length": 2, "width": 3}, {"length": 1},
                                        {"length": 1, "width": 2, "base": 3, "height": 4}]) == \
        [True, True, True, False, False, False]
    assert verdicts(SCHEMAS["object or string"], [{"a": None}, {"b": 1}, "s", {}]) == [True, False, False, False]
    assert verdicts(SCHEMAS["subset"], [{"a": 1}, {"a": 1, "b": 2}, {"b": 2}]) == [True, False, False]


def test_a_negated_one_of_keeps_what_it_allows(monkeypatch):
    # compiled loosely (a language holding every value of the oneOf, subtracted), the rewrite is exact: {a, b}
    # is kept; the general oneOf's loose language (each branch loosely less the others' exact languages) held
    # it too, so it was lost
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "additionalProperties": False, "not": {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}}
    values = [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {}]
    assert verdicts(schema, values) == [False, False, True, True]
    monkeypatch.setattr(schema_compiler, "exclusive_required", lambda *a: None)
    assert verdicts(schema, values) == [False, False, False, True]


def test_names_an_object_never_holds_are_not_written_absent():
    # c is never held (additionalProperties false, c not declared): no branch needs c absent; the branch
    # requiring c is written (and admits nothing once merged)
    assert exclusive_required([{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}], frozenset({"c"})) == [
        [obj(["a"], ["b"])], [obj(["b"], ["a"])], [obj(["c"], ["a", "b"])]]


def test_a_negated_one_of_with_a_name_never_held():
    """A helper's break test: the rewrite wrote c: false beside additionalProperties: false, a layer that the
    loose compile under not widened, so {a, b} (two branches hold: the oneOf fails, the not passes) was lost."""
    inner = {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False,
             "oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}]}
    schema = {"type": "object", "properties": {"a": {}, "b": {}}, "not": inner}
    assert verdicts(schema, [{"a": 1, "b": 1}, {"a": 1}, {"b": 1}, {}]) == [True, False, False, True]
    two = {"oneOf": [{"type": ["object", "integer"], "properties": {"a": {"type": "string"}, "b": {"enum": [1, "s"]}},
                      "oneOf": [{"required": ["a", "b", "x"]}, {"required": ["a"]}, {"required": ["b"]},
                                {"required": ["a", "b", "x"]}, {"required": ["b", "x"]}],
                      "additionalProperties": False},
                     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"enum": [1, "s"]}},
                      "required": ["a"]}]}
    assert verdicts(two, [{"a": "s", "b": "s"}, {"a": "s"}, {"b": 1}, 3]) == [True, False, True, False]
