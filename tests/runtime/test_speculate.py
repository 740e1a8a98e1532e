"""Speculation (prompt-lookup drafts verified under the mask) with the SmolLM2 fixture model in float32: the
same answers as without it, one at a time, in a batch and as engine turns, in fewer forward passes; in a
batch every row's cache holds exactly its prompt and the tokens it took."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from callmaybe.compiler.build import runtime_compiler
from callmaybe.core.catalog import load_catalog
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime.answering.engine import Engine
from callmaybe.runtime.answering.runner import answer_all
from callmaybe.runtime.answering.session import RunConfig, Runtime
from callmaybe.runtime.decoding import batch as batch_module
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.decoding.turn import Sampling, TurnRequest

from ..conftest import REPO

REQUESTS = json.loads((REPO / "data" / "input" / "function_calling_tests.json").read_text())

#: SmolLM2-135M-Instruct's calls for the public requests, greedy, float32, with or without speculation.
EXPECTED = [
    '{"name": "fn_add_numbers", "parameters": {"a": 2, "b": 3}}',
    '{"name": "fn_add_numbers", "parameters": {"a": 265, "b": 345}}',
    '{"name": "fn_greet", "parameters": {"name": "greet"}}',
    '{"name": "fn_add_numbers", "parameters": {"a": 1, "b": 2}}',
    '{"name": "fn_reverse_string", "parameters": {"s": "hello"}}',
    '{"name": "fn_reverse_string", "parameters": {"s": "world"}}',
    '{"name": "fn_get_square_root", "parameters": {"a": 16}}',
    '{"name": "fn_get_square_root", "parameters": {"a": 144}}',
    '{"name": "fn_add_numbers", "parameters": {"a": 34, "b": 233}}',
    '{"name": "fn_greet", "parameters": {"name": "programming_is_fun"}}',
    '{"name": "fn_greet", "parameters": {"name": "The cat sat on the mat with another cat"}}',
]


@pytest.fixture(scope="module")
def runtime():
    torch.set_num_threads(1)
    return Runtime(RunConfig(model=FIXTURE_MODEL, dtype="float32", threads=1), runtime_compiler)


@pytest.fixture(scope="module")
def functions():
    return load_catalog(REPO / "schemas" / "functions_definition.json")


def calls(runtime, functions, speculate: bool, max_batch: int):
    """(the generated texts in request order, forward passes, draft tokens, draft tokens taken)."""
    runtime.config = replace(runtime.config, speculate=speculate)
    answerer = runtime.answerer(functions)
    out = sorted(answer_all(((answerer, r) for r in REQUESTS), max_batch), key=lambda a: a[0])
    gens = [g for _, _, g in out]
    return ([g.text for g in gens], sum(g.forward_passes for g in gens), sum(g.drafted_tokens for g in gens),
            sum(g.accepted_tokens for g in gens))


def test_speculation_gives_the_same_calls_in_fewer_passes(runtime, functions):
    texts, passes, drafted, taken = calls(runtime, functions, False, 1)
    assert texts == EXPECTED
    assert (passes, drafted, taken) == (83, 0, 0)
    texts, passes, drafted, taken = calls(runtime, functions, True, 1)
    assert texts == EXPECTED
    assert (passes, drafted, taken) == (47, 99, 53)  # 65, 60, 18 before closing and healed drafts


def test_speculation_in_a_batch_gives_the_same_calls_and_each_row_keeps_only_the_tokens_it_took(
        runtime, functions, monkeypatch):
    step = batch_module.Batch.step
    # per row: the row (held so that its id is not reused by a later row) and the tokens its cache holds that
    # are neither call tokens nor pending
    held: dict[int, tuple[object, int]] = {}
    sharing = []  # per step: how many rows share the catalog prefix's keys and values

    def checked(batch):
        done = step(batch)
        sharing.append(sum(batch.shares))
        for b, row in enumerate(batch.rows):
            # its tokens: those of the shared catalog prefix, when it shares it, and its own valid slots
            shared = len(batch.base_ids) if batch.shares[b] else 0
            assert batch.lengths[b] == shared + int(batch.valid[b].sum())
            prompt = batch.lengths[b] - len(row.matcher.tokens) + len(row.pending)
            assert held.setdefault(id(row), (row, prompt))[1] == prompt  # the prompt's, whatever was dropped
        return done

    monkeypatch.setattr(batch_module.Batch, "step", checked)
    texts, passes, drafted, taken = calls(runtime, functions, True, 4)
    assert texts == EXPECTED
    # a row's prompt is fed in a batch step (batch.enter, the catalog prefix cached) and its first token may
    # come with a draft: 88 drafted before, when the prompt went through a pass of its own (batch.start)
    assert (passes, drafted, taken) == (47, 99, 53)  # 65, 49, 18 before closing and healed drafts
    assert len(held) == len(REQUESTS)
    assert max(sharing) == 4  # every row of a full batch on the shared prefix


def test_engine_turns_are_the_same_with_and_without_speculation(runtime, functions):
    index = open_index(runtime.index_for(functions), runtime.vocabulary.token_bytes)
    user = lambda text: [{"role": "user", "content": text}]  # noqa: E731
    turns = [TurnRequest(user(r["prompt"]), functions, "required") for r in REQUESTS] + [
        TurnRequest(user("Greet shrek and then greet john"), functions, "required", parallel=True, max_tokens=60),
        TurnRequest(user("Reverse the string 'hello'"), functions, "required", function="fn_reverse_string"),
        TurnRequest(user("Reverse the string 'hello'"), functions, "required", sampling=Sampling(0.7, 0.9, 3)),
    ]

    def answers(speculate, max_batch):
        runtime.config = replace(runtime.config, speculate=speculate)
        got = dict(Engine(runtime, max_batch=max_batch).answer((t, index, None) for t in turns))
        return [(json.dumps([(c.name, c.arguments) for c in got[i].calls]), got[i].completion_tokens,
                 got[i].forced_tokens) for i in range(len(turns))], got

    plain, _ = answers(False, 1)
    for max_batch in (1, 4):
        fast, got = answers(True, max_batch)
        assert fast == plain
        assert got[len(turns) - 1].drafted_tokens == 0  # a sampled turn drafts nothing
        assert sum(r.accepted_tokens for r in got.values()) > 0
