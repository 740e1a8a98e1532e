"""Can one of the functions offered do what the request asks? The model's verdict, over the whole catalog.

Small models put their call's odds high whatever they are shown (``bench/decision.py``: Qwen2.5-Coder-1.5B
opens a code fence or a JSON object first on requests no function fits as on those one does), so under
``tool_choice="auto"`` a call the first token wants is checked by asking the model, in its chat template,
*"Functions: <every function offered, one line each with its parameters>. A user wrote: "<request>". Can a call
of one of these functions do what the user asked? Answer yes or no."* The verdict is the log-odds of its first
answer token, ``log p(yes) - log p(no)`` (nats; each summed over ``yes``/``Yes``/`` yes``/`` Yes`` and the same
forms of ``no``): the catalog is the whole list the turn offers, never "the only tool available", and the
request is read by the model in whatever language it is written; no word of it is matched by this code.

:data:`VERDICT_LOG_ODDS_MIN` (0.5) was set on BFCL live's development part (``bench/decision.py``; figures in
docs/call-or-answer.md): with the first-token rule it declines 0 of 50 calls and 18 of 25 irrelevant
requests on the even-numbered cases, 2 of 27 and 10 of 20 on the odd ones, and 0 of 12 calls and 10 of 12
requests no function fits on the six everyday functions of ``bench/catalogs/everyday_cases.jsonl`` (eight
languages).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...core.catalog import Function
from ..decoding.prompt import chat_ids, describe_function, plain_text_ids

#: Keep a call when the model's verdict log-odds (yes against no, nats) is at least this.
VERDICT_LOG_ODDS_MIN = 0.5
_YES = ("yes", "Yes", " yes", " Yes")
_NO = ("no", "No", " no", " No")


@dataclass(frozen=True)
class Relevance:
    """``p_yes``: p(yes) / (p(yes) + p(no)); ``log_odds``: ``log p(yes) - log p(no)`` (nats); ``keep``: at
    least the threshold; ``evidence``: one line saying why; ``forward_passes``: passes the check ran (1)."""

    p_yes: float
    log_odds: float
    keep: bool
    evidence: str
    forward_passes: int


def question(functions: list[Function], request: str) -> str:
    """The yes/no question the verdict reads (see the module docstring)."""
    listing = "\n".join(describe_function(fn) for fn in functions)
    return (f"Functions:\n{listing}\n\nA user wrote: \"{request}\"\n\n"
            "Can a call of one of these functions do what the user asked? Answer yes or no.")


def _first_ids(tokenizer, words: tuple[str, ...]) -> list[int]:
    return sorted({tokenizer.encode(w, add_special_tokens=False)[0] for w in words})


def _logits(model, ids: list[int], keep: int) -> torch.Tensor:
    """float32 logits (keep, vocab) of the last ``keep`` positions of one sequence, without a cache: the
    output layer runs on those positions only (``logits_to_keep``): over the whole of an 870-token verdict
    prompt it took 12-15% of the pass (the default model, two cores: 3.4-4.5 s against 3.0-3.3 s), and its
    float32 logits take 0.6 MB a position."""
    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False, logits_to_keep=keep)
    return out.logits[0, -keep:].float()


def continuation_logprob(model, tokenizer, context: str, text: str) -> float:
    """Summed log-probability (nats) of ``text``'s tokens after ``context`` (both plain text)."""
    head = plain_text_ids(tokenizer, context)
    return answer_logprob(model, head, plain_text_ids(tokenizer, text, at_start=False))


def answer_logprob(model, prompt: list[int], answer: list[int]) -> float:
    """Summed log-probability (nats) of the token ids ``answer`` after the token ids ``prompt`` under ``model``
    (a causal LM called as transformers' are): one forward pass without a cache, float32 log-softmax; 0.0 and no
    pass for an empty ``answer``."""
    if not answer:
        return 0.0
    logits = _logits(model, prompt + answer, len(answer) + 1)[:-1]
    chosen = torch.log_softmax(logits, -1)[torch.arange(len(answer)), torch.tensor(answer, device=logits.device)]
    return float(chosen.sum())


def yes_no_log_odds(model, tokenizer, text: str) -> float:
    """The model's log-odds (nats, clipped to +-50) of answering "yes" rather than "no" to ``text`` asked as a user
    message in its chat template: one forward pass; each side summed over ``yes``/``Yes``/`` yes``/`` Yes`` and the
    same forms of ``no``."""
    ids = chat_ids(tokenizer, [], [{"role": "user", "content": text}], "plain")
    logp = torch.log_softmax(_logits(model, ids, 1)[-1], -1)
    yes = float(torch.logsumexp(logp[_first_ids(tokenizer, _YES)], 0))
    no = float(torch.logsumexp(logp[_first_ids(tokenizer, _NO)], 0))
    return max(-50.0, min(50.0, yes - no))


def relevance(model, tokenizer, functions: list[Function], request: str,
              threshold: float = VERDICT_LOG_ODDS_MIN) -> Relevance:
    """The model's verdict on whether a call of one of ``functions`` does what ``request`` asks (module
    docstring): one forward pass of ``model`` (a transformers causal LM) over the question in its chat
    template, a line per function."""
    log_odds = yes_no_log_odds(model, tokenizer, question(functions, request))
    p_yes = 1.0 / (1.0 + math.exp(-log_odds))
    keep = log_odds >= threshold
    names = ", ".join(fn.name for fn in functions[:3]) + (", ..." if len(functions) > 3 else "")
    why = (f"the model {'says' if keep else 'doubts'} a call of {names} does what the request asks "
           f"(verdict log-odds {log_odds:+.2f} {'>=' if keep else '<'} {threshold:+.2f})")
    return Relevance(p_yes, log_odds, keep, why, 1)
