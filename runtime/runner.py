"""Answer a list of requests: prompt, decode under the index, turn each output into a call or an error."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from ..catalog import Function
from ..errors import CallmaybeError
from .calls import to_call
from .decoder import generate
from .masks import TokenIndex
from .prompt import prompt_ids


@dataclass
class RunStats:
    """Totals of a run: requests, failures, tokens generated/chosen/forced, forward passes, seconds."""

    requests: int = 0
    failed: int = 0
    tokens: int = 0
    chosen: int = 0
    forced: int = 0
    forward_passes: int = 0
    seconds: float = 0.0
    per_request: list[dict] = field(default_factory=list)


def answer(model, tokenizer, index: TokenIndex, functions: list[Function], request: Any,
           max_tokens: int = 256, trace: bool = False) -> tuple[dict[str, Any], Any]:
    """Answer one request entry ``{"prompt": ...}``: returns (result entry, Generation or None).

    A bad request (missing or empty prompt) or a failed decode gives ``{"prompt", "error"}``.
    """
    prompt = request.get("prompt") if isinstance(request, dict) else None
    if not isinstance(prompt, str) or not prompt.strip():
        return {"prompt": prompt if isinstance(prompt, str) else None, "error": "empty or missing prompt"}, None
    key = index.data.header.get("options", {}).get("parameters_key", "parameters")
    by_name = {fn.name: fn for fn in functions}
    try:
        gen = generate(model, tokenizer, index, prompt_ids(tokenizer, functions, prompt, key), max_tokens, trace)
        call = to_call(gen.text, by_name, key)
    except CallmaybeError as exc:
        return {"prompt": prompt, "error": str(exc)}, None
    return {"prompt": prompt, **call}, gen


def run_requests(model, tokenizer, index: TokenIndex, functions: list[Function], requests: list[Any],
                 max_tokens: int = 256, trace: bool = False, progress: bool = True) -> tuple[list[dict], RunStats]:
    """Answer every request in order; one failure never stops the others."""
    stats = RunStats()
    results = []
    bar = tqdm(requests, desc="requests", unit="req", file=sys.stderr, disable=not progress)
    for request in bar:
        entry, gen = answer(model, tokenizer, index, functions, request, max_tokens, trace)
        results.append(entry)
        stats.requests += 1
        if "error" in entry:
            stats.failed += 1
        if gen is not None:
            stats.tokens += len(gen.tokens)
            stats.chosen += gen.chosen_tokens
            stats.forced += gen.forced_tokens
            stats.forward_passes += gen.forward_passes
            stats.seconds += gen.seconds
            stats.per_request.append({"prompt": entry["prompt"], "tokens": len(gen.tokens),
                                      "forward_passes": gen.forward_passes, "seconds": gen.seconds,
                                      "trace": gen.trace})
    return results, stats
