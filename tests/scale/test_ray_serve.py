"""``callmaybe serve --ray`` (a child process joined to the tests' local Ray) with two replicas of the SmolLM2
fixture model, driven by the official openai client: valid calls from both replicas, and serving goes on while
one replica is killed (SIGKILL), until Ray Serve's replacement joins."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from callmaybe.core.catalog import Function, catalog_fingerprint, load_catalog, parse_catalog
from callmaybe.core.errors import IndexFileError
from callmaybe.core.files import cache_dir
from callmaybe.core.indexfile import read_header

from ..server.serving import free_port

MODEL = "smollm2-135m-instruct"
REPO = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": fn.name, "description": fn.description,
                                           "parameters": fn.parameters}}
         for fn in load_catalog(REPO / "schemas" / "functions_definition.json")]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                             "parameters": {"type": "object", "properties": {
                                                 "city": {"type": "string", "maxLength": 20}},
                                                 "required": ["city"]}}}]
WEATHER_FUNCTIONS = parse_catalog(WEATHER, "tools")
PROMPTS = ["What is the sum of 2 and 3?", "Greet john", "Reverse the string 'hello'", "What is the sum of 7 and 9?"]


def wait(condition, seconds: float, what: str, proc: subprocess.Popen):
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            pytest.fail(f"callmaybe serve --ray stopped ({proc.returncode}): {proc.stderr.read()[-3000:]}")
        try:
            value = condition()
            if value:
                return value
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


@pytest.fixture(scope="module")
def server(ray_cluster, tmp_path_factory):
    port = free_port()
    index_dir = tmp_path_factory.mktemp("shared-indexes")
    address = ray_cluster.get_runtime_context().gcs_address
    proc = subprocess.Popen([sys.executable, "-m", "callmaybe.cli", "serve", "--model", MODEL, "--dtype", "float32",
                             "--threads", "1", "--port", str(port), "--max-batch", "2", "--ray-replicas", "2",
                             "--ray-index-dir", str(index_dir), f"--ray={address}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    wait(lambda: httpx.get(url + "/health", timeout=2).status_code == 200, 600, "serve --ray did not start", proc)
    yield url, proc, index_dir
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(60) == 0
    except subprocess.TimeoutExpired:
        proc.kill()


def replicas(url: str, proc, want: int = 2, seconds: float = 120) -> set[int]:
    """The process ids of the replicas /health reports, asked until ``want`` distinct ones answered."""
    seen: set[int] = set()

    def enough():
        seen.add(httpx.get(url + "/health", timeout=5).json()["replica"])
        return len(seen) >= want

    wait(enough, seconds, f"fewer than {want} replicas answered /health", proc)
    return seen


def ask(client: openai.OpenAI, prompt: str):
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}], tools=TOOLS,
                                           tool_choice="required", max_tokens=64)
    call = reply.choices[0].message.tool_calls[0].function
    jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    return call


def uncache(functions: list[Function]) -> None:
    """Delete the local cache's indexes of ``functions`` (of any tokenizer): the tool list is new again."""
    for path in cache_dir("indexes").glob("*.safetensors"):
        try:
            if read_header(path).get("catalog_fingerprint") == catalog_fingerprint(functions):
                path.unlink()
        except IndexFileError:
            continue


def test_two_replicas_answer_valid_calls_and_keep_serving_while_one_is_killed(server):
    url, proc, index_dir = server
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=2, timeout=120)
    first = [ask(client, p) for p in PROMPTS]
    assert first[0].name == "fn_add_numbers"
    pids = replicas(url, proc)
    assert len(pids) == 2
    victim = min(pids)
    os.kill(victim, signal.SIGKILL)
    again = [ask(client, p) for p in PROMPTS]  # the client retries what the dead replica held
    assert [(c.name, c.arguments) for c in again] == [(c.name, c.arguments) for c in first]  # greedy: the same
    health = httpx.get(url + "/health", timeout=5).json()
    assert health["status"] == "ok" and health["replica"] != victim
    wait(lambda: httpx.get(url + "/health", timeout=5).json()["replica"] not in pids, 300,
         "Ray Serve did not replace the killed replica", proc)


def test_a_new_tool_list_is_compiled_once_for_every_replica(server):
    url, proc, index_dir = server
    uncache(WEATHER_FUNCTIONS)
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=2, timeout=300)
    with ThreadPoolExecutor(4) as pool:  # at once, so both replicas may get it before either has it
        replies = list(pool.map(lambda city: client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"Weather in {city}?"}], tools=WEATHER,
            tool_choice="required", max_tokens=32), ["Paris", "Rome", "Oslo", "Lima"]))
    for reply in replies:
        call = reply.choices[0].message.tool_calls[0].function
        assert call.name == "get_weather"
        jsonschema.validate(json.loads(call.arguments), WEATHER[0]["function"]["parameters"])
    seen = {}

    def both():
        health = httpx.get(url + "/health", timeout=5).json()
        seen[health["replica"]] = health["index_compiles"]
        return len(seen) >= 2

    wait(both, 120, "fewer than 2 replicas answered /health", proc)
    assert sum(c["compiled"] for c in seen.values()) == 1
    assert len(list(index_dir.glob("*.safetensors"))) == 1
    uncache(WEATHER_FUNCTIONS)
