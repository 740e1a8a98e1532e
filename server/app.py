"""The routes: ``POST /v1/chat/completions``, ``GET /v1/models`` (and ``/v1/models/{id}``), ``GET /health``;
``POST /v1/responses`` is :mod:`.responses`'.

A request is checked (:mod:`.protocol`), its tools' index found or compiled off the event loop
(:mod:`.tools`), and its turn submitted to the engine (:mod:`.submit`), whose events (called on the engine's thread) reach
the request through an asyncio queue. A client that goes away, while its turn waits or while it streams,
has its turn cancelled. Every error leaves as an API error object (:mod:`.errors`); the server keeps serving.
"""

from __future__ import annotations

import asyncio
import hmac
from contextlib import aclosing
import logging
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from ..core.errors import CallmaybeError, CatalogError
from .errors import ApiError, bad_request, not_found, one_line, server_error, unauthorized
from .protocol import DONE, ChatRequest, Completion, parse_chat, sse
from .limits import json_body
from .responses import create_response
from .submit import EngineLike, engine_error, events_of, start_turn
from .tools import IndexCache

log = logging.getLogger("callmaybe.server")


def create_app(engine: EngineLike, indexes: IndexCache, model: str, api_key: str | None = None,
               info: dict[str, Any] | None = None) -> FastAPI:
    """The FastAPI application serving ``model`` with ``engine`` (started and closed by the caller).

    ``indexes``: the index cache (:class:`~.tools.IndexCache`). ``api_key``: when set, every ``/v1`` route
    needs ``Authorization: Bearer <api_key>`` (else 401). ``info``: more fields for ``/health``
    (``max_batch``, ``max_queue`` ...).
    """
    app = FastAPI(title="callmaybe", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.engine, app.state.indexes, app.state.model = engine, indexes, model
    _handlers(app)

    def authorized(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
            raise unauthorized()

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(authorized)])

    @v1.get("/models")
    async def models() -> dict[str, Any]:
        """The one served model."""
        return {"object": "list", "data": [_model_card(model)]}

    @v1.get("/models/{name:path}")
    async def model_card(name: str) -> dict[str, Any]:
        """The served model by name; 404 for any other."""
        if name != model:
            raise ApiError(404, f"the model {name!r} does not exist; this server serves {model!r}",
                           param="model", code="model_not_found")
        return _model_card(model)

    @v1.post("/chat/completions")
    async def chat_completions(request: Request) -> Response:
        """One assistant turn, whole (``chat.completion``) or streamed (server-sent ``chat.completion.chunk``
        events, then ``[DONE]``)."""
        try:
            return await _chat(request, engine, indexes, model)
        except ApiError:
            raise
        except ClientDisconnect:  # hung up before its body was read: normal, nobody to answer
            log.debug("client hung up before its request was read")
            return Response(status_code=499)
        except CatalogError as exc:  # SchemaError included: a schema the compiler refuses
            raise bad_request(str(exc), "tools") from None
        except CallmaybeError as exc:
            raise bad_request(str(exc)) from None
        except Exception as exc:  # anything unexpected: one line in the log and to the client
            log.error("chat completion failed: %s: %s", type(exc).__name__, one_line(str(exc), 300))
            raise server_error(f"internal error ({type(exc).__name__}): {one_line(str(exc), 300)}") from None

    @v1.post("/responses")
    async def responses(request: Request) -> Response:
        """One assistant turn in OpenAI's Responses API: a ``response`` object, or its stream of events."""
        return await create_response(request, engine, indexes, model)

    app.include_router(v1)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """``{"status": "ok", "model", "queued", "decoding", "indexes", "compiling", ...}``: turns waiting
        for a row, rows decoding, indexes in memory, tool lists being compiled."""
        return {"status": "ok", "model": model, "queued": engine.queued, "decoding": engine.decoding,
                "indexes": len(indexes), "compiling": indexes.compiling, **(info or {})}

    return app


def _model_card(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": "callmaybe"}


def _handlers(app: FastAPI) -> None:
    """Every error as an API error object: ours, routing's (404, 405), validation's (400), anything else's
    (500, one line)."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            err = not_found(f"no route {request.method} {request.url.path}")
        else:
            err = ApiError(exc.status_code, str(exc.detail), "invalid_request_error" if exc.status_code < 500
                           else "server_error")
        return JSONResponse(err.body(), status_code=err.status, headers={**(exc.headers or {}), **err.headers})

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(bad_request(f"invalid request: {exc.errors()[:1]}").body(), status_code=400)

    @app.exception_handler(Exception)
    async def any_error(request: Request, exc: Exception) -> JSONResponse:
        err = server_error(f"internal error ({type(exc).__name__})")
        return JSONResponse(err.body(), status_code=500)


async def _chat(request: Request, engine: EngineLike, indexes: IndexCache, model: str) -> Response:
    chat = parse_chat(await json_body(request), model)
    ticket, events = await start_turn(engine, indexes, chat.turn, chat.schema_name, "response_format")
    if chat.stream:
        return StreamingResponse(_stream(request, engine, ticket, events, chat), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
    return await _whole(request, engine, ticket, events, chat)


async def _whole(request: Request, engine: EngineLike, ticket: Any, events: asyncio.Queue,
                 chat: ChatRequest) -> Response:
    finished = False
    try:
        async with aclosing(events_of(request, events)) as stream:
            async for event in stream:
                if event.kind == "done":
                    finished = True
                    return JSONResponse(Completion(chat.model).whole(event.data))
                if event.kind == "error":
                    finished = True
                    raise engine_error(str(event.data))
        return Response(status_code=499)  # the client went away; nobody reads this
    finally:
        if not finished:
            engine.cancel(ticket)


async def _stream(request: Request, engine: EngineLike, ticket: Any, events: asyncio.Queue, chat: ChatRequest):
    completion = Completion(chat.model)
    usage = chat.include_usage
    finished = False
    try:
        yield sse(completion.first(usage))
        async with aclosing(events_of(request, events)) as stream:
            async for event in stream:
                if event.kind == "text":
                    yield sse(completion.text(event.data, usage))
                elif event.kind == "call":
                    position, call = event.data
                    yield sse(completion.call(position, call, usage))
                elif event.kind == "done":
                    finished = True
                    for chunk in completion.last(event.data, usage):
                        yield sse(chunk)
                    yield DONE
                elif event.kind == "error":
                    finished = True
                    yield sse(engine_error(str(event.data)).body())
                    yield DONE
    finally:
        if not finished:
            engine.cancel(ticket)
