"""``run`` and ``eval`` under ``--tool-choice auto|none`` or ``--parallel-calls``: each request is a turn
decoded by the :class:`~.engine.Engine` (in the caller's thread), and its result becomes an entry.

Entries: one call ``{"prompt", "name", "parameters"}``; a declined request (a text answer)
``{"prompt", "name": null, "parameters": null, "content": "..."}``; with ``--parallel-calls`` every entry
holds a ``calls`` list ``[{"name", "parameters"}, ...]`` (empty when declined, with ``content``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from ...core.catalog import Function
from .engine import Engine
from ..decoding.masks import TokenIndex
from .runner import RunStats, request_error
from ..decoding.turn import TurnRequest, TurnResult


def turn_entry(prompt: str, result: TurnResult, parallel: bool) -> dict[str, Any]:
    """The result entry of a turn (module docstring); an error entry when the check after generation withheld
    its answer (``result.refusal``)."""
    if result.refusal is not None:
        return {"prompt": prompt, "error": result.refusal}
    calls = [{"name": c.name, "parameters": c.arguments} for c in result.calls]
    if parallel:
        entry = {"prompt": prompt, "calls": calls}
        if not calls:
            entry["content"] = result.content or ""
        return entry
    if calls:
        return {"prompt": prompt, **calls[0]}
    return {"prompt": prompt, "name": None, "parameters": None, "content": result.content or ""}


def _messages(request: dict) -> list[dict]:
    """The chat of a request entry: its ``messages`` (a system message, earlier turns, tool results) when it
    has them, else its prompt as the one user message."""
    messages = request.get("messages")
    return messages if isinstance(messages, list) and messages else [{"role": "user", "content": request["prompt"]}]


def answer_turns(engine: Engine, items: Iterable[tuple[list[Function], TokenIndex, Any]], config,
                 text_tokens: int | None = None) -> Iterator[tuple[int, dict[str, Any], TurnResult | None]]:
    """Answer ``(functions, index, request entry)`` items (``{"prompt"}``, with ``"messages"`` where the request
    is several messages) as turns under ``config``'s ``tool_choice``,
    ``parallel_calls``, ``max_tokens`` and ``keep_unstated``; ``text_tokens`` cuts a text answer short
    (:class:`~..decoding.turn.TurnRequest`). Yields (position, result entry, TurnResult or
    None) as each ends; a bad request (:func:`~.runner.request_error`) or a failed turn gets an error entry."""
    items = list(items)
    good: list[int] = []
    for position, (_, _, request) in enumerate(items):
        error = request_error(request)
        if error is not None:
            yield position, error, None
        else:
            good.append(position)
    turns = ((TurnRequest(_messages(items[p][2]), items[p][0], config.tool_choice,
                          parallel=config.parallel_calls, max_tokens=config.max_tokens,
                          keep_unstated=config.keep_unstated, text_tokens=text_tokens), items[p][1], None)
             for p in good)
    for k, outcome in engine.answer(turns):
        position = good[k]
        prompt = items[position][2]["prompt"]
        if isinstance(outcome, TurnResult):
            yield position, turn_entry(prompt, outcome, config.parallel_calls), outcome
        else:
            yield position, {"prompt": prompt, "error": str(outcome)}, None


def run_turns(engine: Engine, functions: list[Function], index: TokenIndex, requests: list[Any], config,
              on_result: Callable[[int, dict], None] | None = None,
              on_answer: Callable[[dict], None] | None = None) -> tuple[list[dict], RunStats]:
    """Answer every request of one catalog as turns (:func:`answer_turns`); returns (entries in the requests'
    order, totals). ``on_result`` gets each position and entry as it ends (to journal it), ``on_answer`` its
    record."""
    from ...core.messages import progress

    stats = RunStats()
    results: list[dict | None] = [None] * len(requests)
    with progress(total=len(requests), desc="requests", unit="req") as bar:
        for position, entry, result in answer_turns(engine, ((functions, index, r) for r in requests), config):
            results[position] = entry
            if on_result is not None:
                on_result(position, entry)
            record = stats.add_turn(entry, result)
            bar.update(1)
            if on_answer is not None:
                on_answer(record)
    return results, stats
