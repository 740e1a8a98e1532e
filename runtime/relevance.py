"""Does the function of a first call do what the request asks? The check behind ``tool_choice="auto"``.

Small models call whatever function they are shown: Qwen2.5-Coder-1.5B calls the one function of 97% of
BFCL's irrelevance cases, often with values the request states (a number that fits an unrelated function's
parameter), so no rule on the call's values can tell those calls apart (:func:`~.evidence.first_call`
catches 42%). Asked directly, the same model tells them apart well. Two signals, each one short forward
pass with no KV cache shared with the turn:

* **verdict**: the probability the model gives "yes" (summed over ``yes``/``Yes``/`` yes``/`` Yes``) as the
  first token of its answer to *"A user asked: "<request>". The only tool available is this function:
  <function>. Does calling this function do what the user asked? Answer yes or no."* in its chat template;
* **pointwise mutual information** of the request and the function: the log-probability (nats, summed over
  the request's tokens) of the request after *"Function: <name>\\nDescription: <description>\\nA request this
  function answers: "* minus after *"A request: "* (raw text, no template). A request the function answers is
  likelier once the function is named.

The call is declined when the verdict is below :data:`YES_MIN` or the information below :data:`PMI_MIN`.
Both thresholds were set on the even-numbered cases of BFCL irrelevance and of the first 100 of BFCL simple
(the default model, int8) and checked on the odd ones: declined 88 of 120 irrelevance cases and 0 of 50
simple ones (even), 99 of 120 and 0 of 50 (odd). The lowest verdict of a simple case was 0.615.
Texts (the request, the function's name and description) are encoded as plain text: only the chat
template's own markers are special tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.catalog import Function
from .prompt import chat_ids, describe_function, plain_text_ids

#: Decline when the model's "yes" is less likely than this (see the module docstring).
YES_MIN = 0.6
#: Decline when the request's pointwise mutual information with the function is below this (nats, summed).
PMI_MIN = 0.0
_YES = ("yes", "Yes", " yes", " Yes")


@dataclass(frozen=True)
class Relevance:
    """``p_yes``: the verdict (a probability); ``pmi``: the information (nats); ``keep``: both pass;
    ``evidence``: one line saying why; ``forward_passes``: passes the check ran (3)."""

    p_yes: float
    pmi: float
    keep: bool
    evidence: str
    forward_passes: int


def question(fn: Function, request: str) -> str:
    """The yes/no question the verdict reads (see the module docstring)."""
    return (f'A user asked: "{request}"\n\nThe only tool available is this function:\n{describe_function(fn)}\n\n'
            "Does calling this function do what the user asked? Answer yes or no.")


def _first_ids(tokenizer, words: tuple[str, ...]) -> list[int]:
    return sorted({tokenizer.encode(w, add_special_tokens=False)[0] for w in words})


def _logits(model, ids: list[int]) -> torch.Tensor:
    """float32 logits (len(ids), vocab) of one sequence, without a cache."""
    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False)
    return out.logits[0].float()


def continuation_logprob(model, tokenizer, context: str, text: str) -> float:
    """Summed log-probability (nats) of ``text``'s tokens after ``context`` (both plain text)."""
    head = plain_text_ids(tokenizer, context)
    tail = plain_text_ids(tokenizer, text, at_start=False)
    logits = _logits(model, head + tail)[len(head) - 1:-1]
    chosen = torch.log_softmax(logits, -1)[torch.arange(len(tail)), torch.tensor(tail, device=logits.device)]
    return float(chosen.sum())


def relevance(model, tokenizer, fn: Function, request: str) -> Relevance:
    """Whether a call of ``fn`` answers ``request`` (see the module docstring): three forward passes of
    ``model`` (a transformers causal LM) on prompts of a few hundred tokens at most."""
    ids = chat_ids(tokenizer, [], [{"role": "user", "content": question(fn, request)}], "plain")
    probs = torch.softmax(_logits(model, ids)[-1], -1)
    p_yes = float(probs[_first_ids(tokenizer, _YES)].sum())
    named = f"Function: {fn.name}\nDescription: {fn.description or ''}\nA request this function answers: "
    pmi = continuation_logprob(model, tokenizer, named, request.strip()) - \
        continuation_logprob(model, tokenizer, "A request: ", request.strip())
    keep = p_yes >= YES_MIN and pmi >= PMI_MIN
    if keep:
        why = f"the model says {fn.name} does what the request asks (p(yes) {p_yes:.2f}, PMI {pmi:.1f})"
    elif p_yes < YES_MIN:
        why = f"the model doubts that {fn.name} does what the request asks (p(yes) {p_yes:.2f} < {YES_MIN})"
    else:
        why = f"the request is no likelier for naming {fn.name} (PMI {pmi:.1f} nats < {PMI_MIN})"
    return Relevance(p_yes, pmi, keep, why, 3)
