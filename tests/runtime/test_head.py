"""The output layer computing only the logits a grammar's mask lets a position read: an int8 layer's rows give
its whole product's columns bit for bit, a pass mixes such rows with whole ones, Decoding names the ids its
next pass reads, and the int8 fixture model answers the same with and without it, one at a time and batched."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from callmaybe.core.catalog import load_catalog
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime.decoding import decoder as decoder_module
from callmaybe.runtime.decoding.head import logits
from callmaybe.runtime.model import quant
from callmaybe.runtime.model.quant import SPLIT_ROWS, Int8Linear

from ..conftest import REPO

INF = float("-inf")


def layer(bias: bool) -> Int8Linear:
    torch.manual_seed(5)
    return Int8Linear.from_linear(nn.Linear(64, 300, bias=bias), rotated=False)


def inputs(rows: int) -> torch.Tensor:
    torch.manual_seed(6)
    x = torch.randn(rows, 64)
    x[:, [3, 40]] *= 30  # a transformer's few large channels
    return x.to(torch.bfloat16)


IDS = torch.tensor([0, 7, 8, 150, 299])


@pytest.mark.parametrize("with_kernel", [True, False])
@pytest.mark.parametrize("rows", [1, 3, 9, SPLIT_ROWS])
@pytest.mark.parametrize("bias", [False, True])
def test_a_layer_s_rows_give_its_whole_product_s_columns_bit_for_bit(monkeypatch, with_kernel, rows, bias):
    if not with_kernel:
        monkeypatch.setattr(quant.native, "_loaded", [None])  # torch._int_mm for the gathered rows too
    elif quant.native.kernel() is None:
        pytest.skip("the native kernel is unavailable here")
    q, x = layer(bias), inputs(rows)
    whole = q(x)
    assert q.takes_ids(rows)
    got = q.at(x, IDS)
    assert got.dtype == torch.bfloat16 and got.shape == (rows, 5)
    assert torch.equal(got, whole[:, IDS])
    masked = q.masked(x, IDS)
    assert masked.shape == (rows, 300) and torch.equal(masked[:, IDS], whole[:, IDS])
    others = torch.ones(300, dtype=torch.bool)
    others[IDS] = False
    assert (masked[:, others] == INF).all()
    # ids at or past the layer's outputs (a vocabulary wider than the head) name nothing; none: all -inf
    past = q.masked(x, torch.tensor([7, 300, 305]))
    assert torch.equal(past[:, 7], whole[:, 7]) and (past[:, :7] == INF).all() and (past[:, 8:] == INF).all()
    assert (q.masked(x, torch.tensor([300])) == INF).all()


def test_a_rotated_layer_or_too_many_rows_take_no_ids():
    torch.manual_seed(5)
    rotated = Int8Linear.from_linear(nn.Linear(64, 30, bias=False))
    assert rotated.block > 1 and not rotated.takes_ids(1)
    q = layer(False)
    assert q.takes_ids(1) and q.takes_ids(SPLIT_ROWS) and not q.takes_ids(SPLIT_ROWS + 1) and not q.takes_ids(0)
    with pytest.raises(ValueError) as err:
        q.at(inputs(SPLIT_ROWS + 1), IDS)
    assert str(err.value) == (f"Int8Linear.at: input ({SPLIT_ROWS + 1}, 64) on cpu: not a product it takes (an "
                              f"unrotated layer, 1-{SPLIT_ROWS} rows of 64, on the CPU)")
    with pytest.raises(ValueError):
        rotated.at(inputs(1), IDS)


def test_a_pass_mixes_rows_that_read_some_logits_with_rows_that_read_all():
    q, x = layer(True), inputs(4)
    whole = q(x)
    allowed = [None, torch.tensor([1, 2]), None, torch.tensor([2, 299])]
    got = logits(q, x, allowed)
    assert got.shape == (4, 300)
    assert torch.equal(got[0], whole[0]) and torch.equal(got[2], whole[2])
    # the rows with ids share one product over the union {1, 2, 299}: those columns hold the whole product's
    for r in (1, 3):
        assert torch.equal(got[r, [1, 2, 299]], whole[r, [1, 2, 299]])
        assert (got[r, 3:299] == INF).all() and got[r, 0] == INF
    assert torch.equal(logits(q, x, [torch.tensor([5])] * 4), q.masked(x, torch.tensor([5])))
    assert torch.equal(logits(q, x, [None] * 4), whole)


def test_a_head_that_takes_no_ids_or_a_pass_past_the_split_rows_computes_every_logit():
    torch.manual_seed(7)
    plain = nn.Linear(64, 30)
    x = inputs(2).float()
    assert torch.equal(logits(plain, x, [torch.tensor([1]), None]), plain(x))
    q, many = layer(False), inputs(SPLIT_ROWS + 1)
    assert torch.equal(logits(q, many, [torch.tensor([1])] * (SPLIT_ROWS + 1)), q(many))
    with pytest.raises(ValueError) as err:
        logits(q, x, [None])
    assert str(err.value) == "logits: 1 id rows for 2 hidden rows"


@pytest.fixture(scope="module")
def int8_answerer():
    from callmaybe.compiler.build import runtime_compiler
    from callmaybe.core.callformat import compile_options
    from callmaybe.runtime.answering.runner import Answerer
    from callmaybe.runtime.answering.session import model_vocabulary
    from callmaybe.runtime.decoding.index import open_index
    from callmaybe.runtime.model.load import load_model

    torch.set_num_threads(1)
    loaded = load_model(FIXTURE_MODEL, dtype="int8")
    functions = load_catalog(REPO / "schemas" / "functions_definition.json")
    vocabulary = model_vocabulary(FIXTURE_MODEL, loaded)
    data = runtime_compiler(functions, vocabulary, compile_options("plain"), True)
    index = open_index(data, vocabulary.token_bytes)
    # a new Answerer per use: its prefix cache starts empty (a batch stores the catalog prefix it computed)
    return lambda: Answerer(loaded.model, loaded.tokenizer, index, functions)


def test_decoding_names_the_ids_of_its_next_choices(int8_answerer):
    """After the plain format's forced ``{"name": "fn_``, the model chooses among the catalog's names: a short id
    row, named whole; with a trace (the model's top 3 before masking) or inside a free string, none."""
    from callmaybe.runtime.decoding.decoder import Decoding

    a = int8_answerer()
    row = Decoding(a.index, a.tokenizer, 256, [1, 2, 3])
    assert not row.take_forced()
    assert row.matcher.data == b'{"name": "fn_'
    mask = row.matcher.mask()
    assert mask.is_sparse() and torch.equal(row.needed_ids(), mask.token_ids())
    traced = Decoding(a.index, a.tokenizer, 256, [1, 2, 3], trace=True)
    traced.take_forced()
    assert traced.needed_ids() is None
    # into fn_greet's free string "name": every token that fits a JSON string is allowed
    for tok in a.tokenizer.encode('greet", "parameters": {"name": "', add_special_tokens=False):
        row.matcher.advance(tok)
    assert not row.matcher.mask().is_sparse() and row.needed_ids() is None


PROMPTS = ["What is the sum of 2 and 3?", "Greet shrek", "Reverse the string 'hello'",
           "What is the square root of 16?", "Calculate the square root of 144", "Greet john"]


def test_the_int8_model_answers_the_same_with_the_logits_of_the_allowed_ids_alone(int8_answerer, monkeypatch):
    from callmaybe.runtime.answering.runner import run_requests

    requests = [{"prompt": p} for p in PROMPTS]
    calls = []
    real = Int8Linear.masked

    def counted(self, x, ids):
        calls.append((x.shape[0], len(ids)))
        return real(self, x, ids)

    monkeypatch.setattr(Int8Linear, "masked", counted)
    one, _ = run_requests(int8_answerer(), requests, progress_bar=False)
    sequential = len(calls)
    batched, _ = run_requests(int8_answerer(), requests, progress_bar=False, max_batch=3)
    assert sequential > 0 and len(calls) > sequential
    monkeypatch.setattr(decoder_module.Decoding, "needed_ids", lambda self: None)
    calls.clear()
    assert run_requests(int8_answerer(), requests, progress_bar=False)[0] == one
    assert run_requests(int8_answerer(), requests, progress_bar=False, max_batch=3)[0] == batched
    assert not calls
    assert [r["name"] for r in one[:3]] == ["fn_add_numbers", "fn_greet", "fn_reverse_string"]
