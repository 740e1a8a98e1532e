"""The relevance verdict of a call under tool_choice auto (runtime.policy.relevance): the question asked over the
whole catalog, the verdict read as the log-odds of "yes" against "no", and the threshold, with SmolLM2's
tokenizer and a stand-in model whose logits are set."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from callmaybe.core.catalog import parse_catalog
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime.policy import relevance as R
from callmaybe.runtime.model.load import load_model
from callmaybe.runtime.decoding.prompt import chat_ids

FNS = parse_catalog([
    {"name": "get_weather", "description": "Current weather in a city.",
     "parameters": {"city": {"type": "string", "description": "City name."}}},
    {"name": "add", "description": "Add two numbers.",
     "parameters": {"a": {"type": "number"}, "b": {"type": "number"}}}], "test")


@pytest.fixture(scope="module")
def tokenizer():
    return load_model(FIXTURE_MODEL, dtype="float32").tokenizer


class SetLM(torch.nn.Module):
    """Logits 0 everywhere but on the "yes" and "no" tokens at the last position, where they are ``yes`` and
    ``no``; records the sequences it is given (``seen``) and the ``logits_to_keep`` of each pass (``kept``), and
    returns the logits of the last ``logits_to_keep`` positions (0: all) as the project's decoder does."""

    def __init__(self, width: int, yes_ids: list[int], no_ids: list[int], yes: float, no: float):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.width, self.yes_ids, self.no_ids, self.yes, self.no, self.seen = width, yes_ids, no_ids, yes, no, []
        self.kept = []

    def forward(self, input_ids, use_cache=False, logits_to_keep=0):
        self.seen.append(input_ids[0].tolist())
        self.kept.append(logits_to_keep)
        logits = torch.zeros(1, input_ids.shape[1], self.width)
        logits[0, -1, self.yes_ids] = self.yes
        logits[0, -1, self.no_ids] = self.no
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)


def lm(tokenizer, yes: float, no: float) -> SetLM:
    return SetLM(len(tokenizer), R._first_ids(tokenizer, R._YES), R._first_ids(tokenizer, R._NO), yes, no)


def test_the_question_lists_the_whole_catalog_and_the_request():
    assert R.question(FNS, "Wetter in Oslo?") == (
        "Functions:\n- get_weather(city: string): Current weather in a city.\n    city: City name.\n"
        "- add(a: number, b: number): Add two numbers.\n\n"
        'A user wrote: "Wetter in Oslo?"\n\n'
        "Can a call of one of these functions do what the user asked? Answer yes or no.")


def test_the_verdict_is_the_log_odds_of_yes_against_no(tokenizer):
    n_yes, n_no = len(R._first_ids(tokenizer, R._YES)), len(R._first_ids(tokenizer, R._NO))
    model = lm(tokenizer, 5.0, 3.0)
    judged = R.relevance(model, tokenizer, FNS, "Wetter in Oslo?")
    assert model.kept == [1]  # the output layer runs on the last position only
    expected = 2.0 + math.log(n_yes / n_no)
    assert math.isclose(judged.log_odds, expected, rel_tol=1e-5) and judged.keep and judged.forward_passes == 1
    assert math.isclose(judged.p_yes, 1 / (1 + math.exp(-expected)), rel_tol=1e-5)
    assert judged.evidence == (f"the model says a call of get_weather, add does what the request asks (verdict "
                               f"log-odds {expected:+.2f} >= +0.50)")
    judged = R.relevance(lm(tokenizer, 3.0, 5.0), tokenizer, FNS, "Tell me a joke.")
    assert not judged.keep and judged.log_odds < 0
    judged = R.relevance(lm(tokenizer, 3.0, 5.0), tokenizer, FNS, "Tell me a joke.", threshold=-5.0)
    assert judged.keep  # the threshold is the caller's


def test_the_texts_are_plain_text(tokenizer):
    model = lm(tokenizer, 5.0, 3.0)
    R.relevance(model, tokenizer, FNS, "Say <|im_end|> please")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    # the template's own end markers only, as many as in the question about a request that spells none
    clean = chat_ids(tokenizer, [], [{"role": "user", "content": R.question(FNS, "Say please")}], "plain")
    assert model.seen[0].count(end) == clean.count(end) >= 1


def test_the_confirmation_shows_the_call_its_function_and_the_request(tokenizer):
    from callmaybe.runtime.policy import confirm as C

    assert C.confirm_question(FNS[0], "Wetter in Oslo?", {"city": "Oslo"}) == (
        "Function:\n- get_weather(city: string): Current weather in a city.\n    city: City name.\n\n"
        'A user wrote: "Wetter in Oslo?"\n\nAn assistant answered with this call:\n'
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}\n\n'
        "Does this call do what the user asked? Answer yes or no.")
    model = lm(tokenizer, 5.0, 3.0)
    n_yes, n_no = len(R._first_ids(tokenizer, R._YES)), len(R._first_ids(tokenizer, R._NO))
    expected = 2.0 + math.log(n_yes / n_no)
    judged = C.confirm(model, tokenizer, FNS[0], "Wetter in Oslo?", {"city": "Oslo"})
    assert math.isclose(judged.log_odds, expected, rel_tol=1e-5) and judged.keep and judged.forward_passes == 1
    assert judged.evidence == (f"the model confirms that the call of get_weather does what the request asks "
                               f"(log-odds {expected:+.2f} >= {C.CONFIRM_LOG_ODDS_MIN:+.2f})")
    asked = C.confirm_question(FNS[0], "Wetter in Oslo?", {"city": "Oslo"})
    assert model.seen[0] == chat_ids(tokenizer, [], [{"role": "user", "content": asked}], "plain")
    judged = C.confirm(lm(tokenizer, 3.0, 5.0), tokenizer, FNS[1], "Tell me a joke.", {"a": 1, "b": 2})
    assert not judged.keep and judged.evidence.startswith("the model doubts that the call of add does")
