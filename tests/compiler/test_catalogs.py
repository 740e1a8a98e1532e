"""Catalogs beyond the public one: fn30 (OpenAI format) and BFCL per-case catalogs (both formats)."""

import json

import pytest

from callmaybe.catalog import load_catalog, parse_catalog
from callmaybe.compiler.grammar import compile_grammar
from callmaybe.errors import SchemaError

from ..conftest import shared_path


def test_fn30_compiles_and_accepts_a_nested_call():
    fns = load_catalog(shared_path("data", "bench", "catalog_fn30.openai.json"))
    assert len(fns) == 30 and fns[0].source_format == "openai"
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


def test_bfcl_free_form_map_is_refused_with_a_reason():
    path = shared_path("data", "bfcl_simple", "cases.jsonl")
    case = next(json.loads(l) for l in open(path) if '"simple_python_337"' in l)
    with pytest.raises(SchemaError) as err:
        compile_grammar(parse_catalog(case["functions"], case["id"]))
    assert "an object without 'properties' (a free-form map) is not supported" in str(err.value)
