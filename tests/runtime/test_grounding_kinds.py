"""Grounding keeps the right values a model writes in other words than the request's (a reformatted date, a
label the description lists), and still leaves out what it copied or guessed: whole answers with a scripted
model that writes a given call."""

from types import SimpleNamespace

import pytest
import torch

from callmaybe.compiler.compile import compile_index
from callmaybe.core.catalog import parse_catalog
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.answering.runner import Answerer

from .tiny import TinyTokenizer

# every printable ASCII byte, the call's opening, then EOS
TOKENS = [bytes([b]) for b in range(32, 127)] + [b'{"name": "', None]
EOS = len(TOKENS) - 1
VOCAB = Vocabulary(name="tiny", token_bytes=tuple(TOKENS), eos_ids=(EOS,), vocab_size=len(TOKENS))


class CallModel:
    """Writes ``call`` (a canonical call text): at each step it prefers the token that continues the call
    written so far, found in its inputs from the last ``{"name": "`` on. The cache is the tuple of every id
    seen so far, so a pass that starts again from an earlier point (restating) sees its own past."""

    def __init__(self, call: str):
        self.call = call.encode()

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        seen = (cache or ()) + tuple(input_ids[0].tolist())
        text = b"".join(TOKENS[i] or b"" for i in seen)
        start = text.rfind(b'{"name": "')
        written = text[start:] if start >= 0 else b""
        logits = torch.zeros(1, input_ids.shape[1], VOCAB.vocab_size)
        if self.call.startswith(written):
            rest = self.call[len(written):]
            nxt = next((i for i, t in enumerate(TOKENS) if t and rest.startswith(t)), EOS) if rest else EOS
            logits[0, -1, nxt] = 50.0
        return SimpleNamespace(logits=logits, cache=seen)


class Tokenizer(TinyTokenizer):
    """The byte tokenizer, with a chat template that renders any conversation as one "#"."""

    def __init__(self):
        super().__init__(TOKENS)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False, **kw):
        return "#"


def answer(tool: dict, request: str, call: str, keep_unstated: bool = False):
    fns = parse_catalog([{"type": "function", "function": tool}], "t")
    index = open_index(compile_index(fns, VOCAB)[0], VOCAB.token_bytes)
    answerer = Answerer(CallModel(call), Tokenizer(), index, fns, max_tokens=80, prefix_cache=False,
                        keep_unstated=keep_unstated)
    return answerer.answer({"prompt": request})


RATE = {"name": "rate", "description": "Exchange rate between two currencies.", "parameters": {
    "type": "object", "properties": {
        "base": {"type": "string", "description": "Currency code, e.g. USD."},
        "target": {"type": "string", "description": "Currency code, e.g. EUR."},
        "date": {"type": "string", "description": "The day, as YYYY-MM-DD. Default: today."}},
    "required": ["base", "target"]}}
TICKETS = {"name": "book", "description": "Book tickets.", "parameters": {
    "type": "object", "properties": {
        "count": {"type": "integer", "description": "How many tickets."},
        "extras": {"type": "array", "items": {"type": "string"},
                   "description": "Add-ons, e.g. 'Early Entry Pass', 'Parking'."}},
    "required": ["count"]}}
DISHES = {"name": "dishes", "description": "Find dishes.", "parameters": {
    "type": "object", "properties": {
        "diet": {"type": "array", "items": {"type": "string"},
                 "description": "Diets to respect: 'vegan', 'vegetarian', 'dairy-free'."}},
    "required": []}}


@pytest.mark.parametrize("tool, request_text, call, parameters, evidence", [
    (RATE, "What was the pound to yen rate on March 3, 2021?",
     '{"name": "rate", "parameters": {"base": "GBP", "target": "JPY", "date": "2021-03-03"}}',
     {"base": "GBP", "target": "JPY", "date": "2021-03-03"},
     {"date": "a reformat of what the request states: 2021, 3, 3"}),
    (TICKETS, "Book two tickets with early entry",
     '{"name": "book", "parameters": {"count": 2, "extras": ["Early Entry Pass"]}}',
     {"count": 2, "extras": ["Early Entry Pass"]},
     {"extras": '"Early Entry Pass": a label the catalog offers; the request states early, entry'}),
    (DISHES, "Find plant-based and dairy-free dishes",
     '{"name": "dishes", "parameters": {"diet": ["vegan", "dairy-free"]}}',
     {"diet": ["vegan", "dairy-free"]},
     {"diet": '"vegan": a label the catalog offers, chosen beside "dairy-free", which the request states'}),
])
def test_values_written_in_other_words_are_kept(tool, request_text, call, parameters, evidence):
    entry, gen = answer(tool, request_text, call)
    assert entry == {"prompt": request_text, "name": tool["name"], "parameters": parameters}
    assert gen.dropped == [] and gen.restated == {}
    assert {k: o["evidence"] for k, o in gen.grounding.items() if o["evidence"] != "required"} == evidence
    assert all(o["action"] == "kept" for o in gen.grounding.values())


@pytest.mark.parametrize("tool, request_text, call, parameters, evidence", [
    (RATE, "What was the pound to yen rate in 2021?",  # the day is a guess: 2021 is stated, 1 and 1 are not
     '{"name": "rate", "parameters": {"base": "GBP", "target": "JPY", "date": "2021-01-01"}}',
     {"base": "GBP", "target": "JPY"},
     {"date": 'not in the request, nor a reformat or label of what it states ("2021-01-01")'}),
    (TICKETS, "Book two tickets",  # a label the request does not name
     '{"name": "book", "parameters": {"count": 2, "extras": ["Early Entry Pass"]}}',
     {"count": 2},
     {"extras": 'a value the catalog offers ("Early Entry Pass"), which the request does not name'}),
    (DISHES, "Find some dishes",
     '{"name": "dishes", "parameters": {"diet": ["vegan"]}}',
     {},
     {"diet": 'a value the catalog offers ("vegan"), which the request does not name'}),
])
def test_copied_or_guessed_values_are_left_out(tool, request_text, call, parameters, evidence):
    entry, gen = answer(tool, request_text, call)
    assert entry == {"prompt": request_text, "name": tool["name"], "parameters": parameters}
    assert gen.dropped == list(evidence)
    assert {k: o["evidence"] for k, o in gen.grounding.items() if o["action"] == "left out"} == evidence


def test_keep_unstated_keeps_the_models_values():
    call = '{"name": "dishes", "parameters": {"diet": ["vegan"]}}'
    entry, gen = answer(DISHES, "Find some dishes", call, keep_unstated=True)
    assert entry["parameters"] == {"diet": ["vegan"]} and gen.grounding == {} and gen.dropped == []
