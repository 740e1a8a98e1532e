"""A turn between a route and the engine: submitting it (its indexes found or compiled first), reading its
events back until it is done or the client goes away, and the API error of a turn the engine failed. Shared
by the chat route (:mod:`.app`) and the Responses route (:mod:`.responses`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from fastapi import Request

from ..core.errors import CatalogError, InputError
from ..runtime.answering.engine import EngineClosed, QueueFull
from ..runtime.decoding.turn import Event, TurnRequest
from .errors import ApiError, bad_request, one_line, server_error, too_many, unavailable
from .tools import IndexCache

log = logging.getLogger("callmaybe.server")


class EngineLike(Protocol):
    """What the server needs of :class:`callmaybe.runtime.answering.engine.Engine`."""

    def submit(self, request: TurnRequest, on_event, index=None, schema_index=None) -> Any: ...

    def cancel(self, ticket: Any) -> None: ...

    @property
    def queued(self) -> int: ...

    @property
    def decoding(self) -> int: ...


async def start_turn(engine: EngineLike, indexes: IndexCache, turn, schema_name: str | None,
                     schema_param: str) -> tuple[Any, asyncio.Queue]:
    """Find or compile the indexes of ``turn`` (its tools unless ``tool_choice`` is "none"; its response schema,
    named ``schema_name``) and submit it; returns (ticket, the queue its events arrive on). Shared by the chat
    and Responses routes. Raises ApiError 400 (param ``schema_param``) for a response schema the compiler
    refuses, and what :func:`submit` raises."""
    index = await indexes.for_tools(turn.functions) if turn.functions and turn.tool_choice != "none" else None
    schema_index = None
    if turn.response_schema is not None:
        try:
            schema_index = await indexes.for_schema(schema_name, turn.response_schema)
        except CatalogError as exc:
            raise bad_request(str(exc), schema_param) from None
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Event] = asyncio.Queue()

    def on_event(event: Event) -> None:  # on the engine's thread
        loop.call_soon_threadsafe(events.put_nowait, event)

    return await submit(engine, turn, on_event, index, schema_index), events


async def submit(engine: EngineLike, turn: TurnRequest, on_event, index, schema_index) -> Any:
    """Submit in a worker thread (it tokenizes the prompt). Raises ApiError 400 for a prompt the engine
    refuses (too long for the context, a template that cannot render it), 429 when its queue is full, 503 when
    it is shutting down."""
    future = asyncio.get_running_loop().run_in_executor(None, engine.submit, turn, on_event, index, schema_index)
    try:
        return await asyncio.shield(future)
    except InputError as exc:
        raise bad_request(str(exc), getattr(exc, "param", "messages")) from None
    except QueueFull as exc:
        raise too_many(f"the server is busy: {exc}", code="queue_full") from None
    except EngineClosed as exc:
        raise unavailable(str(exc)) from None
    except asyncio.CancelledError:  # the request went away while submitting: free the turn once it exists
        future.add_done_callback(lambda f: f.cancelled() or f.exception() or engine.cancel(f.result()))
        raise


async def disconnected(request: Request) -> None:
    """Return when the client goes away (the body is read already, so the next message is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def events_of(request: Request, events: asyncio.Queue):
    """The turn's events until ``done`` or ``error`` (included); stops early, without it, when the client
    goes away. Every task it starts is cancelled when it ends, however it ends (Starlette cancels a stream
    whose client hung up while it waits here)."""
    gone = asyncio.ensure_future(disconnected(request))
    getter: asyncio.Future | None = None
    try:
        while True:
            if events.empty():
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    return
                event, getter = getter.result(), None
            else:
                event = events.get_nowait()
            if event.kind == "done" and getattr(event.data, "decision", None):
                log.info("call or answer: %s", event.data.decision)  # never the answer's content
            yield event
            if event.kind in ("done", "error"):
                return
    finally:
        gone.cancel()
        if getter is not None:
            getter.cancel()


def engine_error(message: str) -> ApiError:
    """The API error of a turn the engine failed: 503 while shutting down; else 500 with the engine's one-line
    message (an answer that fails a keyword the grammar does not enforce says which), logged."""
    if "shutting down" in message:
        return unavailable(message)
    log.warning("turn failed: %s", one_line(message, 300))
    return server_error(message)
