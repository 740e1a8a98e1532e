"""The engine: one thread that owns the model and decodes every submitted turn, concurrent turns as rows of one
forward pass (:mod:`..decoding.batch`).

The server and the batch commands submit :class:`~..decoding.turn.TurnRequest` s; the engine reports each turn's
progress through its ``on_event`` callback, called on the engine's thread:

* ``Event("text", text)``: more text of the answer (streamed token by token, whole UTF-8 characters);
* ``Event("call", (position, ToolCall))``: a call is final (decoded, checked, grounded);
* ``Event("done", TurnResult)``: the turn is over; nothing follows;
* ``Event("error", message)``: the turn failed (one line); nothing follows.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator

from ...core.errors import CallmaybeError, InputError
from ..policy.decision import CALL_LOG_ODDS_MIN, COMBINED_LOG_ODDS_MIN
from ..policy.relevance import VERDICT_LOG_ODDS_MIN
from ..decoding.turn import Event


class QueueFull(CallmaybeError):
    """The engine's queue holds as many turns as it may; the caller should retry later."""


class EngineClosed(CallmaybeError):
    """The engine is shutting down and takes no more turns."""


class Ticket:
    """A submitted turn: its request, prompt ids, callback and (once admitted) its row."""

    def __init__(self, request, ids: list[int], prefix_len: int, on_event: Callable[[Event], None],
                 index, schema_index):
        self.request, self.ids, self.prefix_len, self.on_event = request, ids, prefix_len, on_event
        self.index, self.schema_index = index, schema_index
        self.call_ids: list[int] | None = None  # under "auto": the prompt a call is decoded under (TurnDecoding)
        self.text_ids: list[int] | None = None  # under "auto": the prompt a declined turn answers under
        self.row = None
        self.cancelled = False
        self.over = False


class Engine:
    """Decodes submitted turns, up to ``max_batch`` at once as rows of one forward pass (:mod:`..decoding.batch`), on one
    thread that owns the model (:meth:`start`), or in the caller's thread (:meth:`drain`).

    ``runtime``: a loaded :class:`~.session.Runtime` (model, tokenizer, vocabulary, call format, prefix
    cache). ``max_queue``: how many turns may wait for a row; :meth:`submit` raises QueueFull past it.
    A turn joins the next forward pass as soon as a row is free; a finished or cancelled turn leaves at once.
    ``prefill_chunk`` (the server's): while other rows decode, a new row's prompt, a new catalog's prefix
    included, is fed this many tokens per step (:class:`~..decoding.batch.Batch` ``chunk``) instead of in a
    pass of its own; None (``run``, ``eval``: throughput before latency): all at once. ``prefill_share``
    (with a chunk): the chunk shrinks so that the decoding rows' step takes at most ``1 + prefill_share``
    times as long as without it (:class:`~..decoding.batch.Batch` ``share``; None: ``prefill_chunk`` tokens).
    """

    def __init__(self, runtime, max_batch: int = 8, max_queue: int = 64, prefill_chunk: int | None = None,
                 prefill_share: float | None = None):
        from .turns import Vocab

        self.runtime = runtime
        self.max_batch, self.max_queue = max(1, max_batch), max_queue
        self.prefill_chunk, self.prefill_share = prefill_chunk, prefill_share
        loaded = runtime.loaded
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.judge = getattr(runtime.config, "relevance_check", True)  # relevance of first calls under auto
        self.confirm = getattr(runtime.config, "confirm_check", True)  # the model's verdict on a decoded first call
        self.result_check = getattr(runtime.config, "result_check", True)  # a text answer after a tool result uses it
        from ...core.callformat import call_format_of

        self.call_format = call_format_of(runtime.options)
        v = runtime.vocabulary
        self.vocab = Vocab(v.token_bytes, v.eos_ids, v.vocab_size, self.tokenizer, self.call_format)
        self.context: int | None = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        self._queue: deque[Ticket] = deque()
        self._rows: list[Ticket] = []
        self._lock = threading.Condition()
        self._tokenizing = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._prefix_lengths: dict[tuple, tuple[int, list[int]]] = {}  # -> (shared length, a reference prompt)
        self._batch = None

    @property
    def queued(self) -> int:
        """Turns waiting for a row."""
        return len(self._queue)

    @property
    def decoding(self) -> int:
        """Turns decoding now."""
        return len(self._rows)

    def prompt_ids(self, request) -> tuple[list[int], int]:
        """The prompt's token ids of ``request`` and how many of them every chat with the same tools and
        choices shares (the catalog prefix, kept by the prefix cache). Raises InputError when a message is
        not valid Unicode, the chat template cannot render the messages or the prompt fills the model's
        context."""
        from ...core.catalog import catalog_fingerprint
        from ..decoding.prompt import chat_ids

        opening = request.function is not None or request.tool_choice == "required"
        opening = opening and bool(request.functions) and self.call_format == "tools"
        options = (self.call_format, opening, request.tool_choice, request.parallel)
        functions = request.functions if request.tool_choice != "none" or self.call_format == "tools" else []
        for text in _texts(request.messages):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise input_error("a message holds text that is not valid Unicode (a lone surrogate)",
                                  "messages") from None
        try:
            with self._tokenizing:  # submits come from several threads; the engine's own use only reads
                ids = chat_ids(self.tokenizer, functions, request.messages, *options)
        except ValueError as exc:
            raise input_error(str(exc), "messages") from None
        if self.context is not None and len(ids) + 1 >= self.context:
            raise input_error(f"the prompt is {len(ids)} tokens; the model's context is {self.context}",
                              "messages")
        key = (catalog_fingerprint(functions), *options, tuple(f.description for f in functions))
        with self._tokenizing:
            return ids, self._prefix_length(key, functions, options, ids)

    def call_prompt_ids(self, request) -> list[int] | None:
        """Under "auto" in the "plain" call format: the prompt a call the model decided on is decoded under, the
        same chat with the "required" system message (the "auto" one adds a sentence after the catalog,
        :data:`~..decoding.prompt.AUTO_CLAUSE`, so the two share every token before it). None otherwise (the
        "tools" format's prompt is the chat template's, the same for both)."""
        from ..decoding.prompt import chat_ids

        if request.tool_choice != "auto" or self.call_format != "plain" or not request.functions:
            return None
        with self._tokenizing:
            return chat_ids(self.tokenizer, request.functions, request.messages, self.call_format, False,
                            "required", request.parallel)

    def text_prompt_ids(self, request) -> list[int] | None:
        """Under "auto" with tools: the prompt a declined turn writes its text answer under, the same chat
        (system message, earlier calls and tool results included) rendered without the catalog, as
        ``tool_choice="none"`` renders it in the "plain" call format. None otherwise."""
        from ..decoding.prompt import chat_ids

        if request.tool_choice != "auto" or not request.functions:
            return None
        with self._tokenizing:
            return chat_ids(self.tokenizer, [], request.messages, self.call_format, False, "none",
                            request.parallel)

    def _prefix_length(self, key: tuple, functions, args: tuple, ids: list[int]) -> int:
        """The catalog prefix length of ``ids`` (see :meth:`prompt_ids`), from a reference prompt per key."""
        from ..decoding.prompt import chat_ids, common_length

        if key not in self._prefix_lengths:
            if len(self._prefix_lengths) >= 256:
                self._prefix_lengths.clear()
            a = chat_ids(self.tokenizer, functions, [{"role": "user", "content": "Request one?"}], *args)
            b = chat_ids(self.tokenizer, functions, [{"role": "user", "content": "Another request entirely."}], *args)
            self._prefix_lengths[key] = (common_length(a, b), a)
        shared, reference = self._prefix_lengths[key]
        return min(shared, common_length(ids, reference), len(ids) - 1)

    def submit(self, request, on_event: Callable[[Event], None], index=None, schema_index=None) -> Ticket:
        """Queue ``request`` (a :class:`~..decoding.turn.TurnRequest`); its events go to ``on_event``, on the engine's
        thread. ``index``: the call index of ``request.functions``; ``schema_index``: the index of its
        ``response_schema``. Raises InputError (a prompt past the context, messages the template cannot
        render, a named function not among the tools, a call required without tools, a ``max_tokens`` that cannot
        hold the call or JSON answer required), QueueFull or EngineClosed."""
        if request.function is not None and request.function not in {f.name for f in request.functions}:
            raise input_error(f"tool_choice names {request.function!r}, which is not among the tools", "tool_choice")
        if index is None and request.functions and request.tool_choice != "none":
            raise InputError("the tools have no index")
        if request.response_schema is not None and schema_index is None:
            raise InputError("the response schema has no index")
        ids, prefix_len = self.prompt_ids(request)
        left = None if self.context is None else self.context - len(ids)
        if left is not None and left < request.max_tokens:  # the answer must fit the context too
            request = replace(request, max_tokens=left)
        ticket = Ticket(request, ids, prefix_len, on_event, index, schema_index)
        ticket.call_ids = self.call_prompt_ids(request)
        ticket.text_ids = self.text_prompt_ids(request)
        try:
            self._row(ticket)  # checks the budget and the named function now, in the caller's thread
        except InputError as exc:
            if left is not None and request.max_tokens == left and str(exc).startswith("max_tokens"):
                raise input_error(f"the prompt is {len(ids)} tokens; the model's context ({self.context}) leaves "
                                  f"{left} for the answer: {str(exc).split(': ', 1)[-1]}", "messages") from None
            raise input_error(str(exc), "max_tokens" if str(exc).startswith("max_tokens") else "messages") \
                from None
        with self._lock:
            if self._closed:
                raise EngineClosed("the server is shutting down")
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"{len(self._queue)} requests are waiting (the queue holds {self.max_queue}); "
                                "retry later")
            self._queue.append(ticket)
            self._lock.notify()
        return ticket

    def cancel(self, ticket: Ticket) -> None:
        """Forget ``ticket``: it leaves the queue, or its row leaves the batch before the next step; no more
        events."""
        with self._lock:
            ticket.cancelled = True
            if ticket in self._queue:
                self._queue.remove(ticket)
            self._lock.notify()

    def start(self) -> None:
        """Decode on a daemon thread until :meth:`close`."""
        self._thread = threading.Thread(target=self._serve, name="callmaybe-engine", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread; turns still queued or decoding get ``Event("error", "server shutting down")``."""
        with self._lock:
            self._closed = True
            self._lock.notify()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for t in list(self._queue) + self._rows:
            self._emit(t, Event("error", "server shutting down"))
        self._queue.clear()
        self._rows = []

    def drain(self) -> None:
        """Decode in the caller's thread until every submitted turn is over."""
        while self._queue or self._rows:
            self._round()

    def answer(self, items: Iterable[tuple[Any, Any, Any]]) -> Iterator[tuple[int, Any]]:
        """Decode ``(request, index, schema_index)`` items in the caller's thread (for ``run`` and ``eval``),
        ``max_batch`` at a time, the next joining as soon as a row is free. Yields (position in ``items``,
        :class:`~..decoding.turn.TurnResult` or an error message) as each turn ends, so not in order."""
        todo = iter(enumerate(items))
        finished: deque[tuple[int, Any]] = deque()
        exhausted = False
        while True:
            while not exhausted and len(self._queue) + len(self._rows) < self.max_batch:
                try:
                    position, (request, index, schema_index) = next(todo)
                except StopIteration:
                    exhausted = True
                    break

                def on_event(event: Event, position: int = position) -> None:
                    if event.kind in ("done", "error"):
                        finished.append((position, event.data))
                try:
                    self.submit(request, on_event, index, schema_index)
                except CallmaybeError as exc:
                    finished.append((position, str(exc)))
            while finished:
                yield finished.popleft()
            if exhausted and not self._queue and not self._rows:
                return
            self._round()

    # -- the decoding loop ---------------------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._queue and not self._rows:
                    self._lock.wait()
                if self._closed:
                    return
            try:
                self._round()
            except Exception as exc:  # never let the thread die: fail what was decoding, go on
                for t in self._rows:
                    self._emit(t, Event("error", f"{type(exc).__name__}: {exc}"))
                self._rows = []
                self._batch = None

    def _emit(self, ticket: Ticket, event: Event) -> None:
        if ticket.cancelled or ticket.over:
            return
        if event.kind in ("done", "error"):
            ticket.over = True
        try:
            ticket.on_event(event)
        except Exception:  # a callback's failure is the caller's; the engine goes on
            pass

    def _round(self) -> None:
        """Admit waiting turns into free rows, drop cancelled rows, then one forward pass for all rows (new
        rows' prompts included: :func:`~..decoding.batch.enter`)."""
        from ..decoding.batch import Batch, enter, start

        if self._batch is None:
            self._batch = Batch(self.model, self.runtime.profile, self.prefill_chunk, self.prefill_share,
                                rows=self.max_batch)
        batch = self._batch
        cancelled = [t for t in self._rows if t.cancelled]
        if cancelled:
            batch.remove([t.row for t in cancelled])
            self._rows = [t for t in self._rows if not t.cancelled]
        while len(self._rows) < self.max_batch:
            with self._lock:
                if not self._queue:
                    break
                ticket = self._queue.popleft()
            try:
                row = ticket.row
                # its prompt is fed in the batch's next step (with the prefix's keys and values), or alone
                started = enter(row, ticket.ids, self.runtime.prefix, ticket.prefix_len,
                                fold=self.prefill_chunk is not None)
                if started is None:
                    started = start(self.model, row, ticket.ids, self.runtime.prefix, ticket.prefix_len)
            except Exception as exc:
                self._emit(ticket, Event("error", _message(exc)))
                continue
            if started.kv is None or row.finish_reason is not None:
                continue  # over after its first token; its events are out
            batch.join(started)
            self._rows.append(ticket)
        if not self._rows:
            return
        wait = batch.anticipation()  # the client just answered may be sending its next request
        if wait > 0:
            with self._lock:
                if not self._queue and not self._closed:
                    self._lock.wait(wait)
                if self._queue or self._closed:
                    return  # the next round admits it first
        try:
            done = batch.step()
        except Exception as exc:  # out of memory, or a bug: every row of the step fails, the engine goes on
            batch.drop_all()
            for t in self._rows:
                self._emit(t, Event("error", _message(exc)))
            self._rows = []
            return
        gone = {id(r) for r in done}
        self._rows = [t for t in self._rows if id(t.row) not in gone]

    def _row(self, ticket: Ticket):
        from ..policy.parallel import pair_probability
        from ..policy.confirm import confirm
        from ..policy.relevance import relevance
        from .runner import ground
        from ..decoding.prompt import common_length
        from .turns import TurnDecoding, request_text

        request = ticket.request
        config = self.runtime.config
        text = request_text(request.messages)
        cached = ticket.prefix_len if self.runtime.prefix.enabled and ticket.prefix_len > 0 else 0

        def grounded(fn, arguments, context, tokens):  # context: the call's prompt, ids or call_ids
            return ground(self.model, ticket.index, fn, arguments, text, context, tokens, self.runtime.prefix,
                          min(ticket.prefix_len, common_length(context, ticket.ids)), self.runtime.profile)

        def judged(functions, asked):
            with self.runtime.profile.timed("relevance pass"):
                return relevance(self.model, self.tokenizer, functions, asked,
                                 getattr(config, "verdict_threshold", VERDICT_LOG_ODDS_MIN))

        def confirmed(fn, asked, arguments):
            with self.runtime.profile.timed("confirm pass"):
                return confirm(self.model, self.tokenizer, fn, asked, arguments)

        def used(with_results, answer):  # the PMI of an answer written without the catalog with the results
            from ..decoding.prompt import chat_ids
            from ..policy.result_use import emptied_results, result_use

            with self._tokenizing:
                without = chat_ids(self.tokenizer, [], emptied_results(request.messages), self.call_format, False,
                                   "none", request.parallel)
            with self.runtime.profile.timed("result pass"):
                return result_use(self.model, with_results, without, answer)

        def paired(key, first, second):
            with self.runtime.profile.timed("pair pass"):
                return pair_probability(self.model, self.tokenizer, key, first, second)

        row = TurnDecoding(request, self.vocab, ticket.ids, ticket.ids[cached:], ticket.index, ticket.schema_index,
                           grounded, lambda e: self._emit(ticket, e), self.runtime.profile,
                           judged if request.tool_choice == "auto" and self.judge else None,
                           paired if request.parallel and not request.keep_unstated else None,
                           evidence=getattr(config, "evidence_check", True),
                           threshold=getattr(config, "call_threshold", CALL_LOG_ODDS_MIN),
                           confirm=confirmed if request.tool_choice == "auto" and self.confirm else None,
                           speculate=getattr(config, "speculate", True), call_ids=ticket.call_ids,
                           combined_min=getattr(config, "combined_threshold", COMBINED_LOG_ODDS_MIN),
                           text_ids=ticket.text_ids,
                           result_check=used if request.tool_choice == "auto" and self.result_check else None)
        ticket.row = row
        return row


def input_error(message: str, param: str) -> InputError:
    """An InputError whose ``param`` names the request field at fault (the server's error objects say it)."""
    exc = InputError(message)
    exc.param = param
    return exc


def _texts(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _texts(k)
            yield from _texts(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _texts(v)


def _message(exc: Exception) -> str:
    return str(exc) if isinstance(exc, CallmaybeError) else f"{type(exc).__name__}: {exc}"
