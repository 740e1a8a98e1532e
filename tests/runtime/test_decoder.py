"""The decoding loop with a scripted model on a tiny vocabulary: forced text, budget, loops, processor."""

import json
from types import SimpleNamespace

import pytest
import torch

from callmaybe.core.catalog import parse_catalog
from callmaybe.compiler.compile import compile_index
from callmaybe.runtime.decoding.decoder import BudgetExhausted, generate
from callmaybe.runtime.decoding.loops import repeating
from callmaybe.runtime.decoding.index import open_index
from callmaybe.core.vocabulary import Vocabulary

from .tiny import TinyTokenizer

TOKENS = [b'{"', b"name", b'":', b" ", b'"', b"f", b", ", b"parameters", b"{", b"}", b"}}", b"a", b"ab",
          b'"}}', b'{"name": "f", "parameters": {"s": "', b"s", b"1", None, b"0", b"[", b"]", b"]}}"]
EOS = 17
VOCAB = Vocabulary(name="tiny", token_bytes=tuple(TOKENS), eos_ids=(EOS,), vocab_size=24)
ID = {t: i for i, t in enumerate(TOKENS) if t is not None}


def Tokenizer():
    return TinyTokenizer(TOKENS)


class ScriptedModel:
    """Prefers the tokens of ``preference`` (most preferred first) at every step; counts calls."""

    def __init__(self, preference):
        self.preference = [ID[t] for t in preference]
        self.calls = []

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        self.calls.append(input_ids.shape[1])
        logits = torch.zeros(1, input_ids.shape[1], VOCAB.vocab_size)
        for rank, tok in enumerate(self.preference):
            logits[0, -1, tok] = 100.0 - rank
        return SimpleNamespace(logits=logits, cache=cache)


@pytest.fixture(scope="module")
def index():
    fns = parse_catalog([{"name": "f", "parameters": {"s": {"type": "string"}}}], "t")
    data, _ = compile_index(fns, VOCAB)
    return open_index(data, VOCAB.token_bytes)


def test_forced_text_is_one_pass_and_model_chooses_the_rest(index):
    model = ScriptedModel([b"ab", b'"}}'])
    gen = generate(model, Tokenizer(), index, [ID[b"1"]], max_tokens=10)
    # the whole prefix is forced (one token here), then the model writes "ab" until the loop rule stops it
    assert gen.text.startswith('{"name": "f", "parameters": {"s": "ab')
    assert gen.text.endswith('"}}')
    assert gen.forward_passes == gen.chosen_tokens
    assert model.calls[0] == 2  # prompt token + the forced token in one pass


def test_budget_closes_the_call_instead_of_truncating(index):
    model = ScriptedModel([b"a", b'"}}'])  # would write "a" forever
    gen = generate(model, Tokenizer(), index, [ID[b"1"]], max_tokens=4)
    assert gen.text == '{"name": "f", "parameters": {"s": "aa"}}'
    assert len(gen.tokens) == 4


def test_repeated_ngram_is_closed_early(index):
    model = ScriptedModel([b"ab", b'"}}'])
    gen = generate(model, Tokenizer(), index, [ID[b"1"]], max_tokens=100)
    assert gen.loop_closed
    # "ab" is 2 bytes: the loop rule wants 4 repeats and 16 bytes, so 8 repeats
    assert gen.text == '{"name": "f", "parameters": {"s": "' + "ab" * 8 + '"}}'


class SequenceModel(ScriptedModel):
    """Prefers the k-th token of ``script`` at its k-th call (then the last one)."""

    def __init__(self, script):
        super().__init__([])
        self.script = [ID[t] for t in script]

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        tok = self.script[min(len(self.calls), len(self.script) - 1)]
        self.calls.append(input_ids.shape[1])
        logits = torch.zeros(1, input_ids.shape[1], VOCAB.vocab_size)
        logits[0, -1, tok] = 100.0
        return SimpleNamespace(logits=logits, cache=cache)


def test_digits_of_a_number_are_not_a_loop():
    fns = parse_catalog([{"name": "f", "parameters": {"s": {"type": "integer"}}}], "t")
    idx = open_index(compile_index(fns, VOCAB)[0], VOCAB.token_bytes)
    gen = generate(SequenceModel([b"1"] + [b"0"] * 8 + [b"}}"]), Tokenizer(), idx, [ID[b"1"]], max_tokens=100)
    assert gen.text == '{"name": "f", "parameters": {"s": 100000000}}'
    assert not gen.loop_closed


def test_a_single_repeated_character_in_a_string_is_closed_after_16_bytes(index):
    gen = generate(SequenceModel([b"1"] * 40 + [b'"}}']), Tokenizer(), index, [ID[b"1"]], max_tokens=100)
    assert gen.loop_closed
    assert gen.text == '{"name": "f", "parameters": {"s": "' + "1" * 16 + '"}}'


def test_budget_below_the_shortest_call_is_an_error(index):
    with pytest.raises(BudgetExhausted) as err:
        generate(ScriptedModel([b"a"]), Tokenizer(), index, [ID[b"1"]], max_tokens=1)
    assert str(err.value) == "a call needs at least 2 tokens; the token budget is 1"


def test_repeating():
    assert repeating([b"abcd", b"ef"] * 4)  # 6 bytes x 4 >= 16
    assert not repeating([b"ab", b"c"] * 4)  # 4 repeats, but only 12 bytes
    assert repeating([b"ab", b"c"] * 6)  # 18 bytes
    assert repeating([b"x", b"hello", b"hello", b"hello", b"hello"])
    assert not repeating([b"hello", b"hello", b"hello", b"hell"])
    assert not repeating([])


def test_logits_processor_matches_the_mask(index):
    from callmaybe.runtime.decoding.processor import IndexLogitsProcessor

    proc = IndexLogitsProcessor(index, prompt_length=1)
    scores = torch.zeros(1, VOCAB.vocab_size)
    out = proc(torch.tensor([[ID[b"1"]]]), scores)
    allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
    assert allowed == sorted([ID[b'{"'], ID[b"{"], ID[b'{"name": "f", "parameters": {"s": "']])
    out = proc(torch.tensor([[ID[b"1"], ID[b'{"name": "f", "parameters": {"s": "']]]), scores)
    assert torch.isfinite(out[0, ID[b"ab"]]) and not torch.isfinite(out[0, ID[b'":']])


def test_logits_processor_follows_input_ids_that_are_rewritten(index):
    """Reused for a new generation (shorter input) or given several new tokens at once, each row's matcher is
    synced to the tokens after the prompt."""
    from callmaybe.runtime.decoding.processor import IndexLogitsProcessor

    forced = ID[b'{"name": "f", "parameters": {"s": "']
    proc = IndexLogitsProcessor(index, prompt_length=1)
    scores = torch.zeros(1, VOCAB.vocab_size)
    proc(torch.tensor([[ID[b"1"], forced, ID[b"ab"], ID[b'"}}']]]), scores)  # three new tokens at once
    assert proc.matchers[0].tokens == [forced, ID[b"ab"], ID[b'"}}']]
    out = proc(torch.tensor([[ID[b"1"], forced, ID[b"a"]]]), scores)  # rewritten after the forced token
    assert proc.matchers[0].tokens == [forced, ID[b"a"]]
    assert torch.isfinite(out[0, ID[b"ab"]]) and torch.isfinite(out[0, ID[b'"}}']])
    out = proc(torch.tensor([[ID[b"1"]]]), scores)  # a new generation with the same processor
    assert proc.matchers[0].tokens == []
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == sorted([ID[b'{"'], ID[b"{"], forced])


def test_a_runaway_array_is_closed():
    fns = parse_catalog([{"name": "f", "parameters": {"s": {"type": "array", "items": {"type": "integer"}}}}], "t")
    idx = open_index(compile_index(fns, VOCAB)[0], VOCAB.token_bytes)
    # the model writes "1, " forever: 3 bytes per repeat, so the rule waits for 11 repeats (>= 32 bytes)
    gen = generate(SequenceModel([b"1"] + [b", ", b"1"] * 60), Tokenizer(), idx, [ID[b"1"]], max_tokens=200)
    assert gen.loop_closed
    items = json.loads(gen.text)["parameters"]["s"]
    assert items == [1] * len(items) and 8 <= len(items) <= 13
    assert len(gen.tokens) < 60
