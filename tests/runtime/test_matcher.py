"""The Matcher on a tiny vocabulary: exact allowed sets, forced tokens, budget, EOS, refusal and rollback."""

import pytest
import torch

from callmaybe.compiler.compile import compile_index
from callmaybe.core.catalog import parse_catalog
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.decoding.matcher import BudgetExhausted, Matcher, TokenNotAllowed

from .test_decoder import EOS, ID, VOCAB, Tokenizer

FORCED = ID[b'{"name": "f", "parameters": {"s": "']


@pytest.fixture(scope="module")
def index():
    fns = parse_catalog([{"name": "f", "parameters": {"s": {"type": "string"}}}], "t")
    return open_index(compile_index(fns, VOCAB)[0], VOCAB.token_bytes)


def allowed(matcher: Matcher) -> set[bytes | str]:
    return {"EOS" if i == EOS else VOCAB.token_bytes[i] for i in matcher.mask().token_ids().tolist()}


def test_the_start_allows_the_tokens_that_begin_a_call(index):
    m = Matcher(index)
    assert allowed(m) == {b'{"', b"{", b'{"name": "f", "parameters": {"s": "'}
    assert not m.is_complete() and not m.is_finished()


def test_forced_tokens_need_a_tokenizer_and_are_the_canonical_encoding(index):
    assert Matcher(index).forced_tokens() == []
    assert Matcher(index, tokenizer=Tokenizer()).forced_tokens() == [FORCED]


def test_inside_the_string_and_at_the_end(index):
    m = Matcher(index, tokenizer=Tokenizer())
    for tok in m.forced_tokens():
        m.advance(tok)
    assert allowed(m) == {b'"', b'{"', b" ", b"f", b", ", b"name", b"parameters", b"{", b"}", b"}}", b"a", b"ab",
                          b'"}}', b"s", b"1", b"0", b"[", b"]", b"]}}"}
    m.advance(ID[b"ab"])
    m.advance(ID[b'"}}'])
    assert m.is_complete() and allowed(m) == {"EOS"}
    m.advance(EOS)
    assert m.is_finished() and m.data == b'{"name": "f", "parameters": {"s": "ab"}}'
    assert m.call_tokens() == [FORCED, ID[b"ab"], ID[b'"}}']] and m.tokens[-1] == EOS


def test_a_token_the_mask_forbids_is_refused_and_changes_nothing(index):
    m = Matcher(index)
    with pytest.raises(TokenNotAllowed, match="token 11 is not allowed in state 0"):
        m.advance(ID[b"a"])
    with pytest.raises(TokenNotAllowed, match=r"EOS \(17\) before the call is complete"):
        m.advance(EOS)
    assert m.tokens == [] and m.state == index.start and m.data == b""


def test_the_budget_narrows_the_mask_so_the_call_completes(index):
    with pytest.raises(BudgetExhausted, match="a call needs at least 2 tokens; the token budget is 1"):
        Matcher(index, max_tokens=1)
    m = Matcher(index, max_tokens=3)
    m.advance(FORCED)
    assert m.tokens_left == 2
    assert allowed(m) == {b'"}}', b'"', b'{"', b"ab", b"a", b"f", b" ", b", ", b"name", b"parameters", b"{", b"}",
                          b"}}", b"s", b"1", b"0", b"[", b"]", b"]}}"}
    m.advance(ID[b"a"])
    assert allowed(m) == {b'"}}'}  # one token left: only the closing quote and braces complete the call
    logits = torch.zeros(VOCAB.vocab_size)
    assert int(m.apply(logits).argmax()) == ID[b'"}}']


def test_rollback_returns_to_an_earlier_state(index):
    m = Matcher(index, tokenizer=Tokenizer())
    m.advance(FORCED)
    after_forced = m.state
    for tok in (ID[b"ab"], ID[b'"}}'], EOS):
        m.advance(tok)
    m.rollback(3)
    assert m.state == after_forced and m.tokens == [FORCED] and not m.finished
    assert m.data == b'{"name": "f", "parameters": {"s": "'
    with pytest.raises(ValueError, match="cannot roll back 2 tokens of 1"):
        m.rollback(2)


def test_close_early_leaves_only_the_shortest_completion(index):
    m = Matcher(index, max_tokens=100)
    m.advance(FORCED)
    m.close_early()
    assert m.tokens_left == 1 and allowed(m) == {b'"}}'}


def test_ids_out_of_range_are_refused_and_leave_the_index_unharmed(index):
    """An id past the vocabulary (padding, or from a bad sampler) or a negative one never aliases another
    (state, token) pair in the shared next-state memo."""
    m = Matcher(index)
    m.advance(FORCED)
    state = m.state
    for bad in (VOCAB.vocab_size + ID[b"a"], ID[b"a"] - VOCAB.vocab_size, 22, 23, -1):
        with pytest.raises(TokenNotAllowed, match=f"token {bad} is not allowed in state {state}"):
            m.advance(bad)
        assert index.next_state(state - 1, bad + VOCAB.vocab_size) == -1
    assert m.tokens == [FORCED] and m.state == state
    m.advance(ID[b"a"])  # still allowed after all of that
    assert m.data.endswith(b'"s": "a')


def test_a_token_that_breaks_the_budget_is_refused(index):
    m = Matcher(index, max_tokens=2)
    m.advance(FORCED)
    with pytest.raises(TokenNotAllowed, match="token 11 leaves no room to complete the call within the token budget"):
        m.advance(ID[b"a"])
    m.advance(ID[b'"}}'])
    assert m.is_complete() and m.tokens_left == 0
    m.advance(EOS)  # EOS comes on top of the budget
    assert m.is_finished()
