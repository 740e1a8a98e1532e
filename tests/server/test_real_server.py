"""The real server (``callmaybe serve`` in a child process) with the SmolLM2 fixture model, driven by the
official openai client: every tool_choice mode, parallel calls, streaming reassembly, a two-turn agent loop, a
response schema, the error statuses, the Responses API; every returned call checked with jsonschema against its
tool. One server for the module (one model load)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from callmaybe.core.catalog import load_catalog
from callmaybe.runtime.answering import engine as engine_module

from .serving import free_port, streamed_calls

MODEL = "smollm2-135m-instruct"
REPO = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": fn.name, "description": fn.description,
                                           "parameters": fn.parameters}}
         for fn in load_catalog(REPO / "schemas" / "functions_definition.json")]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def server_log(tmp_path_factory):
    """The server's stderr (its log), a file: a pipe nobody reads would stop the server once full."""
    return tmp_path_factory.mktemp("serve") / "stderr.log"


@pytest.fixture(scope="module")
def server(server_log):
    if not hasattr(engine_module, "Engine"):
        pytest.skip("runtime.answering.engine.Engine is not on this branch yet")
    port = free_port()
    log = open(server_log, "w")
    proc = subprocess.Popen([sys.executable, "-m", "callmaybe.cli", "serve", "--model", MODEL, "--dtype", "float32",
                             "--threads", "1", "--port", str(port), "--max-batch", "2"],
                            stdout=subprocess.DEVNULL, stderr=log, text=True, env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        if proc.poll() is not None:
            pytest.fail(f"callmaybe serve stopped ({proc.returncode}): {server_log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "callmaybe serve did not start"
        time.sleep(0.3)
    yield url
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0, timeout=300)


def user(text):
    return [{"role": "user", "content": text}]


def checked(calls, tools=TOOLS):
    """Each call names a tool and its arguments (a JSON string) match that tool's parameters."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    out = []
    for call in calls:
        assert call.id.startswith("call_") and call.type == "function"
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, schemas[call.function.name])
        out.append((call.function.name, arguments))
    return out


def test_each_tool_choice_mode(client):
    r = client.chat.completions.create(model=MODEL, messages=user("What is the sum of 2 and 3?"), tools=TOOLS,
                                       tool_choice="required", parallel_tool_calls=False)
    assert r.choices[0].finish_reason == "tool_calls"
    assert checked(r.choices[0].message.tool_calls) == [("fn_add_numbers", {"a": 2.0, "b": 3.0})]
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    r = client.chat.completions.create(model=MODEL, messages=user("Reverse the string 'hello'"), tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "fn_greet"}})
    assert [name for name, _ in checked(r.choices[0].message.tool_calls)] == ["fn_greet"]
    r = client.chat.completions.create(model=MODEL, messages=user("Say hello in one word."), tools=TOOLS,
                                       tool_choice="none", max_tokens=8)
    assert r.choices[0].message.tool_calls is None and isinstance(r.choices[0].message.content, str)
    assert r.choices[0].finish_reason in ("stop", "length")
    r = client.chat.completions.create(model=MODEL, messages=user("What is the square root of 16?"), tools=TOOLS,
                                       max_tokens=40)  # auto
    choice = r.choices[0]
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls" and checked(choice.message.tool_calls)
    else:
        assert isinstance(choice.message.content, str) and choice.finish_reason in ("stop", "length")


def test_parallel_calls_and_a_two_turn_agent_loop(client):
    messages = user("Greet shrek and greet john.")
    r = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="required",
                                       parallel_tool_calls=True, max_tokens=96)
    calls = r.choices[0].message.tool_calls
    assert len(checked(calls)) >= 1
    messages += [r.choices[0].message.model_dump(exclude_none=True),
                 *({"role": "tool", "tool_call_id": c.id, "content": "done"} for c in calls)]
    r = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=24)
    choice = r.choices[0]
    assert choice.message.content is not None or checked(choice.message.tool_calls)


def test_streaming_is_reassembled(client):
    stream = client.chat.completions.create(model=MODEL, messages=user("What is the sum of 265 and 345?"),
                                            tools=TOOLS, tool_choice="required", stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    calls = streamed_calls(chunks)
    assert calls and all(c["name"] in SCHEMAS for c in calls.values())
    for c in calls.values():
        jsonschema.validate(json.loads(c["arguments"]), SCHEMAS[c["name"]])
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == ["tool_calls"]
    assert chunks[-1].usage.completion_tokens > 0
    chunks = list(client.chat.completions.create(model=MODEL, messages=user("Name a color."), max_tokens=6,
                                                 stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text and chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_a_response_schema(client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "days": {"type": "integer", "minimum": 1, "maximum": 7}},
              "required": ["city", "days"]}
    r = client.chat.completions.create(model=MODEL, messages=user("Plan 3 days in Rome as JSON."), max_tokens=48,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "plan", "schema": schema}})
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_error_statuses_and_the_server_keeps_serving(server, client):
    def good():
        r = client.chat.completions.create(model=MODEL, messages=user("Greet john"), tools=TOOLS[:3],
                                           tool_choice="required", max_tokens=48)
        checked(r.choices[0].message.tool_calls, TOOLS[:3])

    with pytest.raises(openai.NotFoundError, match="model_not_found|does not exist"):
        client.chat.completions.create(model="gpt-4o", messages=user("hi"))
    good()
    refused = [{"type": "function", "function": {"name": "fetch_doc", "parameters": {
        "type": "object", "properties": {"doc": {"$ref": "http://example.com/doc.json"}}, "required": ["doc"]}}}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=user("hi"), tools=refused)
    message = info.value.body["message"]
    assert "fetch_doc" in message and "$ref" in message and "\n" not in message
    good()
    with pytest.raises(openai.BadRequestError, match="context"):
        client.chat.completions.create(model=MODEL, messages=user("word " * 20000), tools=TOOLS)
    good()
    r = httpx.post(server + "/v1/chat/completions", content=b"{oops", timeout=30)
    assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}
    good()
    health = httpx.get(server + "/health", timeout=5).json()
    assert health["status"] == "ok" and health["model"] == MODEL


def test_what_a_user_found_breaking_it(server, client):
    """Each case a new user broke once (a 500, a call past the context, a replacement character)."""
    post = lambda body: httpx.post(server + "/v1/chat/completions", json={"model": MODEL, **body}, timeout=120)  # noqa: E731
    r = post({"messages": user("Greet john"), "tools": TOOLS, "tool_choice": "required", "max_tokens": 3})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"
    assert re.fullmatch(r"max_tokens 3 cannot hold a call: the shortest takes \d+ tokens", r.json()["error"]["message"])
    # a prompt that leaves less room than a call needs, whatever max_tokens says
    over = post({"messages": user("a " * 8192), "tools": TOOLS[:1], "tool_choice": "required"}).json()
    overhead = int(re.search(r"the prompt is (\d+) tokens", over["error"]["message"]).group(1)) - 8192
    r = post({"messages": user("a " * (8192 - 8 - overhead)), "tools": TOOLS[:1], "tool_choice": "required"})
    assert r.status_code == 400, r.text
    assert re.fullmatch(r"the prompt is 8184 tokens; the model's context \(8192\) leaves 8 for the answer: the "
                        r"shortest takes \d+ tokens", r.json()["error"]["message"]), r.text
    # a lone surrogate in the text (valid JSON, not valid Unicode)
    r = httpx.post(server + "/v1/chat/completions", timeout=60, headers={"content-type": "application/json"},
                   content=b'{"model": "%s", "messages": [{"role": "user", "content": "hi \\ud800"}]}' % MODEL.encode())
    assert r.status_code == 400 and "not valid Unicode" in r.json()["error"]["message"], r.text
    # any signed 64-bit seed (issue 30, item 6: one past it is refused)
    r = client.chat.completions.create(model=MODEL, messages=user("Greet john"), tools=TOOLS, tool_choice="required",
                                       temperature=0.7, seed=-(2**63), max_tokens=48)
    checked(r.choices[0].message.tool_calls)
    # stop texts end a text answer; top_p 0 is greedy
    r = client.chat.completions.create(model=MODEL, messages=user("Count from one to ten in words."),
                                       tool_choice="none", max_tokens=40, stop=[" "], top_p=0, temperature=1)
    assert r.choices[0].finish_reason == "stop" and " " not in (r.choices[0].message.content or "")
    assert r.system_fingerprint.startswith("callmaybe-")


def test_a_client_that_hangs_up_frees_its_row(server):
    with httpx.Client(timeout=60) as http:
        with http.stream("POST", server + "/v1/chat/completions", json={
                "model": MODEL, "messages": user("Write a long story about a dragon."), "tool_choice": "none",
                "max_tokens": 400, "stream": True}) as r:
            lines = r.iter_lines()
            next(lines)
            next(lines)
    deadline = time.monotonic() + 30
    while True:
        health = httpx.get(server + "/health", timeout=5).json()
        if health["decoding"] == 0 and health["queued"] == 0:
            break
        assert time.monotonic() < deadline, health
        time.sleep(0.2)


def test_the_readme_client_example_runs(server, capsys):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Serve\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    code = code.replace("http://127.0.0.1:8000/v1", server + "/v1").replace("qwen2.5-coder-1.5b-instruct", MODEL)
    exec(compile(code, "README.md", "exec"), {})
    assert "name='get_weather'" in capsys.readouterr().out


RESPONSES_WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
WEATHER_CHAT = {"type": "function",
                "function": {k: RESPONSES_WEATHER[k] for k in ("name", "description", "parameters")}}


def test_the_responses_api_answers_as_the_chat_route_does(client):
    """``responses.create`` (plain, with tools, a function_call_output round trip, streamed): the same turns
    as the chat route's for the same conversation, so the same answers and token counts."""
    r = client.responses.create(model=MODEL, input="What is the weather in Paris?", tools=[RESPONSES_WEATHER],
                                tool_choice="required")
    [call] = r.output
    assert (call.type, call.name, json.loads(call.arguments), r.status) == ("function_call", "get_weather",
                                                                           {"city": "Paris"}, "completed")
    chat = client.chat.completions.create(model=MODEL, messages=user("What is the weather in Paris?"),
                                          tools=[WEATHER_CHAT], tool_choice="required")
    assert chat.choices[0].message.tool_calls[0].function.arguments == call.arguments
    assert (r.usage.input_tokens, r.usage.output_tokens) == (chat.usage.prompt_tokens, chat.usage.completion_tokens)
    system = "Answer weather questions; use the tool, then answer briefly."
    items = [*user("What is the weather in Paris?"), call.model_dump(exclude_none=True),
             {"type": "function_call_output", "call_id": call.call_id, "output": "18 C and sunny"}]
    r = client.responses.create(model=MODEL, instructions=system, input=items, tools=[RESPONSES_WEATHER],
                                tool_choice="none", max_output_tokens=24)
    messages = [{"role": "system", "content": system}, *user("What is the weather in Paris?"),
                {"role": "assistant", "tool_calls": [{"id": call.call_id, "type": "function", "function": {
                    "name": "get_weather", "arguments": call.arguments}}]},
                {"role": "tool", "tool_call_id": call.call_id, "content": "18 C and sunny"}]
    chat = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_CHAT], tool_choice="none",
                                          max_tokens=24)
    assert r.output_text and r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == chat.usage.prompt_tokens > 0
    assert r.status == ("incomplete" if chat.choices[0].finish_reason == "length" else "completed")
    events = list(client.responses.create(model=MODEL, instructions=system, input=items, tools=[RESPONSES_WEATHER],
                                          tool_choice="none", max_output_tokens=24, stream=True))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == r.output_text
    assert events[-1].response.output_text == r.output_text and events[-1].response.status == r.status
    r = client.responses.create(model=MODEL, input="Say hello in one word.", max_output_tokens=8)
    chat = client.chat.completions.create(model=MODEL, messages=user("Say hello in one word."), max_tokens=8)
    assert r.output_text == chat.choices[0].message.content and r.usage.output_tokens == 8
    assert (r.status, r.incomplete_details.reason) == ("incomplete", "max_output_tokens")


# issue 30 ---------------------------------------------------------------------------------------------------

def post(server, body, **kw):
    return httpx.post(server + "/v1/chat/completions", json={"model": MODEL, **body}, timeout=300, **kw)


def test_a_schema_the_grammar_cannot_enforce_is_refused_up_front(server):
    """Item 2: a pattern with a repeat past 256 was decoded anyway and failed after generation with a 500
    (streamed: a 200 role chunk first, then an error event). Now a 400 naming the tool, the parameter and the
    keyword, before anything is decoded, for a tool as for a response_format."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|aa)*(b|c){50,900}[^x]{1000}$"}},
              "required": ["a"]}
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    why = ("pattern (a repeat count 1000 above 256): not enforced by the grammar, so an answer could fail it after "
           "generation; this server takes only schemas it enforces (callmaybe compile --explain says which keywords "
           "are)")
    for stream in (False, True):
        r = post(server, {"messages": user("Give me a string"), "tools": tools, "tool_choice": "required",
                          "stream": stream})
        assert r.status_code == 400, r.text
        assert r.json()["error"] == {"message": f"function 'f', parameter 'a': {why}", "type": "invalid_request_error",
                                     "param": "tools", "code": None}
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}
    r = post(server, {"messages": user("Give me a string"), "response_format": fmt})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == {"message": f"schema 'r', parameter 'a': {why}", "type": "invalid_request_error",
                                 "param": "response_format", "code": None}
    # an open object's repeated extra keys are the one thing left to the check: json_object is served
    r = post(server, {"messages": user("Reply in JSON."), "response_format": {"type": "json_object"}, "max_tokens": 24})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["refusal"] is None


#: get_time's shortest call in SmolLM2's tokens: alone (its name is forced text) and named among two tools (its
#: name pinned token by token, as the tokenizer writes the rest after the forced '{"name": "get_')
NEED_ALONE, NEED = 18, 19
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"timezone": {"type": "string", "pattern": "^[A-Za-z_]+/[A-Za-z_]+$"}},
    "required": ["timezone"]}}}


def test_a_named_function_in_a_small_budget_is_refused(server):
    """Item 3: get_weather and get_time, get_time named, max_tokens 16 or 17: an empty 200 (no content, no call,
    "length", 0 tokens), the budget checked against the shortest call of any tool. Now the named one's."""
    named = {"type": "function", "function": {"name": "get_time"}}
    alone = post(server, {"messages": user("What time is it in Paris?"), "tools": [TIME], "tool_choice": named,
                          "max_tokens": 3})
    assert alone.json()["error"]["message"] == (f"max_tokens 3 cannot hold a call of get_time: the shortest takes "
                                                f"{NEED_ALONE} tokens")
    need = NEED
    for budget in (16, 17, need - 1):
        r = post(server, {"messages": user("What time is it in Paris?"), "tools": [WEATHER, TIME],
                          "tool_choice": named, "max_tokens": budget})
        assert r.status_code == 400, r.text
        assert r.json()["error"] == {"message": f"max_tokens {budget} cannot hold a call of get_time: the shortest "
                                                f"takes {need} tokens", "type": "invalid_request_error",
                                     "param": "max_tokens", "code": None}
    r = post(server, {"messages": user("What time is it in Paris?"), "tools": [WEATHER, TIME], "tool_choice": named,
                      "max_tokens": need})
    assert r.status_code == 200, r.text
    [call] = r.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_time"
    jsonschema.validate(json.loads(call["function"]["arguments"]), TIME["function"]["parameters"])


def test_the_log_after_clients_hung_up_holds_no_error(server, server_log):
    """Item 4: after clients hung up, the log held "Task was destroyed but it is pending!" lines and
    ClientDisconnect at error level. Hang up in every way, then read the log."""
    import socket

    port = int(server.rsplit(":", 1)[1])
    body = json.dumps({"model": MODEL, "messages": user("Write a long story about a dragon."), "tool_choice": "none",
                       "max_tokens": 200}).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    for _ in range(3):
        with httpx.Client(timeout=60) as http:
            with http.stream("POST", server + "/v1/chat/completions", json={**json.loads(body), "stream": True}) as r:
                next(r.iter_lines())
        with socket.create_connection(("127.0.0.1", port)) as s:  # waiting for the whole answer
            s.sendall(head + b"content-length: %d\r\n\r\n" % len(body) + body)
            time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", port)) as s:  # while sending the body
            s.sendall(head + b"content-length: 1000\r\n\r\n" + body[:20])
            time.sleep(0.2)
    deadline = time.monotonic() + 60
    while (h := httpx.get(server + "/health", timeout=5).json())["decoding"] or h["queued"]:
        assert time.monotonic() < deadline, h
        time.sleep(0.2)
    r = post(server, {"messages": user("Greet john"), "tools": TOOLS, "tool_choice": "required", "max_tokens": 48})
    assert r.status_code == 200, r.text
    log = server_log.read_text()
    for bad in ("Task was destroyed", "ClientDisconnect", "Traceback", "ERROR", "chat completion failed"):
        assert bad not in log, log[-3000:]
