"""The chat completions protocol: a request body in, a :class:`~callmaybe.runtime.decoding.turn.TurnRequest` out;
a :class:`~callmaybe.runtime.decoding.turn.TurnResult` or the turn's events in, a ``chat.completion`` or
``chat.completion.chunk`` objects out.

Every field is checked here and a bad one raises :class:`~.errors.ApiError` 400 naming it (``param``).
Unknown fields are ignored. Defaults that differ from OpenAI's: ``temperature`` 0 (greedy), since a call
should be the model's most likely valid one; ``max_tokens`` 256.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from ..core import __version__
from ..core.catalog import Function, check_schema, parse_function
from ..core.errors import CatalogError
from ..runtime.decoding.turn import FINISH_REASONS, SEED_MAX, SEED_MIN, Sampling, ToolCall, TurnRequest, TurnResult
from .errors import bad_request, model_not_found

ROLES = ("system", "developer", "user", "assistant", "tool")
DEFAULT_MAX_TOKENS = 256
#: Names the software that answered (OpenAI's ``system_fingerprint``): callmaybe and its version.
SYSTEM_FINGERPRINT = f"callmaybe-{__version__}"
#: the name a ``json_object`` response format's schema gets in messages
JSON_OBJECT = "json_object"
#: The names OpenAI's API takes for a function or a response schema (its documented pattern); catalog files
#: of ``run`` and ``eval`` take any non-empty name (BFCL's dotted ``math.factorial``).
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
NAME_RULE = "1 to 64 letters, digits, underscores or dashes (^[a-zA-Z0-9_-]{1,64}$)"


@dataclass
class ChatRequest:
    """A checked chat completions request: the ``turn`` to produce, whether to ``stream`` it (and end the
    stream with a usage chunk: ``include_usage``), and the name of its response schema (``schema_name``,
    None without one)."""

    model: str
    turn: TurnRequest
    stream: bool = False
    include_usage: bool = False
    schema_name: str | None = None


def parse_chat(body: Any, served_model: str) -> ChatRequest:
    """Check a decoded request body and turn it into a :class:`ChatRequest`.

    Raises ApiError 400 for a body that is not an object, a missing or mistyped field, a bad value (``n``
    other than 1, a ``tool_choice`` naming no given tool, an invalid JSON Schema, a tool the catalog reader
    refuses), and ApiError 404 (``model_not_found``) when ``model`` is not ``served_model``.
    """
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    model = _get(body, "model", str, required=True)
    if model != served_model:
        raise model_not_found(model, served_model)
    n = _get(body, "n", int, 1)
    if n != 1:
        raise bad_request(f"n={n} is not supported: this server returns one choice (n=1)", "n")
    functions = parse_tools(body.get("tools"))
    tool_choice, function = parse_tool_choice(body.get("tool_choice"), functions)
    parallel = _get(body, "parallel_tool_calls", bool, True)
    max_tokens = _get(body, "max_completion_tokens", int, None)
    if max_tokens is None:
        max_tokens = _get(body, "max_tokens", int, DEFAULT_MAX_TOKENS)
        param = "max_tokens"
    else:
        param = "max_completion_tokens"
    if max_tokens < 1:
        raise bad_request(f"{param} must be at least 1, got {max_tokens}", param)
    stream = _get(body, "stream", bool, False)
    options = _get(body, "stream_options", dict, {})
    include_usage = _get(options, "include_usage", bool, False, "stream_options.include_usage")
    schema_name, schema = parse_response_format(body.get("response_format"))
    refuse_unsupported(body)
    turn = TurnRequest(messages=parse_messages(body.get("messages")), functions=functions,
                       tool_choice=tool_choice, function=function, parallel=parallel, max_tokens=max_tokens,
                       sampling=parse_sampling(body), response_schema=schema, stop=parse_stop(body.get("stop")))
    return ChatRequest(model=model, turn=turn, stream=stream, include_usage=include_usage, schema_name=schema_name)


def _get(body: dict, name: str, kind: type, default: Any = None, param: str | None = None,
         required: bool = False) -> Any:
    """``body[name]`` checked to be a ``kind`` (an int is no bool; a float may be an int), ``default`` when
    absent or null. Raises ApiError 400 naming ``param`` (default ``name``)."""
    param = param or name
    value = body.get(name)
    if value is None:
        if required:
            raise bad_request(f"'{param}' is required", param)
        return default
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise bad_request(f"'{param}' must be {_KIND_NAMES[kind]}, got {_json_type(value)}", param)
    return value


_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", dict: "an object",
               list: "an array"}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind, name in _KIND_NAMES.items():
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def parse_tools(tools: Any) -> list[Function]:
    """``tools`` (OpenAI function tools, full JSON Schema parameters) as :class:`Function` s, in order.

    Raises ApiError 400 (param ``tools``) for a tool that is not a function tool, a name outside OpenAI's
    pattern (:data:`NAME`), one the catalog reader refuses (the message names it), or a name given twice."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise bad_request(f"'tools' must be an array, got {_json_type(tools)}", "tools")
    functions = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise bad_request(f"tools[{i}] must be {{\"type\": \"function\", \"function\": {{...}}}}", "tools")
        name = tool["function"].get("name")
        if isinstance(name, str) and not NAME.fullmatch(name):
            raise bad_request(f"tools[{i}].function.name {name!r} is not a valid function name: {NAME_RULE}", "tools")
        try:
            functions.append(parse_function(tool, f"tools[{i}]"))
        except CatalogError as exc:
            raise bad_request(str(exc), "tools") from None
    names = [fn.name for fn in functions]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise bad_request(f"tools: the function name {twice[0]!r} is given twice", "tools")
    return functions


def parse_tool_choice(choice: Any, functions: list[Function]) -> tuple[str, str | None]:
    """``tool_choice`` as (one of ``auto``, ``required``, ``none``; the named function or None).

    Absent: ``auto`` with tools, ``none`` without; ``auto`` without tools means ``none``. Raises ApiError
    400 (param ``tool_choice``) for another value, ``required`` or a named function without tools, or a
    name not among the tools."""
    if choice is None:
        return ("auto" if functions else "none"), None
    if isinstance(choice, str):
        if choice not in ("auto", "required", "none"):
            raise bad_request(f"tool_choice must be 'auto', 'required', 'none' or a function, got {choice!r}",
                              "tool_choice")
        if choice == "required" and not functions:
            raise bad_request("tool_choice 'required' needs tools", "tool_choice")
        return (choice if functions else "none"), None
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        if not isinstance(name, str):
            raise bad_request("tool_choice.function.name must be a string", "tool_choice")
        if name not in {fn.name for fn in functions}:
            raise bad_request(f"tool_choice names the function {name!r}, which is not among the tools",
                              "tool_choice")
        return "required", name
    raise bad_request("tool_choice must be 'auto', 'required', 'none' or {\"type\": \"function\", "
                      "\"function\": {\"name\": ...}}", "tool_choice")


def parse_messages(messages: Any) -> list[dict[str, Any]]:
    """``messages`` checked and normalized: roles ``system`` (``developer`` becomes it), ``user``,
    ``assistant`` (``content`` may be null when it has ``tool_calls``, each ``{"id", "type": "function",
    "function": {"name", "arguments": a JSON string of an object}}``) and ``tool`` (with ``tool_call_id``;
    ``name`` filled in from the call it answers). Text content parts are joined into one string.

    Raises ApiError 400 (param ``messages``) for anything else."""
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array", "messages")
    names: dict[str, str] = {}  # tool call id -> function name
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad_request(f"{where} must be an object", "messages")
        role = m.get("role")
        if role not in ROLES:
            raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", "messages")
        content = _content(m.get("content"), where)
        entry: dict[str, Any] = {"role": "system" if role == "developer" else role, "content": content}
        if role == "assistant":
            calls = _tool_calls(m.get("tool_calls"), where)
            if calls:
                entry["tool_calls"] = calls
                names.update((c["id"], c["function"]["name"]) for c in calls)
            elif content is None:
                raise bad_request(f"{where}: an assistant message needs content or tool_calls", "messages")
        elif content is None:
            raise bad_request(f"{where}.content is required", "messages")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                raise bad_request(f"{where}.tool_call_id must be a string", "messages")
            entry["tool_call_id"] = call_id
            name = m.get("name")
            entry["name"] = name if isinstance(name, str) else names.get(call_id, call_id)
        elif isinstance(m.get("name"), str) and role != "assistant":
            entry["name"] = m["name"]
        out.append(entry)
    return out


def _content(content: Any, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(f"{where}.content[{j}]: only text parts ({{\"type\": \"text\", \"text\": ...}}) "
                                  "are supported", "messages")
            texts.append(part["text"])
        return "".join(texts)
    raise bad_request(f"{where}.content must be a string, an array of text parts or null", "messages")


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise bad_request(f"{where}.tool_calls must be an array", "messages")
    out = []
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise bad_request(f"{at} must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", "
                              "\"arguments\"}}}}", "messages")
        arguments = fn.get("arguments", "{}")
        if not isinstance(arguments, str):
            raise bad_request(f"{at}.function.arguments must be a JSON string", "messages")
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:  # JSONDecodeError, or an integer past Python's 4,300-digit limit
            raise bad_request(f"{at}.function.arguments is not valid JSON: {getattr(exc, 'msg', exc)}",
                              "messages") from None
        if not isinstance(parsed, dict):
            raise bad_request(f"{at}.function.arguments must encode a JSON object", "messages")
        call_id = call.get("id")
        out.append({"id": call_id if isinstance(call_id, str) else f"call_{i_d()}", "type": "function",
                    "function": {"name": fn["name"], "arguments": arguments or "{}"}})
    return out


def parse_response_format(fmt: Any) -> tuple[str | None, Any]:
    """``response_format`` as (schema name, schema): (None, None) for none or ``{"type": "text"}``;
    ``json_object`` is the schema ``{"type": "object"}``; ``json_schema`` takes ``json_schema.schema`` (any
    root type) named ``json_schema.name``. Raises ApiError 400 (param ``response_format``) for another
    type, a missing name or schema, or an invalid JSON Schema."""
    if fmt is None:
        return None, None
    if not isinstance(fmt, dict):
        raise bad_request("response_format must be an object", "response_format")
    kind = fmt.get("type")
    if kind == "text":
        return None, None
    if kind == "json_object":
        return JSON_OBJECT, {"type": "object"}
    if kind != "json_schema":
        raise bad_request(f"response_format.type must be 'text', 'json_object' or 'json_schema', got {kind!r}",
                          "response_format")
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict):
        raise bad_request("response_format.json_schema must be an object", "response_format")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("response_format.json_schema.name must be a non-empty string", "response_format")
    if not NAME.fullmatch(name):
        raise bad_request(f"response_format.json_schema.name {name!r} is not a valid name: {NAME_RULE}",
                          "response_format")
    schema = spec.get("schema")
    if not isinstance(schema, (dict, bool)):
        raise bad_request("response_format.json_schema.schema must be a JSON Schema object", "response_format")
    if isinstance(schema, dict):
        try:
            check_schema(schema, f"response_format {name!r}")
        except CatalogError as exc:
            raise bad_request(str(exc), "response_format") from None
    return name, schema


def parse_stop(stop: Any) -> tuple[str, ...]:
    """``stop``: a string or up to 4 strings that end a text answer (not included). Raises ApiError 400."""
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(x, str) and x for x in stops) or len(stops) > 4:
        raise bad_request("'stop' must be a non-empty string or an array of up to 4 of them", "stop")
    return tuple(stops)


#: Options this server does not implement, with the value that asks for nothing (what it does anyway).
UNSUPPORTED = {"logprobs": False, "top_logprobs": None, "presence_penalty": 0, "frequency_penalty": 0,
               "logit_bias": None}


def refuse_unsupported(body: dict) -> None:
    """Raise ApiError 400 for an option this server would otherwise ignore: ``logprobs``, ``top_logprobs``,
    ``presence_penalty``, ``frequency_penalty`` or ``logit_bias`` with a value other than the one that asks
    for nothing (absent, null, false, 0, ``{}``)."""
    for name, neutral in UNSUPPORTED.items():
        value = body.get(name)
        if value is not None and value != neutral and value != {}:
            raise bad_request(f"'{name}' is not supported by this server (it would be ignored); leave it out",
                              name)


def parse_sampling(body: dict) -> Sampling:
    """``temperature`` (0 to 2; default 0: greedy), ``top_p`` (0 to 1; 0 keeps the most likely token) and
    ``seed`` (a signed 64-bit integer, OpenAI's range: each one gives its own draws) as a :class:`Sampling`.
    Raises ApiError 400 for values out of range."""
    temperature = _get(body, "temperature", float, 0.0)
    top_p = _get(body, "top_p", float, 1.0)
    seed = _get(body, "seed", int, None)
    if not 0.0 <= temperature <= 2.0:
        raise bad_request(f"temperature must be between 0 and 2, got {temperature}", "temperature")
    if not 0.0 <= top_p <= 1.0:
        raise bad_request(f"top_p must be between 0 and 1, got {top_p}", "top_p")
    if seed is not None and not SEED_MIN <= seed <= SEED_MAX:
        raise bad_request(f"seed must be a signed 64-bit integer (from {SEED_MIN} to {SEED_MAX}), got {seed}",
                          "seed")
    return Sampling(temperature=temperature, top_p=top_p, seed=seed)


def i_d(n: int = 12) -> str:
    """A random identifier suffix of ``2n`` hex digits."""
    return secrets.token_hex(n)


def tool_call(call: ToolCall) -> dict[str, Any]:
    """One call as OpenAI writes it: ``{"id": "call_...", "type": "function", "function": {"name",
    "arguments": its JSON string}}``."""
    return {"id": f"call_{i_d()}", "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}


def usage(result: TurnResult) -> dict[str, int]:
    """``{"prompt_tokens", "completion_tokens", "total_tokens"}`` of a turn."""
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens}


def finish_reason(result: TurnResult) -> str:
    """The turn's finish reason, one of ``tool_calls``, ``stop``, ``length``, ``content_filter`` (the check
    after generation withheld the answer: ``refusal`` says why); ``tool_calls`` whenever it called, whatever
    the engine said."""
    if result.calls:
        return "tool_calls"
    return result.finish_reason if result.finish_reason in FINISH_REASONS else "stop"


class Completion:
    """One response's identity (``chatcmpl-...`` id, creation time in Unix seconds, model) and the objects
    made from its turn: :meth:`whole` (not streamed) and the stream's chunks."""

    def __init__(self, model: str):
        self.id = f"chatcmpl-{i_d()}"
        self.created = int(time.time())
        self.model = model
        self._sent_calls: set[int] = set()
        self._sent_text = ""

    def whole(self, result: TurnResult) -> dict[str, Any]:
        """The ``chat.completion`` object of a finished turn (its message's ``refusal``: why the check after
        generation withheld the answer, else null, as OpenAI writes it)."""
        message: dict[str, Any] = {"role": "assistant", "content": result.content, "refusal": result.refusal}
        if result.calls:
            message["tool_calls"] = [tool_call(c) for c in result.calls]
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "system_fingerprint": SYSTEM_FINGERPRINT,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": finish_reason(result)}],
                "usage": usage(result)}

    def chunk(self, delta: dict[str, Any], finish: str | None = None, include_usage: bool = False) -> dict[str, Any]:
        """A ``chat.completion.chunk`` with one choice; ``include_usage`` adds ``"usage": null`` (as OpenAI
        does on every chunk but the last when usage is asked for)."""
        out = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
               "system_fingerprint": SYSTEM_FINGERPRINT,
               "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            out["usage"] = None
        return out

    def first(self, include_usage: bool = False) -> dict[str, Any]:
        """The stream's first chunk: the role."""
        return self.chunk({"role": "assistant", "content": ""}, include_usage=include_usage)

    def text(self, delta: str, include_usage: bool = False) -> dict[str, Any]:
        """A chunk of answer text."""
        self._sent_text += delta
        return self.chunk({"content": delta}, include_usage=include_usage)

    def call(self, position: int, call: ToolCall, include_usage: bool = False) -> dict[str, Any]:
        """The chunk of one whole call at ``position`` (its id, name and complete arguments at once)."""
        self._sent_calls.add(position)
        return self.chunk({"tool_calls": [{"index": position, **tool_call(call)}]}, include_usage=include_usage)

    def last(self, result: TurnResult, include_usage: bool = False) -> list[dict[str, Any]]:
        """The stream's closing chunks: text or calls of ``result`` not streamed yet (none, when the engine
        reported them all), the finish reason, then (``include_usage``) the usage chunk with no choices."""
        out = []
        if result.refusal is not None:  # what was streamed is withdrawn: say why
            out.append(self.chunk({"refusal": result.refusal}, include_usage=include_usage))
        content = result.content or ""
        if content.startswith(self._sent_text) and len(content) > len(self._sent_text):
            out.append(self.text(content[len(self._sent_text):], include_usage))
        for position, call in enumerate(result.calls):
            if position not in self._sent_calls:
                out.append(self.call(position, call, include_usage))
        out.append(self.chunk({}, finish_reason(result), include_usage))
        if include_usage:
            out.append({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                        "model": self.model, "choices": [], "usage": usage(result)})
        return out


def sse(obj: Any) -> bytes:
    """One server-sent event: ``data: <json>`` and a blank line."""
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode("utf-8")


#: The stream's end.
DONE = b"data: [DONE]\n\n"
