"""The batch step's cost line (runtime/decoding/stepcost.py): its fit and the token budget it gives."""

from __future__ import annotations

import pytest

from callmaybe.runtime.decoding.stepcost import LEAST, StepCost


def line(fixed: float, per_token: float, tokens) -> StepCost:
    cost = StepCost()
    for t in tokens:
        cost.add(t, fixed + per_token * t)
    return cost


def test_the_fit_is_the_line_through_the_steps():
    fixed, per_token = line(0.09, 0.01, [1, 17, 4, 30, 2, 9, 1, 16]).fit()
    assert fixed == pytest.approx(0.09) and per_token == pytest.approx(0.01)


def test_the_budget_keeps_the_step_within_its_share():
    cost = line(0.09, 0.01, [1, 17, 4, 30, 2, 9, 1, 16])
    assert cost.extra_tokens(0.5, 1) == 5  # 0.5 * (0.09 + 0.01) / 0.01
    assert cost.extra_tokens(0.5, 11) == 10  # 0.5 * (0.09 + 0.11) / 0.01
    assert cost.extra_tokens(0.25, 1) == 2  # 2.5
    assert cost.extra_tokens(0.001, 1) == 1  # a long prompt always moves on


def test_only_the_last_window_of_steps_counts():
    cost = StepCost(window=LEAST)
    for t in [1, 17, 4, 30, 2, 9, 1, 16]:
        cost.add(t, 5.0)  # an old machine, or another load
    for t in [1, 17, 4, 30, 2, 9, 1, 16]:
        cost.add(t, 0.09 + 0.01 * t)
    assert cost.fit() == pytest.approx((0.09, 0.01))


@pytest.mark.parametrize("steps", [
    [(1, 0.1)] * (LEAST - 1),  # too few steps
    [(4, 0.1), (4, 0.2)] * LEAST,  # every step of one size: no slope
    [(t, 1.0 - 0.01 * t) for t in range(1, LEAST + 1)],  # more tokens, less time: noise, no line
])
def test_no_line_no_budget(steps):
    cost = StepCost()
    for tokens, seconds in steps:
        cost.add(tokens, seconds)
    assert cost.fit() is None and cost.extra_tokens(0.5, 1) is None
