"""The call-or-answer decision (runtime/policy/decision.py): which tokens begin a call, and the log-odds rule."""

from __future__ import annotations

import math

import torch

from callmaybe.runtime.policy.decision import CALL_LOG_ODDS_MIN, call_start_ids, decide

TOKENS = [b"{", b' {"', b"\n{", b"```", b"  ```json", b"`", b"Hello", b"{}", b"}", None, b"\t[{", b" "]


def test_call_start_ids_are_the_marker_and_tokens_opening_an_object_or_a_fence():
    assert call_start_ids(TOKENS, None).tolist() == [0, 1, 2, 3, 4, 7]
    assert call_start_ids(TOKENS, 9).tolist() == [0, 1, 2, 3, 4, 7, 9]
    assert call_start_ids(TOKENS, 9).dtype == torch.int64


def test_decide_compares_the_odds_of_a_call_with_the_threshold():
    starts = torch.tensor([0, 3])
    logits = torch.log(torch.tensor([0.2, 0.5, 0.25, 0.05]))  # p(call) = 0.25
    d = decide(logits, starts, threshold=-1.0)
    assert math.isclose(d.p_call, 0.25, rel_tol=1e-6)
    assert math.isclose(d.log_odds, math.log(0.25 / 0.75), rel_tol=1e-6)  # -1.0986
    assert not d.call and d.evidence == "p(call) 0.250, log-odds -1.10 < -1.00"
    d = decide(logits, starts, threshold=-1.5)
    assert d.call and d.evidence == "p(call) 0.250, log-odds -1.10 >= -1.50"


def test_decide_takes_probabilities_over_the_allowed_tokens_only():
    starts = torch.tensor([0])
    logits = torch.log(torch.tensor([0.3, 0.3, 0.4]))
    banned = torch.tensor([0.0, 0.0, float("-inf")])  # token 2 (a control token) cannot be written
    d = decide(logits, starts, threshold=-0.001, allowed=banned)
    assert math.isclose(d.p_call, 0.5, rel_tol=1e-6) and math.isclose(d.log_odds, 0.0, abs_tol=1e-6)
    assert d.call


def test_a_certain_call_is_clipped_not_infinite():
    d = decide(torch.tensor([0.0, -200.0]), torch.tensor([0]), CALL_LOG_ODDS_MIN)
    assert d.log_odds == 50.0 and d.call
    d = decide(torch.tensor([-200.0, 0.0]), torch.tensor([0]), CALL_LOG_ODDS_MIN)
    assert d.log_odds < -50.0 + 1e-9 and not d.call
