"""Agent loops against a running ``callmaybe serve``: does each client complete a tool turn with the served
model, ending in a text answer that uses the tool's result?

Clients (each with its defaults, as a user would run it): the plain ``openai`` client over chat completions
(``openai-chat``) and over the Responses API (``openai-responses``), a loop of at most ``--max-turns`` requests
that runs every call and sends its result back; openai-agents with its default model class
(``agents-responses``: ``OpenAIResponsesModel``, over ``/v1/responses``) and ``OpenAIChatCompletionsModel``
(``agents-chat``); pydantic-ai's OpenAI chat model (``pydantic-ai``); LangChain's ``ChatOpenAI.bind_tools``
(``langchain``) in the same loop. Tools: weather (``get_weather(city)``), currency (``convert_currency(amount,
from_currency, to_currency)``), to-do (``add_todo(item)``); each asked with and without a system message.

Printed for each client, tool and system message: every request's messages (or input items) and tool choice,
and every answer (the assistant message or output items), as the client sent and received them on the wire
(one JSON object a line); the calls the tool ran; the final text; and the verdict: ``ok`` (a text answer that
states the tool's result: the figure it returned), ``text without the result``, ``no text answer`` (the loop
ran out of turns, or ended on a call) or ``error: ...``. Then a table of verdicts. ``--json FILE`` writes every
loop (transcript included) for the notes. Usage::

    callmaybe serve --model smollm2-135m-instruct --port 8000 &
    python bench/agent_loops.py --url http://127.0.0.1:8000/v1 [--model M] [--clients openai-chat,langchain,...]
        [--tools weather,currency,todo] [--max-turns 4] [--max-tokens N] [--json FILE]

Needs the test extra's clients (``pip install -e '.[test]'``). Not run by ``make test``: the figures go in the
issue notes.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable

import httpx

CLIENTS = ("openai-chat", "openai-responses", "agents-responses", "agents-chat", "pydantic-ai", "langchain")
PACKAGES = ("openai", "openai-agents", "pydantic-ai-slim", "langchain-openai", "langchain-core")


# ---------------------------------------------------------------------------------------------------- the tools

def get_weather(city: str) -> str:
    """Get the current weather of a city."""
    return f"18 C and sunny in {city}"


def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money from one currency to another (ISO codes such as USD, EUR)."""
    return json.dumps({"amount": amount, "from": from_currency, "to": to_currency, "result": 92.17})


def add_todo(item: str) -> str:
    """Add an item to the user's to-do list."""
    return f"Added {item!r}: the list now has 4 items."


@dataclass(frozen=True)
class Task:
    """One tool, the request that needs it, a system message for it, and the figures of its result (one of them
    in the final text: the answer used the result)."""

    name: str
    function: Callable[..., str]
    parameters: dict[str, Any]
    request: str
    system: str
    evidence: tuple[str, ...]


TASKS = {
    "weather": Task("weather", get_weather,
                    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                    "What is the weather in Paris?",
                    "Answer weather questions; use the tool, then answer briefly.", ("18",)),
    "currency": Task("currency", convert_currency,
                     {"type": "object", "properties": {"amount": {"type": "number"},
                                                       "from_currency": {"type": "string"},
                                                       "to_currency": {"type": "string"}},
                      "required": ["amount", "from_currency", "to_currency"]},
                     "How much is 100 US dollars in euros?",
                     "You convert currencies with the tool, then give the result in one sentence.", ("92.17", "92,17")),
    "todo": Task("todo", add_todo,
                 {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
                 "Add 'call mom' to my to-do list.",
                 "You manage the user's to-do list with the tool; confirm briefly.", ("4 items", "four items")),
}


def chat_tool(task: Task) -> dict[str, Any]:
    fn = task.function
    return {"type": "function", "function": {"name": fn.__name__, "description": fn.__doc__,
                                             "parameters": task.parameters}}


def responses_tool(task: Task) -> dict[str, Any]:
    return {"type": "function", **chat_tool(task)["function"]}


# ---------------------------------------------------------------------------------------- the wire, recorded

@dataclass
class Exchange:
    """One request and its answer as they went over the wire."""

    path: str
    request: Any
    status: int
    answer: Any


@dataclass
class Loop:
    """One client's loop on one task: the wire, the calls the tool ran, the final text, the verdict."""

    client: str
    task: str
    system: bool
    exchanges: list[Exchange] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    final: str | None = None
    verdict: str = ""
    seconds: float = 0.0


def _decoded(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:  # a stream, or not JSON
        return content.decode("utf-8", "replace")


class Recording(httpx.BaseTransport):
    """An httpx transport that records each exchange into ``loop``."""

    def __init__(self, loop: Loop):
        self.loop, self.inner = loop, httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        content = response.read()
        self.loop.exchanges.append(Exchange(request.url.path, _decoded(request.content), response.status_code,
                                            _decoded(content)))
        return httpx.Response(response.status_code, headers=response.headers, content=content, request=request)


class AsyncRecording(httpx.AsyncBaseTransport):
    """:class:`Recording` for async clients."""

    def __init__(self, loop: Loop):
        self.loop, self.inner = loop, httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        content = await response.aread()
        self.loop.exchanges.append(Exchange(request.url.path, _decoded(request.content), response.status_code,
                                            _decoded(content)))
        return httpx.Response(response.status_code, headers=response.headers, content=content, request=request)


# ------------------------------------------------------------------------------------------------ the clients

@dataclass
class Settings:
    url: str
    model: str
    max_turns: int
    max_tokens: int | None
    timeout: float


def recorded(task: Task, loop: Loop) -> Callable[..., str]:
    """The task's tool, recording each call's arguments into ``loop`` (with the tool's own name, docstring and
    signature, which the frameworks read)."""
    fn = task.function
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def tool(*args, **kwargs):
        arguments = signature.bind_partial(*args, **kwargs).arguments
        loop.calls.append({"name": fn.__name__, "arguments": dict(arguments)})
        return fn(*args, **kwargs)

    return tool


def run_openai_chat(s: Settings, task: Task, system: bool, loop: Loop) -> str | None:
    import openai

    client = openai.OpenAI(base_url=s.url, api_key="unused", max_retries=0, timeout=s.timeout,
                           http_client=httpx.Client(transport=Recording(loop), timeout=s.timeout))
    tool = recorded(task, loop)
    messages: list[dict[str, Any]] = ([{"role": "system", "content": task.system}] if system else [])
    messages.append({"role": "user", "content": task.request})
    extra = {"max_tokens": s.max_tokens} if s.max_tokens else {}
    for _ in range(s.max_turns):
        reply = client.chat.completions.create(model=s.model, messages=messages, tools=[chat_tool(task)], **extra)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = tool(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return None


def run_openai_responses(s: Settings, task: Task, system: bool, loop: Loop) -> str | None:
    import openai

    client = openai.OpenAI(base_url=s.url, api_key="unused", max_retries=0, timeout=s.timeout,
                           http_client=httpx.Client(transport=Recording(loop), timeout=s.timeout))
    tool = recorded(task, loop)
    items: list[Any] = [{"role": "user", "content": task.request}]
    extra: dict[str, Any] = {"max_output_tokens": s.max_tokens} if s.max_tokens else {}
    if system:
        extra["instructions"] = task.system
    for _ in range(s.max_turns):
        reply = client.responses.create(model=s.model, input=items, tools=[responses_tool(task)], **extra)
        calls = [o for o in reply.output if o.type == "function_call"]
        if not calls:
            return reply.output_text
        items += [o.model_dump(exclude_none=True) for o in reply.output]
        for call in calls:
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": tool(**json.loads(call.arguments))})
    return None


def run_agents(s: Settings, task: Task, system: bool, loop: Loop, responses: bool) -> str | None:
    import openai
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig, Runner
    from agents import function_tool
    from agents.exceptions import MaxTurnsExceeded

    client = openai.AsyncOpenAI(base_url=s.url, api_key="unused", max_retries=0, timeout=s.timeout,
                                http_client=httpx.AsyncClient(transport=AsyncRecording(loop), timeout=s.timeout))
    model_class = OpenAIResponsesModel if responses else OpenAIChatCompletionsModel
    agent = Agent(name="assistant", instructions=task.system if system else None,
                  tools=[function_tool(recorded(task, loop))], model=model_class(model=s.model, openai_client=client),
                  model_settings=ModelSettings(max_tokens=s.max_tokens))
    try:
        result = Runner.run_sync(agent, task.request, max_turns=s.max_turns,
                                 run_config=RunConfig(tracing_disabled=True))
    except MaxTurnsExceeded:
        return None
    return result.final_output if isinstance(result.final_output, str) else None


def run_pydantic_ai(s: Settings, task: Task, system: bool, loop: Loop) -> str | None:
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    client = openai.AsyncOpenAI(base_url=s.url, api_key="unused", max_retries=0, timeout=s.timeout,
                                http_client=httpx.AsyncClient(transport=AsyncRecording(loop), timeout=s.timeout))
    model = OpenAIChatModel(s.model, provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, system_prompt=task.system if system else (), tools=[recorded(task, loop)],
                  model_settings={"max_tokens": s.max_tokens} if s.max_tokens else None)
    try:
        return agent.run_sync(task.request, usage_limits=UsageLimits(request_limit=s.max_turns)).output
    except UsageLimitExceeded:
        return None


def run_langchain(s: Settings, task: Task, system: bool, loop: Loop) -> str | None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool as as_tool
    from langchain_openai import ChatOpenAI

    tool = as_tool(recorded(task, loop))
    llm = ChatOpenAI(base_url=s.url, api_key="unused", model=s.model, max_retries=0, timeout=s.timeout,
                     max_tokens=s.max_tokens,
                     http_client=httpx.Client(transport=Recording(loop), timeout=s.timeout)).bind_tools([tool])
    messages: list[Any] = ([SystemMessage(task.system)] if system else []) + [HumanMessage(task.request)]
    for _ in range(s.max_turns):
        reply = llm.invoke(messages)
        if not reply.tool_calls:
            return reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
        messages.append(reply)
        messages += [tool.invoke(call) for call in reply.tool_calls]
    return None


RUNNERS: dict[str, Callable[[Settings, Task, bool, Loop], str | None]] = {
    "openai-chat": run_openai_chat,
    "openai-responses": run_openai_responses,
    "agents-responses": lambda s, t, system, loop: run_agents(s, t, system, loop, responses=True),
    "agents-chat": lambda s, t, system, loop: run_agents(s, t, system, loop, responses=False),
    "pydantic-ai": run_pydantic_ai,
    "langchain": run_langchain,
}


def verdict(task: Task, final: str | None) -> str:
    """``ok`` when the final text states one of the task's figures; else what went wrong."""
    if final is None:
        return "no text answer"
    if not final.strip():
        return "empty text"
    if any(e.lower() in final.lower() for e in task.evidence):
        return "ok"
    return "text without the result"


def run_loop(s: Settings, client: str, task: Task, system: bool) -> Loop:
    loop = Loop(client, task.name, system)
    start = time.monotonic()
    try:
        loop.final = RUNNERS[client](s, task, system, loop)
        loop.verdict = verdict(task, loop.final)
    except Exception as exc:  # a framework's own error: the verdict, one line
        loop.verdict = f"error: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    loop.seconds = time.monotonic() - start
    return loop


# --------------------------------------------------------------------------------------------------- printing

def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def sent(exchange: Exchange) -> list[str]:
    """The conversation of a request, one message (or input item) a line, and its tool choice."""
    body = exchange.request if isinstance(exchange.request, dict) else {}
    lines = []
    if body.get("instructions") is not None:
        lines.append(_line({"instructions": body["instructions"]}))
    conversation = body.get("messages", body.get("input"))
    lines += [_line(m) for m in (conversation if isinstance(conversation, list) else [conversation])]
    lines.append(_line({"tool_choice": body.get("tool_choice"), "tools": [
        (t.get("function") or t).get("name") for t in body.get("tools") or []]}))
    return lines


def received(exchange: Exchange) -> list[str]:
    """The answer of a request: the assistant message and finish reason, or the output items, or the error."""
    answer = exchange.answer
    if not isinstance(answer, dict):
        return [_line(answer)]
    if answer.get("error"):
        return [_line({"status": exchange.status, **answer})]
    if "choices" in answer:
        choice = answer["choices"][0]
        return [_line({**choice["message"], "finish_reason": choice["finish_reason"]})]
    if "output" in answer:
        return [_line(item) for item in answer["output"]] + [_line({"status": answer.get("status")})]
    return [_line(answer)]


def show(loop: Loop) -> None:
    print(f"\n=== {loop.client} / {loop.task} / {'with' if loop.system else 'without'} a system message "
          f"({loop.seconds:.1f} s)")
    for i, exchange in enumerate(loop.exchanges, 1):
        print(f"  -> request {i}: POST {exchange.path}")
        for line in sent(exchange):
            print(f"       {line}")
        print(f"  <- answer {i} ({exchange.status}):")
        for line in received(exchange):
            print(f"       {line}")
    print(f"  tool calls run: {_line(loop.calls)}")
    print(f"  final text: {_line(loop.final)}")
    print(f"  verdict: {loop.verdict}")


def table(loops: list[Loop], clients: list[str], tasks: list[str]) -> None:
    columns = [(t, system) for t in tasks for system in (True, False)]
    names = [f"{t}{'+sys' if system else ''}" for t, system in columns]
    width = max(len(c) for c in clients) + 2
    cell = max(max(len(n) for n in names), 9) + 2
    print("\n" + "client".ljust(width) + "".join(n.ljust(cell) for n in names) + "ok")
    for client in clients:
        row = {(lp.task, lp.system): lp for lp in loops if lp.client == client}
        marks = []
        for column in columns:
            v = row[column].verdict if column in row else "-"
            marks.append("ok" if v == "ok" else "no text" if v == "no text answer" else
                         "no result" if v == "text without the result" else v.split(":")[0])
        print(client.ljust(width) + "".join(m.ljust(cell) for m in marks)
              + f"{sum(row[c].verdict == 'ok' for c in columns if c in row)}/{len(columns)}")


def versions() -> str:
    out = []
    for package in PACKAGES:
        try:
            out.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            out.append(f"{package} (not installed)")
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/v1", help="the server's /v1 base URL")
    parser.add_argument("--model", help="the served model's name (default: the one /v1/models names)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated, of {', '.join(CLIENTS)}")
    parser.add_argument("--tools", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    parser.add_argument("--max-turns", type=int, default=4, help="requests per loop at most (default 4)")
    parser.add_argument("--max-tokens", type=int, help="each request's token budget (default: the clients')")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    parser.add_argument("--json", help="write every loop, transcript included, to this file")
    args = parser.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    tasks = [t for t in args.tools.split(",") if t]
    unknown = [c for c in clients if c not in RUNNERS] + [t for t in tasks if t not in TASKS]
    if unknown:
        print(f"agent_loops: unknown client or tool {unknown[0]!r} (clients: {', '.join(CLIENTS)}; tools: "
              f"{', '.join(TASKS)})", file=sys.stderr)
        return 2
    try:
        served = httpx.get(args.url.rstrip("/") + "/models", timeout=10).json()["data"][0]["id"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        print(f"agent_loops: no callmaybe server answers at {args.url}: {exc}", file=sys.stderr)
        return 2
    settings = Settings(args.url, args.model or served, args.max_turns, args.max_tokens, args.timeout)
    print(f"agent loops against {args.url} ({settings.model}); {versions()}")
    loops = []
    for client in clients:
        for name in tasks:
            for system in (True, False):
                loop = run_loop(settings, client, TASKS[name], system)
                show(loop)
                loops.append(loop)
    table(loops, clients, tasks)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"url": args.url, "model": settings.model, "versions": versions(),
                       "loops": [{"client": lp.client, "task": lp.task, "system": lp.system, "verdict": lp.verdict,
                                  "final": lp.final, "calls": lp.calls, "seconds": round(lp.seconds, 2),
                                  "exchanges": [vars(e) for e in lp.exchanges]} for lp in loops]},
                      f, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
