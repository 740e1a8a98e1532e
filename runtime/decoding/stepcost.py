"""What a batch step costs, learnt from the steps taken, so that a long prompt's chunks lengthen the decoding
rows' steps by about a chosen fraction.

A step's wall time is modelled as ``fixed + per_token * tokens`` (``tokens``: all the step feeds, every row's
together): reading the weights once per step is the fixed part, the arithmetic of each fed token the
rest. The two are fitted by least squares over the last :data:`WINDOW` steps, so the estimate follows the
model, the machine and its load without a constant measured on one of them. The budget this gives is the
token budget of Sarathi-Serve (Agrawal et al., OSDI 2024, "Taming Throughput-Latency Tradeoff in LLM
Inference with Sarathi-Serve"), there chosen from a latency target offline, here from the fitted cost online.
The line is an approximation: a chunk's first tokens cost more than it says (a second row and its attention:
with the 1.5B model on two cores, 2 tokens beside one decoding row made the step 1.4-1.55x, not 1.2x).
"""

from __future__ import annotations

from collections import deque

#: Steps the fit looks back over.
WINDOW = 64

#: Steps needed before the fit is used (fewer, or all of one size: :meth:`StepCost.fit` gives None).
LEAST = 8


class StepCost:
    """The last :data:`WINDOW` steps' (tokens fed, seconds) and the line through them."""

    def __init__(self, window: int = WINDOW):
        self.steps: deque[tuple[int, float]] = deque(maxlen=window)

    def add(self, tokens: int, seconds: float) -> None:
        """Record a step that fed ``tokens`` tokens (every row's) in ``seconds`` of wall time."""
        self.steps.append((tokens, seconds))

    def fit(self) -> tuple[float, float] | None:
        """(fixed seconds a step, seconds per fed token) by least squares over the recorded steps; None with
        fewer than :data:`LEAST` steps, when every step fed as many tokens, or when the slope is not positive
        (noise larger than the tokens' cost). The fixed part is floored at 0."""
        n = len(self.steps)
        if n < LEAST:
            return None
        mean_x = sum(t for t, _ in self.steps) / n
        mean_y = sum(s for _, s in self.steps) / n
        sxx = sum((t - mean_x) ** 2 for t, _ in self.steps)
        if sxx == 0:
            return None
        slope = sum((t - mean_x) * (s - mean_y) for t, s in self.steps) / sxx
        if slope <= 0:
            return None
        return max(0.0, mean_y - slope * mean_x), slope

    def extra_tokens(self, share: float, tokens: int) -> int | None:
        """How many tokens a step that feeds ``tokens`` may feed besides, so that it takes at most ``1 + share``
        times as long as without them by the line: ``floor(share * (fixed + per_token * tokens) /
        per_token)``, at least 1 (a long prompt always moves on). None while :meth:`fit` has no line."""
        line = self.fit()
        if line is None:
            return None
        fixed, per_token = line
        return max(1, int(share * (fixed + per_token * tokens) / per_token + 1e-9))  # 4.9999... is 5
