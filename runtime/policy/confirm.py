"""Does the call just decoded do what the request asks? The model's verdict on the call itself.

The verdict before the call (:mod:`.relevance`) sees the catalog and the request; a small model says yes to
most requests whose topic a function shares (BFCL's irrelevance set offers one function close to each
request: "the slope of a line perpendicular to y = 3x + 2" with ``find_critical_points``). Once the call is
decoded under the grammar, its values say what it would do, and the model judges that better: under
``tool_choice="auto"`` the first call of a turn is shown to the model in its chat template, *"Function: <the
function's line, as the verdict lists it>. A user wrote: "<request>". An assistant answered with this call:
{"name": ..., "arguments": ...}. Does this call do what the user asked? Answer yes or no."*, and a call whose
log-odds of "yes" against "no" (nats, :func:`.relevance.yes_no_log_odds`) is below :data:`CONFIRM_LOG_ODDS_MIN`
is declined: the turn answers in text. One forward pass over a short prompt; no word of the request is read by
this code, so the check is the same in every language.

:data:`CONFIRM_LOG_ODDS_MIN` was set on BFCL live's development part, even-numbered cases (figures in
docs/call-or-answer.md).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ...core.catalog import Function
from ..decoding.prompt import describe_function
from .relevance import Relevance, yes_no_log_odds

#: Keep a decoded first call when the model's log-odds (yes against no, nats) on it is at least this.
CONFIRM_LOG_ODDS_MIN = 0.6


def confirm_question(fn: Function, request: str, arguments: dict[str, Any]) -> str:
    """The yes/no question about one decoded call (see the module docstring); ``arguments`` as the call
    reports them (JSON-serializable)."""
    call = json.dumps({"name": fn.name, "arguments": arguments}, ensure_ascii=False)
    return (f"Function:\n{describe_function(fn)}\n\nA user wrote: \"{request}\"\n\n"
            f"An assistant answered with this call:\n{call}\n\nDoes this call do what the user asked? "
            "Answer yes or no.")


def confirm(model, tokenizer, fn: Function, request: str, arguments: dict[str, Any],
            threshold: float = CONFIRM_LOG_ODDS_MIN) -> Relevance:
    """The model's verdict on a decoded call of ``fn`` with ``arguments`` for ``request`` (module docstring):
    one forward pass of ``model`` (a transformers causal LM); ``keep`` when the log-odds reach ``threshold``."""
    log_odds = yes_no_log_odds(model, tokenizer, confirm_question(fn, request, arguments))
    keep = log_odds >= threshold
    why = (f"the model {'confirms' if keep else 'doubts'} that the call of {fn.name} does what the request asks "
           f"(log-odds {log_odds:+.2f} {'>=' if keep else '<'} {threshold:+.2f})")
    return Relevance(1.0 / (1.0 + math.exp(-log_odds)), log_odds, keep, why, 1)
