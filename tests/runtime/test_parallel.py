"""How a parallel turn's calls are settled at its end (runtime.policy.parallel): values joined with "and" split
unless the model reads them as one name, drafts and repeats left out. The examples are BFCL parallel cases
Qwen2.5-Coder-1.5B got wrong (parallel_34, parallel_43, parallel_72)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from callmaybe.core.catalog import parse_catalog
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime.policy import parallel as P
from callmaybe.runtime.model.load import load_model
from callmaybe.runtime.decoding.turn import ToolCall

RELIGION = parse_catalog([{"name": "religion_history.track", "description": "Track a religion's history.",
                           "parameters": {"type": "object", "properties": {
                               "region": {"type": "string"}, "religion": {"type": "string"},
                               "start_year": {"type": "integer"}, "end_year": {"type": "integer"}},
                               "required": ["region", "religion", "start_year", "end_year"]}}], "test")
CONCERTS = parse_catalog([{"name": "concert_finder", "description": "Upcoming concerts.",
                           "parameters": {"type": "object", "properties": {
                               "location": {"type": "string"}, "music_genre": {"type": "string"},
                               "time_period": {"type": "integer", "default": 30}},
                               "required": ["location", "music_genre"]}}], "test")
INTEGRATE = parse_catalog([{"name": "integrate", "description": "Area under a curve.",
                            "parameters": {"type": "object", "properties": {
                                "function": {"type": "string"}, "start_x": {"type": "integer"},
                                "end_x": {"type": "integer"}, "method": {"type": "string"}},
                                "required": ["function", "start_x", "end_x"]}}], "test")
#: What Qwen2.5-Coder-1.5B gives these pairs after '{"<key>": "<first> and' (module docstring of parallel).
MEASURED = {("region", "Egypt", "Turkey"): 0.0007, ("music_genre", "rock", "jazz"): 0.0009,
            ("music_genre", "rock", "roll"): 0.836, ("region", "Bosnia", "Herzegovina"): 0.996}


def by_name(catalog):
    return {fn.name: fn for fn in catalog}


def measured(key, first, second):
    return MEASURED[(key, first, second)]


def settle(catalog, arguments, request, pair=measured):
    name = catalog[0].name
    calls = [ToolCall(name, a) for a in arguments]
    notes = [{k: {"action": "kept", "evidence": "required"} for k in a} for a in arguments]
    return P.settle(calls, notes, by_name(catalog), request, pair)


def test_a_value_joined_with_and_is_two_calls():
    asked = "I want to know the rise and fall of Christianity in Egypt and Turkey from 100 A.D to 1500 A.D."
    joined = {"region": "Egypt and Turkey", "religion": "Christianity", "start_year": 100, "end_year": 1500}
    calls, notes, passes = settle(RELIGION, [joined], asked)
    assert [c.arguments for c in calls] == [{**joined, "region": "Egypt"}, {**joined, "region": "Turkey"}]
    assert passes == 1
    assert notes[0]["region"] == {"action": "split", "evidence": "'Egypt and Turkey' joins two values the request "
                                                                 "states (p('Turkey' after 'Egypt' and) 0.001 < 0.05)"}
    assert notes[0]["religion"] == {"action": "kept", "evidence": "required"}
    # the model's own arguments stay what it decoded
    assert [c.model_arguments for c in calls] == [None, None]
    notes[0]["region"]["seen"] = notes[0]["religion"]["seen"] = True  # each call has notes of its own
    assert "seen" not in notes[1]["region"] and "seen" not in notes[1]["religion"]


def test_joined_values_of_two_calls_make_a_grid():
    asked = ("Can you find me any upcoming rock and jazz concerts for the next month in San Francisco, California "
             "and New York, New York?")
    calls, _, passes = settle(CONCERTS, [{"location": "San Francisco, California", "music_genre": "rock and jazz"},
                                         {"location": "New York, New York", "music_genre": "rock and jazz"}], asked)
    assert [(c.arguments["location"], c.arguments["music_genre"]) for c in calls] == [
        ("San Francisco, California", "rock"), ("San Francisco, California", "jazz"),
        ("New York, New York", "rock"), ("New York, New York", "jazz")]
    assert passes == 1  # one pair, asked once; location has a comma: never a candidate


def test_a_pair_the_model_reads_as_one_name_stays_whole():
    calls, notes, passes = settle(CONCERTS, [{"location": "Austin", "music_genre": "rock and roll"},
                                             {"location": "Dallas", "music_genre": "rock and roll"}],
                                  "rock and roll concerts in Austin and Dallas")
    assert [c.arguments["music_genre"] for c in calls] == ["rock and roll", "rock and roll"]
    assert passes == 1 and notes[0]["music_genre"]["action"] == "kept"
    calls, _, _ = settle(RELIGION, [{"region": "Bosnia and Herzegovina", "religion": "Islam", "start_year": 1400,
                                     "end_year": 1900}], "Islam in Bosnia and Herzegovina from 1400 to 1900")
    assert [c.arguments["region"] for c in calls] == ["Bosnia and Herzegovina"]


def test_what_is_never_split():
    def never(*args):
        raise AssertionError("not a candidate: the model is not asked")

    # a part the request does not state; a value with a comma; no pair callback at all
    for value, asked in [("Egypt and Syria", "Christianity in Egypt and Turkey"),
                         ("Cairo, Egypt and Turkey", "Christianity in Cairo, Egypt and Turkey")]:
        call = {"region": value, "religion": "Christianity", "start_year": 100, "end_year": 1500}
        calls, _, passes = settle(RELIGION, [call], asked, never)
        assert ([c.arguments for c in calls], passes) == ([call], 0)
    call = {"region": "Egypt and Turkey", "religion": "Christianity", "start_year": 100, "end_year": 1500}
    calls, _, passes = settle(RELIGION, [call], "Christianity in Egypt and Turkey", None)
    assert ([c.arguments for c in calls], passes) == ([call], 0)
    # two joined arguments in one call: which pairs go together is not said
    two = {"region": "Egypt and Turkey", "religion": "Christianity and Islam", "start_year": 100, "end_year": 1500}
    calls, _, passes = settle(RELIGION, [two], "Christianity and Islam in Egypt and Turkey", never)
    assert ([c.arguments for c in calls], passes) == ([two], 0)
    # values of different lengths may share their last words ("Italian and Japanese restaurants"); a value
    # joined with itself
    for value in ("Italian and Japanese restaurants", "Egypt and New Zealand", "and and and", "Egypt and egypt"):
        call = {"region": value, "religion": "Christianity", "start_year": 100, "end_year": 1500}
        calls, _, passes = settle(RELIGION, [call], f"Find {value}", never)
        assert ([c.arguments for c in calls], passes) == ([call], 0)
    # a pair the model gives no answer for (NaN) stays whole
    call = {"region": "Egypt and Turkey", "religion": "Christianity", "start_year": 100, "end_year": 1500}
    calls, _, _ = settle(RELIGION, [call], "Christianity in Egypt and Turkey", lambda *a: float("nan"))
    assert [c.arguments for c in calls] == [call]


def test_a_split_that_breaks_the_schema_is_not_made():
    enum = parse_catalog([{"name": "pick", "description": "", "parameters": {"type": "object", "properties": {
        "color": {"type": "string", "enum": ["red", "black and white"]}}, "required": ["color"]}}], "test")
    calls, _, passes = P.settle([ToolCall("pick", {"color": "black and white"})], [{}], by_name(enum),
                                "a black and white one", lambda *a: 0.01)
    assert ([c.arguments for c in calls], passes) == ([{"color": "black and white"}], 1)


def test_a_draft_of_two_calls_is_left_out():
    # parallel_72: the third call leaves out the method the fourth and fifth give
    arguments = [{"function": "x^3", "start_x": 2, "end_x": 5, "method": "trapezoid"},
                 {"function": "x^3", "start_x": 2, "end_x": 5, "method": "simpson"},
                 {"function": "2x^2+3x-1", "start_x": -1, "end_x": 3},
                 {"function": "2x^2+3x-1", "start_x": -1, "end_x": 3, "method": "trapezoid"},
                 {"function": "2x^2+3x-1", "start_x": -1, "end_x": 3, "method": "simpson"}]
    calls, _, _ = settle(INTEGRATE, arguments, "the 'trapezoid' method ... the 'simpson' method")
    assert [c.arguments for c in calls] == arguments[:2] + arguments[3:]
    # one refinement only: the call without a method may mean the default; both stay
    calls, _, _ = settle(INTEGRATE, arguments[2:4], "")
    assert [c.arguments for c in calls] == arguments[2:4]
    # without the description's default, still a draft; with a default neither other call gives, a call
    # that asks for the default ("today" beside 3 and 5 days)
    plain = parse_catalog([{"name": "integrate", "description": "", "parameters": {
        "type": "object", "properties": {"function": {"type": "string"}, "start_x": {"type": "integer"},
                                         "end_x": {"type": "integer"}, "method": {"type": "string"}},
        "required": ["function", "start_x", "end_x"]}}], "test")
    assert P.drafts([ToolCall("integrate", a) for a in arguments[2:]], by_name(plain)) == {0}
    weather = parse_catalog([{"name": "weather", "description": "", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
        "required": ["city"]}}], "test")
    days = [{"city": "Paris"}, {"city": "Paris", "days": 3}, {"city": "Paris", "days": 5}]
    calls, _, _ = settle(weather, days, "Weather in Paris today, and for 3 days and for 5 days")
    assert [c.arguments for c in calls] == days
    assert P.drafts([ToolCall("weather", a) for a in days + [{"city": "Paris", "days": 1}]], by_name(weather)) == {0}
    # a call that leaves out a required argument of the others is not a draft of them
    assert P.drafts([ToolCall("integrate", {"function": "x", "start_x": 1}),
                     ToolCall("integrate", {"function": "x", "start_x": 1, "end_x": 2}),
                     ToolCall("integrate", {"function": "x", "start_x": 1, "end_x": 3})], by_name(INTEGRATE)) == set()


def test_repeats_and_a_joined_first_call_are_left_out():
    asked = "Christianity in Egypt and Turkey from 100 to 1500"
    base = {"religion": "Christianity", "start_year": 100, "end_year": 1500.0}
    calls, _, _ = settle(RELIGION, [{**base, "region": "Egypt and Turkey"}, {**base, "region": "Turkey",
                                                                            "end_year": 1500}], asked)
    assert [c.arguments["region"] for c in calls] == ["Egypt", "Turkey"]  # 1500 and 1500.0 are one value
    # three calls, the first joining the other two: split, then the repeats go
    calls, _, passes = settle(RELIGION, [{**base, "region": "Egypt and Turkey"}, {**base, "region": "Egypt"},
                                         {**base, "region": "Turkey"}], asked)
    assert ([c.arguments["region"] for c in calls], passes) == (["Egypt", "Turkey"], 1)
    # the split comes before evidence.joined, which reads only the joined argument: Christianity is kept
    asked = "Christianity in Egypt and Turkey, and Islam in Egypt and Turkey"
    calls, _, _ = settle(RELIGION, [{**base, "region": "Egypt and Turkey"}, {**base, "region": "Egypt",
                                    "religion": "Islam"}, {**base, "region": "Turkey", "religion": "Islam"}], asked)
    assert [(c.arguments["region"], c.arguments["religion"]) for c in calls] == [
        ("Egypt", "Christianity"), ("Turkey", "Christianity"), ("Egypt", "Islam"), ("Turkey", "Islam")]
    # integers compare exactly at any size; 1 and 1.0 are one value, true and 1 two
    ids = parse_catalog([{"name": "get", "description": "", "parameters": {"type": "object", "properties": {
        "id": {"type": ["integer", "boolean"]}}, "required": ["id"]}}], "test")
    calls, _, _ = settle(ids, [{"id": 1234567890123456789}, {"id": 1234567890123456788}, {"id": 10**400},
                               {"id": 1}, {"id": 1.0}, {"id": True}], "")
    assert [c.arguments["id"] for c in calls] == [1234567890123456789, 1234567890123456788, 10**400, 1, True]


class UniformLM(torch.nn.Module):
    """Logits 0 everywhere (every token equally likely); records the sequences it is given; returns the last
    ``logits_to_keep`` positions (0: all), as the project's decoder does."""

    def __init__(self, width: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.width, self.seen = width, []

    def forward(self, input_ids, use_cache=False, logits_to_keep=0):
        self.seen.append(input_ids[0].tolist())
        return SimpleNamespace(logits=torch.zeros(1, logits_to_keep or input_ids.shape[1], self.width))


def test_pair_probability_reads_the_second_value_after_the_first():
    tokenizer = load_model(FIXTURE_MODEL, dtype="float32").tokenizer
    lm = UniformLM(len(tokenizer))
    p = P.pair_probability(lm, tokenizer, "region", 'Egypt "old"', "Turkey")
    assert tokenizer.decode(lm.seen[0]) == '{"region": "Egypt \\"old\\" and Turkey'
    tail = len(tokenizer.encode(" Turkey", add_special_tokens=False))
    assert p == pytest.approx(math.exp(-tail * math.log(len(tokenizer))))
