"""Where the time of a run goes: seconds, calls and tokens per phase, printed by ``run --profile`` and ``eval
--profile``.

Phases (every forward pass is in exactly one of the first ten):

* ``prefix``: the catalog prompt's keys and values, computed once per run (per catalog);
* ``prefill``: a request's first pass, over the prompt after the shared prefix;
* ``decode step``: a pass over one new token (the one the model just chose);
* ``forced chunk``: a pass over forced text appended without asking the model (with the chosen token before it);
* ``verify pass``: a pass over the pending tokens and a draft copied from the prompt, verified under the mask
  (:meth:`~.decoder.Decoding.verify`; its tokens count the draft's);
* ``batch step``: with ``--max-batch``, a pass over the pending tokens of every row of the batch (:mod:`.batch`;
  a row's prefill is still its own ``prefill``);
* ``restate pass``: the passes of restating an unstated argument (:mod:`..policy.restate`);
* ``relevance pass``: the passes of asking the model whether a first call under ``auto`` fits the request
  (:mod:`..policy.relevance`);
* ``confirm pass``: the passes of showing the model a decoded first call under ``auto`` (:mod:`..policy.confirm`);
* ``pair pass``: the passes asking whether two values a parallel call joined with "and" are one name
  (:mod:`..policy.parallel`);
* ``result pass``: the passes checking that a text answer after a tool result uses it (:mod:`..policy.result_use`);
* ``mask``: the matcher's mask, applying it to the logits, and the argmax;
* ``forced tokens``: finding and taking forced text (tokenizing it the first time a state is seen);
* ``prompt``: rendering the chat template and tokenizing it;
* ``check``: parsing and validating the call, grounding (its restate passes apart);
* ``other``: the rest of the wall time (Python between the phases, progress, writing the output).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from collections.abc import Iterator

PHASES = ("prefix", "prefill", "decode step", "forced chunk", "verify pass", "batch step", "restate pass",
          "relevance pass", "confirm pass", "pair pass", "result pass", "mask", "forced tokens", "prompt", "check")
MODEL_PHASES = PHASES[:11]


class Profile:
    """Seconds (float), calls and tokens (int) per phase of :data:`PHASES`, summed over a run."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.calls = dict.fromkeys(PHASES, 0)
        self.tokens = dict.fromkeys(PHASES, 0)

    def add(self, phase: str, seconds: float, tokens: int = 0, calls: int = 1) -> None:
        """Count ``calls`` calls of ``phase`` (0: time spent looking, nothing done) that took ``seconds`` and
        processed ``tokens`` tokens."""
        self.seconds[phase] += seconds
        self.calls[phase] += calls
        self.tokens[phase] += tokens

    @contextmanager
    def timed(self, phase: str, tokens: int = 0) -> Iterator[None]:
        """Time the block as one call of ``phase``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - t0, tokens)

    def lines(self, wall_seconds: float) -> list[str]:
        """The breakdown as text: one line per phase with seconds, share of ``wall_seconds``, calls, tokens and
        milliseconds per call; then ``other`` (the wall time no phase accounts for) and the total."""
        out = [f"{'phase':<14}{'seconds':>9}{'share':>8}{'calls':>8}{'tokens':>8}{'ms/call':>9}"]
        for phase in PHASES:
            s, n, t = self.seconds[phase], self.calls[phase], self.tokens[phase]
            if n or s:
                per_call = f"{1000 * s / n:>9.1f}" if n else ""
                out.append(f"{phase:<14}{s:>9.2f}{100 * s / wall_seconds if wall_seconds else 0:>7.1f}%{n:>8}"
                           f"{t or '':>8}{per_call}".rstrip())
        other = wall_seconds - sum(self.seconds.values())
        out.append(f"{'other':<14}{other:>9.2f}{100 * other / wall_seconds if wall_seconds else 0:>7.1f}%")
        model = sum(self.seconds[p] for p in MODEL_PHASES)
        out.append(f"{'total':<14}{wall_seconds:>9.2f}  (forward passes {model:.2f} s, "
                   f"{100 * model / wall_seconds if wall_seconds else 0:.1f}%)")
        return out
