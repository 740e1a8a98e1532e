"""The server over a fake engine (scripted events, no model), served by uvicorn on a local port and driven by
httpx and the official openai client: request parsing, responses, streaming, every error status, auth, the
queue bound, the index cache (compile once, LRU, rate limit) and cancellation on disconnect."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from callmaybe.server.app import create_app
from callmaybe.server.limits import CompileRate
from callmaybe.server.tools import IndexCache

from .fake import CRASH, FAIL, SHUTDOWN, SLOW, TOO_LONG, TWO_CALLS, CountingLoader, FakeEngine
from .serving import running, streamed_calls

MODEL = "tiny-model"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}
USER = [{"role": "user", "content": "weather in Paris?"}]


class Served:
    def __init__(self, url, engine, loader, cache):
        self.url, self.engine, self.loader, self.cache = url, engine, loader, cache
        self.http = httpx.Client(base_url=url, timeout=10)
        self.client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)

    def post(self, body, **kw):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.http.post("/v1/chat/completions", content=data,
                              headers={"content-type": "application/json", **kw.pop("headers", {})}, **kw)

    def good(self):
        """A good request succeeds (after each bad one: the server keeps serving)."""
        r = self.post({"model": MODEL, "messages": USER, "tools": [WEATHER]})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["finish_reason"] == "tool_calls"


def serve(max_queue=64, per_minute=30, capacity=32, seconds=0.0, api_key=None):
    engine = FakeEngine(max_queue=max_queue)
    loader = CountingLoader(seconds)
    cache = IndexCache(loader.tools, loader.schema, {"parameters_key": "parameters"}, capacity,
                       CompileRate(per_minute))
    app = create_app(engine, cache, MODEL, api_key=api_key, info={"max_queue": max_queue})
    return engine, loader, cache, app


@pytest.fixture(scope="module")
def server():
    engine, loader, cache, app = serve()
    with running(app) as url:
        yield Served(url, engine, loader, cache)
    engine.close()


def error_of(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert "\n" not in body["error"]["message"] and "Traceback" not in body["error"]["message"]
    return body["error"]


def test_a_call_in_the_chat_completion_shape(server):
    r = server.post({"model": MODEL, "messages": USER, "tools": [WEATHER, ADD]})
    body = r.json()
    assert r.status_code == 200 and body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert body["model"] == MODEL and isinstance(body["created"], int)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "x", "unit": "c"}
    assert body["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    turn = server.engine.turns[-1]
    assert turn.request.tool_choice == "auto" and turn.request.parallel and turn.index is not None
    assert [f.name for f in turn.request.functions] == ["get_weather", "add"]


def test_tool_choice_modes_reach_the_turn_request(server):
    c = server.client
    c.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER, ADD], tool_choice="required",
                              parallel_tool_calls=False, max_tokens=50, temperature=0.5, top_p=0.9, seed=3)
    req = server.engine.turns[-1].request
    assert (req.tool_choice, req.function, req.parallel, req.max_tokens) == ("required", None, False, 50)
    assert (req.sampling.temperature, req.sampling.top_p, req.sampling.seed) == (0.5, 0.9, 3)
    r = c.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER, ADD],
                                  tool_choice={"type": "function", "function": {"name": "add"}},
                                  max_completion_tokens=40, max_tokens=10)
    req = server.engine.turns[-1].request
    assert (req.tool_choice, req.function, req.max_tokens) == ("required", "add", 40)
    assert r.choices[0].message.tool_calls[0].function.name == "add"
    r = c.chat.completions.create(model=MODEL, messages=USER, tools=[WEATHER], tool_choice="none")
    assert server.engine.turns[-1].request.tool_choice == "none"
    assert r.choices[0].message.content == "Hello é" and r.choices[0].finish_reason == "stop"
    r = c.chat.completions.create(model=MODEL, messages=USER)
    req = server.engine.turns[-1].request
    assert req.tool_choice == "none" and req.functions == [] and server.engine.turns[-1].index is None
    assert req.sampling.temperature == 0.0 and req.max_tokens == 256


def test_parallel_calls_and_an_agent_loop_with_a_tool_result(server):
    c = server.client
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": TWO_CALLS}],
                                  tools=[WEATHER, ADD])
    calls = r.choices[0].message.tool_calls
    assert [t.function.name for t in calls] == ["get_weather", "add"] and calls[0].id != calls[1].id
    messages = [{"role": "user", "content": "weather?"}, r.choices[0].message.model_dump(exclude_none=True),
                *({"role": "tool", "tool_call_id": t.id, "content": "20 C"} for t in calls)]
    r = c.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, ADD], tool_choice="none")
    sent = server.engine.turns[-1].request.messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert sent[1]["tool_calls"][1]["function"]["name"] == "add" and sent[1]["content"] is None
    assert [m["name"] for m in sent[2:]] == ["get_weather", "add"]  # filled in from the calls they answer
    assert r.choices[0].message.content == "Hello é"


def test_streaming_is_reassembled_by_the_openai_client(server):
    c = server.client
    chunks = list(c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": TWO_CALLS}],
                                            tools=[WEATHER, ADD], stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    calls = streamed_calls(chunks)
    assert [calls[i]["name"] for i in sorted(calls)] == ["get_weather", "add"]
    assert json.loads(calls[1]["arguments"]) == {"a": 1, "b": 1}
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == ["tool_calls"]
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 18
    # the client's own accumulator
    with c.chat.completions.stream(model=MODEL, messages=USER, tools=[WEATHER], tool_choice="none") as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "Hello é" and final.choices[0].finish_reason == "stop"


def test_the_raw_event_stream(server):
    with server.http.stream("POST", "/v1/chat/completions", json={
            "model": MODEL, "messages": USER, "stream": True}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = "".join(r.iter_text())
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Hello é"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and "usage" not in chunks[-1]
    assert {c["id"] for c in chunks} == {chunks[0]["id"]} and chunks[0]["object"] == "chat.completion.chunk"


def test_response_formats(server):
    c = server.client
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    r = c.chat.completions.create(model=MODEL, messages=USER, response_format={
        "type": "json_schema", "json_schema": {"name": "result", "schema": schema, "strict": True}})
    turn = server.engine.turns[-1]
    assert turn.request.response_schema == schema and turn.schema_index == ("schema-index", "result")
    assert json.loads(r.choices[0].message.content) == {"answer": 42}
    c.chat.completions.create(model=MODEL, messages=USER, response_format={"type": "json_object"})
    assert server.engine.turns[-1].request.response_schema == {"type": "object"}
    c.chat.completions.create(model=MODEL, messages=USER, response_format={"type": "text"})
    assert server.engine.turns[-1].request.response_schema is None
    c.chat.completions.create(model=MODEL, messages=USER, response_format={
        "type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "array", "items": {"type": "integer"}}}})
    assert server.engine.turns[-1].request.response_schema["type"] == "array"


BAD_REQUESTS = [
    (b"{not json", 400, None, "not valid JSON"),
    (b"[1, 2]", 400, None, "JSON object"),
    ({"messages": USER}, 400, "model", "'model' is required"),
    ({"model": MODEL}, 400, "messages", "non-empty array"),
    ({"model": MODEL, "messages": "hi"}, 400, "messages", "non-empty array"),
    ({"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}, 400, "messages", "role"),
    ({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "messages", "text"),
    ({"model": MODEL, "messages": [{"role": "tool", "content": "x"}]}, 400, "messages", "tool_call_id"),
    ({"model": MODEL, "messages": [{"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}, 400, "messages",
     "not valid JSON"),
    ({"model": MODEL, "messages": USER, "max_tokens": "many"}, 400, "max_tokens", "integer"),
    ({"model": MODEL, "messages": USER, "max_tokens": 0}, 400, "max_tokens", "at least 1"),
    ({"model": MODEL, "messages": USER, "stream": "yes"}, 400, "stream", "boolean"),
    ({"model": MODEL, "messages": USER, "temperature": 3}, 400, "temperature", "between 0 and 2"),
    ({"model": MODEL, "messages": USER, "top_p": 1.5}, 400, "top_p", "top_p must be between 0 and 1, got 1.5"),
    ({"model": MODEL, "messages": USER, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop", "up to 4"),
    ({"model": MODEL, "messages": USER, "stop": [""]}, 400, "stop", "non-empty string"),
    ({"model": MODEL, "messages": USER, "logprobs": True}, 400, "logprobs",
     "'logprobs' is not supported by this server (it would be ignored); leave it out"),
    ({"model": MODEL, "messages": USER, "presence_penalty": 0.5}, 400, "presence_penalty", "not supported"),
    ({"model": MODEL, "messages": USER, "logit_bias": {"42": 5}}, 400, "logit_bias", "not supported"),
    ({"model": MODEL, "messages": USER, "n": 2}, 400, "n", "n=2"),
    ({"model": MODEL, "messages": USER, "tools": {"a": 1}}, 400, "tools", "array"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "retrieval"}]}, 400, "tools", "tools[0]"),
    ({"model": MODEL, "messages": USER, "tools": [WEATHER, WEATHER]}, 400, "tools", "given twice"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"x": {"type": 7}}}}}]}, 400, "tools",
     "invalid JSON Schema"),
    ({"model": MODEL, "messages": USER, "tools": [WEATHER], "tool_choice": "sometimes"}, 400, "tool_choice", "'auto'"),
    ({"model": MODEL, "messages": USER, "tool_choice": "required"}, 400, "tool_choice", "needs tools"),
    ({"model": MODEL, "messages": USER, "tools": [WEATHER],
      "tool_choice": {"type": "function", "function": {"name": "add"}}}, 400, "tool_choice", "'add'"),
    ({"model": MODEL, "messages": USER, "response_format": {"type": "yaml"}}, 400, "response_format", "yaml"),
    ({"model": MODEL, "messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "r", "schema": {"type": "object", "minProperties": -1}}}}, 400, "response_format", "invalid JSON"),
    ({"model": "gpt-4o", "messages": USER}, 404, "model", "'gpt-4o' does not exist"),
    ({"model": MODEL, "messages": [{"role": "user", "content": TOO_LONG}]}, 400, "messages", "context"),
]


@pytest.mark.parametrize("body,status,param,words", BAD_REQUESTS)
def test_each_bad_request_is_an_api_error_and_the_server_keeps_serving(server, body, status, param, words):
    err = error_of(server.post(body), status)
    assert err["param"] == param and words in err["message"], err
    if status == 404:
        assert err["code"] == "model_not_found"
    server.good()


def test_a_schema_the_compiler_refuses_names_the_tool_and_the_keyword(server):
    tool = {"type": "function", "function": {"name": "fetch", "parameters": {
        "type": "object", "properties": {"doc": {"$ref": "http://example.com/doc.json"}}, "required": ["doc"]}}}
    for _ in range(2):  # the second answer comes from the remembered refusal
        err = error_of(server.post({"model": MODEL, "messages": USER, "tools": [tool]}), 400)
        assert "fetch" in err["message"] and "$ref" in err["message"] and err["param"] == "tools"
        server.good()
    bad = {"type": "json_schema", "json_schema": {"name": "doc", "schema": {"$ref": "http://example.com/d.json"}}}
    err = error_of(server.post({"model": MODEL, "messages": USER, "response_format": bad}), 400)
    assert "$ref" in err["message"] and err["param"] == "response_format"
    server.good()


def test_engine_errors_and_unexpected_ones_are_api_errors(server):
    err = error_of(server.post({"model": MODEL, "messages": [{"role": "user", "content": FAIL}]}), 500)
    assert err["message"] == "decoding failed: out of memory"
    server.good()
    error_of(server.post({"model": MODEL, "messages": [{"role": "user", "content": SHUTDOWN}]}), 503)
    server.good()
    err = error_of(server.post({"model": MODEL, "messages": [{"role": "user", "content": CRASH}]}), 500)
    assert "RuntimeError" in err["message"]
    server.good()
    with pytest.raises(openai.APIError, match="out of memory"):
        list(server.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": FAIL}],
                                                   stream=True))
    server.good()
    err = error_of(server.http.get("/v1/nothing"), 404)
    assert "no route" in err["message"]
    error_of(server.http.get("/v1/chat/completions"), 405)
    server.good()


def test_models_and_health(server):
    models = server.client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert server.client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        server.client.models.retrieve("other")
    health = server.http.get("/health").json()
    assert health["status"] == "ok" and health["model"] == MODEL and health["max_queue"] == 64
    assert {"queued", "decoding", "indexes", "compiling"} <= set(health)


def test_the_same_new_tool_list_is_compiled_once_under_concurrent_requests():
    engine, loader, cache, app = serve(seconds=0.5)
    tools = [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}]
    with running(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        ask = lambda _: client.chat.completions.create(model=MODEL, messages=USER, tools=tools)  # noqa: E731
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(ask, range(4)))
        assert [a.choices[0].message.tool_calls[0].function.name for a in answers] == ["ping"] * 4
        assert loader.tools_calls == 1
        ask(0)  # cached
        assert loader.tools_calls == 1 and len(cache) == 1
    engine.close()


def tool_named(name):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object",
                                                                         "properties": {"q": {"type": "string"}}}}}


def test_the_cache_is_bounded_and_new_tool_lists_are_rate_limited():
    engine, loader, cache, app = serve(per_minute=3, capacity=2)
    with running(app) as url:
        s = Served(url, engine, loader, cache)
        for name in ("a", "b", "c"):  # three new lists: the third drops "a" from memory
            assert s.post({"model": MODEL, "messages": USER, "tools": [tool_named(name)]}).status_code == 200
        assert loader.tools_calls == 3 and len(cache) == 2
        err = error_of(s.post({"model": MODEL, "messages": USER, "tools": [tool_named("a")]}), 429)
        assert "new tool lists" in err["message"] and err["code"] == "compile_rate_exceeded"
        # lists in memory don't count
        assert s.post({"model": MODEL, "messages": USER, "tools": [tool_named("c")]}).status_code == 200
        r = s.post({"model": MODEL, "messages": USER, "tools": [tool_named("b")]})
        assert r.status_code == 200 and loader.tools_calls == 3
        assert int(s.post({"model": MODEL, "messages": USER, "tools": [tool_named("d")]}).headers["retry-after"]) >= 1
    engine.close()


def test_a_full_queue_is_429():
    engine, loader, cache, app = serve(max_queue=1)
    engine.hold.clear()  # nothing runs: turns stay queued
    with running(app) as url:
        s = Served(url, engine, loader, cache)
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(s.post, {"model": MODEL, "messages": USER})
            deadline = time.monotonic() + 5
            while engine.queued < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            err = error_of(s.post({"model": MODEL, "messages": USER}), 429)
            assert err["code"] == "queue_full" and "busy" in err["message"]
            engine.hold.set()
            assert first.result(5).status_code == 200
        s.good()
    engine.close()


def test_the_api_key_guards_every_v1_route():
    engine, loader, cache, app = serve(api_key="s3cret")
    with running(app) as url:
        s = Served(url, engine, loader, cache)
        body = {"model": MODEL, "messages": USER}
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "s3cret"}):
            err = error_of(s.post(body, headers=headers), 401)
            assert err["code"] == "invalid_api_key"
            error_of(s.http.get("/v1/models", headers=headers), 401)
        assert s.post(body, headers={"authorization": "Bearer s3cret"}).status_code == 200
        good = openai.OpenAI(base_url=url + "/v1", api_key="s3cret", max_retries=0)
        assert good.chat.completions.create(model=MODEL, messages=USER).choices[0].message.content
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url + "/v1", api_key="nope", max_retries=0).models.list()
        assert s.http.get("/health").status_code == 200  # not under /v1
    engine.close()


def wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_client_that_goes_away_has_its_turn_cancelled(server):
    engine = server.engine
    # waiting for a whole answer
    engine.hold.clear()
    before = len(engine.turns)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/chat/completions", json={"model": MODEL, "messages": USER}, timeout=0.5)
    wait_for(lambda: engine.turns[before].ticket in engine.cancelled())
    engine.hold.set()
    server.good()
    # streaming: read the first chunk, then hang up
    before = len(engine.turns)
    with httpx.Client(timeout=5) as http:
        with http.stream("POST", server.url + "/v1/chat/completions", json={
                "model": MODEL, "messages": [{"role": "user", "content": SLOW}], "stream": True}) as r:
            next(r.iter_lines())
    wait_for(lambda: engine.turns[before].ticket in engine.cancelled())
    assert len(engine.turns[before].events) < 3
    server.good()


# issue 30: what a hostile client found (items 1, 4, 5, 6; the behaviour does not depend on the model) ---------

LIMIT = "this server takes at most 64"


def nested_schema(levels: int) -> str:
    """The JSON text of an object schema ``levels`` objects deep (each level: an object and its properties),
    written by hand: json.dumps itself recurses."""
    return '{"type": "object", "properties": {"a": ' * levels + '{"type": "string"}' + "}}" * levels


def test_nesting_past_the_limit_is_a_400_naming_it(server):
    """Item 1: a tool's parameters or a response_format schema 2,000 levels deep, or a body 5,000 arrays deep,
    was a 500 (RecursionError while decoding the body); now a 400 naming the limit, whatever the depth, checked
    before the body is parsed."""
    tool = ('{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
            '"function": {"name": "f", "parameters": %s}}]}') % (MODEL, nested_schema(2000))
    error = error_of(server.post(tool), 400)
    assert error == {"message": f"the request body nests arrays and objects 4,005 levels deep; {LIMIT}",
                     "type": "invalid_request_error", "param": None, "code": "nested_too_deeply"}
    fmt = ('{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": '
           '"json_schema", "json_schema": {"name": "r", "schema": %s}}}') % (MODEL, nested_schema(2000))
    assert error_of(server.post(fmt), 400)["message"] == f"the request body nests arrays and objects 4,004 levels deep; {LIMIT}"
    deep = '{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "x": %s}' % (MODEL, "[" * 5000 + "]" * 5000)
    assert error_of(server.post(deep), 400)["message"] == f"the request body nests arrays and objects 5,001 levels deep; {LIMIT}"
    # the limit itself: 64 levels are read (an unknown field is ignored), 65 are not
    at = '{"model": "%s", "messages": [{"role": "user", "content": "[[[[hi"}], "x": %s}'
    assert server.post(at % (MODEL, "[" * 63 + "]" * 63)).status_code == 200
    assert error_of(server.post(at % (MODEL, "[" * 64 + "]" * 64)), 400)["message"] == (
        f"the request body nests arrays and objects 65 levels deep; {LIMIT}")
    server.good()


def test_a_body_past_the_size_limit_is_a_413(server):
    """The body's size is bounded too (4 MiB): by its content-length before it is read, or as it streams."""
    big = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "a" * (5 * 2**20)}]})
    error = error_of(server.post(big), 413)
    assert error == {"message": f"the request body is {len(big):,} bytes; this server takes at most 4,194,304 bytes",
                     "type": "invalid_request_error", "param": None, "code": "request_too_large"}
    chunked = server.http.post("/v1/chat/completions", content=iter([big.encode()[i:i + 2**20]
                                                                     for i in range(0, len(big), 2**20)]))
    assert error_of(chunked, 413)["message"] == "the request body is longer; this server takes at most 4,194,304 bytes"
    server.good()


def test_tool_and_schema_names_are_the_apis(server):
    """Item 5: names OpenAI's API rejects were accepted (``get weather"}<|im_end|>``)."""
    rule = "1 to 64 letters, digits, underscores or dashes (^[a-zA-Z0-9_-]{1,64}$)"
    for name in ['get weather"}<|im_end|>', "math.factorial", "x" * 65, "héllo"]:
        tool = {"type": "function", "function": {**WEATHER["function"], "name": name}}
        error = error_of(server.post({"model": MODEL, "messages": USER, "tools": [ADD, tool]}), 400)
        assert error["message"] == f"tools[1].function.name {name!r} is not a valid function name: {rule}"
        assert error["param"] == "tools"
    fmt = {"type": "json_schema", "json_schema": {"name": "my schema", "schema": {"type": "object"}}}
    error = error_of(server.post({"model": MODEL, "messages": USER, "response_format": fmt}), 400)
    assert error["message"] == f"response_format.json_schema.name 'my schema' is not a valid name: {rule}"
    tool = {"type": "function", "function": {**WEATHER["function"], "name": "get-weather_2" + "x" * 51}}
    assert server.post({"model": MODEL, "messages": USER, "tools": [tool]}).status_code == 200  # 64 characters
    server.good()


def test_seeds_outside_64_bits_are_refused(server):
    """Item 6: seeds were taken mod 2**63 (2**63, 2**64 and 2**70 all behaved like 0): the signed 64-bit
    range is honoured, each seed its own draw, and a seed outside it is refused."""
    for seed in (2**63, 2**64, 2**70, -(2**63) - 1):
        error = error_of(server.post({"model": MODEL, "messages": USER, "temperature": 1, "seed": seed}), 400)
        assert error["message"] == ("seed must be a signed 64-bit integer (from -9223372036854775808 to "
                                    f"9223372036854775807), got {seed}")
        assert error["param"] == "seed"
    for seed in (2**63 - 1, -(2**63), -1):
        assert server.post({"model": MODEL, "messages": USER, "temperature": 1, "seed": seed}).status_code == 200
        assert server.engine.turns[-1].request.sampling.seed == seed


def test_hanging_up_leaves_no_task_and_logs_no_error(server, caplog):
    """Item 4: clients that hung up left "Task was destroyed but it is pending!" (a waiting queue getter
    leaked when Starlette cancelled a stream) and a ClientDisconnect logged at error level. Now nothing is
    pending once they are gone, and nothing is logged above debug."""
    import asyncio
    import gc
    import logging
    import socket

    caplog.set_level(logging.DEBUG)
    port = int(server.url.rsplit(":", 1)[1])
    for _ in range(3):
        with httpx.Client(timeout=5) as http:  # streaming, gone after the first chunk
            with http.stream("POST", server.url + "/v1/chat/completions", json={
                    "model": MODEL, "messages": [{"role": "user", "content": SLOW}], "stream": True}) as r:
                next(r.iter_lines())
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": SLOW}]}).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        with socket.create_connection(("127.0.0.1", port)) as s:  # waiting for a whole answer, then gone
            s.sendall(head + b"content-length: %d\r\n\r\n" % len(body) + body)
            time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", port)) as s:  # gone while sending the body
            s.sendall(head + b"content-length: 1000\r\n\r\n" + body[:20])
            time.sleep(0.1)
    wait_for(lambda: server.engine.queued == 0 and server.engine.decoding == 0)
    time.sleep(0.3)
    gc.collect()
    pending = [t.get_coro().__qualname__ for t in gc.get_objects() if isinstance(t, asyncio.Task) and not t.done()]
    assert pending == ["Server.serve"]  # uvicorn's own
    loud = [(r.name, r.levelname, r.getMessage()) for r in caplog.records
            if r.levelno > logging.DEBUG and r.name.startswith(("callmaybe", "asyncio"))]
    assert loud == []
    server.good()


def test_tool_call_arguments_with_an_integer_past_pythons_digit_limit_are_a_400(server):
    """json.loads raises a ValueError that is no JSONDecodeError for an integer of more than 4,300 digits: a
    previous turn's tool call carrying one was a 500."""
    arguments = '{"a": 1' + "0" * 5000 + ', "b": 2}'
    body = {"model": MODEL, "messages": [
        {"role": "user", "content": "add"},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                              "function": {"name": "add", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "3"}]}
    error = error_of(server.post(json.dumps(body)), 400)
    assert error["message"] == ("messages[1].tool_calls[0].function.arguments is not valid JSON: Exceeds the limit "
                                "(4300 digits) for integer string conversion: value has 5001 digits; use "
                                "sys.set_int_max_str_digits() to increase the limit")


def test_what_a_second_hostile_pass_found(server):
    """Issue 30, tried again as a hostile client: numbers JSON does not have (NaN, Infinity, 1e400, which
    Python's reader takes: a ``const`` of 1e400 came back as ``Infinity``), and a lone surrogate in a tool's
    schema (a UnicodeEncodeError in the compiler: a 500)."""
    for literal, why in (("NaN", "NaN is not a JSON value"), ("-Infinity", "-Infinity is not a JSON value"),
                         ("1e400", "the number 1e400 is past the range of a double")):
        body = '{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "temperature": %s}' % (MODEL, literal)
        assert error_of(server.post(body), 400)["message"] == f"the request body is not valid JSON: {why}"
    const = ('{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
             '"function": {"name": "f", "parameters": {"type": "object", "properties": {"p": {"const": 1e400}}}}}]}')
    assert error_of(server.post(const % MODEL), 400)["message"] == ("the request body is not valid JSON: the number "
                                                                   "1e400 is past the range of a double")
    broken = ('{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
              '"function": {"name": "f", "parameters": {"type": "object", "properties": {"p": {"enum": ["\\udc00"]}}}}}]}')
    error = error_of(server.post(broken % MODEL), 400)
    assert (error["message"], error["param"]) == (
        "tools[0] (f): text that is not valid Unicode (a lone surrogate) at 'parameters/properties/p/enum/0'", "tools")
    fmt = ('{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": '
           '"json_schema", "json_schema": {"name": "r", "schema": {"properties": {"\\ud800": {}}}}}}')
    assert error_of(server.post(fmt % MODEL), 400)["message"] == (
        "response_format 'r': text that is not valid Unicode (a lone surrogate) at 'properties/\\ud800'")
    server.good()


def test_a_pattern_the_check_cannot_compile_is_refused_before_decoding():
    """The server compiles a schema's patterns for the check after generation with its index (in the compile
    worker): one RE2 refuses is a 400 there, not a failed answer later."""
    from callmaybe.core.errors import SchemaError
    from callmaybe.core.indexfile import IndexData
    from callmaybe.server.serve import enforced

    index = IndexData(header={"not_enforced": []}, arrays={})
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^\\p{L}{1,10000}$"}}}
    with pytest.raises(SchemaError) as err:
        enforced(index, {"function 'f'": schema})
    assert str(err.value) == ("function 'f': pattern '^\\\\p{L}{1,10000}$' is too large for the check after "
                              "generation (pattern too large - compile failed)")
    assert enforced(index, {"function 'f'": {"type": "object"}}) is index
