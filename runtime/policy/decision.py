"""The call-or-answer decision under ``tool_choice="auto"``: the model's own probability of starting a call.

Where a call may start (the assistant's first token), the model's next-token distribution splits into tokens
that begin a call as the model writes one (its call marker, Qwen's ``<tool_call>``; a token whose text, after
leading whitespace, opens a JSON object ``{`` or a code fence of three backquotes, as small models write
their calls without the marker) and everything else (text, EOS). The turn calls when the log-odds of the first
part, ``log p(call) - log p(text)`` (nats), reaches :data:`CALL_LOG_ODDS_MIN`, and answers in text otherwise.
The rule reads no word of the request: it is the same in every language.

:data:`CALL_LOG_ODDS_MIN` (-1.0) was chosen on BFCL live's development part (``bench/decision.py``; the
docs/call-or-answer.md gives the figures): fitted on the even-numbered cases at 1.5 it declined 19% of the
calls due on the odd ones (Qwen2.5-Coder-1.5B opens a fence or a JSON object first on irrelevant requests as on
calls, log-odds +1 to +4), so it was moved to where it declines text-minded answers only (a haiku: -7.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used: the CLI reads the threshold without it
    import torch

#: Call when log p(call) - log p(text) at the first token is at least this (nats); see the module docstring.
CALL_LOG_ODDS_MIN = -1.0
#: Keep a first call that passed all three checks (the first token, this module; the verdict,
#: :mod:`.relevance`; :mod:`.confirm`) only when their three log-odds (nats) sum to at least this: each
#: is evidence for the call, and a call that passes each one narrowly is doubted as a whole. Fitted on BFCL
#: live's even-numbered cases with ``bench/combined.py`` (the highest value on a 0.25 grid that declines no
#: right call there, and at most 2% of the calls due; docs/call-or-answer.md).
COMBINED_LOG_ODDS_MIN = 1.75
#: What a call's first token may open, after leading whitespace.
CALL_OPENINGS = (b"{", b"```")


def call_start_ids(token_bytes: list[bytes | None], marker: int | None) -> torch.Tensor:
    """Ids (int64, sorted) of the tokens that begin a call (module docstring): ``marker`` (None: the call
    format has none) and each token whose bytes, after leading spaces, tabs and newlines, start with ``{`` or
    three backquotes. ``token_bytes[i]`` is token i's bytes (None for control tokens)."""
    import torch

    ids = {i for i, b in enumerate(token_bytes)
           if b is not None and b.lstrip(b" \t\r\n").startswith(CALL_OPENINGS)}
    if marker is not None:
        ids.add(int(marker))
    return torch.tensor(sorted(ids), dtype=torch.long)


@dataclass(frozen=True)
class Decision:
    """``p_call``: the probability of the call-starting tokens; ``log_odds``: ``log p_call - log (1 - p_call)``
    (nats, clipped to +-50); ``call``: the turn calls; ``evidence``: one line saying why."""

    p_call: float
    log_odds: float
    call: bool
    evidence: str


def decide(logits: torch.Tensor, start_ids: torch.Tensor, threshold: float = CALL_LOG_ODDS_MIN,
           allowed: torch.Tensor | None = None) -> Decision:
    """The decision (module docstring) from ``logits`` (shape (vocab_size,), the model's output at the first
    position of the answer) and ``start_ids`` (:func:`call_start_ids`). ``allowed``: an additive bias
    (float32, (vocab_size,), 0 or -inf) of the tokens the turn may pick at all (control tokens excluded), so
    that probabilities are taken over what can be written."""
    import torch

    logits = logits.float()
    if allowed is not None:
        logits = logits + allowed.to(logits.device)
    logp = torch.log_softmax(logits, -1)
    call = float(torch.logsumexp(logp[start_ids.to(logp.device)], 0))
    p_call = math.exp(call)
    text = math.log1p(-p_call) if p_call < 1.0 else -math.inf
    log_odds = max(-50.0, min(50.0, call - text))
    yes = log_odds >= threshold
    why = (f"p(call) {p_call:.3f}, log-odds {log_odds:+.2f} {'>=' if yes else '<'} {threshold:+.2f}")
    return Decision(p_call, log_odds, yes, why)
