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
