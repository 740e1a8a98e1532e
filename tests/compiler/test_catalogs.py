"""Catalogs beyond the public one: fn30 (OpenAI format) and BFCL per-case catalogs (both formats)."""

import json


from callmaybe.core.catalog import load_catalog, parse_catalog
from callmaybe.compiler.grammar import compile_grammar

from ..conftest import shared_path


def test_fn30_compiles_and_accepts_a_nested_call():
    fns = load_catalog(shared_path("data", "bench", "catalog_fn30.openai.json"))
    assert len(fns) == 30 and fns[0].spelling == "openai"
    dfa = compile_grammar(fns).dfa
    call = {"name": "create_event", "parameters": {
        "title": "Sync", "start": "10:00", "duration_min": 30, "attendees": ["a", "b"],
        "location": {"city": "Paris"}}}
    assert dfa.accepts(json.dumps(call).encode())
    call["parameters"]["location"] = {"room": "4B"}  # city is required
    assert not dfa.accepts(json.dumps(call).encode())


def bfcl_cases(limit):
    path = shared_path("data", "bfcl_simple", "cases.jsonl")
    with open(path) as f:
        return [json.loads(line) for _, line in zip(range(limit), f)]


def test_bfcl_per_case_catalogs_compile_in_both_formats():
    for case in bfcl_cases(40):
        for fmt in ("functions", "tools"):
            fns = parse_catalog(case[fmt], case["id"])
            assert compile_grammar(fns).dfa.num_states > 0


def test_bfcl_free_form_map_compiles_as_a_string_keyed_map():
    path = shared_path("data", "bfcl_simple", "cases.jsonl")
    case = next(json.loads(l) for l in open(path) if '"simple_python_337"' in l)
    fns = parse_catalog(case["functions"], case["id"])
    dfa = compile_grammar(fns).dfa
    name = fns[0].name
    params = {"players": ["Alice", "Bob"], "cards": {"Alice": ["Ace"], "Bob": 2}, "type": "holdem"}
    assert dfa.accepts(json.dumps({"name": name, "parameters": params}).encode())


def test_a_draft_4_object_without_required_is_taken():
    """Draft 4 refuses ``"required": []``: a catalog that names no required property gets none written (it
    was refused: "invalid JSON Schema at 'required': [] should be non-empty"); one that writes the empty list
    itself is still refused, by that message."""
    import pytest

    from callmaybe.core.errors import CatalogError

    params = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"a": {"type": "string"}}}
    fns = parse_catalog([{"type": "function", "function": {"name": "f", "description": "d", "parameters": params}}],
                        "t")
    assert "required" not in fns[0].parameters
    dfa = compile_grammar(fns).dfa
    assert [dfa.accepts(t) for t in (b'{"name": "f", "parameters": {}}', b'{"name": "f", "parameters": {"a": "x"}}',
                                     b'{"name": "f", "parameters": {"a": 1}}')] == [True, True, False]
    with pytest.raises(CatalogError) as err:
        parse_catalog([{"name": "f", "parameters": {**params, "required": []}}], "t")
    assert str(err.value) == "t: function 0 (f): invalid JSON Schema at 'required': [] should be non-empty"


def test_a_reference_to_a_definition_named_in_another_script():
    """``#/$defs/контакт`` is an IRI (RFC 3986 URI references are ASCII); jsonschema resolves it, and so does
    the grammar, written as it is or percent-encoded (it was refused: "is not a 'uri-reference'")."""
    contact = {"type": "object", "properties": {"імʼя": {"type": "string", "maxLength": 5}}, "required": ["імʼя"],
               "additionalProperties": False}
    params = {"type": "object", "$defs": {"контакт": contact},
              "properties": {"від": {"$ref": "#/$defs/контакт"},
                             "до": {"$ref": "#/$defs/%D0%BA%D0%BE%D0%BD%D1%82%D0%B0%D0%BA%D1%82"}},
              "required": ["від", "до"]}
    dfa = compile_grammar(parse_catalog([{"name": "надіслати", "parameters": params}], "uk")).dfa

    def call(a, b):
        text = json.dumps({"name": "надіслати", "parameters": {"від": {"імʼя": a}, "до": {"імʼя": b}}},
                          ensure_ascii=False)
        return dfa.accepts(text.encode())

    assert [call("Ая", "Б"), call(1, "Б"), call("a", 2), call("a", "abcdef")] == [True, False, False, False]
