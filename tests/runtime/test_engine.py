"""The engine with the SmolLM2 fixture model in float32: turns decoded as rows of one batch equal the same
turns decoded one at a time; the queue is bounded; a cancelled turn reports nothing; a prompt past the
context is refused on submit."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

from callmaybe.compiler.build import runtime_compiler
from callmaybe.core.catalog import load_catalog
from callmaybe.core.errors import InputError
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime.answering.engine import Engine, QueueFull
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.answering.session import RunConfig, Runtime
from callmaybe.runtime.decoding.turn import Sampling, TurnRequest

from ..conftest import REPO


@pytest.fixture(scope="module")
def runtime():
    torch.set_num_threads(1)
    return Runtime(RunConfig(model=FIXTURE_MODEL, dtype="float32", threads=1), runtime_compiler)


@pytest.fixture(scope="module")
def catalog(runtime):
    functions = load_catalog(REPO / "schemas" / "functions_definition.json")
    return functions, open_index(runtime.index_for(functions), runtime.vocabulary.token_bytes)


def requests(functions):
    user = lambda text: [{"role": "user", "content": text}]  # noqa: E731
    return [
        TurnRequest(user("What is the sum of 2 and 3?"), functions, "required"),
        TurnRequest(user("Tell me about cats."), functions, "auto", max_tokens=12),
        TurnRequest(user("Greet shrek"), functions, "none", max_tokens=8),
        TurnRequest(user("Greet shrek and then greet john"), functions, "required", parallel=True, max_tokens=60),
        TurnRequest(user("Reverse the string 'hello'"), functions, "required", function="fn_reverse_string"),
        TurnRequest(user("Greet john"), functions, "required", sampling=Sampling(0.7, 0.9, 3)),
    ]


def answers(runtime, catalog, max_batch):
    functions, index = catalog
    engine = Engine(runtime, max_batch=max_batch)
    out = {}
    for position, result in engine.answer((r, index, None) for r in requests(functions)):
        out[position] = (result.content, [(c.name, c.arguments) for c in result.calls], result.finish_reason,
                         result.completion_tokens)
    return [out[i] for i in range(len(out))]


def test_batched_turns_equal_turns_one_at_a_time(runtime, catalog):
    alone = answers(runtime, catalog, 1)
    assert answers(runtime, catalog, 4) == alone
    assert alone[0][1:3] == ([("fn_add_numbers", {"a": 2.0, "b": 3.0})], "tool_calls")
    assert alone[2][1] == [] and alone[2][0] and alone[2][2] in ("stop", "length")  # "none": text only
    assert [name for name, _ in alone[4][1]] == ["fn_reverse_string"]
    assert all(a[2] == "tool_calls" and a[1] for a in (alone[3], alone[5]))
    functions = {f.name: f for f in catalog[0]}
    for _, calls, _, _ in alone:
        for name, arguments in calls:
            jsonschema.validate(arguments, functions[name].parameters)


def test_queue_is_bounded_and_cancel_reports_nothing(runtime, catalog):
    functions, index = catalog
    engine = Engine(runtime, max_batch=1, max_queue=1)
    events = []
    first = engine.submit(requests(functions)[0], events.append, index)
    with pytest.raises(QueueFull, match=r"1 requests are waiting \(the queue holds 1\); retry later"):
        engine.submit(requests(functions)[0], events.append, index)
    engine.cancel(first)
    engine.drain()
    assert events == [] and engine.queued == 0 and engine.decoding == 0


def test_prompt_past_the_context_is_refused(runtime, catalog):
    functions, index = catalog
    long = TurnRequest([{"role": "user", "content": "word " * 9000}], functions, "required")
    with pytest.raises(InputError, match=r"the prompt is \d+ tokens; the model's context is 8192"):
        Engine(runtime).submit(long, lambda e: None, index)


def test_an_auto_turn_is_given_the_relevance_and_confirm_checks_and_their_passes_are_profiled(runtime, catalog):
    functions, index = catalog
    engine = Engine(runtime, max_batch=1)
    user = [{"role": "user", "content": "What is the sum of 2 and 3?"}]
    ticket = engine.submit(TurnRequest(user, functions, "auto"), lambda e: None, index)
    before = runtime.profile.calls["relevance pass"]
    judged = ticket.row.judge(functions, "What is the sum of 2 and 3?")
    assert judged.forward_passes == 1 and 0.0 < judged.p_yes < 1.0
    assert runtime.profile.calls["relevance pass"] == before + 1
    before = runtime.profile.calls["confirm pass"]
    by_name = {fn.name: fn for fn in functions}
    confirmed = ticket.row.confirm(by_name["fn_add_numbers"], "What is the sum of 2 and 3?", {"a": 2.0, "b": 3.0})
    assert confirmed.forward_passes == 1 and 0.0 < confirmed.p_yes < 1.0
    assert confirmed.keep == (confirmed.log_odds >= 0.6)
    assert runtime.profile.calls["confirm pass"] == before + 1
    required = engine.submit(TurnRequest(user, functions, "required"), lambda e: None, index)
    assert required.row.judge is None and required.row.confirm is None
    engine.close()


def _answered(name, arguments, result, asked):
    return [{"role": "user", "content": asked},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": "c1", "content": result}]


def test_a_declined_call_in_a_batch_answers_as_the_turn_that_never_called(runtime, catalog):
    # a threshold of -60 makes each turn call; the call repeats the one the tool answered, so it is declined
    # and the row goes back to its prompt (Batch._truncate, prompt partly from the prefix cache) while other
    # rows decode beside it: its text is the text of the same turn at a threshold of +60, which never calls,
    # and the other rows' answers do not move
    functions, index = catalog
    chats = [_answered("fn_reverse_string", {"s": "hello"}, '{"result": "olleh"}', "Reverse the string 'hello'"),
             _answered("fn_greet", {"name": "shrek"}, "Hello shrek!", "Greet shrek")]
    forced = [TurnRequest(c, functions, "auto", max_tokens=24, call_threshold=-60.0) for c in chats]
    plain = [TurnRequest(c, functions, "auto", max_tokens=24, call_threshold=60.0) for c in chats]
    other = TurnRequest([{"role": "user", "content": "What is the sum of 2 and 3?"}], functions, "required")

    def answer(requests, max_batch):
        engine = Engine(runtime, max_batch=max_batch)
        got = dict(engine.answer((r, index, None) for r in requests))
        engine.close()
        return [(r.content, [(c.name, c.arguments) for c in r.calls], r.finish_reason, r.completion_tokens,
                 r.decision) for _, r in sorted(got.items())]

    texts = answer(plain, 1)
    assert [t[1] for t in texts] == [[], []] and all(t[4].startswith("answered in text") for t in texts)
    batched = answer([forced[0], other, forced[1]], 3)
    assert batched == answer([forced[0], other, forced[1]], 1)
    for (content, calls, finish, tokens, decision), text, name in zip(batched[::2], texts,
                                                                      ("fn_reverse_string", "fn_greet")):
        assert (content, calls, finish, tokens) == text[:4]
        # after the tool result the answer is written without the catalog and kept: it states the result
        assert re.fullmatch(f"declined a call: {name} with these arguments was already called and answered; the "
                            r"answer written without the catalog uses the tool result \(PMI \+\d+\.\d\d nats >= "
                            r"\+5\.00\)", decision), decision
        assert decision.split("; ")[1] == text[4].split("; ")[1]  # the same answer, checked the same way
    assert batched[1][1] == [("fn_add_numbers", {"a": 2.0, "b": 3.0})]


def test_turns_that_join_a_running_batch_get_no_prefill_pass_of_their_own(runtime, catalog):
    # the prompts after the catalog prefix go through the batch's steps (batch.enter), not one pass each
    functions, index = catalog
    runtime.profile.__init__()
    engine = Engine(runtime, max_batch=3)
    turns = [TurnRequest([{"role": "user", "content": text}], functions, "required")
             for text in ("What is the sum of 2 and 3?", "Greet shrek", "Reverse the string 'hello'")]
    results = dict(engine.answer((t, index, None) for t in turns))
    assert [results[i].calls[0].name for i in range(3)] == ["fn_add_numbers", "fn_greet", "fn_reverse_string"]
    assert runtime.profile.calls.get("prefill", 0) == 0
    assert runtime.profile.calls["batch step"] >= 1
