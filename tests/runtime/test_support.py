"""The request's support for a value (runtime/policy/support.py): the value's span, the context without the
request, and the PMI with a scripted model whose value logits depend on whether the request is in sight."""

import math
from types import SimpleNamespace

import pytest
import torch

from callmaybe.runtime.policy.support import is_label, support, value_span, without_request

TOKENS = [b'{"name": "f", "parameters": {', b'"city": ', b'"Paris"', b', ', b'"unit": ', b'"cm"', b'}}',
          b"<user>", b"Paris", b" in", b" cm", None, b"<end>", b"x"]
ID = {t: i for i, t in enumerate(TOKENS) if t is not None}
SPECIAL = 11
CALL = [ID[b'{"name": "f", "parameters": {'], ID[b'"city": '], ID[b'"Paris"'], ID[b", "], ID[b'"unit": '],
        ID[b'"cm"'], ID[b"}}"]]


def test_value_span_of_each_argument():
    data = b'{"name": "f", "parameters": {"city": "Paris", "n": [1, 2], "o": {"a": "}"}}}'
    assert value_span(data, "city") == (37, 44)
    assert data[37:44] == b'"Paris"'
    assert data[slice(*value_span(data, "n"))] == b"[1, 2]"
    assert data[slice(*value_span(data, "o"))] == b'{"a": "}"}'
    assert value_span(data, "a") is None
    assert value_span(b'{"name": "f", "parameters": {"s": "caf\xc3\xa9", "t": 1}}', "t") == (48, 49)
    assert value_span(b'{"name": "f", "parameters": {"s": "open', "s") is None


def test_without_request_takes_out_the_last_aligned_occurrence():
    context = [SPECIAL, ID[b"<user>"], ID[b"Paris"], ID[b" in"], ID[b" cm"], ID[b"<end>"], ID[b"Paris"]]
    assert without_request(context, TOKENS, "Paris in cm") == [SPECIAL, ID[b"<user>"], ID[b"<end>"], ID[b"Paris"]]
    assert without_request(context, TOKENS, "Paris") == context[:-1]
    assert without_request(context, TOKENS, "aris in") is None  # not on token boundaries
    assert without_request(context, TOKENS, "Rome") is None
    assert without_request(context, TOKENS, "") is None


class RequestModel:
    """Logits 0 everywhere, except 3.0 on ``"Paris"`` (the value token) at each position after which the
    request's ``Paris`` token has been seen; answers ``logits_to_keep`` as a list of positions. Counts calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        ids = input_ids[0].tolist()
        self.calls.append(len(ids))
        logits = torch.zeros(1, len(ids), len(TOKENS))
        seen = False
        for i, t in enumerate(ids):
            seen = seen or t == ID[b"Paris"]
            if seen:
                logits[0, i, ID[b'"Paris"']] = 3.0
        if isinstance(logits_to_keep, torch.Tensor):
            logits = logits[:, logits_to_keep]
        return SimpleNamespace(logits=logits, cache=cache)


def test_support_is_the_log_ratio_with_and_without_the_request():
    model = RequestModel()
    context = [SPECIAL, ID[b"<user>"], ID[b"Paris"], ID[b" in"], ID[b" cm"], ID[b"<end>"]]
    out = support(model, TOKENS, context, CALL, "Paris in cm", ["city", "unit", "gone"])
    n = len(TOKENS)
    assert out["city"] == pytest.approx(3.0 - math.log(math.exp(3.0) + n - 1) + math.log(n), abs=1e-5)
    # the request moves no weight to "cm": it loses what "Paris" gains
    assert out["unit"] == pytest.approx(math.log(n) - math.log(math.exp(3.0) + n - 1), abs=1e-5)
    assert set(out) == {"city", "unit"}
    assert model.calls == [len(context) + len(CALL), len(context) - 3 + len(CALL)]


def test_support_runs_nothing_when_the_request_is_not_in_the_context():
    model = RequestModel()
    context = [SPECIAL, ID[b"<user>"], ID[b"x"], ID[b"<end>"]]
    assert support(model, TOKENS, context, CALL, "Paris", ["city"]) == {}
    assert support(model, TOKENS, context, CALL, "x", ["nothing"]) == {}
    assert model.calls == []


def test_is_label():
    schema = {"type": "string", "enum": ["seconds", "milliseconds", 3], "default": "N/A"}
    assert is_label("seconds", schema) and is_label(3, schema)
    assert not is_label("minutes", schema)
    # the default is a label; no default
    assert not is_label("seconds", {"enum": ["seconds", "milliseconds"], "default": "seconds"})
    assert not is_label("seconds", {"enum": ["seconds", "milliseconds"]})
    assert not is_label(True, {"enum": [True, 1], "default": 0})
    assert not is_label(["seconds"], schema)
    assert not is_label("seconds", None) and not is_label("seconds", {"type": "string"})


class TriggerModel(RequestModel):
    """:class:`RequestModel` whose value logit is raised once the request's ``x`` token has been seen."""

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        ids = input_ids[0].tolist()
        self.calls.append(len(ids))
        logits = torch.zeros(1, len(ids), len(TOKENS))
        seen = False
        for i, t in enumerate(ids):
            seen = seen or t == ID[b"x"]
            if seen:
                logits[0, i, ID[b'"Paris"']] = 3.0
        if isinstance(logits_to_keep, torch.Tensor):
            logits = logits[:, logits_to_keep]
        return SimpleNamespace(logits=logits, cache=cache)


def test_ground_keeps_a_label_the_request_supports():
    from callmaybe.core.catalog import parse_catalog
    from callmaybe.runtime.answering.runner import ground
    from callmaybe.runtime.decoding.profile import Profile

    fn = parse_catalog([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome"], "default": "none"}}}}}], "t")[0]
    call = [ID[b'{"name": "f", "parameters": {'], ID[b'"city": '], ID[b'"Paris"'], ID[b"}}"]]
    context = [SPECIAL, ID[b"<user>"], ID[b"x"], ID[b"<end>"]]
    model, profile = TriggerModel(), Profile()
    done = ground(model, SimpleNamespace(token_bytes=TOKENS), fn, {"city": "Paris"}, "x", context, call, None, 0,
                  profile)
    pmi = 3.0 - math.log(math.exp(3.0) + len(TOKENS) - 1) + math.log(len(TOKENS))
    assert done.parameters == {"city": "Paris"} and done.dropped == [] and done.forward_passes == 2
    assert done.grounding == {"city": {"action": "kept", "evidence": f"the request supports it (PMI {pmi:+.2f} nats >= "
                                       '+0.50); a value the catalog offers ("Paris"), which the request does not name'}}
    assert model.calls == [len(context) + len(call), len(context) - 1 + len(call)]
    assert profile.calls["support pass"] == 2
