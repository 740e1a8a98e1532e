"""Batched decoding (--max-batch) with the SmolLM2 fixture model in float32: rows of different lengths give
the logits each would get alone, rows join and leave between steps, and the answers equal one-at-a-time ones."""

from __future__ import annotations

import pytest
import torch

from callmaybe.core.catalog import load_catalog
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime.decoding import batch as batch_module
from callmaybe.runtime.decoding.batch import Batch, Started
from callmaybe.runtime.decoding.decoder import forward
from callmaybe.runtime.model.load import load_model
from callmaybe.runtime.answering.runner import Answerer, answer_batched, run_requests

from ..conftest import REPO

PROMPTS = ["What is the sum of 2 and 3?", "Greet shrek", "Reverse the string 'hello'",
           "What is the square root of 16?", "Calculate the square root of 144", "Greet john", ""]


@pytest.fixture(scope="module")
def smollm2():
    torch.set_num_threads(1)
    return load_model(FIXTURE_MODEL, dtype="float32")


class Fed:
    """A stand-in for a Decoding: feeds fixed chunks and records the logits it is given."""

    def __init__(self, chunks):
        self.chunks, self.pending, self.seen = list(chunks[1:]), list(chunks[0]), []

    def take_forced(self):
        return False

    def propose(self):
        return []  # drafts nothing: every step is choose()

    def choose(self, logits):
        self.seen.append(logits.clone())
        if not self.chunks:
            return True
        self.pending = self.chunks.pop(0)
        return False


def alone(model, chunks):
    """The last logits after each chunk, the chunks fed one pass each to a batch of one."""
    past, out = None, []
    for chunk in chunks:
        logits, past = forward(model, chunk, past)
        out.append(logits)
    return out


def started(model, chunks, prefix=None):
    """A Fed row whose first chunk went through the model alone, as :func:`batch.start` leaves it; with
    ``prefix`` (its catalog prefix, fed with its first chunk in one pass), a row that says so
    (``Started.base``), as :func:`batch.start` leaves a row of a cached catalog."""
    row = Fed(chunks if prefix is None else [prefix + chunks[0]] + chunks[1:])
    logits, past = forward(model, row.pending, None)
    row.choose(logits)
    base = None if prefix is None else tuple(prefix)
    return Started(row, [(layer.keys.clone(), layer.values.clone()) for layer in past.layers], base=base)


def _plain(loaded):
    """The fixture's weights in :class:`~callmaybe.runtime.model.llama.CausalLM`, the decoder the int8 and int4
    checkpoints load into, as they load it (a one-token step attends through ``_one_query``)."""
    from callmaybe.runtime.model.llama import CausalLM

    model = CausalLM(loaded.model.config.to_dict(), torch.float32, device="meta", exact_attention=False)
    # the state dict names the tied output layer too (the embedding's tensor): every key matches
    model.load_state_dict(loaded.model.state_dict(), assign=True, strict=True)
    return model.eval()


@pytest.mark.parametrize("decoder", ["transformers", "callmaybe"])
def test_rows_of_different_lengths_get_the_logits_they_get_alone(smollm2, monkeypatch, decoder):
    model = smollm2.model if decoder == "transformers" else _plain(smollm2)
    scripts = [
        [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [20, 21, 22], [30], [31]],
        [[11, 12, 13], [40], [50, 51, 52, 53, 54], [60], [61], [62]],
        [[70, 71, 72, 73, 74, 75], [80], [81, 82]],
    ]
    monkeypatch.setattr(batch_module, "REPACK_SLACK", 0)  # repack at every departure
    batch = Batch(model)
    rows = [started(model, s) for s in scripts[:2]]
    for r in rows:
        batch.join(r)
    assert batch.slots == 10 and batch.valid.sum(dim=1).tolist() == [10, 3]
    assert batch.step() == []
    late = started(model, scripts[2])  # joins between steps
    batch.join(late)
    rows.append(late)
    departures = []
    while len(batch):
        departures.append([scripts[[r.row for r in rows].index(d)][0][0] for d in batch.step()])
    assert departures == [[], [1, 70], [], [11]]  # each leaves after its last chunk; the others go on
    for r, script in zip(rows, scripts):
        expected = alone(model, script)
        assert len(r.row.seen) == len(expected)
        for got, want in zip(r.row.seen, expected):
            assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


class Rewinds(Fed):
    """A Fed row that, after its chunk ``at``, goes back to its first ``keep`` tokens (as a turn that declines
    the call it decoded does: ``truncate_to``)."""

    def __init__(self, chunks, at, keep):
        super().__init__(chunks)
        self.at, self.keep, self.truncate_to = at, keep, None

    def choose(self, logits):
        done = super().choose(logits)
        if len(self.seen) == self.at:
            self.truncate_to = self.keep
        return done


def test_a_row_that_goes_back_to_its_prompt_gets_the_logits_of_a_row_that_never_left_it(smollm2):
    model = smollm2.model
    prompt = [1, 2, 3, 4, 5, 6]
    # the row decodes [40], [41, 42] (a call), goes back to its prompt, then feeds [50], [51] (text)
    back = Rewinds([prompt, [40], [41, 42], [50], [51]], at=3, keep=len(prompt))
    other = [[70, 71, 72], [80], [81], [82], [83], [84]]
    batch = Batch(model)
    for chunks, row in ((None, back), (other, None)):
        row = row or Fed(chunks)
        logits, past = forward(model, row.pending, None)
        row.choose(logits)
        batch.join(Started(row, [(layer.keys.clone(), layer.values.clone()) for layer in past.layers]))
    while len(batch):
        batch.step()
    straight = alone(model, [prompt, [50], [51]])  # what the text gets after the prompt alone
    assert len(back.seen) == 5
    for got, want in zip(back.seen[3:], straight[1:]):
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
    assert back.truncate_to is None  # the batch took it


def test_a_row_that_goes_back_past_its_prompt_while_another_leaves_and_the_cache_is_repacked(smollm2, monkeypatch):
    # a turn whose text turned into a call it then declines goes back to the end of that text (truncate_to
    # past the prompt); in the same step a short row leaves and the cache is repacked (slack 0)
    monkeypatch.setattr(batch_module, "REPACK_SLACK", 0)
    model = smollm2.model
    prompt = list(range(1, 12))
    back = Rewinds([prompt, [40], [41], [42, 43, 44], [45], [50], [51], [52]], at=4, keep=len(prompt) + 2)
    short = Fed([[90, 91], [92], [93], [94]])
    long_chunks = [list(range(60, 80)), [70], [71], [72], [73], [74], [75], [76], [77]]
    long = Fed(long_chunks)
    batch = Batch(model)
    for row in (long, back, short):
        logits, past = forward(model, row.pending, None)
        row.choose(logits)
        batch.join(Started(row, [(layer.keys.clone(), layer.values.clone()) for layer in past.layers]))
    departures = []
    while len(batch):
        departures.append(len(batch.step()))
    assert departures[:3] == [0, 0, 1]  # the short row leaves in the step after which the other goes back
    # after [42, 43, 44], the row keeps its prompt, 40 and 41: [45] and the rest follow them
    straight = alone(model, [prompt, [40], [41], [45], [50], [51], [52]])
    assert len(back.seen) == 8
    for got, want in zip(back.seen[4:], straight[3:]):
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
    for got, want in zip(long.seen, alone(model, long_chunks)):
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


@pytest.fixture(scope="module")
def answerer(smollm2):
    from callmaybe.compiler.build import runtime_compiler
    from callmaybe.core.callformat import compile_options
    from callmaybe.runtime.decoding.index import open_index
    from callmaybe.runtime.answering.session import model_vocabulary

    functions = load_catalog(REPO / "schemas" / "functions_definition.json")
    vocabulary = model_vocabulary(FIXTURE_MODEL, smollm2)
    data = runtime_compiler(functions, vocabulary, compile_options("plain"), True)
    index = open_index(data, vocabulary.token_bytes)
    return Answerer(smollm2.model, smollm2.tokenizer, index, functions)


def test_batched_answers_equal_one_at_a_time(answerer):
    requests = [{"prompt": p} for p in PROMPTS]
    one, stats_one = run_requests(answerer, requests, progress_bar=False)
    three, stats_three = run_requests(answerer, requests, progress_bar=False, max_batch=3)
    assert three == one
    assert one[-1] == {"prompt": "", "error": "empty or missing prompt"}
    assert [r["name"] for r in one[:3]] == ["fn_add_numbers", "fn_greet", "fn_reverse_string"]
    assert (stats_three.tokens, stats_three.failed) == (stats_one.tokens, stats_one.failed)


def test_answers_come_as_calls_finish_and_a_failed_step_fails_only_its_rows(answerer, monkeypatch):
    real_step, calls = Batch.step, []

    def step_failing_once(self):
        calls.append(len(self))
        if len(calls) == 2:
            raise RuntimeError("out of memory")
        return real_step(self)

    monkeypatch.setattr(Batch, "step", step_failing_once)
    answers = list(answer_batched(((answerer, {"prompt": p}) for p in PROMPTS[:5]), max_batch=2))
    assert sorted(position for position, _, _ in answers) == [0, 1, 2, 3, 4]
    failed = {position for position, entry, _ in answers if "error" in entry}
    assert len(failed) == calls[1] == 2
    assert all(entry["error"] == "RuntimeError: out of memory" for _, entry, _ in answers if "error" in entry)
    assert all("name" in entry for position, entry, _ in answers if position not in failed)


def test_a_prefix_cache_shared_by_two_catalogs_computes_only_what_differs(smollm2):
    from callmaybe.runtime.decoding.decoder import PrefixCache
    from callmaybe.runtime.decoding.profile import Profile

    model, profile = smollm2.model, Profile()
    cache = PrefixCache(model, profile=profile)
    a, b = [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 60, 70]
    cache.lookup(a + [9], 8)
    cache.release()
    past, covered = cache.lookup(b + [9], 7)
    assert covered == 7 and cache.ids == b and past.get_seq_length() == 7
    assert profile.tokens["prefix"] == 8 + 2  # b computed only from where it leaves a
    reused, _ = forward(model, [9], past)
    alone_logits = alone(model, [b, [9]])[-1]
    assert torch.allclose(reused, alone_logits, atol=1e-4)



def test_a_prefix_cache_keeps_several_catalogs_and_computes_each_once(smollm2):
    # a server alternating between a known and a new tool list: neither prefix is computed twice
    from callmaybe.runtime.decoding.decoder import PrefixCache
    from callmaybe.runtime.decoding.profile import Profile

    model, profile = smollm2.model, Profile()
    cache = PrefixCache(model, profile=profile)
    a, b = [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 60, 70]
    for prefix in (a, b, a, b, a):
        past, covered = cache.lookup(prefix + [9, 10], len(prefix))
        assert covered == len(prefix) and past.get_seq_length() == len(prefix)
        reused, _ = forward(model, [9, 10], past)
        cache.release()
        assert torch.allclose(reused, alone(model, [prefix, [9, 10]])[-1], atol=1e-4)
    assert profile.tokens["prefix"] == 8 + 2
    assert [e.ids for e in cache.entries] == [b, a]  # least recently used first
    # a prefix inside a cached one (a shorter prefix length of the same prompt) computes nothing
    past, covered = cache.lookup(a, 6)
    assert covered == 6 and past.get_seq_length() == 6
    cache.release()
    assert profile.tokens["prefix"] == 10 and [e.ids for e in cache.entries] == [b, a]
    assert [e.cache.get_seq_length() for e in cache.entries] == [7, 8]


def test_a_prefix_cache_past_its_bytes_drops_the_least_recently_used(smollm2):
    from callmaybe.runtime.decoding.decoder import PrefixCache

    model = smollm2.model
    probe = PrefixCache(model)
    probe.lookup([1, 2, 3, 4], 4)
    probe.release()
    per_token = probe.entries[0].bytes // 4
    cache = PrefixCache(model, max_bytes=per_token * 12)  # room for 12 tokens
    a, b, c = [1, 2, 3, 4, 5, 6], [1, 2, 3, 40, 50, 60], [7, 8, 9, 10]
    for prefix in (a, b, a, c):
        cache.lookup(prefix, len(prefix))
        cache.release()
    # b (6 tokens, used before a) left when c came: a 6 + c 4 = 10 tokens fit, 16 do not
    assert [e.ids for e in cache.entries] == [a, c]
    assert sum(e.bytes for e in cache.entries) == per_token * 10

def entered(model, chunks, prefix_cache, prefix):
    """A Fed row that joins as :func:`batch.enter` leaves a turn: the keys and values of the shared ``prefix``
    only, its first chunk fed in the batch's next step."""
    from callmaybe.runtime.decoding.batch import enter

    row = Fed(chunks)
    got = enter(row, prefix + row.pending, prefix_cache, len(prefix))
    assert got is not None and got.kv[0][0].shape[2] == len(prefix)
    return got


def test_a_row_whose_prompt_is_folded_into_the_running_batch_gets_the_logits_it_gets_alone(smollm2):
    from callmaybe.runtime.decoding.decoder import PrefixCache

    model = smollm2.model
    prefix = [1, 2, 3, 4, 5, 6, 7]
    cache = PrefixCache(model)
    running = [[8, 9, 10], [40], [41], [42], [43]]
    late = [[20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30], [50], [51, 52, 53], [54]]
    batch = Batch(model)
    first = entered(model, running, cache, prefix)
    batch.join(first)
    assert batch.step() == []  # the first row's prompt, alone in the batch
    second = entered(model, late, cache, prefix)
    batch.join(second)  # joins a running batch: its 11 prompt tokens go with the other row's 1
    steps = 0
    while len(batch):
        batch.step()
        steps += 1
    assert steps == 4  # no pass of its own for the late row's prompt
    for row, chunks in ((first.row, running), (second.row, late)):
        expected = alone(model, [prefix + chunks[0]] + chunks[1:])
        assert len(row.seen) == len(expected)
        for got, want in zip(row.seen, expected):
            assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()



def test_a_new_catalog_prefix_is_fed_in_chunks_beside_a_decoding_row_then_cached(smollm2, monkeypatch):
    # the server's path (Engine prefill_chunk): a request with a new tool list joins with the part of its
    # catalog prefix the cache shares, feeds the rest 4 tokens a step while the other row decodes on, and the
    # batch stores the new prefix for the next request
    from callmaybe.runtime.decoding.batch import enter
    from callmaybe.runtime.decoding.decoder import PrefixCache
    from callmaybe.runtime.decoding.profile import Profile

    monkeypatch.setattr(batch_module, "SHORT_PROMPT", 0)  # a short prompt stands for a long one
    model, profile = smollm2.model, Profile()
    cache = PrefixCache(model, profile=profile)
    known, new = [1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 30, 31, 32, 33, 34, 35, 36, 37]
    running = [[8, 9, 10], [40], [41], [42], [43], [44]]
    late = [[60, 61, 62], [63]]
    batch = Batch(model, chunk=4)
    first = entered(model, running, cache, known)
    batch.join(first)
    assert batch.step() == []
    row = Fed(late)
    got = enter(row, new + row.pending, cache, len(new), fold=True)
    assert got.kv[0][0].shape[2] == 3 and got.store == (cache, new)
    assert row.pending == [30, 31, 32, 33, 34, 35, 36, 37, 60, 61, 62]
    batch.join(got)
    fed = []
    while len(batch):
        before = list(batch.lengths)
        batch.step()
        fed.append([n - b for n, b in zip(batch.lengths, before)] if len(batch) == len(before) else None)
    assert fed[:3] == [[1, 4], [1, 4], [1, 3]]  # the late row's 11 tokens in 4, 4 and 3; the other row each step
    assert len(first.row.seen) == 6 and len(row.seen) == 2
    for got_row, chunks, prefix in ((first.row, running, known), (row, late, new)):
        expected = alone(model, [prefix + chunks[0]] + chunks[1:])
        for got_logits, want in zip(got_row.seen, expected):
            assert torch.allclose(got_logits, want, atol=1e-4), (got_logits - want).abs().max()
    computed = profile.tokens["prefix"]
    past, covered = cache.lookup(new + [9], len(new))
    assert covered == len(new) and profile.tokens["prefix"] == computed  # stored by the batch: nothing computed
    reused, _ = forward(model, [9], past)
    cache.release()
    assert torch.allclose(reused, alone(model, [new, [9]])[-1], atol=1e-4)


def test_a_folded_prompt_alone_in_the_batch_is_fed_at_once(smollm2):
    from callmaybe.runtime.decoding.batch import enter
    from callmaybe.runtime.decoding.decoder import PrefixCache

    model = smollm2.model
    cache = PrefixCache(model)
    cache.lookup([1, 2, 3, 4, 9], 4)
    cache.release()
    new = [1, 2, 3, 30, 31, 32, 33, 34, 35, 36, 37]
    row = Fed([[60, 61, 62], [63]])
    batch = Batch(model, chunk=4)
    batch.join(enter(row, new + row.pending, cache, len(new), fold=True))
    assert batch.step() == [] and batch.lengths == [len(new) + 3]  # no other row waits: one pass
    assert [e.ids for e in cache.entries] == [[1, 2, 3, 4], new]

def test_enter_without_a_cached_prefix_leaves_the_prompt_to_start():
    from callmaybe.runtime.decoding.batch import enter
    from callmaybe.runtime.decoding.decoder import PrefixCache

    assert enter(Fed([[1, 2]]), [1, 2], None, 0) is None
    assert enter(Fed([[1, 2]]), [1, 2], PrefixCache(None, enabled=False), 1) is None


@pytest.mark.parametrize("own_pass", [True, False])
def test_buffers_that_grow_in_rows_and_slots_keep_every_row_s_logits(smollm2, monkeypatch, own_pass):
    # one row and two slots to start with: every join and most steps grow the buffers; own_pass False is the
    # padded transformers forward that an unknown architecture takes
    monkeypatch.setattr(batch_module, "ROWS_FIRST", 1)
    monkeypatch.setattr(batch_module, "SLOT_CHUNK", 2)
    model = smollm2.model
    scripts = [[[1, 2, 3], [10], [11, 12, 13, 14], [15]],
               [[4, 5], [20, 21], [22]],
               [[6, 7, 8, 9, 10, 11], [30], [31], [32], [33]]]
    batch = Batch(model)
    batch.own_pass = own_pass
    rows = []
    for script in scripts:
        rows.append(started(model, script))
        batch.join(rows[-1])
        batch.step()
    while len(batch):
        batch.step()
    assert batch.keys[0].shape[0] == 4  # rows doubled from 1: 2, then 4
    for r, script in zip(rows, scripts):
        expected = alone(model, script)
        assert len(r.row.seen) == len(expected)
        for got, want in zip(r.row.seen, expected):
            assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


@pytest.mark.parametrize("pending, fed", [
    ([1, 400], [1, 4]),  # a row decodes: the other's prompt goes 4 tokens a step
    ([1, 400, 70], [1, 0, 4]),  # the fewest left first: 70 before 400
    ([1, 400, 60], [1, 4, 60]),  # a request's own message (up to SHORT_PROMPT tokens) whole
    ([400, 70], [0, 70]),  # no row decodes: the shortest prompt whole (then it decodes)
    ([300, 290], [0, 128]),  # at most PREFILL_STEP tokens in a step
    ([3, 2], [3, 2]),
])
def test_a_step_feeds_long_prompts_in_chunks(smollm2, pending, fed):
    assert batch_module.PREFILL_STEP == 128 and batch_module.SHORT_PROMPT == 64
    batch = Batch(smollm2.model, chunk=4)
    batch.rows = [Fed([list(range(n))]) for n in pending]
    assert batch._allot() == fed


def shared_batch(model, pending, feeding=()):
    """A Batch with chunk 16 and share 0.5 whose steps have cost 0.09 s + 0.01 s a token, rows with
    ``pending`` tokens, those at ``feeding`` part fed already."""
    batch = Batch(model, chunk=16, share=0.5)
    for t in [1, 17, 4, 30, 2, 9, 1, 16]:
        batch.cost.add(t, 0.09 + 0.01 * t)
    batch.rows = [Fed([list(range(n))]) for n in pending]
    batch._feeding = {id(batch.rows[b]) for b in feeding}
    return batch


@pytest.mark.parametrize("pending, feeding, fed", [
    ([1, 400], (), [1, 5]),  # 0.5 * (0.09 + 0.01) / 0.01 tokens beside one decoding row, not 16
    ([1, 1, 1, 1, 1, 1, 400], (), [1, 1, 1, 1, 1, 1, 7]),  # beside six: 0.5 * 0.15 / 0.01
    ([1, 400, 70], (), [1, 0, 5]),  # the fewest left first
    ([1, 30], (1,), [1, 5]),  # the end of a prompt already part fed is no request's own message: chunked too
    ([1, 30], (), [1, 30]),  # a request's own message goes whole
])
def test_with_a_share_a_step_feeds_what_keeps_the_decoding_rows_within_it(smollm2, pending, feeding, fed):
    assert shared_batch(smollm2.model, pending, feeding)._allot() == fed


@pytest.mark.parametrize("share", [0.0, -0.5, float("nan"), float("inf")])
def test_a_share_that_is_not_a_positive_finite_number_is_refused(smollm2, share):
    with pytest.raises(ValueError, match=f"share must be a positive finite number, got {share}"):
        Batch(smollm2.model, chunk=16, share=share)


def test_with_a_share_a_step_after_a_decoding_row_keeps_to_the_budget_for_busy_s(smollm2, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(batch_module.time, "monotonic", lambda: clock[0])
    batch = shared_batch(smollm2.model, [1, 400])
    assert batch._allot() == [1, 5] and batch._decoding
    batch._account(6, 0.15)  # the end of the step (its cost on the line): busy now
    batch.rows = batch.rows[1:]  # the decoding row is answered; its client's next request is on its way
    clock[0] += batch_module.BUSY_S - 0.01
    assert batch._allot() == [4]  # 0.5 * 0.09 / 0.01: the next request waits at most this step
    clock[0] += 0.02
    assert batch._allot() == [128]  # alone for a second: PREFILL_STEP tokens a step
    clock[0] -= 0.02
    unshared = Batch(smollm2.model, chunk=16)
    unshared.rows, unshared._busy = batch.rows, batch._busy
    assert unshared._allot() == [128]  # without a share, only a decoding row in the same step holds it back


def test_with_a_share_a_batch_of_long_prompts_waits_a_moment_after_its_last_decoding_row(smollm2, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(batch_module.time, "monotonic", lambda: clock[0])
    batch = shared_batch(smollm2.model, [1, 400])
    batch._busy = clock[0]
    assert batch.anticipation() == 0.0  # a row decodes: no wait
    batch.rows = batch.rows[1:]
    clock[0] += 0.03
    assert batch.anticipation() == pytest.approx(batch_module.ANTICIPATE_S - 0.03)
    clock[0] += batch_module.ANTICIPATE_S
    assert batch.anticipation() == 0.0
    clock[0] -= batch_module.ANTICIPATE_S
    unshared = Batch(smollm2.model, chunk=16)
    unshared.rows, unshared._busy = batch.rows, batch._busy
    assert unshared.anticipation() == 0.0  # without a share, never


def test_the_engine_holds_a_batch_of_long_prompts_for_a_request_that_arrives():
    # Engine._round with a batch that asks to wait: a request submitted meanwhile wakes it and is admitted
    # before any step; with none submitted, the step comes after the wait
    import collections
    import threading
    import time as clock
    from callmaybe.runtime.answering.engine import Engine

    class Held:
        def __init__(self, waits):
            self.waits, self.steps = list(waits), 0

        def anticipation(self):
            return self.waits.pop(0)

        def step(self):
            self.steps += 1
            return []

    engine = Engine.__new__(Engine)  # only what _round reads
    engine._lock, engine._queue, engine._closed = threading.Condition(), collections.deque(), False
    engine.max_batch, engine._batch = 0, Held([30.0, 0.05])  # max_batch 0: the round admits no one
    engine._rows = [type("Ticket", (), {"cancelled": False, "row": object()})()]

    def arrive():
        with engine._lock:
            engine._queue.append("request")
            engine._lock.notify()

    threading.Timer(0.05, arrive).start()
    t0 = clock.perf_counter()
    engine._round()
    assert engine._batch.steps == 0 and clock.perf_counter() - t0 < 20  # woken by the request, no step
    engine._queue.clear()
    engine._round()
    assert engine._batch.steps == 1  # nothing came: the step after 0.05 s


def test_bfloat16_keys_are_kept_in_float32_buffers_with_the_same_logits(smollm2, monkeypatch):
    """Under the row pass the key/value buffers are float32 (its attention's dtype: no widening at each step);
    bfloat16 keys widen exactly, so every step's logits equal those with bfloat16 buffers, and the catalog
    prefix a batch stores for the next request is the model's bfloat16."""
    from callmaybe.runtime.decoding.batch import enter
    from callmaybe.runtime.model.llama import Attention
    from callmaybe.runtime.decoding.decoder import PrefixCache

    monkeypatch.setattr(batch_module, "SHORT_PROMPT", 0)
    monkeypatch.setattr(Attention, "takes_packed", lambda self, x, keys: False)  # the torch attention either way
    model = _plain(smollm2).to(torch.bfloat16)
    scripts = [[[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [20, 21, 22], [30], [31]], [[11, 12, 13], [40], [50, 51], [60]]]
    seen, stored = {}, {}
    for wide in (True, False):
        if not wide:
            monkeypatch.setattr(Batch, "_buffer_dtype", lambda self, dtype: dtype)
        cache = PrefixCache(model)
        batch = Batch(model, chunk=4)
        rows = [started(model, scripts[0]), entered(model, scripts[1], cache, [1, 2, 3, 4, 5, 6, 7])]
        for r in rows:
            batch.join(r)
        late = Fed([[60, 61], [62]])
        batch.join(enter(late, [1, 2, 3, 30, 31, 32, 33, 34] + late.pending, cache, 8, fold=True))
        assert batch.keys[0].dtype == (torch.float32 if wide else torch.bfloat16)
        while len(batch):
            batch.step()
        seen[wide] = [r.row.seen for r in rows] + [late.seen]
        past, covered = cache.lookup([1, 2, 3, 30, 31, 32, 33, 34, 9], 8)
        assert covered == 8
        stored[wide] = [(layer.keys, layer.values) for layer in past.layers]
        cache.release()
    assert all(torch.equal(a, b) for x, y in zip(seen[True], seen[False]) for a, b in zip(x, y))
    assert [len(x) for x in seen[True]] == [4, 4, 2]
    assert all(k.dtype == torch.bfloat16 and torch.equal(k, k2) and torch.equal(v, v2)
               for (k, v), (k2, v2) in zip(stored[True], stored[False]))


def test_attention_runs_pad_rows_feeding_one_token_apart_from_wider_rows():
    from callmaybe.runtime.decoding.rowpass import runs

    assert runs([1, 1, 16, 1]) == [(0, 2, 1), (2, 3, 16), (3, 4, 1)]
    assert runs([1] * 16) == [(0, 16, 1)]
    assert runs([3, 9, 1, 0, 1, 2]) == [(0, 2, 9), (2, 5, 1), (5, 6, 2)]
    assert runs([40]) == [(0, 1, 40)]
    assert runs([]) == []


def test_rows_of_one_catalog_prefix_share_its_keys_and_values_and_get_the_logits_they_get_alone(smollm2,
                                                                                                 monkeypatch):
    monkeypatch.setattr(batch_module, "REPACK_SLACK", 0)  # repack at every departure
    model = smollm2.model
    prefix = [1, 2, 3, 4, 5, 6, 7, 8]
    first = [[20, 21, 22], [30], [31, 32], [33]]
    second = [[40], [41], [42], [43], [44], [45]]
    other = [[9, 9, 10, 11, 12], [50], [51], [52]]  # another prefix: its own slots hold all of it
    late = [[60, 61], [62, 63, 64], [65]]
    batch = Batch(model)
    rows = [started(model, first, prefix), started(model, second, prefix), started(model, other, [9, 9])]
    for r in rows:
        batch.join(r)
    # the first row's 8 prefix tokens are the base; the other base is refused while the first is in use
    assert batch.base_ids == tuple(prefix) and batch.shares == [True, True, False]
    assert batch.valid.sum(dim=1).tolist() == [3, 1, 7] and batch.slots == 7
    assert batch.base_keys[0].shape[1] == 8
    batch.step()
    rows.append(started(model, late, prefix))
    batch.join(rows[-1])
    assert batch.shares == [True, True, False, True] and batch.lengths == [12, 10, 8, 10]
    while len(batch):
        batch.step()
    for r, chunks in zip(rows, (first, second, other, late)):
        base = list(r.base) if r.base != (9, 9) else [9, 9]
        expected = alone(model, [base + chunks[0]] + chunks[1:])
        assert len(r.row.seen) == len(expected)
        for got, want in zip(r.row.seen, expected):
            assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


def test_a_row_that_goes_back_into_the_shared_prefix_stops_sharing_it_and_the_others_go_on(smollm2):
    model = smollm2.model
    prefix = [1, 2, 3, 4, 5, 6, 7, 8]
    # after [40], [41, 42] the row goes back to the prefix's first 5 tokens (a call's own prompt that shares
    # only the template's header), then feeds [50, 51, 52] and [53]
    back = Rewinds([prefix + [20, 21], [40], [41, 42], [50, 51, 52], [53]], at=3, keep=5)
    logits, past = forward(model, back.pending, None)
    back.choose(logits)
    batch = Batch(model)
    batch.join(Started(back, [(layer.keys.clone(), layer.values.clone()) for layer in past.layers],
                       base=tuple(prefix)))
    stays = started(model, [[30, 31], [32], [33], [34], [35]], prefix)
    batch.join(stays)
    for _ in range(3):
        batch.step()
    assert batch.shares == [False, True] and batch.lengths == [8, 13]
    while len(batch):
        batch.step()
    straight = alone(model, [prefix[:5] + [50, 51, 52], [53]])
    assert len(back.seen) == 5
    for got, want in zip(back.seen[3:], straight):
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
    for got, want in zip(stays.row.seen, alone(model, [prefix + [30, 31], [32], [33], [34], [35]])):
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


def test_the_shared_prefix_changes_once_no_row_uses_it(smollm2):
    model = smollm2.model
    batch = Batch(model)
    batch.join(started(model, [[20], [21]], [1, 2, 3]))
    while len(batch):
        batch.step()
    late = started(model, [[30], [31]], [4, 5, 6, 7])
    batch.join(late)
    assert batch.base_ids == (4, 5, 6, 7) and batch.shares == [True] and batch.valid.sum().item() == 1
    while len(batch):
        batch.step()
    for got, want in zip(late.row.seen, alone(model, [[4, 5, 6, 7, 30], [31]])):
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


def test_the_base_met_by_a_run_s_tokens_alone_gives_the_padded_run_s_attention():
    """A run of rows feeding 3, 1 and 2 tokens (padded to 3), the second row not attending to the base: the
    packed tokens' attention (:func:`_attend_packed`) equals the padded layout's (:func:`_attend`) at every
    token, within float32 rounding; the padding's cells take no part."""
    from callmaybe.runtime.decoding.rowpass import _attend, _attend_packed

    gen = torch.Generator().manual_seed(3)
    n, kv, group, w, d, slots, size = 3, 2, 3, 3, 8, 7, 11
    counts = [3, 1, 2]
    rows = torch.tensor([0, 0, 0, 1, 2, 2])
    cols = torch.tensor([0, 1, 2, 0, 0, 1])
    packed = torch.randn(len(rows), kv, group, d, generator=gen)
    padded = torch.full((n, w, kv, group, d), float("nan"))  # padding: NaN, so any use of it shows
    padded[rows, cols] = packed
    grouped = padded.permute(0, 2, 3, 1, 4).reshape(n, kv, group * w, d)
    keys, values = torch.randn(n, kv, slots, d, generator=gen), torch.randn(n, kv, slots, d, generator=gen)
    allowed = torch.zeros(n, w, slots, dtype=torch.bool)
    for b, c in enumerate(counts):
        for col in range(c):
            allowed[b, col, : slots - w + col + 1] = True
    bias = torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf"))[:, None, None]
    scores = torch.matmul(torch.nan_to_num(grouped), keys.transpose(-1, -2)) * 0.5
    scores = (scores.view(n, kv, group, w, slots) + bias).view(n, kv, group * w, slots)
    base_keys, base_values = torch.randn(kv, size, d, generator=gen), torch.randn(kv, size, d, generator=gen)
    shared = torch.tensor([0.0, float("-inf"), 0.0]).view(n, 1, 1, 1)
    want = _attend(torch.nan_to_num(grouped), scores, values, base_keys, base_values, shared, 0.5)
    want = want.view(n, kv, group, w, d)[rows, :, :, cols]
    got = _attend_packed(packed, rows, cols, scores, values, base_keys, base_values, shared, 0.5)
    assert got.shape == (6, kv, group, d) and not got.isnan().any()
    assert torch.allclose(got, want, atol=1e-6), (got - want).abs().max()


def test_the_native_step_attention_gives_the_torch_attentions_logits(smollm2, monkeypatch):
    """In bfloat16 the row pass's attention is one native call a layer (:meth:`~callmaybe.runtime.model.llama.
    Attention.packed`) when the library is there: a batch with a shared base, rows without it, a prompt fed in
    chunks and rows leaving gives the logits of the torch attention within rounding."""
    from callmaybe.runtime.decoding.batch import enter
    from callmaybe.runtime.decoding.decoder import PrefixCache
    from callmaybe.runtime.model import native
    from callmaybe.runtime.model.llama import Attention

    if native.rotation() is None:
        pytest.skip("the native library is unavailable here (no compiler)")
    monkeypatch.setattr(batch_module, "SHORT_PROMPT", 0)
    model = _plain(smollm2).to(torch.bfloat16)
    scripts = [[[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [20, 21, 22], [30], [31]], [[11, 12, 13], [40], [50, 51], [60]],
               [[70, 71], [72, 73, 74, 75, 76], [77]]]
    seen, used = {}, []
    takes = Attention.takes_packed
    for own in (True, False):
        monkeypatch.setattr(Attention, "takes_packed", lambda self, x, keys: (used.append(own), own and
                                                                              takes(self, x, keys))[1])
        cache = PrefixCache(model)
        batch = Batch(model, chunk=4)
        rows = [started(model, scripts[0]), entered(model, scripts[1], cache, [1, 2, 3, 4, 5, 6, 7]),
                started(model, scripts[2])]
        for r in rows:
            batch.join(r)
        late = Fed([[60, 61], [62]])
        batch.join(enter(late, [1, 2, 3, 30, 31, 32, 33, 34] + late.pending, cache, 8, fold=True))
        while len(batch):
            batch.step()
        seen[own] = [r.row.seen for r in rows] + [late.seen]
        cache.release()
    assert True in used and False in used
    pairs = [(a, b) for x, y in zip(seen[True], seen[False]) for a, b in zip(x, y)]
    assert len(pairs) == 13 and all(a.shape == b.shape for a, b in pairs)
    # bfloat16 logits of magnitude up to 30 (a step of 0.125 there), after 30 layers whose attention rounds to
    # bfloat16 from sums made in another order: measured worst 0.56, mean at most 0.23 (a mask or head gone
    # wrong moves them by whole units)
    worst = max(float((a.float() - b.float()).abs().max()) for a, b in pairs)
    mean = max(float((a.float() - b.float()).abs().mean()) for a, b in pairs)
    assert worst < 1.0 and mean < 0.3, (worst, mean)
    # the token each would pick is the other's best or within that rounding of it (near ties may flip)
    assert all(float(b.float()[int(a.argmax())]) >= float(b.float().max()) - 1.0 for a, b in pairs)


def test_the_buffers_hold_the_rows_asked_for_from_the_first_join(smollm2):
    """A batch made for 16 rows (the server's ``--max-batch``) holds them from its first join: no row's join waits
    for the buffers to grow; one made without the hint starts with 4 and doubles."""
    model = smollm2.model
    for rows, want in ((16, [16, 16, 16, 16, 16, 16]), (None, [4, 4, 4, 4, 8, 8])):
        batch = Batch(model) if rows is None else Batch(model, rows=rows)
        held = []
        for n in range(6):
            batch.join(started(model, [[1, 2, 3 + n], [4]]))
            held.append(batch.keys[0].shape[0])
        assert held == want
    assert Batch(model, rows=2).first_rows == 4


def test_a_row_leaving_is_replaced_by_the_last_row_and_every_row_keeps_its_logits(smollm2):
    """When the first of four rows leaves, the last moves into its buffer row (one move, not three); the rows go
    on with the logits each gets alone."""
    model = _plain(smollm2)
    scripts = [[[1, 2, 3], [4]], [[11, 12, 13, 14], [15], [16], [17]], [[21, 22], [23], [24], [25]],
               [[31, 32, 33, 34, 35], [36], [37], [38]]]
    batch = Batch(model)
    rows = [started(model, s) for s in scripts]
    for r in rows:
        batch.join(r)
    assert [r is s.row for r, s in zip(batch.rows, rows)] == [True] * 4
    assert batch.step() == [rows[0].row]
    assert [batch.rows.index(s.row) for s in rows[1:]] == [1, 2, 0]  # the last row took the first's place
    while len(batch):
        batch.step()
    for r, script in zip(rows, scripts):
        expected = alone(model, script)
        assert len(r.row.seen) == len(expected)
        for got, want in zip(r.row.seen, expected):
            assert torch.allclose(got, want, atol=1e-3), (got - want).abs().max()  # float32 sums in another order
