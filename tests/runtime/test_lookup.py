"""Prompt-lookup drafts on a tiny vocabulary: the exact draft ids for a constructed prompt and state, cut where
the grammar refuses a token; verification with a scripted model: the cache drops the keys and values of the
draft tokens not taken, the matcher holds only the taken ones, and the call equals the one decoded without a
draft; a draft the grammar cuts closes the value and carries the forced text after it, a draft stops at
punctuation that ends a value, and the forced text token healing left to the model is drafted."""

from types import SimpleNamespace

import pytest
import torch

from callmaybe.compiler.compile import compile_index
from callmaybe.core.catalog import parse_catalog
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.decoding.decoder import generate
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.decoding.lookup import PromptLookup, boundary, closing, cut, healed
from callmaybe.runtime.decoding.matcher import Matcher

from .tiny import TinyTokenizer

TOKENS = [b'{"', b"name", b'":', b" ", b'"', b"f", b", ", b"parameters", b"{", b"}", b"}}", b"a", b"ab",
          b'"}}', b'{"name": "f", "parameters": {"s": "', b"s", b"1", None, b"0", b"[", b"]", b"]}}", b"b", b"c"]
EOS = 17
VOCAB = Vocabulary(name="tiny", token_bytes=tuple(TOKENS), eos_ids=(EOS,), vocab_size=len(TOKENS))
ID = {t: i for i, t in enumerate(TOKENS) if t is not None}
OPENING = ID[b'{"name": "f", "parameters": {"s": "']  # the call's forced text, one token


def ids(*pieces):
    return [EOS if p is None else ID[p] for p in pieces]


@pytest.fixture(scope="module")
def index():
    fns = parse_catalog([{"name": "f", "parameters": {"s": {"type": "string"}}}], "t")
    data, _ = compile_index(fns, VOCAB)
    return open_index(data, VOCAB.token_bytes)


def matcher_after(index, *pieces):
    m = Matcher(index, 20, TinyTokenizer(TOKENS))
    for tok in ids(*pieces):
        m.advance(tok)
    return m


def test_a_draft_is_what_follows_the_most_recent_occurrence_of_the_tail():
    lookup = PromptLookup(ids(b"1", b"a", b"s", b"1", b"ab", b"c"), VOCAB.token_bytes, k=8)
    assert lookup.propose(ids(b"1")) == ids(b"ab", b"c")  # the later "1"
    assert lookup.propose(ids(b"s", b"1")) == ids(b"ab", b"c")
    assert lookup.propose(ids(b"0", b"s")) == ids(b"1", b"ab", b"c")  # "0s" is not there; "s" is
    assert PromptLookup(ids(b"1", b"a", b"s", b"1", b"ab", b"c"), VOCAB.token_bytes, k=1).propose(ids(b"1")) == \
        ids(b"ab")
    assert lookup.propose(ids(b"0")) == []
    assert lookup.propose(ids(b"c")) == []  # at the prompt's end: nothing follows


def test_a_tail_is_matched_as_bytes_and_a_match_inside_a_token_drafts_its_rest():
    lookup = PromptLookup(ids(b"s", b"ab", b"c"), VOCAB.token_bytes, TinyTokenizer(TOKENS))
    assert lookup.propose(ids(b"a")) == ids(b"b", b"c")  # "a" ends inside "ab": "b" is tokenized
    assert PromptLookup(ids(b"s", b"ab", b"c"), VOCAB.token_bytes).propose(ids(b"a")) == []  # no tokenizer
    assert lookup.propose(ids(b'"', b"s")) == ids(b"ab", b"c")  # '"s' is not there; "s" is


def test_a_tail_without_a_letter_or_digit_drafts_nothing():
    lookup = PromptLookup(ids(b" ", b'"', b"1", b" ", b"ab"), VOCAB.token_bytes)
    assert lookup.propose(ids(b" ")) == []
    assert lookup.propose(ids(b'"')) == []
    assert lookup.propose(ids(b"1", b" ")) == ids(b"ab")


def test_a_control_token_in_the_prompt_is_matched_by_nothing():
    lookup = PromptLookup(ids(b"1", None, b"ab"), VOCAB.token_bytes)
    assert lookup.text == b"1\0ab"
    assert lookup.propose(ids(b"1")) == [EOS, ID[b"ab"]]  # proposed; the grammar cuts it (below)


def test_the_draft_is_cut_at_the_first_token_the_grammar_refuses(index):
    m = matcher_after(index, b'{"name": "f", "parameters": {"s": "', b"1")
    state, tokens = m.state, list(m.tokens)
    assert cut(m, ids(b"ab", b"a", None, b"c")) == ids(b"ab", b"a")  # EOS before the call is complete
    assert cut(m, ids(b"ab", b'"}}', b"a")) == ids(b"ab", b'"}}')  # nothing follows a finished call
    assert cut(m, ids(b"ab", b'"', b"}}", b"a")) == ids(b"ab", b'"', b"}}")  # forced "}}" as the index tokenizes it
    assert cut(m, ids(b"ab", b'"', b"}", b"}")) == ids(b"ab", b'"')  # another spelling of forced text
    assert cut(m, ids(b"[", b"ab")) == ids(b"[", b"ab")  # any character inside a string
    assert cut(m, []) == []
    assert (m.state, m.tokens) == (state, tokens)  # the matcher is left as it was


class Recorded:
    """A cache that counts its tokens and records each crop."""

    def __init__(self):
        self.length, self.crops = 0, []

    def crop(self, n):
        assert n < 0
        self.crops.append(n)
        self.length += n


class CopyModel:
    """Writes ``script[p]`` after absolute position ``p`` (the logits of every position fed); records each
    pass as (the cache's length before it, the ids fed, logits_to_keep)."""

    def __init__(self, script, vocab_size=VOCAB.vocab_size):
        self.script, self.passes, self.vocab_size = script, [], vocab_size

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        cache = cache if cache is not None else Recorded()
        fed = input_ids[0].tolist()
        at = logits_to_keep.tolist() if isinstance(logits_to_keep, torch.Tensor) else None
        self.passes.append((cache.length, fed, logits_to_keep if at is None else at))
        logits = torch.zeros(1, len(fed), self.vocab_size)
        for i in range(len(fed)):
            logits[0, i, self.script.get(cache.length + i, ID[b"a"])] = 100.0
        cache.length += len(fed)
        self.cache = cache
        return SimpleNamespace(logits=logits if at is None else logits[:, at], cache=cache)


PROMPT = ids(b"s", b"1", b"ab", b"a", b"ab", b'"}}')
# after the forced opening (position 6) the model writes "1", "ab", "ab", '"}}'
SCRIPT = {6: ID[b"1"], 7: ID[b"ab"], 8: ID[b"ab"], 9: ID[b'"}}']}


def test_verification_keeps_the_taken_draft_tokens_and_drops_the_others(index):
    model = CopyModel(SCRIPT)
    gen = generate(model, TinyTokenizer(TOKENS), index, PROMPT, max_tokens=20, speculate=True)
    assert gen.text == '{"name": "f", "parameters": {"s": "1abab"}}'
    assert model.passes == [
        (0, PROMPT + [OPENING], 1),  # the prompt's pass: the opening's tail is nowhere in the prompt
        # "1" -> the draft after it; "ab" taken, "a" refused; no logits after '"}}', which ends the call
        (7, ids(b"1", b"ab", b"a", b"ab", b'"}}'), [0, 1, 2, 3]),
        (9, ids(b"ab", b'"}}'), [0]),  # "ab" -> '"}}', taken: the call is finished
    ]
    assert model.cache.crops == [-3]  # "a", "ab", '"}}' of the second pass
    assert model.cache.length == len(PROMPT) + len(gen.tokens)  # every token but none pending
    assert (gen.forward_passes, gen.chosen_tokens, gen.forced_tokens) == (3, 4, 1)
    assert (gen.drafted_tokens, gen.accepted_tokens) == (5, 2)
    assert gen.tokens == [OPENING, *ids(b"1", b"ab", b"ab", b'"}}')]


def test_the_call_is_the_one_decoded_without_a_draft(index):
    plain = CopyModel(SCRIPT)
    gen = generate(plain, TinyTokenizer(TOKENS), index, PROMPT, max_tokens=20)
    assert gen.text == '{"name": "f", "parameters": {"s": "1abab"}}'
    assert [p[1] for p in plain.passes] == [PROMPT + [OPENING], ids(b"1"), ids(b"ab"), ids(b"ab")]
    assert (gen.forward_passes, gen.drafted_tokens) == (4, 0)


@pytest.mark.parametrize("closer, crops, accepted", [(b'"}}', [], 2), (b'"', [-1], 1)])
def test_a_quote_before_punctuation_in_the_prompt_is_drafted_as_the_call_closes(index, closer, crops, accepted):
    # the prompt spells the close '"' then "}}": the draft stops at the quote (boundary) and closes the call as
    # the tokenizer writes it, '"}}'; a model that writes '"' alone takes its own token from the same pass, and
    # the forced "}}" then ends the call without another pass
    prompt = ids(b"s", b"1", b"ab", b'"', b"}}")
    model = CopyModel({5: ID[b"1"], 6: ID[b"ab"], 7: ID[closer]})
    gen = generate(model, TinyTokenizer(TOKENS), index, prompt, max_tokens=20, speculate=True)
    assert gen.text == '{"name": "f", "parameters": {"s": "1ab"}}'
    assert [p[1] for p in model.passes] == [prompt + [OPENING], ids(b"1", b"ab", b'"}}')]
    assert model.cache.crops == crops
    assert (gen.forward_passes, gen.chosen_tokens, gen.drafted_tokens, gen.accepted_tokens) == (2, 3, 2, accepted)


def test_boundary_stops_a_draft_at_punctuation_that_ends_a_value():
    assert boundary(ids(b"ab", b'"', b"}}"), VOCAB.token_bytes) == 1  # a quote, then a brace
    assert boundary(ids(b"ab", b'"', None), VOCAB.token_bytes) == 1  # a quote, then a control token
    assert boundary(ids(b"ab", b"[", b" "), VOCAB.token_bytes) == 1  # a bracket, then a space
    assert boundary(ids(b'"}}', b"a"), VOCAB.token_bytes) == 0  # the byte after it inside the token
    assert boundary(ids(b"ab", b'"', b"a"), VOCAB.token_bytes) == 3  # a quote, then a letter: inside a value
    assert boundary(ids(b"ab", b'"'), VOCAB.token_bytes) == 2  # nothing known after it
    assert boundary(ids(b"ab", b" ", b"c"), VOCAB.token_bytes) == 3  # a space is no punctuation
    assert boundary([], VOCAB.token_bytes) == 0


# A vocabulary where " 1" extends the space after a key (token healing leaves that space to the model) and
# ', "' spells the separator before a key.
TOKENS2 = TOKENS + [b" 1", b', "']
VOCAB2 = Vocabulary(name="tiny2", token_bytes=tuple(TOKENS2), eos_ids=(EOS,), vocab_size=len(TOKENS2))
ID2 = {t: i for i, t in enumerate(TOKENS2) if t is not None}


@pytest.fixture(scope="module")
def index2():
    fns = parse_catalog([{"name": "f", "parameters": {"a": {"type": "integer"}, "s": {"type": "string"}}}], "t")
    data, _ = compile_index(fns, VOCAB2)
    return open_index(data, VOCAB2.token_bytes)


def matcher2(index2, *pieces):
    m = Matcher(index2, 40, TinyTokenizer(TOKENS2))
    while forced := m.forced_tokens():
        for tok in forced:
            m.advance(tok)
    for piece in pieces:
        m.advance(ID2[piece])
    return m


def test_healed_drafts_the_forced_text_token_healing_left_to_the_model(index2):
    m = matcher2(index2)
    assert m.data == b'{"name": "f", "parameters": {"a":'
    state = m.state
    assert [TOKENS2[t] for t in healed(m, TinyTokenizer(TOKENS2))] == [b" "]
    assert m.state == state
    assert healed(matcher2(index2, b" 1"), TinyTokenizer(TOKENS2)) == []  # inside the number: nothing forced


def test_closing_ends_the_value_and_drafts_the_forced_text_after_it(index2):
    m = matcher2(index2, b" 1")
    tokens = list(m.tokens)
    assert [TOKENS2[t] for t in closing(m, TinyTokenizer(TOKENS2))] == [b', "', b"s", b'":', b" ", b'"']
    assert m.tokens == tokens
    assert closing(matcher2(index2, b" "), TinyTokenizer(TOKENS2)) == []  # no digit yet: nothing closes
    m = matcher2(index2, b" 1", b', "', b"s", b'":', b" ", b'"', b"ab")
    assert [TOKENS2[t] for t in closing(m, TinyTokenizer(TOKENS2))] == [b'"}}']


def test_a_value_the_grammar_cuts_is_closed_in_the_same_pass(index2):
    prompt = [ID2[b"s"], ID2[b" 1"], ID2[b"c"], ID2[b"ab"]]
    n = len(prompt) + 13  # the model's first token follows the forced opening's 14 tokens
    script = {n: b" 1", n + 1: b', "', n + 2: b"s", n + 3: b'":', n + 4: b" ", n + 5: b'"', n + 6: b"ab",
              n + 7: b'"}}'}
    model = CopyModel({p: ID2[t] for p, t in script.items()}, VOCAB2.vocab_size)
    gen = generate(model, TinyTokenizer(TOKENS2), index2, prompt, max_tokens=40, speculate=True)
    assert gen.text == '{"name": "f", "parameters": {"a": 1, "s": "ab"}}'
    fed = [[TOKENS2[t] for t in p[1]] for p in model.passes]
    assert fed[0][:4] == [b"s", b" 1", b"c", b"ab"] and fed[0][-4:] == [b'{"', b"a", b'":', b" "]  # healed " "
    assert fed[1:] == [[b" 1", b', "', b"s", b'":', b" ", b'"'], [b"ab"]]  # " 1" -> closed, then the string
    assert [p[2] for p in model.passes] == [[17, 18], [0, 4, 5], 1]  # no logits where text is forced
    assert model.cache.crops == [-1]  # the healed " " the model extended to " 1"
    assert (gen.forward_passes, gen.drafted_tokens, gen.accepted_tokens) == (3, 6, 5)
    plain = CopyModel({p: ID2[t] for p, t in script.items()}, VOCAB2.vocab_size)
    assert generate(plain, TinyTokenizer(TOKENS2), index2, prompt, max_tokens=40).text == gen.text
    assert len(plain.passes) == 5
