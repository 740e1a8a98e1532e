"""What one assistant turn is asked to be, and what it became: the request and result types shared by the
batch commands (``run``, ``eval``) and the server.

A turn answers a chat (``messages``) against a list of functions. ``tool_choice`` says what it may be:

* ``"required"``: one call (or, with ``parallel``, one or more), valid for its function's schema; the
  exercise's contract and the default of ``run``;
* ``"auto"``: the model's first token decides between its call marker (then the call is constrained as
  always) and a text answer: the "maybe";
* ``"none"``: a text answer only;
* a named function (``function``): one call of that function (several with ``parallel``).

A ``response_schema`` turns the text answer into JSON valid for that schema (``response_format``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.catalog import Function

TOOL_CHOICES = ("auto", "required", "none")
FINISH_REASONS = ("tool_calls", "stop", "length", "content_filter")
#: The seeds honoured: signed 64-bit integers, OpenAI's range for ``seed``. torch seeds its generator with 64
#: bits, so this is as many seeds as can give distinct draws (:func:`~.sampling.generator`).
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Sampling:
    """How a token is picked among those the mask allows: greedy when ``temperature`` is 0; else softmax at
    ``temperature`` over the allowed tokens, cut to the smallest set whose probability reaches ``top_p``
    (nucleus sampling, Holtzman et al., ICLR 2020), drawn from a generator seeded with ``seed`` (None: a
    random seed), so that a seed reproduces a turn."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass
class TurnRequest:
    """One assistant turn to produce.

    ``messages``: OpenAI chat messages (``{"role": "system"|"user"|"assistant"|"tool", "content": ...}``; an
    assistant message may hold ``tool_calls``, a tool message ``tool_call_id`` and ``name``), already
    validated. ``functions``: the tools. ``tool_choice``: one of :data:`TOOL_CHOICES`; ``function``: the
    name of the one function to call (then ``tool_choice`` is "required"). ``parallel``: one or more calls
    instead of exactly one. ``max_tokens``: the budget of the whole turn in tokens (text, markers and calls;
    a call is always complete within it). ``response_schema``: the JSON schema a text answer must match
    (its index is passed to the engine). ``keep_unstated``: skip grounding (:mod:`..policy.evidence`).
    ``text_tokens``: stop a free text answer after this many tokens ("length"; ``eval`` grades a declined
    request by "no call" only, so it need not read the whole text); None: only ``max_tokens`` bounds it.
    ``stop``: texts that end a free text answer where they first appear (not included; finish "stop").
    ``call_threshold``: under "auto", the log-odds (nats) at which the model's odds of calling make the turn a
    call (:mod:`..policy.decision`); None: the engine's (``RunConfig.call_threshold``).
    """

    messages: list[dict[str, Any]]
    functions: list[Function] = field(default_factory=list)
    tool_choice: str = "required"
    function: str | None = None
    parallel: bool = False
    max_tokens: int = 256
    sampling: Sampling = field(default_factory=Sampling)
    response_schema: dict[str, Any] | None = None
    keep_unstated: bool = False
    text_tokens: int | None = None
    stop: tuple[str, ...] = ()
    call_threshold: float | None = None


@dataclass
class ToolCall:
    """One call of a turn: the function's name and its arguments (valid for its schema); ``model_arguments``:
    the arguments as decoded, before grounding (None when grounding did not run)."""

    name: str
    arguments: dict[str, Any]
    model_arguments: dict[str, Any] | None = field(default=None, compare=False)


@dataclass
class TurnResult:
    """What a turn became: ``content`` (the text answer, or None), ``calls`` (in order), ``finish_reason``
    (one of :data:`FINISH_REASONS`: "tool_calls" when it called, "stop" for a finished text, "length" for a
    text the budget cut; never "length" for a call), token counts and seconds (wall time from the start of
    the turn to its end). ``grounding``: per call, what grounding did to each argument (:func:`..answering.runner.outcomes`).
    ``forward_passes``: the model passes the turn took (restating included); ``forced_tokens``: the tokens of
    its ``completion_tokens`` appended without asking the model (forced text, markers). ``decision``: under
    "auto", why the turn called or answered in text (:mod:`..policy.decision`; a call declined after it was decoded
    says why), for ``--trace``, ``eval --output`` and the server's log, never for ``content``. ``refusal``:
    why the answer was withheld, when the check after generation failed it (a keyword the grammar does not
    enforce: then ``content`` is None, ``calls`` empty and ``finish_reason`` "content_filter"); None
    otherwise. ``drafted_tokens``/``accepted_tokens``: speculation's draft tokens proposed and taken."""

    content: str | None
    calls: list[ToolCall]
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    grounding: list[dict] = field(default_factory=list)
    forward_passes: int = 0
    forced_tokens: int = 0
    decision: str | None = None
    refusal: str | None = None
    drafted_tokens: int = 0
    accepted_tokens: int = 0


@dataclass(frozen=True)
class Event:
    """One report of a turn's progress, passed to a turn's ``on_event`` callback: ``kind`` "text" (``data``
    more text of the answer), "call" ((position, :class:`ToolCall`)), "done" (the :class:`TurnResult`) or
    "error" (a one-line message). See :mod:`..answering.engine`."""

    kind: str
    data: Any
