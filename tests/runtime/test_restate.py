"""Restating an unstated optional argument from the request: locating the value, the grounded-prefix rule,
the decode with a scripted model, and the Answerer's choice between restating and leaving out."""

import math
from types import SimpleNamespace

import pytest
import torch

from callmaybe.core.catalog import parse_catalog
from callmaybe.compiler.compile import compile_index
from callmaybe.runtime.policy.grounding import fold
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.policy.restate import Restated, grounded_prefix, restate, value_start
from callmaybe.runtime.answering.runner import Answerer
from callmaybe.core.vocabulary import Vocabulary

from .tiny import TinyTokenizer

TOKENS = [b'{"name": "f", "parameters": {', b'"u":', b' "', b"cm", b"in", b"ches", b'"}}', b"}}", b" ", b'"', None,
          b"4"]
EOS = 10
VOCAB = Vocabulary(name="tiny", token_bytes=tuple(TOKENS), eos_ids=(EOS,), vocab_size=len(TOKENS))
ID = {t: i for i, t in enumerate(TOKENS) if t is not None}


def test_value_start_finds_the_top_level_argument_only():
    data = b'{"name": "f", "parameters": {"a": {"unit": "x"}, "b": "say \\"unit\\": 1", "unit": "cm"}}'
    assert value_start(data, "unit") == data.rindex(b'"unit":') + len(b'"unit":')
    assert value_start(data, "a") == data.index(b'"a":') + 4
    assert value_start(data, "x") is None
    assert value_start(b'{"name": "unit", "parameters": {}}', "unit") is None
    assert value_start(b'{"name": "f", "parameters": {"\\u00e9": 1}}', "\u00e9") == 38


@pytest.mark.parametrize("text, expected", [
    (b"", False),
    (b" ", False),
    (b' "', False),
    (b' "In', False),  # case-folded
    (b' "inches"}}', True),
    (b' "all"', True),
    (b' "cm"', None),  # not in the request
    (b' "hi"', None),  # in the request, but only inside "high"
    (b' ""', None),  # blank
    (b' "in\\', None),  # escapes are never restated
    (b"4", None),  # not a string
])
def test_grounded_prefix(text, expected):
    assert grounded_prefix(text, fold("Find all roots for a radius of 4 inches, high")) is expected


class BigramModel:
    """Logits chosen by the last input token: ``table[last] = {token: logit}``, others 0; counts calls."""

    def __init__(self, table):
        self.table = {ID[k]: {ID[t]: v for t, v in row.items()} for k, row in table.items()}
        self.calls = []

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        self.calls.append(input_ids.shape[1])
        logits = torch.zeros(1, input_ids.shape[1], VOCAB.vocab_size)
        for tok, value in self.table.get(int(input_ids[0, -1]), {}).items():
            logits[0, -1, tok] = value
        return SimpleNamespace(logits=logits, cache=cache)


class Tokenizer(TinyTokenizer):
    """The tiny tokenizer with a chat template that renders any conversation as a few "4" tokens."""

    def __init__(self):
        super().__init__(TOKENS)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False, **kw):
        return "4" * (1 + sum(len(m["content"]) % 3 for m in messages))


FNS = parse_catalog([{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"u": {"type": "string"}}}}}], "t")


@pytest.fixture(scope="module")
def index():
    return open_index(compile_index(FNS, VOCAB)[0], VOCAB.token_bytes)


def model_preferring_cm(in_logit):
    """Writes "u": "cm"; after the opening quote "in" gets ``in_logit`` against 3 for "cm"."""
    return BigramModel({
        b"4": {b'{"name": "f", "parameters": {': 9},
        b'{"name": "f", "parameters": {': {b'"u":': 9},
        b'"u":': {b' "': 9},
        b' "': {b"cm": 3, b"in": in_logit},
        b"cm": {b'"}}': 9},
        b"in": {b"ches": 9},
        b"ches": {b'"}}': 9},
    })


def test_restate_decodes_the_value_again_within_the_request(index):
    model = model_preferring_cm(2)
    tokens = [ID[t] for t in (b'{"name": "f", "parameters": {', b'"u":', b' "', b"cm", b'"}}')]
    again = restate(model, index, [ID[b"4"]], tokens, "u", "a radius of 4 inches")
    assert again.value == "inches"
    assert again.tokens == [ID[b' "'], ID[b"in"], ID[b"ches"], ID[b'"}}']]
    assert again.forward_passes == 4 and model.calls == [3, 1, 1, 1]  # prompt + call up to the value, then one each
    # allowed after ' "' (the string's contents): ' "', cm, in, ches, '"}}', '}}', ' ', '"', 4
    p_open = math.exp(9) / (math.exp(9) + 1)  # ' "' against ' ' after "u":
    p_in = math.exp(2) / (math.exp(3) + math.exp(2) + 7)
    p_ches = math.exp(9) / (math.exp(9) + 8)
    p_close = math.exp(9) / (math.exp(9) + 8)
    assert again.probability == pytest.approx(p_open * p_in * p_ches * p_close, rel=1e-5)


def test_restate_gives_up_when_nothing_stated_fits(index):
    tokens = [ID[t] for t in (b'{"name": "f", "parameters": {', b'"u":', b' "', b"cm", b'"}}')]
    # after ' "' no allowed token keeps the value in "a radius" (a lone space never closes a value)
    again = restate(model_preferring_cm(2), index, [ID[b"4"]], tokens, "u", "a radius")
    assert again == Restated(None, 0.0, [ID[b' "']], 2)
    assert restate(model_preferring_cm(2), index, [ID[b"4"]], tokens, "v", "4 inches") is None  # no pass spent


def test_restate_stops_once_the_path_is_below_the_threshold(index):
    tokens = [ID[t] for t in (b'{"name": "f", "parameters": {', b'"u":', b' "', b"cm", b'"}}')]
    model = model_preferring_cm(-2)  # "in" gets 0.005: the search stops there, "ches" is never asked for
    again = restate(model, index, [ID[b"4"]], tokens, "u", "a radius of 4 inches", min_prob=0.1)
    assert again == Restated(None, 0.0, [ID[b' "']], 2) and model.calls == [3, 1]
    full = restate(model_preferring_cm(-2), index, [ID[b"4"]], tokens, "u", "a radius of 4 inches", min_prob=0.0)
    assert (full.value, full.forward_passes) == ("4", 3)  # without a floor: "4" (logit 0) beats "in" (-2)


@pytest.mark.parametrize("text, said, expected", [
    (b' " inches', "4 inches", None),  # leading space: never the start of a word
    (b' "inches,"', "4 inches, high", None),  # ends on punctuation
    (b' "(inches"', "radius (inches)", None),
    (b' "inc', "4 inches", False),  # still open at a word start: may grow into "inches"
    (b' "nches', "4 inches", None),  # inside a word
    ("\u0020\"\u0915\"".encode(), "\u0915\u093f\u0924\u093e\u092c", None),  # Devanagari: a vowel sign follows
    (' "stra\u00dfe"'.encode(), "Hauptstrasse or STRASSE", True),  # folded; whole word "strasse"
])
def test_grounded_prefix_word_edges(text, said, expected):
    assert grounded_prefix(text, fold(said)) is expected


@pytest.mark.parametrize("in_logit, parameters, restated, dropped", [
    (2, {"u": "inches"}, {"u": {"from": "cm", "to": "inches", "probability": 0.2139}}, []),
    (-2, {}, {}, ["u"]),  # "inches" at 0.0050 < RESTATE_MIN_PROB: left out
])
def test_answerer_restates_or_leaves_out(index, in_logit, parameters, restated, dropped):
    answerer = Answerer(model_preferring_cm(in_logit), Tokenizer(), index, FNS, max_tokens=20, prefix_cache=False)
    entry, gen = answerer.answer({"prompt": "a radius of 4 inches"})
    assert entry == {"prompt": "a radius of 4 inches", "name": "f", "parameters": parameters}
    assert gen.restated == restated and gen.dropped == dropped
    assert gen.model_parameters == {"u": "cm"}
    evidence = 'not in the request, nor a reformat or label of what it states ("cm")'
    outcome = {"action": "restated", "to": "inches", "probability": 0.2139} if restated else {"action": "left out"}
    assert gen.grounding == {"u": {**outcome, "evidence": evidence}}
    # 3 passes to generate, then the restate passes: 4 to write "inches", or 2 until the path fell below 0.1
    assert gen.forward_passes == (7 if restated else 5)
    kept, gen = Answerer(model_preferring_cm(in_logit), Tokenizer(), index, FNS, max_tokens=20,
                         prefix_cache=False, keep_unstated=True).answer({"prompt": "a radius of 4 inches"})
    assert kept["parameters"] == {"u": "cm"} and gen.restated == {} and gen.dropped == []


def test_trace_lines_say_what_grounding_did():
    from callmaybe.runtime.answering.runner import grounding_notes, trace_lines

    grounding = {
        "city": {"action": "kept", "evidence": "required"},
        "date": {"action": "kept", "evidence": "a reformat of what the request states: 2021, 3, 3"},
        "unit": {"action": "restated", "to": "inches", "probability": 0.2139,
                 "evidence": 'the parameter\'s default ("cm"), copied from the catalog'},
        "database": {"action": "left out", "evidence": 'a placeholder ("your_db")'},
    }
    assert grounding_notes(grounding) == [
        "  grounding: date kept: a reformat of what the request states: 2021, 3, 3",
        '  grounding: unit restated -> "inches" (p=0.2139): the parameter\'s default ("cm"), copied from the catalog',
        '  grounding: database left out: a placeholder ("your_db")',
    ]
    assert grounding_notes({}) == []
    assert trace_lines({"prompt": "p", "trace": [], "grounding": grounding})[0] == "# p"
    assert len(trace_lines({"prompt": "p", "trace": [], "grounding": grounding})) == 4
