"""OpenAI's Responses API (``POST /v1/responses``): a request body in, the same
:class:`~callmaybe.runtime.decoding.turn.TurnRequest` the chat completions route builds (:mod:`.protocol`) out; the
turn's result or events in, a ``response`` object or the Responses stream of events out.

The request: ``input`` (a string, or a list of items: messages with role ``user``, ``system``, ``developer``
or ``assistant`` and content as a string or ``input_text``/``output_text`` parts; ``function_call`` items
``{call_id, name, arguments}``; ``function_call_output`` items ``{call_id, output}``), ``instructions`` (a
system message before the input), function ``tools`` (``{"type": "function", "name", "description",
"parameters", "strict"}``), ``tool_choice`` (``auto``, ``none``, ``required`` or ``{"type": "function",
"name"}``), ``parallel_tool_calls``, ``max_output_tokens``, ``temperature``, ``top_p``, ``text.format``
(``text``, ``json_object`` or ``json_schema``: enforced like the chat route's ``response_format``),
``stream`` and ``store``. This server keeps no responses: ``store`` is accepted and nothing is stored, and
``previous_response_id`` (like ``conversation`` and ``item_reference`` items) is refused with a 400 that says
to send the whole conversation in ``input``. An option this server would otherwise ignore is refused with a
400 naming it (:data:`UNSUPPORTED`); other unknown fields are ignored, as on the chat route.

The events of a stream (server-sent, ``event: <type>`` and ``data: <json>``, each with its
``sequence_number``, no ``[DONE]``): ``response.created``, ``response.in_progress``; for a text answer
``response.output_item.added`` (a message), ``response.content_part.added``, ``response.output_text.delta``
per piece of text, ``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done``; for each call, once it is final, ``response.output_item.added`` (a
``function_call`` with empty arguments), one ``response.function_call_arguments.delta`` with all of them,
``response.function_call_arguments.done``, ``response.output_item.done``; then ``response.completed`` (or
``response.incomplete`` when the text reached ``max_output_tokens``), whose response holds every item
streamed. A turn that fails ends with an ``error`` event and ``response.failed``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..core.catalog import check_schema
from ..core.errors import CallmaybeError, CatalogError
from ..runtime.decoding.turn import ToolCall, TurnRequest, TurnResult
from .errors import ApiError, bad_request, model_not_found, one_line, server_error
from .limits import json_body
from .submit import EngineLike, engine_error, events_of, start_turn
from .protocol import DEFAULT_MAX_TOKENS, JSON_OBJECT, _get, _json_type, i_d, parse_sampling, parse_tools
from .tools import IndexCache

log = logging.getLogger("callmaybe.server")

#: The roles a message item may have (``developer`` is read as ``system``).
INPUT_ROLES = ("user", "system", "developer", "assistant")
#: The content parts a message item may hold: text only.
TEXT_PARTS = ("input_text", "output_text", "text")
#: Options this server does not implement, with the values that ask for nothing: a request that gives
#: another value is refused (400 naming the field) instead of being answered as if it had not.
UNSUPPORTED = {"previous_response_id": (None,), "conversation": (None,), "prompt": (None,),
               "background": (None, False), "top_logprobs": (None, 0), "truncation": (None, "disabled"),
               "context_management": (None, [])}
#: What each refused option would need.
_WHY = {"previous_response_id": "this server keeps no responses (store is accepted, nothing is stored); send "
                                "the whole conversation in 'input'",
        "conversation": "this server keeps no conversations; send the whole conversation in 'input'",
        "prompt": "this server keeps no prompt templates; send 'instructions' and 'input'",
        "background": "responses are answered while the request waits (or streamed)",
        "top_logprobs": "log probabilities are not returned",
        "truncation": "a conversation longer than the context is refused, never truncated",
        "context_management": "the conversation is never compacted"}


@dataclass
class ResponsesRequest:
    """A checked Responses request: the ``turn`` to produce, whether to ``stream`` it, the name of its
    response schema (``schema_name``, None without one) and ``echo``: the settings the response object
    repeats (``instructions``, ``tools``, ``tool_choice``, ``text`` ...)."""

    model: str
    turn: TurnRequest
    stream: bool = False
    schema_name: str | None = None
    echo: dict[str, Any] = field(default_factory=dict)


def parse_responses(body: Any, served_model: str) -> ResponsesRequest:
    """Check a decoded ``/v1/responses`` body and turn it into a :class:`ResponsesRequest`.

    Raises ApiError 400 naming the field (``param``) for a body that is not an object, a missing or mistyped
    field, a bad value, an unsupported option (:data:`UNSUPPORTED`, ``reasoning``, logprobs in ``include``),
    a tool that is not a function tool or that the catalog reader refuses, a ``function_call_output`` that
    answers no ``function_call`` of the input; ApiError 404 (``model_not_found``) when ``model`` is not
    ``served_model``.
    """
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    model = _get(body, "model", str, required=True)
    if model != served_model:
        raise model_not_found(model, served_model)
    refuse_unsupported(body)
    store = _get(body, "store", bool, False)
    tools = parse_response_tools(body.get("tools"))
    functions = parse_tools([{"type": "function", "function": {k: v for k, v in t.items()
                                                               if k != "type" and v is not None}}
                             for t in tools])
    tool_choice, function = parse_tool_choice(body.get("tool_choice"), [fn.name for fn in functions])
    parallel = _get(body, "parallel_tool_calls", bool, True)
    max_tokens = _get(body, "max_output_tokens", int, None)
    if max_tokens is not None and max_tokens < 1:
        raise bad_request(f"max_output_tokens must be at least 1, got {max_tokens}", "max_output_tokens")
    stream = _get(body, "stream", bool, False)
    text = _get(body, "text", dict, {})
    schema_name, schema, text_format = parse_text_format(text.get("format"))
    instructions = _get(body, "instructions", str, None)
    if "input" not in body or body["input"] is None:
        raise bad_request("'input' is required", "input")
    messages = ([{"role": "system", "content": instructions}] if instructions is not None else [])
    messages += parse_input(body["input"])
    sampling = parse_sampling(body)
    turn = TurnRequest(messages=messages, functions=functions, tool_choice=tool_choice, function=function,
                       parallel=parallel, max_tokens=max_tokens or DEFAULT_MAX_TOKENS, sampling=sampling,
                       response_schema=schema)
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    echo = {"instructions": instructions, "max_output_tokens": max_tokens, "metadata": metadata,
            "parallel_tool_calls": parallel, "previous_response_id": None, "reasoning": None, "store": store,
            "temperature": sampling.temperature, "top_p": sampling.top_p, "text": {"format": text_format},
            "tool_choice": body.get("tool_choice") or ("auto" if functions else "none"), "tools": tools,
            "truncation": "disabled", "user": body.get("user") if isinstance(body.get("user"), str) else None}
    return ResponsesRequest(model=model, turn=turn, stream=stream, schema_name=schema_name, echo=echo)


def refuse_unsupported(body: dict) -> None:
    """Raise ApiError 400 naming the first option this server would otherwise ignore: one of
    :data:`UNSUPPORTED` with another value than those that ask for nothing, a ``reasoning`` effort or summary
    (these models do not reason apart from their answer), or ``message.output_text.logprobs`` in
    ``include``."""
    for name, neutral in UNSUPPORTED.items():
        value = body.get(name)
        if value not in neutral:
            raise bad_request(f"'{name}' is not supported by this server: {_WHY[name]}", name)
    reasoning = body.get("reasoning")
    if reasoning is not None and (not isinstance(reasoning, dict)
                                  or any(v not in (None, "none") for v in reasoning.values())):
        raise bad_request("'reasoning' is not supported by this server (its models write no reasoning); "
                          "leave it out", "reasoning")
    include = body.get("include")
    if include is not None:
        if not isinstance(include, list) or not all(isinstance(x, str) for x in include):
            raise bad_request(f"'include' must be an array of strings, got {_json_type(include)}", "include")
        if "message.output_text.logprobs" in include:
            raise bad_request("'include': message.output_text.logprobs is not supported by this server "
                              "(log probabilities are not returned); leave it out", "include")


def parse_response_tools(tools: Any) -> list[dict[str, Any]]:
    """``tools`` in the Responses shape, as ``{"type": "function", "name", "description", "parameters",
    "strict"}`` dicts (the chat shape ``{"type": "function", "function": {...}}`` is read too). Raises
    ApiError 400 (param ``tools``) for a tool that is not a function tool (``web_search``, ``file_search``
    ...: this server runs no tools of its own) or a mistyped field."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise bad_request(f"'tools' must be an array, got {_json_type(tools)}", "tools")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise bad_request(f"tools[{i}] must be an object", "tools")
        if tool.get("type") != "function":
            raise bad_request(f"tools[{i}]: only function tools ({{\"type\": \"function\", \"name\", "
                              f"\"parameters\"}}) are supported, got type {tool.get('type')!r}", "tools")
        spec = tool["function"] if isinstance(tool.get("function"), dict) else tool
        strict = spec.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise bad_request(f"tools[{i}].strict must be a boolean, got {_json_type(strict)}", "tools")
        out.append({"type": "function", "name": spec.get("name"), "description": spec.get("description"),
                    "parameters": spec.get("parameters"), "strict": True if strict is None else strict})
    return out


def parse_tool_choice(choice: Any, names: list[str]) -> tuple[str, str | None]:
    """``tool_choice`` as (one of ``auto``, ``required``, ``none``; the named function or None). Absent:
    ``auto`` with tools, ``none`` without. Raises ApiError 400 (param ``tool_choice``) for another value
    (``allowed_tools`` and hosted tool types included), ``required`` or a function without tools, or a name
    not among the tools."""
    if choice is None:
        return ("auto" if names else "none"), None
    if isinstance(choice, str):
        if choice not in ("auto", "required", "none"):
            raise bad_request(f"tool_choice must be 'auto', 'required', 'none' or {{\"type\": \"function\", "
                              f"\"name\": ...}}, got {choice!r}", "tool_choice")
        if choice == "required" and not names:
            raise bad_request("tool_choice 'required' needs tools", "tool_choice")
        return (choice if names else "none"), None
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str):
            raise bad_request("tool_choice.name must be a string", "tool_choice")
        if name not in names:
            raise bad_request(f"tool_choice names the function {name!r}, which is not among the tools",
                              "tool_choice")
        return "required", name
    kind = choice.get("type") if isinstance(choice, dict) else None
    raise bad_request("tool_choice must be 'auto', 'required', 'none' or {\"type\": \"function\", \"name\": ...}"
                      + (f", got type {kind!r}" if isinstance(kind, str) else ""), "tool_choice")


def parse_text_format(fmt: Any) -> tuple[str | None, Any, dict[str, Any]]:
    """``text.format`` as (schema name, schema, the format as the response repeats it): ``text`` or none
    gives no schema; ``json_object`` the schema ``{"type": "object"}``; ``json_schema`` takes ``schema``
    (any root type) named ``name``. Raises ApiError 400 (param ``text.format``) for another type, a missing
    name or schema, or an invalid JSON Schema."""
    if fmt is None:
        return None, None, {"type": "text"}
    if not isinstance(fmt, dict):
        raise bad_request(f"text.format must be an object, got {_json_type(fmt)}", "text.format")
    kind = fmt.get("type")
    if kind == "text":
        return None, None, {"type": "text"}
    if kind == "json_object":
        return JSON_OBJECT, {"type": "object"}, {"type": "json_object"}
    if kind != "json_schema":
        raise bad_request(f"text.format.type must be 'text', 'json_object' or 'json_schema', got {kind!r}",
                          "text.format")
    name = fmt.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("text.format.name must be a non-empty string", "text.format")
    schema = fmt.get("schema")
    if not isinstance(schema, (dict, bool)):
        raise bad_request("text.format.schema must be a JSON Schema object", "text.format")
    if isinstance(schema, dict):
        try:
            check_schema(schema, f"text.format {name!r}")
        except CatalogError as exc:
            raise bad_request(str(exc), "text.format") from None
    return name, schema, {"type": "json_schema", "name": name, "schema": schema,
                          "description": fmt.get("description"), "strict": fmt.get("strict", True)}


def parse_input(items: Any) -> list[dict[str, Any]]:
    """``input`` as chat messages, normalized as :func:`.protocol.parse_messages` leaves them: a string is
    one user message; message items keep their role (``developer`` becomes ``system``) and their text;
    ``function_call`` items join the assistant message before them (or make one with no content), as its
    ``tool_calls`` (``id`` = the item's ``call_id``); a ``function_call_output`` becomes a ``tool`` message
    (``tool_call_id``, and ``name``: the function of the call it answers).

    Raises ApiError 400 (param ``input``) naming the item at fault (``input[3].call_id``)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise bad_request("'input' must be a string or a non-empty array of items", "input")
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call_id -> function name
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_request(f"{where} must be an object", "input")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in INPUT_ROLES:
                raise bad_request(f"{where}.role must be one of {', '.join(INPUT_ROLES)}, got {role!r}", "input")
            out.append({"role": "system" if role == "developer" else role,
                        "content": _text(item.get("content"), f"{where}.content")})
        elif kind == "function_call":
            call_id, name = _string(item, "call_id", where), _string(item, "name", where)
            arguments = _string(item, "arguments", where)
            try:
                parsed = json.loads(arguments or "{}")
            except ValueError as exc:  # JSONDecodeError, or an integer past Python's 4,300-digit limit
                raise bad_request(f"{where}.arguments is not valid JSON: {getattr(exc, 'msg', exc)}",
                                  "input") from None
            if not isinstance(parsed, dict):
                raise bad_request(f"{where}.arguments must encode a JSON object", "input")
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments or "{}"}}
            if out and out[-1]["role"] == "assistant" and _joins(items[i - 1]):
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            names[call_id] = name
        elif kind == "function_call_output":
            call_id = _string(item, "call_id", where)
            if call_id not in names:
                raise bad_request(f"{where}.call_id {call_id!r} answers no function_call item before it in "
                                  "'input'", "input")
            out.append({"role": "tool", "tool_call_id": call_id, "name": names[call_id],
                        "content": _text(item.get("output"), f"{where}.output")})
        elif kind == "item_reference":
            raise bad_request(f"{where}: item_reference is not supported: this server keeps no responses; send "
                              "the items themselves", "input")
        else:
            raise bad_request(f"{where}.type {kind!r} is not supported: only message, function_call and "
                              "function_call_output items", "input")
    return out


def _joins(previous: Any) -> bool:
    """Whether a ``function_call`` item after ``previous`` belongs to the same assistant turn: after an
    assistant message or another call."""
    return isinstance(previous, dict) and (previous.get("type") == "function_call"
                                           or previous.get("role") == "assistant")


def _string(item: dict, name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise bad_request(f"{where}.{name} must be a string, got {_json_type(value)}", "input")
    return value


def _text(content: Any, where: str) -> str:
    """A string, or text parts (``input_text``, ``output_text``) joined. Raises ApiError 400 for anything
    else (images, files, audio)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
                raise bad_request(f"{where}[{j}]: only text parts ({{\"type\": \"input_text\", \"text\": ...}}) are "
                                  f"supported, got {kind!r}", "input")
            texts.append(part["text"])
        return "".join(texts)
    raise bad_request(f"{where} must be a string or an array of text parts, got {_json_type(content)}", "input")


def usage(result: TurnResult | None) -> dict[str, Any] | None:
    """``{"input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details",
    "total_tokens"}`` of a turn (None before it ends)."""
    if result is None:
        return None
    return {"input_tokens": result.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": result.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": result.prompt_tokens + result.completion_tokens}


class ResponseObject:
    """One response's identity (``resp_...`` id, creation time in Unix seconds, model, the request's
    settings) and its output items, built from the turn's result (:meth:`whole`) or from its events, each
    method returning the stream events it makes (dicts with ``type`` and ``sequence_number``)."""

    def __init__(self, request: ResponsesRequest):
        self.id = f"resp_{i_d()}"
        self.created_at = int(time.time())
        self.model = request.model
        self.echo = request.echo
        self.output: list[dict[str, Any]] = []
        self._sequence = 0
        self._message: dict[str, Any] | None = None  # the message item being streamed
        self._sent_calls: set[int] = set()

    def body(self, status: str, result: TurnResult | None = None, error: dict | None = None) -> dict[str, Any]:
        """The ``response`` object as it stands, with ``status`` (``in_progress``, ``completed``,
        ``incomplete``, ``failed``)."""
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                "error": error, "incomplete_details": incomplete, "model": self.model,
                "output": [dict(item) for item in self.output], "usage": usage(result), **self.echo}

    def whole(self, result: TurnResult) -> dict[str, Any]:
        """The ``response`` object of a finished turn (the one its stream's last event holds)."""
        return self.finish(result)[-1]["response"]

    @staticmethod
    def status(result: TurnResult) -> str:
        """``incomplete`` for a text the budget cut, else ``completed``."""
        return "incomplete" if not result.calls and result.finish_reason == "length" else "completed"

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def start(self) -> list[dict[str, Any]]:
        """The stream's first events: ``response.created`` and ``response.in_progress``."""
        return [self._event("response.created", response=self.body("in_progress")),
                self._event("response.in_progress", response=self.body("in_progress"))]

    def text(self, delta: str) -> list[dict[str, Any]]:
        """A piece of answer text: ``response.output_text.delta`` (after the message item and its part, for
        the first piece)."""
        events = self._open_message()
        self._message["content"][0]["text"] += delta
        return events + [self._event("response.output_text.delta", item_id=self._message["id"],
                                     output_index=self._index(self._message), content_index=0, delta=delta,
                                     logprobs=[])]

    def _open_message(self) -> list[dict[str, Any]]:
        """A message item and its text part, added (no events when one is open already)."""
        if self._message is not None:
            return []
        self._message = {"id": f"msg_{i_d()}", "type": "message", "status": "in_progress", "role": "assistant",
                         "content": []}
        self.output.append(self._message)
        index = len(self.output) - 1
        events = [self._event("response.output_item.added", output_index=index, item=dict(self._message)),
                  self._event("response.content_part.added", item_id=self._message["id"], output_index=index,
                              content_index=0, part=_part(""))]
        self._message["content"] = [_part("")]
        return events

    def call(self, position: int, call: ToolCall) -> list[dict[str, Any]]:
        """One whole call at ``position``: its ``function_call`` item added, its arguments in one delta,
        done (a message being streamed is closed first)."""
        self._sent_calls.add(position)
        events = self._close_message("completed")
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        item = {"id": f"fc_{i_d()}", "type": "function_call", "status": "in_progress", "call_id": f"call_{i_d()}",
                "name": call.name, "arguments": ""}
        self.output.append(item)
        index = len(self.output) - 1
        events.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        events.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                  delta=arguments))
        item.update(arguments=arguments, status="completed")
        events.append(self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                  name=call.name, arguments=arguments))
        events.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        return events

    def finish(self, result: TurnResult) -> list[dict[str, Any]]:
        """The stream's last events: text and calls of ``result`` not streamed yet, the message closed, and
        ``response.completed`` (``response.incomplete`` for a text the budget cut) with the whole response."""
        events = []
        content = result.content or ""
        sent = self._message["content"][0]["text"] if self._message else ""
        if content.startswith(sent) and len(content) > len(sent):
            events += self.text(content[len(sent):])
        elif not result.calls and not any(item["type"] == "message" for item in self.output):
            events += self._open_message()  # an empty answer is an empty message
        status = self.status(result)
        events += self._close_message("incomplete" if status == "incomplete" else "completed")
        for position, call in enumerate(result.calls):
            if position not in self._sent_calls:
                events += self.call(position, call)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        return events + [self._event(kind, response=self.body(status, result))]

    def fail(self, error: ApiError) -> list[dict[str, Any]]:
        """The events of a turn that failed: ``error`` (code, message, param) and ``response.failed``."""
        return [self._event("error", code=error.code, message=error.message, param=error.param),
                self._event("response.failed", response=self.body(
                    "failed", error={"code": error.code or "server_error", "message": error.message}))]

    def _index(self, item: dict[str, Any]) -> int:
        return next(i for i, it in enumerate(self.output) if it is item)

    def _close_message(self, status: str) -> list[dict[str, Any]]:
        message = self._message
        if message is None:
            return []
        self._message = None
        index, part = self._index(message), message["content"][0]
        message["status"] = status
        return [self._event("response.output_text.done", item_id=message["id"], output_index=index,
                            content_index=0, text=part["text"], logprobs=[]),
                self._event("response.content_part.done", item_id=message["id"], output_index=index,
                            content_index=0, part=dict(part)),
                self._event("response.output_item.done", output_index=index,
                            item={**message, "content": [dict(part)]})]


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def sse_event(event: dict[str, Any]) -> bytes:
    """One server-sent event of the Responses stream: ``event: <type>``, ``data: <json>`` and a blank line."""
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode("utf-8")


async def create_response(request: Request, engine: EngineLike, indexes: IndexCache, model: str) -> Response:
    """The ``POST /v1/responses`` route: one assistant turn, whole (a ``response`` object) or streamed.
    Every failure leaves as an API error object: 400 for a bad request or a schema the compiler refuses, 500
    (one line, logged) for anything unexpected."""
    try:
        return await _respond(request, engine, indexes, model)
    except ApiError:
        raise
    except CatalogError as exc:  # SchemaError included: a schema the compiler refuses
        raise bad_request(str(exc), "tools") from None
    except CallmaybeError as exc:
        raise bad_request(str(exc)) from None
    except Exception as exc:  # anything unexpected: one line in the log and to the client
        log.error("response failed: %s: %s", type(exc).__name__, one_line(str(exc), 300))
        raise server_error(f"internal error ({type(exc).__name__}): {one_line(str(exc), 300)}") from None


async def _respond(request: Request, engine: EngineLike, indexes: IndexCache, model: str) -> Response:
    parsed = parse_responses(await json_body(request), model)  # the chat route's bounds: size, depth, numbers
    try:
        ticket, events = await start_turn(engine, indexes, parsed.turn, parsed.schema_name, "text.format")
    except ApiError as exc:  # a prompt the engine refuses: the conversation is 'input' here
        if exc.param == "messages":
            exc.param = "input"
        raise
    response = ResponseObject(parsed)
    if parsed.stream:
        return StreamingResponse(_stream(request, engine, ticket, events, response), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
    return await _whole(request, engine, ticket, events, response)


async def _whole(request: Request, engine: EngineLike, ticket: Any, events: asyncio.Queue,
                 response: ResponseObject) -> Response:
    finished = False
    try:
        async with aclosing(events_of(request, events)) as stream:
            async for event in stream:
                if event.kind == "done":
                    finished = True
                    return JSONResponse(response.whole(event.data))
                if event.kind == "error":
                    finished = True
                    raise engine_error(str(event.data))
        return Response(status_code=499)  # the client went away; nobody reads this
    finally:
        if not finished:
            engine.cancel(ticket)


async def _stream(request: Request, engine: EngineLike, ticket: Any, events: asyncio.Queue,
                  response: ResponseObject):
    finished = False
    try:
        for out in response.start():
            yield sse_event(out)
        async with aclosing(events_of(request, events)) as stream:
            async for event in stream:
                if event.kind == "text":
                    made = response.text(event.data)
                elif event.kind == "call":
                    made = response.call(*event.data)
                elif event.kind == "done":
                    finished = True
                    made = response.finish(event.data)
                elif event.kind == "error":
                    finished = True
                    made = response.fail(engine_error(str(event.data)))
                else:
                    made = []
                for out in made:
                    yield sse_event(out)
    finally:
        if not finished:
            engine.cancel(ticket)
