"""Answer a list of requests: prompt, decode under the index, turn each output into a call or an error."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from ...core.callformat import call_format_of
from ...core.catalog import Function
from ...core.errors import CallmaybeError, CatalogError, InputError
from ...core.messages import progress
from ..decoding.calls import to_call
from ..decoding.batch import SHORT_PROMPT, Batch, Started, enter, start
from ..decoding.decoder import Decoding, Generation, PrefixCache, generate
from ..policy.evidence import Verdict, verdicts
from ..policy.grounding import drop, valid
from ..decoding.masks import TokenIndex
from ..decoding.lookup import PromptLookup
from ..decoding.profile import Profile
from ..decoding.prompt import prompt_ids, shared_prefix_length
from ..policy.restate import RESTATE_MIN_PROB, restate


@dataclass
class RunStats:
    """Totals of a run: requests, failures, tokens generated/chosen/forced, forward passes, draft tokens
    proposed and taken (speculation), seconds."""

    requests: int = 0
    failed: int = 0
    tokens: int = 0
    chosen: int = 0
    forced: int = 0
    forward_passes: int = 0
    drafted: int = 0
    accepted: int = 0
    seconds: float = 0.0

    def add(self, entry: dict, gen: Generation | None) -> dict:
        """Count one answered request; returns its record (``prompt``, ``error``, ``trace`` and, when
        decoding ran, ``tokens``, ``forward_passes``, ``seconds``, ``loop_closed``, ``dropped``, ``restated``,
        ``grounding``)."""
        self.requests += 1
        if "error" in entry:
            self.failed += 1
        record = {"prompt": entry.get("prompt"), "error": entry.get("error"), "trace": []}
        if gen is not None:
            self.tokens += len(gen.tokens)
            self.chosen += gen.chosen_tokens
            self.forced += gen.forced_tokens
            self.forward_passes += gen.forward_passes
            self.drafted += gen.drafted_tokens
            self.accepted += gen.accepted_tokens
            self.seconds += gen.seconds
            record.update(tokens=len(gen.tokens), forward_passes=gen.forward_passes, seconds=gen.seconds,
                          loop_closed=gen.loop_closed, trace=gen.trace, dropped=gen.dropped,
                          restated=gen.restated, grounding=gen.grounding)
        return record

    def add_turn(self, entry: dict, result: Any) -> dict:
        """Count one request answered as a turn (:mod:`.choices`; ``result`` a :class:`~..decoding.turn.TurnResult`
        or None for an error entry); returns its record as :meth:`add` does, with ``tokens``, ``seconds`` and
        the grounding of every call and the call-or-answer decision when the turn ran."""
        record = self.add(entry, None)
        if result is not None:
            self.tokens += result.completion_tokens
            self.forced += result.forced_tokens
            self.chosen += result.completion_tokens - result.forced_tokens
            self.forward_passes += result.forward_passes
            self.drafted += result.drafted_tokens
            self.accepted += result.accepted_tokens
            self.seconds += result.seconds
            record.update(tokens=result.completion_tokens, seconds=result.seconds,
                          grounding={k: v for g in result.grounding for k, v in g.items()})
            if result.decision:
                record["decision"] = result.decision
        return record


def request_error(request: Any) -> dict[str, Any] | None:
    """The error entry of a request that cannot be answered (not ``{"prompt": <non-empty text>}``), else None."""
    prompt = request.get("prompt") if isinstance(request, dict) else None
    if not isinstance(request, dict) or "prompt" not in request:
        return {"prompt": None, "error": "missing prompt (expected {\"prompt\": ...})"}
    if not isinstance(prompt, str):
        return {"prompt": prompt, "error": f"prompt must be a string, got {_json_type(prompt)}"}
    if not prompt.strip():
        return {"prompt": prompt, "error": "empty or missing prompt"}
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        return {"prompt": prompt.encode("utf-8", "replace").decode(), "error": "prompt is not valid Unicode"}
    return None


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type: null, boolean, number, array, object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else type(value).__name__


def _error_entry(prompt: str, exc: Exception) -> dict[str, Any]:
    if isinstance(exc, CallmaybeError):
        return {"prompt": prompt, "error": str(exc)}
    return {"prompt": prompt, "error": f"{type(exc).__name__}: {exc}"}


class Answerer:
    """Answers requests against one loaded model, index and catalog, reusing the catalog prompt's KV cache.

    ``prefix_cache=False`` recomputes the whole prompt for every request (for measuring the difference);
    ``prefix``: a :class:`~..decoding.decoder.PrefixCache` shared with other answerers (then ``prefix_cache`` is its own
    ``enabled``).
    ``keep_unstated=False`` weighs each optional argument (:mod:`~callmaybe.runtime.policy.evidence`); a string one
    the request does not ground is decoded again, limited to text the request states
    (:mod:`~callmaybe.runtime.policy.restate`), and any ungrounded one is left out when the model gives no such
    value enough probability; the Generation's ``restated`` and ``dropped`` name them, its ``grounding``
    says what happened to each argument and why. ``speculate``: draft tokens from the prompt and verify them
    in one pass (:meth:`~..decoding.decoder.Decoding.verify`; greedy output unchanged).

    The model's context (``model.config.max_position_embeddings``) bounds every prompt: a catalog whose prompt
    alone fills it raises CatalogError here; a request whose prompt does raises no error but gets an error
    entry; otherwise the token budget is cut to what the context has left.
    """

    def __init__(self, model, tokenizer, index: TokenIndex, functions: list[Function], max_tokens: int = 256,
                 prefix_cache: bool = True, keep_unstated: bool = False, profile: Profile | None = None,
                 prefix: PrefixCache | None = None, speculate: bool = False):
        self.keep_unstated, self.speculate = keep_unstated, speculate
        self.model, self.tokenizer, self.index, self.functions = model, tokenizer, index, functions
        self.max_tokens = max_tokens
        options = index.data.header.get("options", {})
        self.key = options.get("parameters_key", "parameters")
        self.call_format = call_format_of(options)
        self.by_name = {fn.name: fn for fn in functions}
        self.profile = profile if profile is not None else Profile()
        self.prefix = prefix if prefix is not None else PrefixCache(model, enabled=prefix_cache, profile=self.profile)
        shared = shared_prefix_length(tokenizer, functions, self.call_format)
        self.prefix_len = shared if self.prefix.enabled else 0
        self.context: int | None = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        if self.context is not None and shared >= self.context:
            raise CatalogError(f"the catalog's prompt is {shared} tokens; the model's context is {self.context} "
                               "(shorten the descriptions or split the catalog)")

    def answer(self, request: Any, trace: bool = False) -> tuple[dict[str, Any], Generation | None]:
        """Answer one request entry ``{"prompt": ...}``: returns (result entry, Generation or None).

        A bad request (missing or empty prompt) or a failed decode gives ``{"prompt", "error"}``; the
        Generation is returned whenever decoding ran (also when its output then failed the schema check).
        """
        error = request_error(request)
        if error is not None:
            return error, None
        prompt, gen = request["prompt"], None
        try:
            ids = self._prompt_ids(prompt)
            gen = generate(self.model, self.tokenizer, self.index, ids, self._budget(ids), trace,
                           self.prefix, self.prefix_len, self.profile, self.speculate)
            return self._finish(prompt, ids, gen), gen
        except (CallmaybeError, RuntimeError, ValueError, TypeError) as exc:  # one bad request never stops the others
            return _error_entry(prompt, exc), gen

    def begin(self, request: Any, trace: bool = False) -> "Job | tuple[dict[str, Any], None]":
        """Start answering ``request`` for a batch (:func:`answer_batched`): with the catalog prefix cached and at
        most :data:`~..decoding.batch.SHORT_PROMPT` tokens of its own, the row joins with a copy of the prefix's
        keys and values and its prompt is fed in the batch's next step (:func:`~..decoding.batch.enter`); else
        its prompt goes through the model alone and its first token is chosen (:func:`~..decoding.batch.start`):
        a long prompt in a step would make every row's step as wide. Returns the :class:`Job`, or (error entry, None) for a bad
        request or a failed start."""
        error = request_error(request)
        if error is not None:
            return error, None
        prompt = request["prompt"]
        try:
            ids = self._prompt_ids(prompt)
            cached = self.prefix_len if self.prefix.enabled and self.prefix_len > 0 else 0
            lookup = PromptLookup(ids, self.index.token_bytes, self.tokenizer) if self.speculate else None
            row = Decoding(self.index, self.tokenizer, self._budget(ids), ids[cached:], trace, self.profile,
                           lookup=lookup)
            # a long prompt fed in a batch step would widen every row's step to its length: alone instead
            short = cached and len(row.pending) <= SHORT_PROMPT
            started = enter(row, ids, self.prefix, self.prefix_len) if short else None
            if started is None:
                started = start(self.model, row, ids, self.prefix, self.prefix_len)
            return Job(self, prompt, ids, cached, started)
        except (CallmaybeError, RuntimeError, ValueError, TypeError) as exc:
            return _error_entry(prompt, exc), None

    def complete(self, job: "Job", failure: Exception | None = None) -> tuple[dict[str, Any], Generation]:
        """The result entry of a job whose decoding finished (or failed with ``failure``), and its
        Generation."""
        gen = job.started.row.result(len(job.ids), job.cached)
        if failure is not None:
            return _error_entry(job.prompt, failure), gen
        try:
            return self._finish(job.prompt, job.ids, gen), gen
        except (CallmaybeError, RuntimeError, ValueError, TypeError) as exc:
            return _error_entry(job.prompt, exc), gen

    def _prompt_ids(self, prompt: str) -> list[int]:
        """The request's prompt token ids; raises InputError when they fill the model's context."""
        with self.profile.timed("prompt"):
            ids = prompt_ids(self.tokenizer, self.functions, prompt, self.call_format)
        if self.context is not None and len(ids) >= self.context:
            raise InputError(f"the prompt is {len(ids)} tokens; the model's context is {self.context}")
        return ids

    def _budget(self, ids: list[int]) -> int:
        """The token budget of a call after ``ids``: ``max_tokens``, or what the context has left."""
        return self.max_tokens if self.context is None else min(self.max_tokens, self.context - len(ids))

    def _finish(self, prompt: str, ids: list[int], gen: Generation) -> dict[str, Any]:
        """The result entry of a decoded call: parsed, checked and grounded. Raises CallmaybeError when the
        output is not a valid call."""
        t0, restating = time.perf_counter(), self.profile.seconds["restate pass"]
        try:
            call = to_call(gen.text, self.by_name, self.key)
            if not self.keep_unstated:
                call["parameters"] = self._ground(call, prompt, ids, gen)
        finally:  # the restate passes are a phase of their own
            spent = time.perf_counter() - t0 - (self.profile.seconds["restate pass"] - restating)
            self.profile.add("check", spent)
        return {"prompt": prompt, **call}

    def _ground(self, call: dict, prompt: str, ids: list[int], gen: Generation) -> dict:
        """The call's arguments grounded (:func:`ground`); records the model's own arguments in
        ``gen.model_parameters``, the names in ``gen.restated`` / ``gen.dropped``, what happened to every
        argument and why in ``gen.grounding``, and adds the passes and seconds spent to ``gen``."""
        t0 = time.perf_counter()
        done = ground(self.model, self.index, self.by_name[call["name"]], call["parameters"], prompt, ids,
                      gen.tokens, self.prefix, self.prefix_len, self.profile)
        gen.model_parameters = dict(call["parameters"])
        gen.forward_passes += done.forward_passes
        gen.restated, gen.dropped, gen.grounding = done.restated, done.dropped, done.grounding
        gen.seconds += time.perf_counter() - t0
        return done.parameters


@dataclass
class Grounded:
    """A call's arguments after grounding: the arguments kept or restated, the restated ones (name ->
    {"from", "to", "probability"}), the names left out, what happened to each argument and why
    (:func:`outcomes`), and the forward passes restating took."""

    parameters: dict
    restated: dict[str, dict]
    dropped: list[str]
    grounding: dict[str, dict]
    forward_passes: int = 0


def ground(model, index: TokenIndex, fn: Function, params: dict, request: str, ids: list[int],
           tokens: list[int], prefix: PrefixCache | None, prefix_len: int, profile: Profile) -> Grounded:
    """Weigh each optional argument of a call of ``fn`` (:mod:`~..policy.evidence`): one the request does not ground
    is decoded again within the request's words (:mod:`~..policy.restate`; ``ids`` is the context before the call,
    ``tokens`` the call's own) and kept when the model gives a stated value at least ``RESTATE_MIN_PROB``,
    else left out (:func:`~..policy.grounding.drop`)."""
    judged = verdicts(params, fn, request)
    names = [k for k, v in judged.items() if not v.keep]
    restated: dict[str, dict] = {}
    passes = 0
    original = params
    for key in [k for k in names if isinstance(params[k], str)]:
        try:
            again = restate(model, index, ids, tokens, key, request, prefix, prefix_len, RESTATE_MIN_PROB, profile)
        except RuntimeError:  # e.g. out of memory: the call is valid as it is; leave the argument out
            continue
        if again is None:
            continue
        passes += again.forward_passes
        trial = {**params, key: again.value}
        if again.value is not None and again.probability >= RESTATE_MIN_PROB and valid(trial, fn):
            params = trial
            restated[key] = {"from": original[key], "to": again.value, "probability": round(again.probability, 4)}
            names.remove(key)
    params, dropped = drop(params, fn, names)
    return Grounded(params, restated, dropped, outcomes(judged, restated, dropped), passes)


def outcomes(judged: dict[str, Verdict], restated: dict[str, dict], dropped: list[str]) -> dict[str, dict]:
    """What grounding did to each argument and why: ``{name: {"action", "evidence"}}``, the action one of
    "kept", "restated" (with "to" and "probability"), "left out", or "kept: leaving it out breaks the
    schema" for an ungrounded argument the schema needs."""
    out = {}
    for key, verdict in judged.items():
        if key in restated:
            out[key] = {"action": "restated", "to": restated[key]["to"],
                        "probability": restated[key]["probability"], "evidence": verdict.evidence}
        elif key in dropped:
            out[key] = {"action": "left out", "evidence": verdict.evidence}
        elif not verdict.keep:
            out[key] = {"action": "kept: leaving it out breaks the schema", "evidence": verdict.evidence}
        else:
            out[key] = {"action": "kept", "evidence": verdict.evidence}
    return out


@dataclass
class Job:
    """A request being answered in a batch: its answerer, prompt text, prompt ids, how many of them came from
    the prefix cache, and its started decoding (:func:`~..decoding.batch.start`)."""

    answerer: Answerer
    prompt: str
    ids: list[int]
    cached: int
    started: Started


def answer_batched(items: Iterable[tuple[Answerer, Any]], max_batch: int, trace: bool = False,
                   ) -> Iterator[tuple[int, dict[str, Any], Generation | None]]:
    """Answer ``(answerer, request)`` pairs with up to ``max_batch`` calls decoding together
    (:class:`~..decoding.batch.Batch`); answerers must share one model. Yields (position in ``items``, result entry,
    Generation or None) as each call finishes, so not in order. A request joins as soon as a row is free; a
    step that fails (out of memory) gives every row in it an error entry and the rest go on."""
    pending = iter(enumerate(items))
    batch: Batch | None = None
    jobs: dict[int, tuple[int, Job]] = {}
    exhausted = False
    while True:
        while not exhausted and (batch is None or len(batch) < max_batch):
            try:
                position, (answerer, request) = next(pending)
            except StopIteration:
                exhausted = True
                break
            begun = answerer.begin(request, trace)
            if not isinstance(begun, Job):
                yield (position, *begun)
                continue
            if begun.started.kv is None:  # finished by its first token or by forced text alone
                yield (position, *answerer.complete(begun))
                continue
            if batch is None:
                batch = Batch(answerer.model, answerer.profile, rows=max_batch)
            batch.join(begun.started)
            jobs[id(begun.started.row)] = (position, begun)
        if batch is None or not len(batch):
            if exhausted:
                return
            continue
        try:
            done, failure = batch.step(), None
        except RuntimeError as exc:
            done, failure = batch.drop_all(), exc
        for row in done:
            position, job = jobs.pop(id(row))
            yield (position, *job.answerer.complete(job, failure))


def answer_all(items: Iterable[tuple[Answerer, Any]], max_batch: int = 1, trace: bool = False,
               ) -> Iterator[tuple[int, dict[str, Any], Generation | None]]:
    """Answer ``(answerer, request)`` pairs, yielding (position in ``items``, result entry, Generation or None):
    one after another, each alone, in order when ``max_batch`` is 1; else :func:`answer_batched`."""
    if max_batch > 1:
        return answer_batched(items, max_batch, trace)
    return ((i, *answerer.answer(request, trace)) for i, (answerer, request) in enumerate(items))


def run_requests(answerer: Answerer, requests: list[Any], trace: bool = False, progress_bar: bool = True,
                 on_answer: Callable[[dict], None] | None = None, max_batch: int = 1,
                 on_result: Callable[[int, dict], None] | None = None) -> tuple[list[dict], RunStats]:
    """Answer every request with ``answerer``, ``max_batch`` at a time (1: one after another, each alone;
    more: :func:`answer_batched`); one failure never stops the others.

    Returns (one result entry per request, in the requests' order; the run's totals). As each request is
    answered (in order when ``max_batch`` is 1, as calls finish otherwise), ``on_result`` (if given) gets its
    position and entry (to journal it) and ``on_answer`` its record (:meth:`RunStats.add`, for a trace shown
    while the run goes on)."""
    stats = RunStats()
    results: list[dict | None] = [None] * len(requests)
    answers = answer_all(((answerer, r) for r in requests), max_batch, trace)
    with progress(total=len(requests), desc="requests", unit="req", disable=not progress_bar) as bar:
        for position, entry, gen in answers:
            results[position] = entry
            if on_result is not None:
                on_result(position, entry)
            record = stats.add(entry, gen)
            bar.update(1)
            if on_answer is not None:
                on_answer(record)
    return results, stats


def trace_lines(record: dict) -> list[str]:
    """The lines ``--trace`` prints for one answered request (a :meth:`RunStats.add` record): the prompt,
    one JSON line per token, the call-or-answer decision under "auto", the error if any, and what grounding did to each optional argument and why."""
    lines = [f"# {record['prompt']}"]
    lines += ["  " + json.dumps(step, ensure_ascii=False) for step in record.get("trace", [])]
    if record.get("decision"):
        lines.append(f"  decision: {record['decision']}")
    if record.get("error"):
        lines.append(f"  error: {record['error']}")
    return lines + grounding_notes(record.get("grounding", {}))


def grounding_notes(grounding: dict[str, dict]) -> list[str]:
    """Trace lines for what grounding did (:func:`outcomes`): one per optional argument, with its evidence;
    required arguments, always kept, are not listed."""
    lines = []
    for key, o in grounding.items():
        if o["evidence"] == "required":
            continue
        action = o["action"]
        if action == "restated":
            action = f"restated -> {json.dumps(o['to'], ensure_ascii=False)} (p={o['probability']})"
        lines.append(f"  grounding: {key} {action}: {o['evidence']}")
    return lines
