"""The check that a text answer after a tool result uses it (runtime/policy/result_use.py), on a model whose
probabilities are known exactly."""

import math
from types import SimpleNamespace

import torch

from callmaybe.runtime.policy.result_use import RESULT_PMI_MIN, answer_logprob, result_use

RESULT = 3  # the token that stands for the tool result in the prompt


class Attentive(torch.nn.Module):
    """Over 4 tokens: uniform next-token probabilities until RESULT has been read, then p(token 1) = 0.75 and
    1/12 for each other token. Returns the logits of the last ``logits_to_keep`` positions (0: all), as the
    project's decoder does, and records each count asked for in ``kept``."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.kept = []

    def forward(self, input_ids, use_cache=False, logits_to_keep=0):
        self.kept.append(logits_to_keep)
        seen = torch.cumsum(input_ids[0] == RESULT, 0) > 0
        logits = torch.zeros(1, input_ids.shape[1], 4)
        logits[0, seen, 1] = math.log(9.0)
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)


def test_answer_logprob_sums_the_answer_tokens_log_probabilities():
    model = Attentive()
    assert math.isclose(answer_logprob(model, [0, 2], [1, 2]), 2 * math.log(0.25), rel_tol=1e-6)
    assert math.isclose(answer_logprob(model, [0, RESULT], [1, 2]), math.log(0.75) + math.log(1 / 12), rel_tol=1e-6)
    assert model.kept == [3, 3]  # the output layer runs on the answer's positions and the one before them only


def test_an_empty_answer_has_no_log_probability_to_sum():
    """An answer that ended at its first token (EOS: nothing generated) sums nothing (the break test's empty second
    answer raised "tensors used as indices must be long" here)."""
    assert answer_logprob(Attentive(), [0, RESULT], []) == 0.0
    assert result_use(Attentive(), [0, RESULT], [0, 2], []).log_odds == 0.0


def test_an_answer_likelier_with_the_result_uses_it():
    """PMI of [1, 1] between a prompt with the result and one without: 2 ln 0.75 - 2 ln 0.25 = 2 ln 3 nats."""
    model = Attentive()
    used = result_use(model, [0, RESULT], [0, 2], [1, 1], threshold=2.0)
    assert (used.keep, round(used.log_odds, 4), used.forward_passes) == (True, round(2 * math.log(3), 4), 2)
    assert used.evidence == ("the answer written without the catalog uses the tool result (PMI +2.20 nats >= "
                             "+2.00)")
    unused = result_use(model, [0, RESULT], [0, 2], [1, 1])  # RESULT_PMI_MIN 5.0
    assert not unused.keep and RESULT_PMI_MIN == 5.0
    assert unused.evidence == ("the answer written without the catalog does not use the tool result (PMI +2.20 "
                               "nats < +5.00)")
    other = result_use(model, [0, RESULT], [0, 2], [2, 0], threshold=0.0)  # less likely with it: negative PMI
    assert round(other.log_odds, 4) == round(2 * math.log((1 / 12) / 0.25), 4) and not other.keep
