"""A fake engine with the real Engine's interface (submit / cancel / queued / decoding), emitting scripted
events from its own thread, and fake index loaders that count their calls; for the server's tests without a
model."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from callmaybe.compiler.grammar import compile_grammar, value_grammar
from callmaybe.core.errors import InputError
from callmaybe.runtime.answering.engine import QueueFull
from callmaybe.runtime.decoding.turn import Event
from callmaybe.runtime.decoding.turn import ToolCall, TurnRequest, TurnResult

TOO_LONG = "PROMPT TOO LONG"
TWO_CALLS = "TWO CALLS"
SLOW = "SLOW"
FAIL = "FAIL"  # the turn ends with Event("error")
SHUTDOWN = "SHUTDOWN"  # the turn ends with Event("error", "server shutting down")
CRASH = "CRASH"  # submit raises an unexpected exception
CUT = "CUT"  # a text answer the token budget cuts (finish "length")


@dataclass
class Submitted:
    ticket: int
    request: TurnRequest
    index: Any
    schema_index: Any
    on_event: Callable[[Event], None]
    cancelled: bool = False
    events: list[Event] = field(default_factory=list)


def example(schema: dict) -> Any:
    """A small value of ``schema`` (its required properties, by type)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {k: example(schema["properties"].get(k, {})) for k in schema.get("required", [])}
    return {"integer": 1, "number": 1.5, "string": "x", "boolean": True, "array": []}.get(kind, "x")


def script(request: TurnRequest) -> list[Event]:
    """The events of a turn: a call (two with TWO_CALLS and parallel) when it may call, else text."""
    last = str(request.messages[-1].get("content") or "")
    if FAIL in last:
        return [Event("text", "partial"), Event("error", "decoding failed: out of memory")]
    if SHUTDOWN in last:
        return [Event("error", "server shutting down")]
    if CUT in last:
        return [Event("text", "Hel"), Event("done", TurnResult("Hel", [], "length", 8, 1))]
    if request.functions and request.tool_choice != "none":
        by_name = {fn.name: fn for fn in request.functions}
        names = [request.function or request.functions[0].name]
        if TWO_CALLS in last and request.parallel:
            names.append(request.functions[-1].name)
        calls = [ToolCall(n, example(by_name[n].parameters)) for n in names]
        return [*(Event("call", (i, c)) for i, c in enumerate(calls)),
                Event("done", TurnResult(None, calls, "tool_calls", 11, 7))]
    if request.response_schema is not None:
        return [Event("text", '{"answer": '), Event("text", "42}"),
                Event("done", TurnResult('{"answer": 42}', [], "stop", 9, 5))]
    return [Event("text", "Hel"), Event("text", "lo é"), Event("done", TurnResult("Hello é", [], "stop", 8, 3))]


def loop_script(request: TurnRequest) -> list[Event]:
    """A scripted model of an agent loop, deterministic for exact tests: after a tool result, the text
    ``"<function> answered: <result>"`` (in two pieces); with tools it may call, one call of the named (else
    the first) function whose required string arguments all take the last word of the last user message
    ("What is the weather in Paris?" -> ``{"city": "Paris"}``); else (and for TWO_CALLS) :func:`script`'s
    answer."""
    last = request.messages[-1]
    if TWO_CALLS in str(last.get("content")):
        return script(request)
    if last["role"] == "tool":
        text = f"{last['name']} answered: {last['content']}"
        return [Event("text", text[:7]), Event("text", text[7:]), Event("done", TurnResult(text, [], "stop", 20, 9))]
    if request.functions and request.tool_choice != "none":
        fn = next(f for f in request.functions if f.name == (request.function or request.functions[0].name))
        said = next(m["content"] for m in reversed(request.messages) if m["role"] == "user")
        word = said.split()[-1].strip("?.!,;:'\"")
        arguments = {k: word for k in fn.parameters.get("required", [])
                     if fn.parameters["properties"].get(k, {}).get("type") == "string"}
        call = ToolCall(fn.name, arguments)
        return [Event("call", (0, call)), Event("done", TurnResult(None, [call], "tool_calls", 15, 6))]
    return script(request)


class FakeEngine:
    """Turns run one at a time on a worker thread, ``delay`` seconds between events (SLOW in the last
    message: 0.5 s); ``hold`` (a threading.Event, set: run) keeps turns queued until released. Raises
    InputError for TOO_LONG, QueueFull when ``max_queue`` turns wait."""

    def __init__(self, max_queue: int = 64, delay: float = 0.0, script: Callable = script):
        self.max_queue, self.delay, self.script = max_queue, delay, script
        self.hold = threading.Event()
        self.hold.set()
        self.turns: list[Submitted] = []
        self._waiting: list[Submitted] = []
        self._active = 0
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def submit(self, request: TurnRequest, on_event, index=None, schema_index=None) -> int:
        if TOO_LONG in str(request.messages[-1].get("content") or ""):
            raise InputError("the prompt is 9000 tokens, longer than the model's context of 8192 tokens")
        if CRASH in str(request.messages[-1].get("content") or ""):
            raise RuntimeError("something broke\nin two lines")
        if request.functions and request.tool_choice != "none" and index is None:
            raise AssertionError("functions without an index")  # under "none" no call is made: no index
        if request.response_schema is not None and schema_index is None:
            raise AssertionError("a response schema without an index")
        with self._lock:
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"{len(self._waiting)} turns are queued (--max-queue {self.max_queue})")
            turn = Submitted(next(self._ids), request, index, schema_index, on_event)
            self.turns.append(turn)
            self._waiting.append(turn)
            self._lock.notify()
        return turn.ticket

    def cancel(self, ticket: int) -> None:
        with self._lock:
            for turn in self.turns:
                if turn.ticket == ticket:
                    turn.cancelled = True
            self._waiting = [t for t in self._waiting if t.ticket != ticket]

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def decoding(self) -> int:
        return self._active

    def cancelled(self) -> list[int]:
        return [t.ticket for t in self.turns if t.cancelled]

    def close(self) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while (not self._waiting or not self.hold.is_set()) and not self._stop:
                    self._lock.wait(0.02)
                if self._stop:
                    return
                turn = self._waiting.pop(0)
                self._active = 1
            slow = SLOW in str(turn.request.messages[-1].get("content") or "")
            for event in self.script(turn.request):
                time.sleep(0.5 if slow else self.delay)
                if turn.cancelled:
                    break
                turn.events.append(event)
                turn.on_event(event)
            self._active = 0


class CountingLoader:
    """Index loaders for :class:`callmaybe.server.tools.IndexCache` that compile the grammar (a real
    SchemaError for a schema the compiler refuses, no vocabulary) after ``seconds``, and count calls."""

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.tools_calls = 0
        self.schema_calls = 0

    def tools(self, functions):
        self.tools_calls += 1
        time.sleep(self.seconds)
        compile_grammar(functions)
        return ("tools-index", tuple(fn.name for fn in functions))

    def schema(self, name, schema):
        self.schema_calls += 1
        time.sleep(self.seconds)
        value_grammar(schema, name=name)
        return ("schema-index", name)
