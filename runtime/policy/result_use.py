"""Does a text answer written after a tool result use that result? The model's own probabilities.

After a tool result, a model that wanted to call again (the same call, declined as a repeat) answers in text.
Beside its catalog, Qwen2.5-Coder-1.5B then describes the function ("To get the current weather in Paris, you
can use the `get_weather` function...") instead of stating the result; without the catalog (the same chat,
its earlier call and the tool result kept) it states the result of a question ("The weather in Paris is
currently 18 degrees Celsius and sunny.") but refuses an action it sees done ("I'm sorry, but I can't assist
with that." after "Added 'call mom': the list now has 4 items."). The answer written without the catalog is
kept when it uses the result: its pointwise mutual information with the results,

    PMI = log p(answer | chat) - log p(answer | the same chat with every tool result since the last user
          message emptied),

in nats, summed over the answer's tokens, reaches :data:`RESULT_PMI_MIN`. An answer that states what a result
says is far likelier with it (+9.5 to +11.3 nats on the three agent-loop tasks of ``bench/agent_loops.py``);
a refusal is about as likely without it (+0.2 and +1.3). Two forward passes over short prompts; no word of
the answer or the result is read by this code, so the check is the same in every language.

:data:`RESULT_PMI_MIN` was set on those three tasks (with and without a system message); the figures on
``bench/catalogs/after_tool_cases.jsonl``'s other cases, not tuned on, are in docs/call-or-answer.md.
"""

from __future__ import annotations

import math
from typing import Any

from .relevance import Relevance, answer_logprob

#: Keep a text answer written without the catalog after a tool result when its PMI with the results (nats)
#: reaches this; below it the answer is written again beside the catalog.
RESULT_PMI_MIN = 5.0

#: The answer's tokens the check reads: it runs once the answer ends or reaches this many tokens, and
#: what comes before is held back until then.
RESULT_TOKENS = 32


def emptied_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the content of every ``tool`` message after the last user message emptied (a copy;
    the other messages are the same objects)."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [{**m, "content": ""} if i > last_user and m.get("role") == "tool" else m
            for i, m in enumerate(messages)]


def result_use(model, with_results: list[int], without_results: list[int], answer: list[int],
               threshold: float = RESULT_PMI_MIN) -> Relevance:
    """Whether ``answer`` (token ids, written after ``with_results``) uses the chat's tool results: its PMI
    between the prompt ``with_results`` and ``without_results`` (the same chat with the results emptied,
    :func:`emptied_results`) reaches ``threshold`` (module docstring). Two forward passes; ``log_odds`` holds
    the PMI (nats), ``p_yes`` its logistic."""
    pmi = answer_logprob(model, with_results, answer) - answer_logprob(model, without_results, answer)
    pmi = max(-50.0, min(50.0, pmi))
    keep = pmi >= threshold
    why = (f"the answer written without the catalog {'uses' if keep else 'does not use'} the tool result "
           f"(PMI {pmi:+.2f} nats {'>=' if keep else '<'} {threshold:+.2f})")
    return Relevance(1.0 / (1.0 + math.exp(-pmi)), pmi, keep, why, 2)
