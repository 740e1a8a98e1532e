"""TokenIndex.mask: the stored row as a view (ids or packed bits), and every form derived from it."""

import numpy as np
import pytest
import torch

from callmaybe.core.catalog import parse_catalog
from callmaybe.compiler.compile import compile_index
from callmaybe.core.indexfile import ROW_BITS, ROW_IDS
from callmaybe.runtime.decoding.masks import Mask
from callmaybe.runtime.decoding.index import open_index
from callmaybe.core.vocabulary import Vocabulary

# every single byte, a few JSON pieces and 600 letter pairs: string states allow ~680 tokens (a packed
# bitmask is the smaller row), the name and key states allow a handful (an id list is smaller)
PAIRS = [bytes([a, b]) for a in range(97, 123) for b in range(97, 123)][:600]
TOKENS = [bytes([b]) for b in range(256)] + [b'{"', b'name', b'": "', b'", "', b'parameters', b'": {',
                                             b'"}}', b'}}', b' "'] + PAIRS
WIDTH = len(TOKENS) + 5  # padding ids past the vocabulary, never allowed
EOS = len(TOKENS) + 1
VOCAB = Vocabulary(name="masks", token_bytes=tuple(TOKENS) + (None,) * 5, eos_ids=(EOS,), vocab_size=WIDTH)


@pytest.fixture(scope="module")
def index():
    fns = parse_catalog([{"name": "go", "parameters": {"city": {"type": "string"}, "n": {"type": "integer"}}},
                         {"name": "stop", "parameters": {}}], "t")
    data, _ = compile_index(fns, VOCAB)
    return open_index(data, VOCAB.token_bytes)


def expected(index, state) -> set[int]:
    out = {int(i) for i in index.data.allowed_tokens(state)}
    return out | ({EOS} if index.is_accepting(state) else set())


def test_rows_of_both_kinds_are_present(index):
    kinds = set(index.data.row_kind.tolist())
    assert kinds == {ROW_IDS, ROW_BITS}


def test_every_form_of_every_mask_agrees_with_the_stored_row(index):
    for state in range(index.num_states):
        want = expected(index, state)
        m = index.mask(state)
        assert isinstance(m, Mask) and index.mask(state) is m
        assert set(m.tensor().nonzero().flatten().tolist()) == want
        assert m.token_ids().tolist() == sorted(want)
        assert m.count() == len(want)
        assert {i for i in range(-2, WIDTH + 3) if i in m} == want
        assert set(index.allowed(state).tolist()) == want


def test_mask_is_a_view_of_the_index_arrays(index):
    for state in range(index.num_states):
        m = index.mask(state)
        stored = m.ids if m.ids is not None else m.bits
        assert (m.ids is None) != (m.bits is None)
        assert len(stored) == 0 or np.shares_memory(stored, index.data.row_ids if m.ids is not None else index.data.row_bits)


def test_apply_sets_exactly_the_disallowed_logits_to_minus_inf(index):
    logits = torch.randn(WIDTH)
    sparse = dense = 0
    for state in range(index.num_states):
        want = expected(index, state)
        out = index.apply(state, logits)
        finite = set(torch.isfinite(out).nonzero().flatten().tolist())
        assert finite == want
        assert torch.equal(out[sorted(want)], logits[sorted(want)])
        sparse += index.mask(state).is_sparse()
        dense += not index.mask(state).is_sparse()
    assert sparse and dense  # both ways of applying were exercised
    # logits narrower than the index (a model whose head is shorter): still only allowed ones survive
    short = logits[:300]
    state = index.start
    assert set(torch.isfinite(index.apply(state, short)).nonzero().flatten().tolist()) == \
        {i for i in expected(index, state) if i < 300}


def test_apply_keeps_the_dtype_and_never_allows_ids_past_the_width(index):
    for state in range(index.num_states):
        want = expected(index, state)
        half = index.apply(state, torch.randn(WIDTH).to(torch.bfloat16))
        assert half.dtype == torch.bfloat16
        assert set(torch.isfinite(half).nonzero().flatten().tolist()) == want
        wide = index.apply(state, torch.randn(WIDTH + 7))
        assert set(torch.isfinite(wide).nonzero().flatten().tolist()) == want


def test_the_best_allowed_token_is_the_argmax_of_the_masked_logits(index):
    """``best`` names the token the masked copy's argmax names, for every state, both kinds of row, per-step
    masks, bfloat16 and float32 logits, logits wider and narrower than the index, and ties (the lowest id)."""
    gen = torch.Generator().manual_seed(4)
    kinds = set()
    # per-step masks (budget_mask's kind), few ids and many
    steps = [Mask(np.sort(np.random.default_rng(n).choice(len(TOKENS), n, replace=False)).astype(np.int32), None,
                  bool(n % 2), [EOS], WIDTH, shared=False) for n in (3, 40, 500)]
    some = np.random.default_rng(1).random(WIDTH) < 0.4
    steps.append(Mask(None, np.packbits(some, bitorder="little"), True, [EOS], WIDTH, shared=False))
    for state in range(index.num_states):
        for m in [index.mask(state)] + steps:
            for logits in (torch.randn(WIDTH, generator=gen), torch.randn(WIDTH, generator=gen).bfloat16(),
                           torch.randn(WIDTH + 7, generator=gen), torch.randn(300, generator=gen),
                           torch.randint(0, 3, (WIDTH,), generator=gen).float()):  # many ties
                if not any(int(i) < logits.shape[0] for i in m.token_ids()):
                    continue
                want = int(torch.argmax(index.apply_mask(m, logits)))
                assert index.best(m, logits) == want, (state, logits.dtype, logits.shape)
                kinds.add((m.is_sparse(), m.shared))
    assert {(True, True), (False, True), (False, False)} <= kinds
    # every allowed logit -inf, or no allowed id below the logits' length: the lowest allowed id (the masked
    # copy's argmax would name token 0, not allowed here)
    m = index.mask(index.start)
    lowest = int(m.token_ids()[0])
    assert 0 not in m and lowest > 50
    assert index.best(m, torch.full((WIDTH,), float("-inf"))) == lowest
    assert index.best(m, torch.randn(50, generator=gen)) == lowest
    dense = Mask(None, np.packbits(np.arange(WIDTH) >= 100, bitorder="little"), False, [EOS], WIDTH, shared=False)
    assert not dense.is_sparse() and index.best(dense, torch.randn(50, generator=gen)) == 100
    assert index.best(Mask(np.zeros(0, dtype=np.int32), None, False, [EOS], WIDTH, shared=False),
                      torch.randn(WIDTH, generator=gen)) == 0


def test_no_mask_for_the_dead_state(index):
    with pytest.raises(IndexError):
        index.mask(-1)


def test_open_index_picks_the_counted_view_and_the_plain_class_refuses_counters():
    """An index with counters (a maxLength past 64) opens as a CountedTokenIndex; TokenIndex itself refuses it
    (its masks would ignore the counts) with one line, and opens a plain index as before."""
    from callmaybe.core.errors import IndexFileError
    from callmaybe.runtime.decoding.counted import CountedTokenIndex
    from callmaybe.runtime.decoding.masks import TokenIndex

    fns = parse_catalog([{"name": "go", "parameters": {"city": {"type": "string", "maxLength": 100}}}], "t")
    data, _ = compile_index(fns, VOCAB)
    assert data.header.get("counters")
    assert type(open_index(data, VOCAB.token_bytes)) is CountedTokenIndex
    with pytest.raises(IndexFileError) as err:
        TokenIndex(data, VOCAB.token_bytes)
    assert str(err.value) == "an index with counters needs CountedTokenIndex: open it with open_index()"
    plain, _ = compile_index(parse_catalog([{"name": "stop", "parameters": {}}], "t"), VOCAB)
    assert type(TokenIndex(plain, VOCAB.token_bytes)) is TokenIndex
