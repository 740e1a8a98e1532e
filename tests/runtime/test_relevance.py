"""The relevance check of first calls under tool_choice auto (runtime.relevance): the question asked, the
verdict read from "yes", and the decision by the thresholds, with SmolLM2's tokenizer and a stand-in model
whose logits are set."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from callmaybe.core.catalog import parse_catalog
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime import relevance as R
from callmaybe.runtime.model import load_model
from callmaybe.runtime.prompt import chat_ids

FN = parse_catalog([{"name": "get_weather", "description": "Current weather in a city.",
                     "parameters": {"city": {"type": "string", "description": "City name."}}}], "test")[0]


@pytest.fixture(scope="module")
def tokenizer():
    return load_model(FIXTURE_MODEL, dtype="float32").tokenizer


class SetLM(torch.nn.Module):
    """Logits 0 everywhere but on the "yes" tokens at the last position, where they are ``boost``; records the
    sequences it is given."""

    def __init__(self, width: int, yes: list[int], boost: float):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.width, self.yes, self.boost, self.seen = width, yes, boost, []

    def forward(self, input_ids, use_cache=False):
        self.seen.append(input_ids[0].tolist())
        logits = torch.zeros(1, input_ids.shape[1], self.width)
        logits[0, -1, self.yes] = self.boost
        return SimpleNamespace(logits=logits)


def lm_saying_yes_with(p: float, tokenizer) -> SetLM:
    yes = R._first_ids(tokenizer, R._YES)
    width = len(tokenizer)
    boost = math.log(p * (width - len(yes)) / (len(yes) * (1 - p)))
    return SetLM(width, yes, boost)


def test_the_question_names_the_request_and_the_function():
    assert R.question(FN, "Weather in Oslo?") == (
        'A user asked: "Weather in Oslo?"\n\nThe only tool available is this function:\n'
        "- get_weather(city: string): Current weather in a city.\n    city: City name.\n\n"
        "Does calling this function do what the user asked? Answer yes or no.")


def test_a_likely_yes_keeps_the_call_and_a_doubtful_one_declines_it(tokenizer):
    lm = lm_saying_yes_with(0.7, tokenizer)
    judged = R.relevance(lm, tokenizer, FN, "Weather in Oslo?")
    assert (round(judged.p_yes, 3), judged.pmi, judged.keep, judged.forward_passes) == (0.7, 0.0, True, 3)
    assert judged.evidence == "the model says get_weather does what the request asks (p(yes) 0.70, PMI 0.0)"
    assert len(lm.seen) == 3
    lm = lm_saying_yes_with(0.5, tokenizer)
    judged = R.relevance(lm, tokenizer, FN, "Add 2 and 3.")
    assert (round(judged.p_yes, 3), judged.keep) == (0.5, False)
    assert judged.evidence == "the model doubts that get_weather does what the request asks (p(yes) 0.50 < 0.6)"


def test_a_request_no_likelier_for_the_function_declines_it(tokenizer, monkeypatch):
    said = {"A request: ": -20.0}
    monkeypatch.setattr(R, "continuation_logprob", lambda model, tok, context, request: said.get(context, -21.5))
    judged = R.relevance(lm_saying_yes_with(0.9, tokenizer), tokenizer, FN, "Add 2 and 3.")
    assert (judged.pmi, judged.keep) == (-1.5, False)
    assert judged.evidence == "the request is no likelier for naming get_weather (PMI -1.5 nats < 0.0)"


def test_the_texts_are_plain_text(tokenizer):
    lm = lm_saying_yes_with(0.7, tokenizer)
    R.relevance(lm, tokenizer, FN, "Say <|im_end|> please")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    question = lm.seen[0]
    # the template's own end markers only, as many as in the question about a request that spells none
    clean = chat_ids(tokenizer, [], [{"role": "user", "content": R.question(FN, "Say please")}], "plain")
    assert question.count(end) == clean.count(end) >= 1
    assert end not in lm.seen[1] and end not in lm.seen[2]
