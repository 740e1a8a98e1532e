"""One assistant turn being decoded: a text answer, one call or several, as the request allows.

:class:`TurnDecoding` is a row as :class:`~..decoding.batch.Batch` and :func:`~..decoding.batch.start` drive it (``pending``,
``phase``, ``profile``, :meth:`~TurnDecoding.take_forced`, :meth:`~TurnDecoding.choose`). It moves through
modes:

* ``decide`` (``tool_choice="auto"``): at the first token the model's probability of starting a call (its
  call marker, Qwen's ``<tool_call>``, or a token opening a JSON object or a code fence, as small models
  write calls without the marker; the marker alone when the answer must be JSON, ``response_schema``, and the
  call format has one) against that of writing text decides (:func:`~..policy.decision.decide`): a call
  is then decoded under the grammar (in the "plain" call format under the "required" message, ``call_ids``,
  as ``tool_choice="required"`` decodes it: the row keeps the tokens the two prompts share and feeds the
  rest), text is the model's own text with the call's openings left out. A text
  answer may still turn into a call when the model writes its call marker, or writes the call as text (a JSON
  object whose first key is "name" and names a function of the catalog, bare or in a code fence:
  :mod:`.shape`): the answer then ends before the
  token that began it (held back, never sent) and the call is decoded under the grammar from there (after the
  forced marker, "tools"). A call the first token wants is
  checked by the model's verdict over the whole catalog (the ``judge`` callback, :mod:`~..policy.relevance`) before
  it is decoded; a text answer follows when the model doubts it. A call that repeats one the conversation
  already answered since the last user message (a tool result follows it), a first call the model doubts once
  shown it (the ``confirm`` callback, :mod:`~..policy.confirm`), and, with the optional value check, a call none of
  whose values the request states (:func:`~..policy.evidence.first_call`), is declined once decoded: the turn
  goes back to where the call began, its first token or the end of the text that turned into the call (the
  row's keys and values after that point are dropped, ``truncate_to``), and answers in text from there, opening
  no call again. The reason is the result's ``decision``, never its ``content``. A parallel turn leaves out an
  answered call and tries another (kept as a later call would be, :func:`~..policy.evidence.another_call`); it
  declines when it made none.
* ``text``: free text, token by token, until EOS or the budget ("length"). After a tool result, a copy of
  the text the prompt wraps that result in is left out of the answer (its opening at the start; its closing
  ends the answer: :func:`~..decoding.prompt.result_wrapper`, Qwen's ``<tool_response>``). Control tokens
  other than EOS and (under "auto") the call marker are never picked; under "none" the marker is not either,
  and with tools the first token opens no call, nor does a token after a blank start (no JSON object, no code
  fence: a model that would write its call as text writes words). Under "auto" after a decline, a call
  written as text later in the answer ends the answer before it (a declined written call first gets one more
  try there without the token that began it: :data:`SHAPE_RETRIES`). Under "none" the text is the model's,
  JSON included (a user who turned calls off may ask for JSON with a "name" key).
* ``json``: a text answer that must match ``response_schema``: decoded under that schema's index.
* ``call``: one call under the call index (:class:`~..decoding.decoder.Decoding`, so forced text and loop breaking
  work as for ``run``). A named function is pinned by walking its name's tokens through the index.
* after a call (``parallel``): the call's closing (``\\n</tool_call>``, "tools"), a newline and (again
  "tools") ``<tool_call>\\n`` are forced and another call starts, while the budget still holds a whole one,
  whatever weight the model would give EOS there: Qwen2.5-Coder-1.5B gives the newline p ~ 1 in the
  "tools" format but p < 0.02 in the "plain" one (12 of 12 BFCL parallel cases), where leaving it the
  choice ended every turn after one call (0 of the first 100 right). A call after the first is kept only
  when the request asks for it (:func:`~..policy.evidence.another_call`: each value stated or used before, one
  stated value new or stated more often than earlier calls used it, or a new combination of a grid's
  values); the first that is not ends the turn, unreported. A parallel turn's calls wait for its end, where
  :func:`~..policy.parallel.settle` leaves out a first call that joined what later calls give apart (510 for "5,10
  and 15", "Paris, London, Rome"), splits a value joined with "and" that the model (the ``pair`` callback)
  does not read as one name ("Egypt and Turkey"), and leaves out drafts and repeats; the calls are then
  reported with their final positions.

Every generated token (chosen, forced or marker) counts against ``max_tokens``; a call always completes
within what is left. When a call is complete it is parsed, checked and grounded (the ``ground`` callback,
which may run the model to restate) before it is reported; with grounding on, an optional number whose one
mention a required argument of the turn takes ("a radius of 1 meter" read as the radius and a permeability
of 1) is then left out (:func:`~..policy.evidence.claimed`: over the whole turn, at its end, when it is parallel).
"""

from __future__ import annotations

import codecs
import json
import time
from dataclasses import replace
from typing import Any, Callable, NamedTuple

import torch

from ...core.callformat import TOOLS_OPENING
from ...core.errors import CallmaybeError, InputError, TokenNotAllowed
from ..decoding.calls import InvalidCall, to_call
from ..policy.decision import CALL_LOG_ODDS_MIN, COMBINED_LOG_ODDS_MIN, call_start_ids, decide
from ..decoding.decoder import Decoding
from ..decoding.prompt import common_length, result_wrapper
from ..policy.evidence import another_call, claimed, first_call
from ..policy.grounding import drop
from ..decoding.lookup import PromptLookup
from ..decoding.masks import TokenIndex
from ..policy.parallel import settle
from ..policy.result_use import RESULT_TOKENS
from ..decoding.profile import Profile
from ..decoding.sampling import generator, pick
from ..decoding.turn import Event, ToolCall, TurnRequest, TurnResult
from .shape import find_shape

#: The text that closes a call in the "tools" call format, before EOS or the next call.
TOOLS_CLOSING = "\n</tool_call>"
#: How many times a text answer that may not call goes back before a call it writes as text (the model then
#: picks another token there); the next time the answer ends before it.
SHAPE_RETRIES = 0


class _FirstAnswer(NamedTuple):
    """A text answer written without the catalog after a tool result that did not use the result, kept aside
    while it is written again beside the catalog (:meth:`TurnDecoding._result_checked`): ``prompt`` (token ids,
    the chat without the catalog), ``pmi`` (nats, its PMI with the results), ``reason`` (its finish reason, None
    when it was checked before its end) and ``state`` (:meth:`TurnDecoding._answer_state`)."""

    prompt: list[int]
    pmi: float
    reason: str | None
    state: dict[str, Any]


class Vocab:
    """What a turn needs to know of the vocabulary: token bytes, EOS ids, the call marker (None in the "plain"
    call format) and the text biases: float32 tensors (vocab_size,), 0 where text may pick the token and -inf
    where not (control tokens other than EOS and the marker; ``no_call`` bans the marker too; ``text_first``
    bans every token that begins a call, :func:`~..policy.decision.call_start_ids`: a text answer's first token, and
    the next ones while it is blank; ``text_lead`` allows the marker among them).
    ``call_starts``: those ids (int64); ``marker_only``: the marker's id alone (int64, empty without one), what
    starts a call when the text answer is JSON (a response schema), which opens as a marker-less call does."""

    def __init__(self, token_bytes, eos_ids, vocab_size: int, tokenizer, call_format: str):
        self.token_bytes, self.eos_ids, self.tokenizer = token_bytes, set(int(e) for e in eos_ids), tokenizer
        self.call_format = call_format
        self.newline = _single(tokenizer, "\n")
        self.marker: int | None = None
        if call_format == "tools":
            opening = tokenizer.encode(TOOLS_OPENING, add_special_tokens=False)
            self.marker = opening[0]
            self.after_marker = opening[1:]
            self.closing = tokenizer.encode(TOOLS_CLOSING, add_special_tokens=False)
        free = torch.full((vocab_size,), float("-inf"))
        ok = [i for i, b in enumerate(token_bytes) if b is not None] + sorted(self.eos_ids)
        free[torch.tensor(ok, dtype=torch.long)] = 0.0
        self.no_call = free.clone()
        if self.marker is not None:
            free[self.marker] = 0.0
        self.free = free
        self.call_starts = call_start_ids(token_bytes, self.marker)
        self.marker_only = torch.tensor([] if self.marker is None else [self.marker], dtype=torch.long)
        self.text_first = self.no_call.clone()
        self.text_first[self.call_starts] = float("-inf")
        self.text_lead = self.text_first.clone()  # the same, where the marker may still turn text into a call
        if self.marker is not None:
            self.text_lead[self.marker] = 0.0


def _single(tokenizer, text: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"the tokenizer writes {text!r} as {len(ids)} tokens, not one")
    return ids[0]


class TurnDecoding:
    """One turn being decoded (see the module docstring).

    ``ids``: the prompt's token ids; ``pending``: those not in the prefix cache. ``index``: the call index of
    ``request.functions`` (None when no call may be made); ``schema_index``: the index of
    ``request.response_schema``. ``ground(fn, arguments, context_ids, call_tokens)`` returns a
    :class:`~.runner.Grounded` (:func:`~.runner.ground`); ``on_event`` gets the turn's
    :class:`~..decoding.turn.Event` s. ``judge(functions, asked)`` returns a :class:`~..policy.relevance.Relevance` for a
    call the first token wants under "auto", unless a tool result follows the last user message (None: no
    check); ``pair(key, first, second)`` a probability
    (:func:`~..policy.parallel.pair_probability`; None: a parallel turn splits no value); ``evidence``: decline a first
    call none of whose values the request states (:func:`~..policy.evidence.first_call`); ``threshold``: the
    decision's log-odds (:data:`~..policy.decision.CALL_LOG_ODDS_MIN`) unless the request sets its own;
    ``confirm(fn, asked, arguments)`` returns a :class:`~..policy.relevance.Relevance` for a decoded first call
    under "auto", a new call after a tool result included (None: no check, :mod:`~..policy.confirm`).
    ``call_ids``: under "auto", the prompt a call is decoded under once the first token decided for one (the
    "plain" call format's "required" message, which asks for a call: :func:`~..decoding.prompt.system_message`):
    the row keeps the tokens both prompts share and feeds the rest of this one (:meth:`_reprompt`); a decline
    goes back to ``ids``. None: the call is decoded under ``ids``.
    ``text_ids``: under "auto", the prompt a declined turn writes its text answer under: the same chat without
    the catalog (:meth:`~.engine.Engine.text_prompt_ids`), so that a model that wanted a call the checks
    declined answers the request instead of writing the call as text (Qwen2.5-Coder-1.5B, shown its catalog,
    wrote "To find the capital of Australia, I will use the `get_capital` function. Here is the JSON
    object..." for a bike shop's catalog). The row keeps the tokens the two prompts share and feeds the rest
    (:meth:`_to_text_prompt`). None: the text answer follows the turn's own prompt. After a tool result only
    with ``result_check``: there the answer written without the catalog is held back until it ends or reaches
    :data:`~..policy.result_use.RESULT_TOKENS` tokens, and ``result_check(text_ids, answer_ids)`` (a
    :class:`~..policy.relevance.Relevance`, :mod:`~..policy.result_use`) says whether it uses the tool result;
    when it does not, the answer is written again beside the catalog (six agent-loop clients, default model:
    without the catalog every weather answer stated the result and every to-do answer became "I'm sorry, but I
    can't assist with that."; beside it the to-do answers stated the result and the weather answers described
    ``get_weather``).
    ``combined_min``: a first call under "auto" that passed the first token's, the verdict's and the
    confirmation's thresholds is still declined when their three log-odds sum below it
    (:data:`~..policy.decision.COMBINED_LOG_ODDS_MIN`).
    ``speculate``: inside a call or a JSON answer of a greedy turn, draft tokens from the prompt and verify them
    in the row's next pass (:meth:`propose`, :meth:`verify`).
    Raises InputError for a named function that is not in the index, a call required without an index, or a
    budget that cannot hold the call or JSON answer the turn must give.
    """

    def __init__(self, request: TurnRequest, vocab: Vocab, ids: list[int], pending: list[int],
                 index: TokenIndex | None, schema_index: TokenIndex | None, ground: Callable | None,
                 on_event: Callable[[Event], None], profile: Profile | None = None,
                 judge: Callable | None = None, pair: Callable | None = None, evidence: bool = False,
                 threshold: float = CALL_LOG_ODDS_MIN, confirm: Callable | None = None, speculate: bool = False,
                 call_ids: list[int] | None = None, combined_min: float = COMBINED_LOG_ODDS_MIN,
                 text_ids: list[int] | None = None, result_check: Callable | None = None):
        self.request, self.vocab, self.ids = request, vocab, ids
        # the prompt a call decided under "auto" is decoded under (None: ``ids``) and, once it is, how many
        # tokens the two prompts share and the text answer's own prompt (a decline goes back to it)
        self.call_ids = call_ids if call_ids is not None and call_ids != ids else None
        self.reprompted: tuple[int, list[int]] | None = None
        # the prompt a declined turn answers in text under (the chat without the catalog; None: ``ids``); after a
        # tool result only with the check that the answer uses the result (class docstring)
        after = _after_tool_result(request.messages)
        self.result_check = result_check if after else None
        self.text_ids = text_ids if text_ids is not None and text_ids != ids and \
            (not after or self.result_check is not None) else None
        # while a text answer written without the catalog after a tool result is held back for that check: the
        # prompt it goes back to (beside the catalog) when the answer does not use the result
        self._trial: list[int] | None = None
        # once that answer did not use the result and is written again beside the catalog: the first answer
        # (its prompt, its PMI and the turn's state after it), which the second is held back to be compared with
        self._rival: _FirstAnswer | None = None
        self._undecline = False  # the trial's answer was the first token's choice: beside the catalog it may call
        self.index, self.schema_index, self.ground, self.judge, self.pair = index, schema_index, ground, judge, pair
        self.confirm = confirm
        self.on_event = on_event
        self.evidence = evidence
        self.threshold = request.call_threshold if request.call_threshold is not None else threshold
        self.decision: str | None = None  # why the turn called or answered in text (result().decision)
        self.log_odds: list[float] = []  # the first token's log-odds, then the verdict's (when asked)
        self.combined_min = combined_min
        self.first_logits: torch.Tensor | None = None  # the first position's logits, kept for a decline
        # where a text answer turned into a call: (tokens generated before the marker, the logits there; None
        # for a call written as text: the last kept token is fed again for them, _rewind)
        self.text_before_call: tuple[int, torch.Tensor | None] | None = None
        self._marks: list[tuple[int, int]] = []  # (len(generated), len(_answer)) at each text token's end
        self._shape_cut: tuple[int, int] | None = None  # where a call written as text cuts the answer (a mark)
        self._shape_token: int | None = None  # the token that began it: not picked there again
        self._shape_bias: torch.Tensor | None = None  # the next text token's bias, once, after going back
        self._shape_backs = 0  # times the answer went back before a call written as text (SHAPE_RETRIES)
        self.declined = False  # a call was declined: the turn is a text answer and opens no call again
        self.truncate_to: int | None = None  # set on a decline: the batch keeps this many of the row's tokens
        self.answered = answered_calls(request.messages)
        # after a tool result: the text the prompt wraps it in (a text answer's copy of the opening is left out,
        # its closing ends the answer, _add_text); ("", "") otherwise
        self.wrapper = result_wrapper(vocab.tokenizer, request.functions, request.messages, vocab.call_format) \
            if after else ("", "")
        closing = self.wrapper[1]
        self.stops = tuple(request.stop) + ((closing,) if closing and closing not in request.stop else ())
        self.skipped: list[ToolCall] = []  # calls of this turn left out: the conversation already answered them
        self.profile = profile if profile is not None else Profile()
        self.pending = list(pending)
        self.by_name = {fn.name: fn for fn in request.functions}
        self.key = "arguments" if vocab.call_format == "tools" else "parameters"
        self.gen = generator(request.sampling)
        # speculation drafts from the prompt inside a call or JSON answer; a sampled turn never drafts
        self.lookup = PromptLookup(ids, vocab.token_bytes, vocab.tokenizer) \
            if speculate and request.sampling.greedy else None
        self.drafted = self.accepted = 0
        self.generated: list[int] = []  # every token after the prompt (chosen, forced, markers)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.content: list[str] = []
        self.text_tokens = 0  # tokens of free text so far
        self.calls: list[ToolCall] = []
        self.grounding: list[dict] = []
        self.call: Decoding | None = None
        self.call_start = 0  # len(self.generated) when the current call began
        self.finish_reason: str | None = None
        self.passes = 0
        self.forced = 0  # generated tokens appended without asking the model
        self._answer = ""  # the text answer decoded so far (what is sent, then what is held back)
        self._unwrapped = False  # the answer's start was checked for a copy of the tool result's opening
        self._sent = 0  # characters of it sent as events
        self._need: int | None = None  # the fewest tokens of a whole call (see _call_need)
        self._over = False  # the turn's last event ("done" or "error") is out
        self.refusal: str | None = None  # why the check after generation withheld the answer (_refuse)
        self.t0 = time.perf_counter()
        r = request
        if r.function is not None and r.function not in self.by_name:
            raise InputError(f"tool_choice names {r.function!r}, which is not among the tools")
        if index is None and (r.function is not None or r.tool_choice == "required"):
            raise InputError("a call is required but no tools were given")
        if r.function is not None or r.tool_choice == "required":
            need = self._call_need()  # a named function's own shortest call, not the index's
            if need > r.max_tokens:
                of = "" if r.function is None else f" of {r.function}"
                raise InputError(f"max_tokens {r.max_tokens} cannot hold a call{of}: the shortest takes {need} tokens")
            self.mode = "call"
            self._begin_call()
        elif r.tool_choice == "auto" and index is not None:
            self.mode = "decide"
        else:
            self.mode = "json" if schema_index is not None else "text"
            if self.mode == "json":
                self._begin_json()

    # -- the row interface of batch.Batch ------------------------------------------------------------------

    @property
    def phase(self) -> str:
        if self.passes == 0:
            return "prefill"
        return "verify pass" if self.call is not None and self.call.draft else \
            "decode step" if len(self.pending) == 1 else "forced chunk"

    @property
    def left(self) -> int:
        """Tokens the budget still allows."""
        return self.request.max_tokens - len(self.generated)

    def take_forced(self) -> bool:
        """Append forced text (of a call or a JSON answer) to ``pending``; True when the turn is over. A
        failure ends this turn with an error event and leaves the other rows alone."""
        if self.finish_reason is not None:
            return True
        try:
            self._take_forced()
        except Exception as exc:  # never trusted to be impossible: this row fails, the batch goes on
            self.fail(_message(exc))
        return self.finish_reason is not None

    def _take_forced(self) -> None:
        if self.mode in ("call", "json"):
            before = len(self.call.pending)  # a chosen token still to feed, not counted again
            finished = self.call.take_forced()
            self._take(self.call.pending[before:], forced=True)
            if self.mode == "json":
                self._stream(self.call.pending[before:])
            self.pending += self.call.pending
            self.call.pending = []
            if finished:
                self._end_value()

    def propose(self) -> list[int]:
        """The draft to feed after ``pending`` in the next pass (call after :meth:`take_forced` said the turn
        goes on): inside a call or a JSON answer, :meth:`~..decoding.decoder.Decoding.propose`; else []."""
        if self.call is None or self.mode not in ("call", "json") or self.lookup is None:
            return []
        return self.call.propose()

    @property
    def choices(self) -> list[int]:
        """The offsets after ``pending`` whose logits :meth:`verify` reads (the call's
        :attr:`~..decoding.decoder.Decoding.choices`; [0] without a draft)."""
        return self.call.choices if self.call is not None and self.call.draft else [0]

    def needed_ids(self) -> torch.Tensor | None:
        """The token ids whose logits the next pass's choices read, inside a call or a JSON answer (the call's
        :meth:`~..decoding.decoder.Decoding.needed_ids`); None where every logit may be read (deciding between
        a call and text, text, or where naming them failed: the pass then computes every logit, and the
        choice that reads them meets the failure as before)."""
        if self.mode not in ("call", "json") or self.call is None or self.finish_reason is not None:
            return None
        try:
            return self.call.needed_ids()
        except Exception:  # never trusted to be impossible: a row's failure is met where it chooses
            return None

    def verify(self, logits: torch.Tensor) -> tuple[bool, int]:
        """Take the next tokens from ``logits`` (len(choices), vocab_size): the model's outputs after
        ``pending`` and after the tokens of the :meth:`propose` draft fed with it where the model chooses
        (:attr:`choices`; :meth:`~..decoding.decoder.Decoding.verify`). Returns (whether the turn is over, how
        many draft tokens were taken: the caller drops the keys and values of the others). Without a draft it is :meth:`choose`."""
        if self.call is None or not self.call.draft:
            return self.choose(logits[-1]), 0
        self.passes += 1
        self.pending = []
        kept = 0
        try:
            call = self.call
            before, forced = len(call.matcher.tokens), call.forced
            self.drafted += len(call.draft)
            finished, kept = call.verify(logits)
            self.accepted += kept
            new = call.matcher.tokens[before:]
            self._take(new, count_eos=False)
            self.forced += call.forced - forced
            if self.mode == "json":
                self._stream([t for t in new if t not in self.vocab.eos_ids])
            self.pending += call.pending
            call.pending = []
            if finished:
                self._end_value()
        except Exception as exc:
            self.fail(_message(exc))
        return self.finish_reason is not None, kept

    def choose(self, logits: torch.Tensor) -> bool:
        """Take the next token from ``logits`` (the model's output after ``pending``, shape (vocab_size,));
        True when the turn is over (a failure ends it with an error event, as in :meth:`take_forced`)."""
        self.passes += 1
        self.pending = []
        try:
            self._choose(logits)
        except Exception as exc:
            self.fail(_message(exc))
        return self.finish_reason is not None

    def _choose(self, logits: torch.Tensor) -> None:
        if self.mode == "decide":
            self._decide(logits)
        elif self.mode == "text":
            self._text(logits, self._text_bias())
        else:
            finished = self.call.choose(logits)
            last = self.call.matcher.tokens[-1:]
            self._take(last, count_eos=False)
            if self.mode == "json":
                self._stream([t for t in last if t not in self.vocab.eos_ids])
            self.pending += self.call.pending
            self.call.pending = []
            if finished:
                self._end_value()

    def fail(self, message: str) -> None:
        """End the turn with an error event (a failed forward pass, a cancelled row, a failure while the turn
        was being closed), unless its last event is already out."""
        if not self._over:
            self.finish_reason, self._over = "error", True
            self.on_event(Event("error", message))

    def result(self) -> TurnResult:
        """What the turn became (complete once it is over)."""
        content = "".join(self.content) if self.content and self.refusal is None else None
        return TurnResult(content, list(self.calls), self.finish_reason or "stop", len(self.ids),
                          len(self.generated), time.perf_counter() - self.t0, list(self.grounding),
                          self.passes, self.forced, self.decision, self.refusal, self.drafted, self.accepted)

    # -- modes --------------------------------------------------------------------------------------------

    def _may_call(self) -> bool:
        """Whether the text answer may still write the call marker (:meth:`_may_write_call`, with a marker)."""
        return self._may_write_call() and self.vocab.marker is not None

    def _decide(self, logits: torch.Tensor) -> None:
        """The first token: the model's odds of starting a call decide (:func:`~..policy.decision.decide`); a call is
        then decoded under the index (after the marker, where the call format has one), text starts with a
        token that begins no call."""
        allowed = self.vocab.free if self.vocab.marker is not None else self.vocab.no_call
        starts = self.vocab.call_starts
        if self.schema_index is not None and self.vocab.marker is not None:
            starts = self.vocab.marker_only  # a JSON answer opens as a call without the marker would
        verdict = decide(logits, starts, self.threshold, allowed)
        if verdict.call and not self._call_fits():  # a call that could not end: text (a break test, issue 29)
            verdict = replace(verdict, call=False, evidence=f"{verdict.evidence}, but max_tokens "
                              f"{self.request.max_tokens} cannot hold a call")
        self.log_odds = [verdict.log_odds]  # the evidence for a call so far (combined in _doubt)
        self.first_logits = logits.detach().clone()
        if not verdict.call:
            self.decision = f"answered in text: {verdict.evidence}"
            if self.result_check is not None and self.text_ids is not None:  # after a tool result: on trial
                self.declined = self._undecline = True  # no call opens without the catalog; beside it again may
                self._to_text_prompt()
                return
            return self._as_text_answer(logits)
        self.decision = f"called: {verdict.evidence}"
        if self.judge is not None and not _after_tool_result(self.request.messages):
            judged = self.judge(self.request.functions, request_text(self.request.messages))
            self.passes += judged.forward_passes
            if not judged.keep:  # the model would call, and doubts a call does what is asked: text
                self.decision = f"answered in text: {verdict.evidence}, but {judged.evidence}"
                self.declined = True  # a call written as text later is not taken either
                if self._to_text_prompt():
                    return
                return self._as_text_answer(logits)
            self.decision += f"; {judged.evidence}"
            self.log_odds.append(judged.log_odds)
        if self.vocab.marker is not None:
            return self._call_after_marker(self.vocab.marker)
        self.mode = "call"
        if self.call_ids is not None:
            self._reprompt()  # the call's first token comes from the next pass, over the rest of call_ids
        self._begin_call()
        if self.reprompted is None and self.call is not None and not self.call.matcher.forced_tokens():
            self._choose(logits)  # the call's first token is chosen here, under its mask

    def _reprompt(self) -> None:
        """Go over to ``call_ids`` for the call: the row keeps the keys and values of the tokens it shares with
        ``ids`` (``truncate_to``) and feeds the rest of ``call_ids`` in its next pass."""
        shared = common_length(self.ids, self.call_ids)
        self.reprompted = (shared, self.ids)
        self.truncate_to = shared
        self.pending = list(self.call_ids[shared:])
        self.ids = self.call_ids

    def _to_text_prompt(self) -> bool:
        """Go over to ``text_ids`` for a declined turn's text answer (see the class docstring), from a row whose
        tokens are ``ids`` (``call_ids`` once reprompted) with nothing generated kept (the caller dropped it):
        the row keeps the tokens the two prompts share and feeds the rest; the answer's first token comes from
        the next pass. False (nothing done) without ``text_ids``."""
        if self.text_ids is None:
            return False
        if self.result_check is not None and self.schema_index is None:  # after a tool result: on trial
            self._trial = self.reprompted[1] if self.reprompted is not None else self.ids
        self._refeed(self.ids, self.text_ids)
        self.ids, self.text_ids = self.text_ids, None
        self.mode = "json" if self.schema_index is not None else "text"
        if self.mode == "json":
            self._begin_json()
        return True

    def _as_text_answer(self, logits: torch.Tensor) -> None:
        """The turn is a text answer after all, from ``logits`` (the first position's): a JSON one takes its
        first token under the schema's mask; a free one a token that opens no call."""
        tok = self._pick(logits, self.vocab.text_first)  # picked either way: a sampled turn's draws stay the same
        self.mode = "json" if self.schema_index is not None else "text"
        if self.mode == "json":
            self._begin_json()
            return self._choose(logits)
        self._text_token(tok)

    def _text_bias(self) -> torch.Tensor:
        """The bias of a text answer's next token: with tools offered, no token that opens a call (a JSON
        object, a code fence) while the answer is blank (its first token, or whitespace so far: a model that
        writes a newline first would write its call as text after it); the call marker only where the turn may
        still call (:meth:`_may_call`)."""
        if self._shape_bias is not None:  # back before a call written as text: no call opens here
            bias, self._shape_bias = self._shape_bias, None
            return bias
        blank = bool(self.request.functions) and not self._answer.strip()
        if self._may_call():
            return self.vocab.text_lead if blank else self.vocab.free
        return self.vocab.text_first if blank else self.vocab.no_call

    def _text(self, logits: torch.Tensor, bias: torch.Tensor) -> None:
        tok = self._pick(logits, bias)
        if tok == self.vocab.marker:  # the text turns into a call: a decline comes back here
            self.text_before_call = (len(self.generated), logits.detach().clone())
        self._text_token(tok)

    def _pick(self, logits: torch.Tensor, bias: torch.Tensor) -> int:
        """A token from ``logits`` plus ``bias`` (a text bias of :class:`Vocab`), as the request samples."""
        return pick(logits + bias.to(logits.device, logits.dtype), self.request.sampling, self.gen)

    def _feed(self, tok: int) -> None:
        """Count ``tok`` as chosen and feed it to the model next."""
        self._take([tok])
        self.pending.append(tok)

    def _call_after_marker(self, tok: int) -> None:
        """The model wrote its call marker ``tok``: the marker's own newline is forced and the call begins."""
        self._take([tok])
        self._take(self.vocab.after_marker, forced=True)
        self.pending += [tok, *self.vocab.after_marker]
        self.mode = "call"
        self._begin_call()

    def _text_token(self, tok: int) -> None:
        if tok in self.vocab.eos_ids:
            return self._end_text("stop")
        if tok == self.vocab.marker:  # the text turns into a call
            self._rival = None  # a second answer that calls is not compared with the first
            self._flush_text()
            self._call_after_marker(tok)
            return
        if not self._marks:
            self._marks.append((len(self.generated), len(self._answer)))
        self._feed(tok)
        self.text_tokens += 1
        if self._add_text(self._utf8.decode(self.vocab.token_bytes[tok] or b"")):
            return self._end_text("stop")  # a stop text: the answer ends before it
        self._marks.append((len(self.generated), len(self._answer)))
        if self._shape_cut is not None:
            return self._written_call()
        cut = self.request.text_tokens
        if self.left <= 0 or (cut is not None and self.text_tokens >= cut):
            return self._end_text("length")
        if self._held and self.text_tokens >= RESULT_TOKENS:
            reason = self._result_checked(None)
            if reason is not None:  # the first answer, which had ended, came back
                self._close_text(reason)

    @property
    def _held(self) -> bool:
        """Whether the text answer is held back for a check of its use of the tool result (nothing of it is
        sent until then: :meth:`_result_checked`)."""
        return self._trial is not None or self._rival is not None

    def _end_text(self, reason: str) -> None:
        """The text answer is over (``reason``, the finish reason): what was held back is sent and the turn
        ends, unless the answer was held back for the check of its use of the tool result
        (:meth:`_result_checked`) and another answer is written or goes on instead."""
        if self._held:
            reason = self._result_checked(reason)
            if reason is None:
                return
        self._close_text(reason)

    def _close_text(self, reason: str) -> None:
        self._flush_text()
        self.finish_reason = reason
        self._done()

    def _result_checked(self, reason: str | None) -> str | None:
        """The check of a text answer after a tool result (``result_check``, see the class docstring), on the
        tokens it has so far; ``reason``: the finish reason when the answer has ended, None when it reached
        :data:`~..policy.result_use.RESULT_TOKENS` and goes on. Returns the finish reason the turn ends with now,
        or None while it goes on.

        The first answer, written without the catalog, stands when it uses the result; what was held back is
        sent. Otherwise the row goes back to the prompt beside the catalog (it keeps the tokens the two prompts
        share and feeds the rest) and the answer starts again there, opening no call after a declined one (the
        first token's own choice of text may still turn into a call there); nothing of the first was sent, and
        it is kept aside (:class:`_FirstAnswer`). The second answer is held back and checked the same way, under
        the same prompt without the catalog; the one whose PMI with the results is higher stands (the second on
        a tie). A break test of 44 after-tool turns (docs/call-or-answer.md) found every one of 11 second answers
        wrong: empty, "<", the result copied as XML tags; the first came back where the second is worse."""
        if self._rival is not None:
            return self._rival_checked(reason)
        catalog_ids, self._trial = self._trial, None
        verdict = self.result_check(self.ids, list(self.generated))
        self.passes += verdict.forward_passes
        self.decision = f"{self.decision}; {verdict.evidence}"
        if verdict.keep:
            self._add_text("")  # what no stop text or written call holds back goes out now
            return reason
        self._rival = _FirstAnswer(self.ids, verdict.log_odds, reason, self._answer_state())
        self.generated, self.forced, self.text_tokens = [], 0, 0
        self._answer, self._sent, self._marks, self._unwrapped = "", 0, [], False
        self._shape_cut, self._shape_token, self._shape_bias, self._shape_backs = None, None, None, 0
        self._utf8.reset()
        self.declined = self.declined and not self._undecline  # as the first token chose it, a call may follow
        self._refeed(self.ids, catalog_ids)
        self.ids = catalog_ids
        self.mode = "text"
        return None

    def _rival_checked(self, reason: str | None) -> str | None:
        """The second answer's check (:meth:`_result_checked`): it stands (what was held back is sent; the turn
        ends with ``reason`` or goes on) when its PMI with the results reaches the first's; otherwise the first
        comes back: the turn ends with the first's finish reason, or, where the first had not ended, the row
        goes back to its prompt and tokens (it keeps the tokens shared with the second's prompt and feeds the
        rest) and the first goes on, no longer held back."""
        first, self._rival = self._rival, None
        verdict = self.result_check(first.prompt, list(self.generated))
        self.passes += verdict.forward_passes
        second = verdict.log_odds
        if second >= first.pmi:
            self.decision = f"{self.decision}; the answer written beside the catalog stands (PMI {second:+.2f} " \
                            f"nats >= {first.pmi:+.2f})"
            self._add_text("")
            return reason
        self.decision = f"{self.decision}; the first answer stands (the one written beside the catalog: PMI " \
                        f"{second:+.2f} nats < {first.pmi:+.2f})"
        catalog_ids = self.ids
        self._restore_answer(first.state)
        self.ids = first.prompt
        if first.reason is not None:
            return first.reason
        self._refeed(catalog_ids, self.ids + self.generated)
        self._add_text("")
        return None

    def _refeed(self, row: list[int], tokens: list[int]) -> None:
        """The row, whose keys and values are those of ``row`` (token ids), goes over to ``tokens``: it keeps the
        tokens the two share (``truncate_to``), the last of ``tokens`` always fed again so that the next pass gives
        the logits after it, and feeds the rest (``pending``)."""
        shared = min(common_length(row, tokens), len(tokens) - 1)
        self.truncate_to = shared
        self.pending = list(tokens[shared:])

    def _answer_state(self) -> dict[str, Any]:
        """What the text answer written so far is (a copy, :meth:`_restore_answer` puts it back)."""
        return {"generated": list(self.generated), "forced": self.forced, "text_tokens": self.text_tokens,
                "_answer": self._answer, "_sent": self._sent, "_marks": list(self._marks),
                "_unwrapped": self._unwrapped, "_shape_cut": self._shape_cut, "_shape_token": self._shape_token,
                "_shape_bias": self._shape_bias, "_shape_backs": self._shape_backs, "declined": self.declined,
                "_utf8": self._utf8.getstate()}

    def _restore_answer(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            if name == "_utf8":
                self._utf8.setstate(value)
            else:
                setattr(self, name, list(value) if isinstance(value, list) else value)

    def _add_text(self, delta: str) -> bool:
        """Add ``delta`` to the text answer and send what no stop text can still claim; True when a stop text
        appeared (the text before it is sent, the rest dropped)."""
        self._answer += delta
        if self.wrapper[0] and not self._unwrapped:  # a copy of the tool result's opening is left out
            lead, opening = self._answer.lstrip(), self.wrapper[0]
            if opening.startswith(lead):
                return False  # it may still be the opening: nothing is sent yet
            if lead.startswith(opening):
                self._answer = lead[len(opening):].lstrip()
                self._marks = [(len(self.generated) - 1, 0)]  # a cut here drops the token that held the opening
            self._unwrapped = True
        stops = self.stops
        if stops:
            first = min((at for at in (self._answer.find(s, max(0, self._sent - len(s) + 1)) for s in stops if s)
                         if at >= 0), default=-1)
            if first >= 0:
                if not self._held:
                    self._send(self._answer[self._sent:first])
                self._answer = self._answer[:first]
                return True
        hold = max((k for stop in stops for k in range(1, len(stop)) if self._answer.endswith(stop[:k])), default=0)
        end = len(self._answer) - hold
        shape = find_shape(self._answer, self.by_name) \
            if self.request.functions and self.request.tool_choice == "auto" else None
        if shape is not None:  # a call written as text, or what may become one: held back from its token
            cut = self._cut(shape.start)
            end = min(end, cut[1])
            if shape.complete:
                self._shape_cut = cut
        if not self._held:  # an answer on trial is held back whole (_result_checked)
            self._send(self._answer[self._sent:max(end, self._sent)])
        return False

    def _cut(self, at: int) -> tuple[int, int]:
        """The last mark (tokens generated, characters of the answer) at or before character ``at`` of the
        answer: the text of the tokens before the one that reaches ``at``."""
        marks = self._marks or [(len(self.generated), 0)]
        return max((m for m in marks if m[1] <= at), default=marks[0])

    def _rewind(self, kept: int) -> None:
        """Go back to ``kept`` generated tokens: the row keeps the keys and values before the last of them and
        feeds it again, so that its next pass gives the logits where the answer goes on."""
        self.generated = self.generated[:kept]
        tokens = self.ids + self.generated
        self.truncate_to = len(tokens) - 1
        self.pending = [tokens[-1]]

    def _written_call(self) -> None:
        """The answer wrote a call as text (:mod:`.shape`): the answer is cut before the token that began it.
        Where the turn may call (``auto``, no call declined), that call is decoded under the grammar from there
        (after the call marker, which is forced, in the "tools" format) and checked as a call after text is;
        elsewhere the model goes back there and picks another token (neither that one nor one that opens a call),
        :data:`SHAPE_RETRIES` times, then the answer ends there."""
        (kept, chars), self._shape_cut = self._shape_cut, None
        self._shape_token = self.generated[kept] if kept < len(self.generated) else None
        self.text_tokens -= len(self.generated) - kept
        self.generated = self.generated[:kept]  # the tokens of the call written as text are not the answer's
        self._answer = self._answer[:chars]
        self._marks = [m for m in self._marks if m[0] <= kept]
        self._utf8.reset()
        if self._may_write_call():
            self._rival = None  # a second answer that calls is not compared with the first
            self._flush_text()
            self._rewind(kept)
            self.text_before_call = (kept, None)
            if self.vocab.marker is not None:
                opening = [self.vocab.marker, *self.vocab.after_marker]
                self._take(opening, forced=True)
                self.pending += opening
            self.mode = "call"
            self._begin_call()
            return
        self._shape_backs += 1
        if self._shape_backs > SHAPE_RETRIES:
            return self._end_text("stop")
        self._back_to_text(kept)

    def _back_to_text(self, kept: int) -> None:
        """Text again from ``kept`` generated tokens, the token that began the call written as text and every
        token that opens a call left out at the first position."""
        self._rewind(kept)
        self.mode = "text"
        bias = self.vocab.text_first.clone()
        if self._shape_token is not None:
            bias[self._shape_token] = float("-inf")
        self._shape_bias = bias

    def _may_write_call(self) -> bool:
        """Whether a call the text answer writes as text becomes a call: under ``auto``, with an index, before
        any decline, where the budget left holds a whole call (:meth:`_call_fits`)."""
        return self.request.tool_choice == "auto" and self.index is not None and not self.declined \
            and self._call_fits()

    def _call_fits(self) -> bool:
        """Whether the tokens the budget still allows hold a whole call from here: its marker and the marker's
        forced newline (in the "tools" call format) and the call's fewest tokens (:meth:`_call_need`)."""
        opening = 1 + len(self.vocab.after_marker) if self.vocab.marker is not None else 0
        return opening + self._call_need() <= self.left

    def _send(self, text: str) -> None:
        if text:
            self._sent += len(text)
            self.content.append(text)
            self.on_event(Event("text", text))

    def _stream(self, tokens: list[int]) -> None:
        """Report the text of ``tokens`` of a JSON answer (whole UTF-8 characters; a split one waits for its
        next bytes)."""
        self._send(self._utf8.decode(b"".join(self.vocab.token_bytes[t] or b"" for t in tokens)))

    def _flush_text(self) -> None:
        """The answer's text is over: send what was held back for the stop texts; bytes of a character the
        budget cut in half are dropped (no replacement character)."""
        self._utf8.reset()
        self._send(self._answer[self._sent:])

    def _begin_call(self) -> None:
        """A new call under the call index, with the budget that is left; a named function is pinned. When
        the budget cannot hold a whole call, the turn ends without one ("length")."""
        if self._call_need() > self.left:
            self.finish_reason = "length"
            self._done()
            return
        self.call_start = len(self.generated)
        self.call = Decoding(self.index, self.vocab.tokenizer, self.left, [], profile=self.profile,
                             pick=self._picker(), lookup=self.lookup)
        if self.request.function is not None:
            self._pin(self.request.function)

    def _begin_json(self) -> None:
        """The JSON answer under the schema's index. Raises InputError when the budget cannot hold it."""
        need = self.schema_index.min_tokens(self.schema_index.start)
        if need > self.left:
            raise InputError(f"max_tokens {self.request.max_tokens} cannot hold a JSON answer: the shortest "
                             f"takes {need} tokens")
        self.call_start = len(self.generated)
        self.call = Decoding(self.schema_index, self.vocab.tokenizer, self.left, [], profile=self.profile,
                             pick=self._picker(), lookup=self.lookup)

    def _call_need(self) -> int:
        """The fewest tokens of a whole call: the index's shortest, or, with a named function, the tokens
        that pin its name (as :meth:`_pin` takes them) and its shortest completion."""
        if self.request.function is None:
            return self.index.min_tokens(self.index.start)
        if self._need is None:
            probe = Decoding(self.index, self.vocab.tokenizer, None, [])
            probe.take_forced()
            tokens = self._name_tokens(self.request.function, probe.matcher.data)
            self._need = self.index.min_tokens(self.index.start)  # no such function: _pin says so
            if tokens is not None:
                try:
                    for tok in tokens:
                        probe.matcher.advance(tok)
                    self._need = len(probe.pending) + len(tokens) + self.index.min_tokens(probe.matcher.state)
                except TokenNotAllowed:
                    pass
        return self._need

    def _name_tokens(self, name: str, data: bytes) -> list[int] | None:
        """The tokens that complete ``{"name": "<name>"`` after ``data`` (the call's text so far: its forced
        text), or None when ``data`` leads elsewhere."""
        target = b'{"name": ' + json.dumps(name, ensure_ascii=False).encode("utf-8")
        if not target.startswith(data) and not data.startswith(target):
            return None
        rest = target[len(data):]
        return self.vocab.tokenizer.encode(rest.decode("utf-8"), add_special_tokens=False) if rest else []

    def _picker(self):
        sampling, gen = self.request.sampling, self.gen
        return None if sampling.greedy else (lambda masked: pick(masked, sampling, gen))

    def _pin(self, name: str) -> None:
        """Walk ``{"name": "<name>"`` through the call index (forced text first), so only that function's
        call can follow. Raises InputError when the index has no such function."""
        matcher = self.call.matcher
        self.call.take_forced()
        self._take(self.call.pending, forced=True)
        self.pending += self.call.pending
        self.call.pending = []
        tokens = self._name_tokens(name, matcher.data)
        if tokens is None:
            raise InputError(f"the call index has no function {name!r}")
        try:
            for tok in tokens:
                matcher.advance(tok)
                self._take([tok], forced=True)
                self.pending.append(tok)
        except TokenNotAllowed:
            raise InputError(f"the call index has no function {name!r}") from None

    def _take(self, tokens: list[int], count_eos: bool = True, forced: bool = False) -> None:
        """Count ``tokens`` as generated, and as ``forced`` (appended without asking the model) if so (EOS
        closing a call is not sent to the model nor counted)."""
        for t in tokens:
            if not count_eos and t in self.vocab.eos_ids:
                continue
            self.generated.append(t)
            self.forced += forced

    def _end_value(self) -> None:
        """A call (or the JSON answer) is complete: report it, then stop or (``parallel``) start another."""
        decoding, self.call = self.call, None
        text = decoding.matcher.data.decode("utf-8", errors="replace")
        if self.mode == "json":  # its text went out token by token
            self._flush_text()
            problem = json_problem(text, self.request.response_schema)
            if problem is not None:
                return self._refuse(f"the answer fails the response schema after generation: {problem}")
            self.finish_reason = "stop"
            self._done()
            return
        try:
            call = to_call(text, self.by_name, self.key)
        except InvalidCall as exc:  # a keyword the grammar does not enforce, failed after generation
            return self._refuse(f"the call fails the check after generation: {exc}")
        except Exception as exc:  # cannot happen for a complete call; never trusted
            self.fail(str(exc))
            return
        arguments, grounding, decoded = call["parameters"], {}, None
        if self.ground is not None and not self.request.keep_unstated:
            decoded = dict(arguments)
            context = self.ids + self.generated[:self.call_start]
            done = self.ground(self.by_name[call["name"]], arguments, context, decoding.matcher.call_tokens())
            arguments, grounding = done.parameters, done.grounding
            self.passes += done.forward_passes  # restating
        asked = request_text(self.request.messages)
        auto = self.request.tool_choice == "auto"
        earlier = self.calls + self.skipped
        if earlier and not another_call(arguments, [c.arguments for c in earlier], asked, call["name"],
                                        [c.name for c in earlier], self.by_name[call["name"]].parameters).keep:
            return self._end_calls()  # a repeat or a guess: the model runs on, the turn is over
        if auto and _repeats(call["name"], (arguments, decoded), self.answered):
            if self.calls:
                return self._end_calls()  # the turn's earlier calls stand
            self.skipped.append(ToolCall(call["name"], arguments, decoded))
            if not self._another_call():  # a parallel turn goes on: a new call may follow the answered one
                self._end_calls()
            return
        if not self.calls and auto:
            doubt = self._doubt(call["name"], arguments, asked)
            if doubt is not None:
                return self._decline(doubt)
        position = len(self.calls)
        self.calls.append(ToolCall(call["name"], arguments, decoded))
        self.grounding.append(grounding)
        if not self.request.parallel:  # a parallel turn's calls wait for its end (_done)
            self._claim()
            self.on_event(Event("call", (position, self.calls[-1])))
        if not self._another_call():  # one call, or no room for another
            self._end_calls()

    def _doubt(self, name: str, arguments: dict, asked: str) -> str | None:
        """Why a decoded first call under "auto" is declined, or None to keep it: with the value check, none of
        its values is in the request; else the model, shown the call (the ``confirm`` callback), doubts it."""
        verdict = first_call(arguments, asked) if self.evidence else None
        if verdict is not None and not verdict.keep:  # a call from nowhere
            return f"{name} would take values the request does not give ({verdict.evidence})"
        if self.confirm is not None:  # after a tool result too (a new call there: docs/call-or-answer.md)
            confirmed = self.confirm(self.by_name[name], asked, arguments)
            self.passes += confirmed.forward_passes
            if not confirmed.keep:  # shown its own call, the model doubts it
                return confirmed.evidence
            self.decision = f"{self.decision}; {confirmed.evidence}" if self.decision else confirmed.evidence
            if len(self.log_odds) == 2:  # the first token's, the verdict's and this one's: all three asked
                total = sum(self.log_odds) + confirmed.log_odds
                if total < self.combined_min:
                    return (f"the model's three log-odds for the call of {name} sum to {total:+.2f} < "
                            f"{self.combined_min:+.2f} (each passed its own threshold)")
        return None

    def _another_call(self) -> bool:
        """In a parallel turn with room for another whole call, force what comes between two calls and begin
        the next; False otherwise. Another call is tried whatever weight the model gives EOS here (see the
        module docstring): the call's closing, a newline, then the marker and its newline."""
        marked = self.vocab.marker is not None
        between = [*(self.vocab.closing if marked else []), self.vocab.newline,
                   *([self.vocab.marker, *self.vocab.after_marker] if marked else [])]
        if not self.request.parallel or len(between) + self._call_need() > self.left:
            return False
        self._take(between, forced=True)
        self.pending += between
        self.mode = "call"
        self._begin_call()
        return True

    def _end_calls(self) -> None:
        """The turn's calls are over: it ends with those it made, or, when the only ones it wrote repeat calls
        the conversation already answered (:attr:`skipped`), it answers in text instead (:meth:`_decline`)."""
        if not self.calls and self.skipped:
            return self._decline(f"{self.skipped[0].name} with these arguments was already called and answered")
        self.finish_reason = "tool_calls"
        self._done()

    def _refuse(self, reason: str) -> None:
        """End the turn without its answer: the check after generation failed it (``reason``, one line). The
        text already streamed stays sent; the result holds no content and no call, and says why."""
        self.refusal = reason
        self.calls, self.grounding = [], []
        self.finish_reason = "content_filter"
        self._over = True
        self.pending = []
        self.on_event(Event("done", self.result()))

    def _decline(self, reason: str) -> None:
        """Answer in text instead of the call just decoded: the turn goes back to where the call began (the
        batch drops the row's keys and values after that point: ``truncate_to``) and the model writes text from
        there, as if it had not called: from its first token, or, when its text turned into the call, after
        that text (already sent), with the call marker masked out. The turn opens no call after a decline (a
        model that wrote the same call again would be declined again, without end). ``reason`` goes to
        ``decision``, not to the answer."""
        self.decision = f"declined a call: {reason}"
        self.declined = True
        self.call, self.pending = None, []
        if self.text_before_call is not None:  # text, then a call: the text stays, the call goes
            kept, logits = self.text_before_call
            self.text_before_call = None
            self.forced = 0  # text tokens: chosen, none forced
            if logits is None:  # a call written as text: the model picks another token where it began
                return self._back_to_text(kept)
            self.truncate_to = len(self.ids) + kept
            self.generated = self.generated[:kept]
            self.mode = "text"
            return self._text(logits, self._text_bias())
        self.generated, self.forced, self.text_tokens = [], 0, 0
        if self._to_text_prompt():
            self.reprompted = None
            return
        self.truncate_to = len(self.ids)
        if self.reprompted is not None:  # the call was decoded under call_ids: back to the answer's prompt
            self.truncate_to, self.ids = self.reprompted  # the shared tokens stay, the rest is fed again
            self.reprompted = None
            self.pending = list(self.ids[self.truncate_to:])
        logits = self.first_logits
        if logits is None:  # a turn that did not decide (cannot happen under "auto"; never trusted)
            self.finish_reason = "stop"
            self._done()
            return
        self._as_text_answer(logits)

    def _claim(self) -> None:
        """Leave out the optional numbers of the turn's calls whose mentions required arguments take
        (:func:`~..policy.evidence.claimed`), when grounding runs."""
        if self.ground is None or self.request.keep_unstated or not self.calls:
            return
        required = [set(self.by_name[c.name].parameters.get("required", [])) for c in self.calls]
        taken = claimed([(c.arguments, r) for c, r in zip(self.calls, required)], request_text(self.request.messages))
        for i, verdicts in enumerate(taken):
            call = self.calls[i]
            arguments, dropped = drop(call.arguments, self.by_name[call.name], sorted(verdicts))
            if dropped:
                self.calls[i] = ToolCall(call.name, arguments, call.model_arguments)
                left_out = {k: {"action": "left out", "evidence": verdicts[k].evidence} for k in dropped}
                self.grounding[i] = {**self.grounding[i], **left_out}

    def _done(self) -> None:
        self.pending = []
        if self.request.parallel:  # joined values given apart, drafts and repeats left out (parallel.settle)
            self._claim()
            self.calls, self.grounding, passes = settle(self.calls, self.grounding, self.by_name,
                                                        request_text(self.request.messages), self.pair)
            self.passes += passes
            for position, call in enumerate(self.calls):
                self.on_event(Event("call", (position, call)))
        self._over = True
        self.on_event(Event("done", self.result()))


def answered_calls(messages: list[dict]) -> list[tuple[str, Any]]:
    """The calls of ``messages`` since the last user message that a tool result answers: (name, arguments as a
    JSON value; ``{}`` where they are left out, null or empty) of each assistant ``tool_calls`` entry after which
    a ``tool`` message comes (by ``tool_call_id`` where both carry ids). Calls answered before the last user
    message do not count: a user who asks again ("and Paris again?") gets a new call, while a loop that would
    call again for the same question does not."""
    since = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    results = [(i, m.get("tool_call_id")) for i, m in enumerate(messages) if m.get("role") == "tool"]
    out = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant" or i < since:
            continue
        for c in m.get("tool_calls") or []:
            if not isinstance(c, dict):
                continue
            fn = c.get("function", c)
            if any(j > i and (not rid or not c.get("id") or rid == c.get("id")) for j, rid in results):
                arguments = fn.get("arguments")
                if arguments is None or arguments == "":  # left out: no arguments, as the prompt shows it
                    arguments = {}
                elif isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except ValueError:  # not JSON (or an integer past the 4,300-digit limit): kept as text
                        pass
                out.append((fn.get("name"), arguments))
    return out


def _after_tool_result(messages: list[dict]) -> bool:
    """True when a tool result came after the last user message (the turn answers from it)."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            return True
        if m.get("role") == "user":
            return False
    return False


def _repeats(name: str, arguments: tuple, answered: list[tuple[str, Any]]) -> bool:
    """True when a call of ``name`` with any of ``arguments`` (after and before grounding; None skipped) is one
    of ``answered`` (:func:`answered_calls`)."""
    return any(n == name and a is not None and a == b for n, b in answered for a in arguments)


def request_text(messages: list[dict]) -> str:
    """The text grounding weighs arguments against: the last user message's text."""
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else ""
    return ""



def _message(exc: Exception) -> str:
    return str(exc) if isinstance(exc, CallmaybeError) else f"{type(exc).__name__}: {exc}"


def json_problem(text: str, schema: dict | None) -> str | None:
    """What is wrong with a JSON answer ``text`` that its grammar did not prevent: a key repeated in one object
    (the grammar of an open object cannot track its keys), or an error against ``schema`` under its draft's
    validator with the format checker (a keyword the grammar does not enforce: ``callmaybe compile
    --explain`` lists them); None when it is valid."""
    from ..decoding.calls import schema_error

    repeated: list[str] = []

    def pairs(items: list) -> dict:
        keys = [k for k, _ in items]
        repeated.extend(k for i, k in enumerate(keys) if k in keys[:i])
        return dict(items)

    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's 4,300-digit limit
        return f"not JSON ({exc})"
    if repeated:
        return f"the key {repeated[0]!r} is given twice in one object"
    return None if schema is None else schema_error(value, schema)
