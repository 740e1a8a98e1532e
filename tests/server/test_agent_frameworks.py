"""Agent frameworks against the server (uvicorn on a local port) over a scripted model of a tool loop
(tests/server/fake.py, ``loop_script``: a call first, then text from the tool's result): openai-agents with
its default model class (``OpenAIResponsesModel``, over ``/v1/responses``, whole and streamed) and
``OpenAIChatCompletionsModel``; pydantic-ai's OpenAI chat model (and its Responses model); LangChain's
``ChatOpenAI.bind_tools`` in a two-turn loop (over chat completions, and with ``use_responses_api``). Each
completes a tool turn with and without a system message; the test checks the call the tool got, the final
text, and the exact conversation each framework sent (as the turn requests the engine received)."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from agents import Agent as AgentsAgent
from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig, Runner, function_tool
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool as langchain_tool
from langchain_openai import ChatOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel as PydanticResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from callmaybe.server.app import create_app
from callmaybe.server.tools import IndexCache

from .fake import CountingLoader, FakeEngine, loop_script
from .serving import running

MODEL = "tiny-model"
SYSTEM = "Answer weather questions; use the tool, then answer briefly."
ASK = "What is the weather in Paris?"
RESULT = "18 C and sunny in Paris"
FINAL = f"weather answered: {RESULT}"  # the scripted model's answer from the tool's result
ASKED: list[str] = []


def weather(city: str) -> str:
    """The weather of a city."""
    ASKED.append(city)
    return f"18 C and sunny in {city}"


@pytest.fixture(autouse=True)
def no_calls_yet():
    ASKED.clear()


@pytest.fixture(scope="module")
def served():
    engine = FakeEngine(script=loop_script)
    loader = CountingLoader()
    with running(create_app(engine, IndexCache(loader.tools, loader.schema), MODEL)) as url:
        yield url + "/v1", engine
    engine.close()


def conversation(engine, before: int, system: bool) -> None:
    """The loop took two turns: the request with the tool, then the conversation with the call and its
    result (the call being weather(city="Paris"), the result the tool's)."""
    turns = [t.request for t in engine.turns[before:]]
    assert len(turns) == 2
    head = [{"role": "system", "content": SYSTEM}] if system else []
    asked = head + [{"role": "user", "content": ASK}]
    assert turns[0].messages == asked
    assert [f.name for f in turns[0].functions] == ["weather"] and turns[0].tool_choice == "auto"
    [call] = turns[1].messages[len(asked)]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("weather", {"city": "Paris"})
    assert turns[1].messages == asked + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "name": "weather", "content": RESULT}]


@pytest.mark.parametrize("system", [True, False])
@pytest.mark.parametrize("model_class", [OpenAIResponsesModel, OpenAIChatCompletionsModel])
def test_openai_agents(served, model_class, system):
    url, engine = served
    before = len(engine.turns)
    client = openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0)
    agent = AgentsAgent(name="weather", instructions=SYSTEM if system else None, tools=[function_tool(weather)],
                        model=model_class(model=MODEL, openai_client=client))
    result = Runner.run_sync(agent, ASK, run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == FINAL and ASKED == ["Paris"]
    conversation(engine, before, system)


def test_openai_agents_streamed_over_responses(served):
    url, engine = served
    before = len(engine.turns)
    client = openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0)
    agent = AgentsAgent(name="weather", instructions=SYSTEM, tools=[function_tool(weather)],
                        model=OpenAIResponsesModel(model=MODEL, openai_client=client))

    async def run():
        streamed = Runner.run_streamed(agent, ASK, run_config=RunConfig(tracing_disabled=True))
        kinds = [event.type async for event in streamed.stream_events()]
        return streamed.final_output, kinds

    final, kinds = asyncio.run(run())
    assert final == FINAL and ASKED == ["Paris"] and "raw_response_event" in kinds
    conversation(engine, before, True)


@pytest.mark.parametrize("system", [True, False])
@pytest.mark.parametrize("model_class", [OpenAIChatModel, PydanticResponsesModel])
def test_pydantic_ai(served, model_class, system):
    url, engine = served
    before = len(engine.turns)
    model = model_class(MODEL, provider=OpenAIProvider(base_url=url, api_key="unused"))
    agent = PydanticAgent(model, system_prompt=SYSTEM if system else (), tools=[weather])
    result = agent.run_sync(ASK)
    assert result.output == FINAL and ASKED == ["Paris"]
    conversation(engine, before, system)


@pytest.mark.parametrize("system", [True, False])
@pytest.mark.parametrize("responses", [False, True])
def test_langchain_bind_tools(served, responses, system):
    url, engine = served
    before = len(engine.turns)
    tool = langchain_tool(weather)
    llm = ChatOpenAI(base_url=url, api_key="unused", model=MODEL, max_retries=0,
                     use_responses_api=responses).bind_tools([tool])
    messages = ([SystemMessage(SYSTEM)] if system else []) + [HumanMessage(ASK)]
    reply = llm.invoke(messages)
    assert isinstance(reply, AIMessage) and [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("weather", {"city": "Paris"})]
    messages += [reply, *(tool.invoke(call) for call in reply.tool_calls)]
    assert isinstance(messages[-1], ToolMessage) and messages[-1].content == RESULT
    final = llm.invoke(messages)
    assert final.text == FINAL and final.tool_calls == [] and ASKED == ["Paris"]  # content: a string or blocks
    conversation(engine, before, system)
