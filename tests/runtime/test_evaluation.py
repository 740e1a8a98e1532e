"""Reading evaluation data: even and odd halves (``eval --ids``), BFCL parallel cases, and scoring one
generation with and without grounding."""

import json

import pytest

from callmaybe.core.errors import InputError
from callmaybe.runtime.evaluation.evaluate import compare_grounding, evaluation_cases, id_number, score, select_ids

TOOL = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "string"}, "unit": {"type": "string"}}, "required": ["x"]}}}]


def write_cases(path, ids, expected=None):
    expected = expected or {"name": "f", "parameters": {"x": ["a"], "unit": ["", "cm"]}}
    path.write_text("".join(json.dumps({"id": i, "tools": TOOL, "prompt": f"p {i}", "expected": expected}) + "\n"
                            for i in ids))
    return path


def test_id_number():
    assert id_number("simple_python_17", 0) == 17 and id_number(4, 9) == 4 and id_number("x", 3) == 3


def test_ids_even_and_odd_split_a_data_set_in_two(tmp_path):
    data = write_cases(tmp_path / "cases.jsonl", ["simple_0", "simple_1", "simple_2", "simple_3", "simple_10"])
    assert [c["id"] for c in evaluation_cases(data, None, "even")] == ["simple_0", "simple_2", "simple_10"]
    assert [c["id"] for c in evaluation_cases(data, None, "odd")] == ["simple_1", "simple_3"]
    assert [c["id"] for c in evaluation_cases(data, 2, "even")] == ["simple_0", "simple_2"]  # limit after ids
    assert len(evaluation_cases(data, None)) == 5
    with pytest.raises(InputError, match="ids must be even or odd, got 'all'"):
        select_ids([], "all")


def test_public_cases_without_ids_split_by_position(tmp_path):
    (tmp_path / "functions_definition.json").write_text(json.dumps(
        [{"name": "f", "description": "", "parameters": {"x": {"type": "string"}}, "returns": {}}]))
    (tmp_path / "function_calling_tests.json").write_text(json.dumps([{"prompt": f"p {i}"} for i in range(6)]))
    (tmp_path / "expected.json").write_text(json.dumps([{"name": "f", "parameters": {"x": "a"}}] * 6))
    assert [c["id"] for c in evaluation_cases(tmp_path, None, "odd")] == [1, 3, 5]


def test_parallel_cases_are_read_and_scored(tmp_path):
    expected = {"calls": [{"name": "f", "parameters": {"x": ["a"], "unit": [""]}},
                          {"name": "f", "parameters": {"x": ["b"], "unit": [""]}}]}
    (case,) = evaluation_cases(write_cases(tmp_path / "p.jsonl", ["parallel_0"], expected), None)
    assert case["rules"] == "bfcl_parallel"
    call = {"name": "f", "parameters": {"x": "b"}}
    assert score(case, call) == {"right_function": True, "right_arguments": False, "one_right_call": True}
    # --parallel-calls: the calls list is graded whole, in any order
    both = {"calls": [{"name": "f", "parameters": {"x": "b"}}, {"name": "f", "parameters": {"x": "a"}}]}
    assert score(case, both) == {"right_function": True, "right_arguments": True, "one_right_call": True}
    assert score(case, {"calls": both["calls"][:1]})["right_arguments"] is False
    assert score(case, {"calls": both["calls"] * 2})["right_arguments"] is False
    assert score(case, {"calls": [], "content": "no"}) == {"right_function": False, "right_arguments": False,
                                                          "one_right_call": False}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 0, "tools": TOOL, "prompt": "p", "expected": {"calls": [{"name": 1}]}}) + "\n")
    with pytest.raises(InputError, match="a case needs"):
        evaluation_cases(bad, None)


def test_irrelevance_cases_are_right_when_declined(tmp_path):
    (case,) = evaluation_cases(write_cases(tmp_path / "i.jsonl", ["irrelevance_0"], {"calls": []}), None)
    assert case["rules"] == "irrelevance"
    declined = {"right_function": True, "right_arguments": True, "declined": True}
    assert score(case, {"prompt": "p", "name": None, "parameters": None, "content": "I cannot."}) == declined
    assert score(case, {"prompt": "p", "calls": [], "content": "I cannot."}) == declined
    called = {"right_function": False, "right_arguments": False, "declined": False}
    assert score(case, {"prompt": "p", "name": "f", "parameters": {"x": "a"}}) == called


def test_a_declined_answer_is_wrong_where_a_call_is_expected():
    case = {"rules": "bfcl", "expected": {"name": "f", "parameters": {"x": ["a"]}}}
    assert score(case, {"name": None, "parameters": None, "content": "?"}) == {"right_function": False,
                                                                              "right_arguments": False}
    assert score(case, {"calls": [{"name": "f", "parameters": {"x": "a"}}]}) == {"right_function": True,
                                                                                "right_arguments": True}


def test_compare_grounding_counts_won_and_lost():
    case = {"rules": "bfcl", "expected": {"name": "f", "parameters": {"x": ["a"], "unit": [""]}}}
    totals = {}
    grounded = {"name": "f", "parameters": {"x": "a"}}
    row = compare_grounding(case, grounded, {"x": "a", "unit": "cm"}, score(case, grounded), totals)
    assert row == {"parameters": {"x": "a", "unit": "cm"}, "right_function": True, "right_arguments": False}
    wrong = {"name": "f", "parameters": {"x": "b"}}
    compare_grounding(case, wrong, {"x": "a"}, score(case, wrong), totals)
    assert totals == {"without_grounding": {"right_function": 2, "right_arguments": 1},
                      "grounding_won": {"right_function": 0, "right_arguments": 1},
                      "grounding_lost": {"right_function": 0, "right_arguments": 1}}


def test_compare_entries_scores_a_calls_list_without_grounding():
    from callmaybe.runtime.evaluation.evaluate import compare_entries

    case = {"rules": "bfcl_parallel", "expected": {"calls": [{"name": "f", "parameters": {"x": ["a"], "unit": [""]}},
                                                             {"name": "f", "parameters": {"x": ["b"], "unit": [""]}}]}}
    grounded = {"calls": [{"name": "f", "parameters": {"x": "b"}}, {"name": "f", "parameters": {"x": "a"}}]}
    without = {"calls": [{"name": "f", "parameters": {"x": "b", "unit": "cm"}}, {"name": "f", "parameters": {"x": "a"}}]}
    totals = {}
    assert compare_entries(case, without, score(case, grounded), totals) == {
        "right_function": True, "right_arguments": False, "one_right_call": True}
    assert totals["grounding_won"] == {"right_function": 0, "right_arguments": 1, "one_right_call": 0}
    assert totals["grounding_lost"] == {"right_function": 0, "right_arguments": 0, "one_right_call": 0}


def test_messages_cases_and_declines_per_language(tmp_path):
    from callmaybe.runtime.evaluation.evaluate import _request, count_declines

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Règle sur a"}]
    lines = [{"id": "m_0", "tools": TOOL, "prompt": "Règle sur a", "messages": messages,
              "expected": {"name": "f", "parameters": {"x": ["a"]}}},
             {"id": "m_1", "lang": "de", "tools": TOOL, "prompt": "p", "expected": {"calls": []}},
             {"id": "m_2", "tools": TOOL, "prompt": "plain p", "expected": {"calls": []}}]
    data = tmp_path / "m.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cases = evaluation_cases(data, None)
    assert _request(cases[0]) == {"prompt": "Règle sur a", "messages": messages}
    assert _request(cases[1]) == {"prompt": "p"}
    totals = {}
    count_declines(totals, cases[0], {"name": None, "parameters": None, "content": "?"})
    count_declines(totals, cases[1], {"calls": [], "content": "no"})
    count_declines(totals, cases[2], {"name": "f", "parameters": {"x": "a"}})
    # no "lang": a prompt with a non-ASCII letter is "other", an ASCII one "en"
    assert totals == {"declines": {"other": {"call": [1, 1]}, "de": {"irrelevance": [1, 1]},
                                   "en": {"irrelevance": [0, 1]}}}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**lines[0], "messages": "hi"}) + "\n")
    with pytest.raises(InputError, match=r'bad.jsonl:1: "messages" must be a list of \{"role", "content"\} objects'):
        evaluation_cases(bad, None)
