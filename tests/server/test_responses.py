"""``POST /v1/responses`` over a scripted engine (tests/server/fake.py, ``loop_script``), served by uvicorn on a
local port and driven by httpx and the official openai client: the input items as the turn's messages (the same
the chat route makes of the same conversation), tools and tool_choice, the response object, a
function_call_output round trip, the stream of events, every error status."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from callmaybe.server.app import create_app
from callmaybe.server.limits import CompileRate
from callmaybe.server.tools import IndexCache

from .fake import CRASH, CUT, FAIL, SHUTDOWN, SLOW, TOO_LONG, TWO_CALLS, CountingLoader, FakeEngine, loop_script
from .serving import running

MODEL = "tiny-model"
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
ADD = {"type": "function", "name": "add", "description": "Add two integers", "strict": False,
       "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                      "required": ["a", "b"]}}
USAGE = {"input_tokens": 8, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 3,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 11}


class Served:
    def __init__(self, url, engine):
        self.url, self.engine = url, engine
        self.http = httpx.Client(base_url=url, timeout=10)
        self.client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)

    def post(self, body, path="/v1/responses", **kw):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.http.post(path, content=data, headers={"content-type": "application/json"}, **kw)

    def last(self):
        return self.engine.turns[-1]

    def good(self):
        """A good request succeeds (after each bad one: the server keeps serving)."""
        r = self.post({"model": MODEL, "input": "What is the weather in Paris?", "tools": [WEATHER]})
        assert r.status_code == 200, r.text
        assert [(o["name"], o["arguments"]) for o in r.json()["output"]] == [("get_weather", '{"city": "Paris"}')]


@pytest.fixture(scope="module")
def server():
    engine = FakeEngine(script=loop_script)
    loader = CountingLoader()
    app = create_app(engine, IndexCache(loader.tools, loader.schema, {}, 32, CompileRate(30)), MODEL)
    with running(app) as url:
        yield Served(url, engine)
    engine.close()


def error_of(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert "\n" not in body["error"]["message"] and "Traceback" not in body["error"]["message"]
    return body["error"]


def test_a_text_answer_in_the_response_shape(server):
    r = server.post({"model": MODEL, "input": "hi"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"].startswith("resp_") and body["object"] == "response" and isinstance(body["created_at"], int)
    [message] = body["output"]
    assert message["id"].startswith("msg_")
    assert message == {"id": message["id"], "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": "Hello é", "annotations": [], "logprobs": []}]}
    assert body["usage"] == USAGE
    assert {k: body[k] for k in ("status", "model", "error", "incomplete_details", "tool_choice", "tools",
                                 "parallel_tool_calls", "temperature", "top_p", "text", "store", "instructions",
                                 "previous_response_id", "max_output_tokens", "truncation", "metadata")} == {
        "status": "completed", "model": MODEL, "error": None, "incomplete_details": None, "tool_choice": "none",
        "tools": [], "parallel_tool_calls": True, "temperature": 0.0, "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "store": False, "instructions": None, "previous_response_id": None, "max_output_tokens": None,
        "truncation": "disabled", "metadata": {}}
    turn = server.last()
    assert turn.request.messages == [{"role": "user", "content": "hi"}]
    assert (turn.request.tool_choice, turn.request.functions, turn.request.max_tokens, turn.index) == ("none", [], 256,
                                                                                                      None)
    reply = server.client.responses.create(model=MODEL, input="hi", store=True, metadata={"k": "v"})
    assert reply.output_text == "Hello é" and reply.usage.total_tokens == 11 and reply.store is True
    assert reply.metadata == {"k": "v"}


def test_input_items_become_the_messages_the_chat_route_makes(server):
    items = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris "},
                                                        {"type": "input_text", "text": "and 2+3?"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}',
         "id": "fc_1", "status": "completed"},
        {"type": "function_call", "call_id": "call_b", "name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "18 C"},
        {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "5"}]},
    ]
    r = server.client.responses.create(model=MODEL, instructions="You answer.", input=items, tools=[WEATHER, ADD],
                                       tool_choice="none")
    expected = [
        {"role": "system", "content": "You answer."},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and 2+3?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "18 C"},
        {"role": "tool", "tool_call_id": "call_b", "name": "add", "content": "5"},
    ]
    assert server.last().request.messages == expected
    assert server.last().request.tool_choice == "none" and r.output_text == "add answered: 5"
    chat = [{"role": "system", "content": "You answer."}, {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and 2+3?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": expected[3]["tool_calls"]},
            {"role": "tool", "tool_call_id": "call_a", "content": "18 C"},
            {"role": "tool", "tool_call_id": "call_b", "content": "5"}]
    tools = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
             for t in (WEATHER, ADD)]
    answer = server.client.chat.completions.create(model=MODEL, messages=chat, tools=tools, tool_choice="none")
    assert server.last().request.messages == expected
    assert answer.choices[0].message.content == "add answered: 5"


def test_tools_and_tool_choice_reach_the_turn_request(server):
    c = server.client
    r = c.responses.create(model=MODEL, input="What is the weather in Paris?", tools=[WEATHER, ADD])
    turn = server.last()
    assert (turn.request.tool_choice, turn.request.function, turn.request.parallel) == ("auto", None, True)
    assert [f.name for f in turn.request.functions] == ["get_weather", "add"] and turn.index is not None
    assert turn.request.functions[0].parameters == {**WEATHER["parameters"], "additionalProperties": False}
    [call] = r.output
    assert call.id.startswith("fc_") and call.call_id.startswith("call_") and call.id[3:] != call.call_id[5:]
    assert (call.type, call.name, call.arguments, call.status) == ("function_call", "get_weather",
                                                                   '{"city": "Paris"}', "completed")
    assert r.status == "completed" and r.tool_choice == "auto" and r.output_text == ""
    assert [t.model_dump(exclude_none=True) for t in r.tools] == [WEATHER, ADD]
    c.responses.create(model=MODEL, input="Weather in Rome?", tools=[WEATHER, ADD], tool_choice="required",
                       parallel_tool_calls=False, max_output_tokens=50, temperature=0.5, top_p=0.9)
    req = server.last().request
    assert (req.tool_choice, req.function, req.parallel, req.max_tokens) == ("required", None, False, 50)
    assert (req.sampling.temperature, req.sampling.top_p) == (0.5, 0.9)
    r = c.responses.create(model=MODEL, input="Weather in Rome?", tools=[ADD, WEATHER],
                           tool_choice={"type": "function", "name": "get_weather"})
    assert (server.last().request.tool_choice, server.last().request.function) == ("required", "get_weather")
    assert [(o.name, o.arguments) for o in r.output] == [("get_weather", '{"city": "Rome"}')]
    assert r.tool_choice.name == "get_weather"
    r = c.responses.create(model=MODEL, input="Weather in Rome?", tools=[WEATHER], tool_choice="none")
    assert server.last().request.tool_choice == "none" and server.last().index is None
    assert r.output_text == "Hello é"


def test_a_function_call_output_round_trip(server):
    c = server.client
    asked = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = c.responses.create(model=MODEL, input=asked, tools=[WEATHER])
    [call] = first.output
    result = {"type": "function_call_output", "call_id": call.call_id, "output": '{"temperature": 18}'}
    second = c.responses.create(model=MODEL, input=asked + [call.model_dump(exclude_none=True), result],
                                tools=[WEATHER])
    assert second.output_text == 'get_weather answered: {"temperature": 18}' and second.status == "completed"
    assert server.last().request.messages == [
        asked[0],
        {"role": "assistant", "content": None, "tool_calls": [{"id": call.call_id, "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": call.call_id, "name": "get_weather", "content": '{"temperature": 18}'}]


def events_of(server, body):
    """The raw stream: (event line, data) pairs."""
    with server.http.stream("POST", "/v1/responses", json={"model": MODEL, "stream": True, **body}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = "".join(r.iter_text())
    out = []
    for block in raw.split("\n\n"):
        if block:
            event, data = block.split("\n")
            assert event.startswith("event: ") and data.startswith("data: ")
            out.append((event[7:], json.loads(data[6:])))
    assert [data["type"] for _, data in out] == [event for event, _ in out]
    assert [data["sequence_number"] for _, data in out] == list(range(len(out)))
    return [data for _, data in out]


def test_the_stream_of_a_text_answer(server):
    events = events_of(server, {"input": "hi"})
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    created, _, added, part, delta1, delta2, text_done, part_done, item_done, completed = events
    assert created["response"]["status"] == "in_progress" and created["response"]["output"] == []
    assert created["response"]["usage"] is None
    item_id = added["item"]["id"]
    assert added["item"] == {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant",
                             "content": []}
    assert part["part"] == {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    assert [delta1["delta"], delta2["delta"]] == ["Hel", "lo é"]
    assert {e["item_id"] for e in (part, delta1, delta2, text_done, part_done)} == {item_id}
    assert text_done["text"] == "Hello é" and part_done["part"]["text"] == "Hello é"
    message = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": "Hello é", "annotations": [], "logprobs": []}]}
    assert item_done["item"] == message
    assert completed["response"]["output"] == [message] and completed["response"]["status"] == "completed"
    assert completed["response"]["usage"] == USAGE and completed["response"]["id"] == created["response"]["id"]


def test_the_stream_of_two_calls(server):
    events = events_of(server, {"input": TWO_CALLS, "tools": [WEATHER, ADD]})
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress",
        *["response.output_item.added", "response.function_call_arguments.delta",
          "response.function_call_arguments.done", "response.output_item.done"] * 2,
        "response.completed"]
    items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [(i["name"], i["arguments"], i["status"]) for i in items] == [
        ("get_weather", '{"city": "x"}', "completed"), ("add", '{"a": 1, "b": 1}', "completed")]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["arguments"], e["item"]["status"]) for e in added] == [
        (0, "", "in_progress"), (1, "", "in_progress")]
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert [(e["output_index"], e["item_id"], e["delta"]) for e in deltas] == [
        (0, items[0]["id"], '{"city": "x"}'), (1, items[1]["id"], '{"a": 1, "b": 1}')]
    assert events[-1]["response"]["output"] == items
    # the client's own accumulator reads the same
    with server.client.responses.stream(model=MODEL, input=TWO_CALLS, tools=[WEATHER, ADD]) as stream:
        final = stream.get_final_response()
    assert [(o.name, o.arguments) for o in final.output] == [("get_weather", '{"city": "x"}'),
                                                            ("add", '{"a": 1, "b": 1}')]
    chunks = list(server.client.responses.create(model=MODEL, input="hi", stream=True))
    assert "".join(e.delta for e in chunks if e.type == "response.output_text.delta") == "Hello é"
    assert chunks[-1].response.output_text == "Hello é"


def test_a_text_the_budget_cuts_is_incomplete(server):
    body = server.post({"model": MODEL, "input": CUT, "max_output_tokens": 1}).json()
    assert (body["status"], body["incomplete_details"], body["max_output_tokens"]) == (
        "incomplete", {"reason": "max_output_tokens"}, 1)
    assert body["output"][0]["status"] == "incomplete" and body["output"][0]["content"][0]["text"] == "Hel"
    assert server.last().request.max_tokens == 1
    events = events_of(server, {"input": CUT})
    assert [e["type"] for e in events][-4:] == ["response.output_text.done", "response.content_part.done",
                                                "response.output_item.done", "response.incomplete"]
    assert events[-1]["response"]["status"] == "incomplete"


def test_text_formats(server):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    r = server.client.responses.create(model=MODEL, input="hi", text={"format": {
        "type": "json_schema", "name": "result", "schema": schema, "strict": True}})
    turn = server.last()
    assert turn.request.response_schema == schema and turn.schema_index == ("schema-index", "result")
    assert json.loads(r.output_text) == {"answer": 42} and r.text.format.name == "result"
    server.client.responses.create(model=MODEL, input="hi", text={"format": {"type": "json_object"}})
    assert server.last().request.response_schema == {"type": "object"}
    server.client.responses.create(model=MODEL, input="hi", text={"format": {"type": "text"}})
    assert server.last().request.response_schema is None


USER = [{"role": "user", "content": "hi"}]
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
BAD_REQUESTS = [
    ({"input": "hi"}, 400, "model", "'model' is required"),
    ({"model": "gpt-4o", "input": "hi"}, 404, "model", "the model 'gpt-4o' does not exist; this server serves "
                                                       "'tiny-model'"),
    ({"model": MODEL}, 400, "input", "'input' is required"),
    ({"model": MODEL, "input": 5}, 400, "input", "'input' must be a string or a non-empty array of items"),
    ({"model": MODEL, "input": []}, 400, "input", "'input' must be a string or a non-empty array of items"),
    ({"model": MODEL, "input": ["hi"]}, 400, "input", "input[0] must be an object"),
    ({"model": MODEL, "input": [{"role": "robot", "content": "x"}]}, 400, "input",
     "input[0].role must be one of user, system, developer, assistant, got 'robot'"),
    ({"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, 400,
     "input", "input[0].content[0]: only text parts ({\"type\": \"input_text\", \"text\": ...}) are supported, got "
              "'input_image'"),
    ({"model": MODEL, "input": [{"role": "user", "content": None}]}, 400, "input",
     "input[0].content must be a string or an array of text parts, got null"),
    ({"model": MODEL, "input": USER + [{**CALL, "arguments": "{oops"}]}, 400, "input",
     "input[1].arguments is not valid JSON: Expecting property name enclosed in double quotes"),
    ({"model": MODEL, "input": USER + [{**CALL, "arguments": "[1]"}]}, 400, "input",
     "input[1].arguments must encode a JSON object"),
    # an integer past Python's 4,300-digit limit: json.loads raises a ValueError that is no JSONDecodeError (a 500)
    ({"model": MODEL, "input": USER + [{**CALL, "arguments": '{"n": 1' + "0" * 5000 + "}"}]}, 400, "input",
     "input[1].arguments is not valid JSON: Exceeds the limit (4300 digits) for integer string conversion: value "
     "has 5001 digits; use sys.set_int_max_str_digits() to increase the limit"),
    ({"model": MODEL, "input": USER + [{**CALL, "name": None}]}, 400, "input",
     "input[1].name must be a string, got null"),
    ({"model": MODEL, "input": USER + [{"type": "function_call_output", "call_id": "call_9", "output": "x"}]}, 400,
     "input", "input[1].call_id 'call_9' answers no function_call item before it in 'input'"),
    ({"model": MODEL, "input": USER + [CALL, {"type": "function_call_output", "call_id": "call_1", "output": 5}]},
     400, "input", "input[2].output must be a string or an array of text parts, got an integer"),
    ({"model": MODEL, "input": [{"type": "item_reference", "id": "msg_1"}]}, 400, "input",
     "input[0]: item_reference is not supported: this server keeps no responses; send the items themselves"),
    ({"model": MODEL, "input": [{"type": "reasoning", "summary": []}]}, 400, "input",
     "input[0].type 'reasoning' is not supported: only message, function_call and function_call_output items"),
    ({"model": MODEL, "input": "hi", "instructions": 5}, 400, "instructions",
     "'instructions' must be a string, got an integer"),
    ({"model": MODEL, "input": "hi", "previous_response_id": "resp_1"}, 400, "previous_response_id",
     "'previous_response_id' is not supported by this server: this server keeps no responses (store is accepted, "
     "nothing is stored); send the whole conversation in 'input'"),
    ({"model": MODEL, "input": "hi", "conversation": "conv_1"}, 400, "conversation",
     "'conversation' is not supported by this server: this server keeps no conversations; send the whole "
     "conversation in 'input'"),
    ({"model": MODEL, "input": "hi", "background": True}, 400, "background",
     "'background' is not supported by this server: responses are answered while the request waits (or streamed)"),
    ({"model": MODEL, "input": "hi", "truncation": "auto"}, 400, "truncation",
     "'truncation' is not supported by this server: a conversation longer than the context is refused, never "
     "truncated"),
    ({"model": MODEL, "input": "hi", "top_logprobs": 3}, 400, "top_logprobs",
     "'top_logprobs' is not supported by this server: log probabilities are not returned"),
    ({"model": MODEL, "input": "hi", "reasoning": {"effort": "high"}}, 400, "reasoning",
     "'reasoning' is not supported by this server (its models write no reasoning); leave it out"),
    ({"model": MODEL, "input": "hi", "include": ["message.output_text.logprobs"]}, 400, "include",
     "'include': message.output_text.logprobs is not supported by this server (log probabilities are not "
     "returned); leave it out"),
    ({"model": MODEL, "input": "hi", "tools": {"a": 1}}, 400, "tools", "'tools' must be an array, got an object"),
    ({"model": MODEL, "input": "hi", "tools": [{"type": "web_search"}]}, 400, "tools",
     "tools[0]: only function tools ({\"type\": \"function\", \"name\", \"parameters\"}) are supported, got type "
     "'web_search'"),
    ({"model": MODEL, "input": "hi", "tools": [{**WEATHER, "strict": "yes"}]}, 400, "tools",
     "tools[0].strict must be a boolean, got a string"),
    ({"model": MODEL, "input": "hi", "tools": [{**WEATHER, "name": None}]}, 400, "tools",
     "tools[0]: missing or empty 'name'"),
    ({"model": MODEL, "input": "hi", "tools": [WEATHER, WEATHER]}, 400, "tools",
     "tools: the function name 'get_weather' is given twice"),
    ({"model": MODEL, "input": "hi", "tools": [WEATHER], "tool_choice": "sometimes"}, 400, "tool_choice",
     "tool_choice must be 'auto', 'required', 'none' or {\"type\": \"function\", \"name\": ...}, got 'sometimes'"),
    ({"model": MODEL, "input": "hi", "tools": [WEATHER], "tool_choice": {"type": "allowed_tools", "mode": "auto",
                                                                        "tools": []}}, 400, "tool_choice",
     "tool_choice must be 'auto', 'required', 'none' or {\"type\": \"function\", \"name\": ...}, got type "
     "'allowed_tools'"),
    ({"model": MODEL, "input": "hi", "tool_choice": "required"}, 400, "tool_choice",
     "tool_choice 'required' needs tools"),
    ({"model": MODEL, "input": "hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "add"}}, 400,
     "tool_choice", "tool_choice names the function 'add', which is not among the tools"),
    ({"model": MODEL, "input": "hi", "max_output_tokens": 0}, 400, "max_output_tokens",
     "max_output_tokens must be at least 1, got 0"),
    ({"model": MODEL, "input": "hi", "stream": "yes"}, 400, "stream", "'stream' must be a boolean, got a string"),
    ({"model": MODEL, "input": "hi", "store": "yes"}, 400, "store", "'store' must be a boolean, got a string"),
    ({"model": MODEL, "input": "hi", "temperature": 3}, 400, "temperature",
     "temperature must be between 0 and 2, got 3.0"),
    ({"model": MODEL, "input": "hi", "text": {"format": {"type": "yaml"}}}, 400, "text.format",
     "text.format.type must be 'text', 'json_object' or 'json_schema', got 'yaml'"),
    ({"model": MODEL, "input": "hi", "text": {"format": {"type": "json_schema", "schema": {}}}}, 400, "text.format",
     "text.format.name must be a non-empty string"),
    ({"model": MODEL, "input": "hi", "text": {"format": {"type": "json_schema", "name": "r", "schema": {
        "type": "object", "minProperties": -1}}}}, 400, "text.format",
     "text.format 'r': invalid JSON Schema at 'minProperties': -1 is less than the minimum of 0"),
    ({"model": MODEL, "input": TOO_LONG}, 400, "input",
     "the prompt is 9000 tokens, longer than the model's context of 8192 tokens"),
]


@pytest.mark.parametrize("body,status,param,message", BAD_REQUESTS)
def test_each_bad_request_is_an_api_error_and_the_server_keeps_serving(server, body, status, param, message):
    err = error_of(server.post(body), status)
    assert (err["param"], err["message"]) == (param, message)
    server.good()


def test_the_body_has_the_chat_routes_bounds(server):
    # the Responses route reads its body as the chat route does (issue 30, item 1): a body 5,000 arrays deep
    # is a 400 naming the limit, not a RecursionError; NaN is no JSON; past 4 MiB is a 413
    deep = '{"model": "%s", "input": "hi", "x": %s}' % (MODEL, "[" * 5000 + "]" * 5000)
    err = error_of(server.post(deep), 400)
    assert (err["message"], err["code"]) == ("the request body nests arrays and objects 5,001 levels deep; this "
                                             "server takes at most 64", "nested_too_deeply")
    err = error_of(server.post('{"model": "%s", "input": "hi", "temperature": NaN}' % MODEL), 400)
    assert err["message"].startswith("the request body is not valid JSON: ")
    big = '{"model": "%s", "input": "%s"}' % (MODEL, "a" * (5 * 1024 * 1024))
    assert error_of(server.post(big), 413)["code"] == "request_too_large"
    server.good()


def test_a_body_that_is_not_json_and_a_schema_the_compiler_refuses(server):
    err = error_of(server.post(b"{oops"), 400)
    assert err["message"].startswith("the request body is not valid JSON: ") and err["param"] is None
    server.good()
    fetch = {"type": "function", "name": "fetch", "parameters": {
        "type": "object", "properties": {"doc": {"$ref": "http://example.com/doc.json"}}, "required": ["doc"]}}
    err = error_of(server.post({"model": MODEL, "input": "hi", "tools": [fetch]}), 400)
    assert "fetch" in err["message"] and "$ref" in err["message"] and err["param"] == "tools"
    server.good()
    bad = {"format": {"type": "json_schema", "name": "doc", "schema": {"$ref": "http://example.com/d.json"}}}
    err = error_of(server.post({"model": MODEL, "input": "hi", "text": bad}), 400)
    assert "$ref" in err["message"] and err["param"] == "text.format"
    server.good()


def test_engine_errors_and_unexpected_ones_are_api_errors(server):
    err = error_of(server.post({"model": MODEL, "input": FAIL}), 500)
    assert (err["message"], err["code"]) == ("decoding failed: out of memory", "internal_error")
    server.good()
    error_of(server.post({"model": MODEL, "input": SHUTDOWN}), 503)
    server.good()
    err = error_of(server.post({"model": MODEL, "input": CRASH}), 500)
    assert err["message"] == "internal error (RuntimeError): something broke in two lines"
    server.good()
    events = events_of(server, {"input": FAIL})
    assert [e["type"] for e in events][-3:] == ["response.output_text.delta", "error", "response.failed"]
    assert {k: events[-2][k] for k in ("code", "message", "param")} == {
        "code": "internal_error", "message": "decoding failed: out of memory", "param": None}
    assert events[-1]["response"]["status"] == "failed"
    assert events[-1]["response"]["error"] == {"code": "internal_error", "message": "decoding failed: out of memory"}
    server.good()
    error_of(server.http.get("/v1/responses"), 405)
    server.good()


def test_the_api_key_guards_the_route():
    engine = FakeEngine(script=loop_script)
    loader = CountingLoader()
    app = create_app(engine, IndexCache(loader.tools, loader.schema), MODEL, api_key="s3cret")
    with running(app) as url:
        err = error_of(httpx.post(url + "/v1/responses", json={"model": MODEL, "input": "hi"}), 401)
        assert err["code"] == "invalid_api_key"
        good = openai.OpenAI(base_url=url + "/v1", api_key="s3cret", max_retries=0)
        assert good.responses.create(model=MODEL, input="hi").output_text == "Hello é"
    engine.close()


def test_a_client_that_goes_away_has_its_turn_cancelled(server):
    engine = server.engine
    before = len(engine.turns)
    with httpx.Client(timeout=5) as http:
        with http.stream("POST", server.url + "/v1/responses", json={"model": MODEL, "input": SLOW,
                                                                     "stream": True}) as r:
            next(r.iter_lines())
    deadline = time.monotonic() + 5
    while engine.turns[before].ticket not in engine.cancelled():
        assert time.monotonic() < deadline, "the turn was not cancelled"
        time.sleep(0.02)
    assert len(engine.turns[before].events) < 3
    server.good()
