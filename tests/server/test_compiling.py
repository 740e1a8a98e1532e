"""Issue 31: new tool lists compile in a worker process of their own (``server/compiling.py``), at a lower
priority, off the decoding path; what it compiles is what an in-process compile gives; a compile past its
limit is a 400 naming the tool and the keyword; two requests with the same new list compile it once; a
worker that dies mid-compile is one error for that list, and the next list gets a new worker."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import openai
import pytest

from callmaybe.compiler.build import prepare_vocabulary, runtime_compiler
from callmaybe.compiler.limits import CompileLimits
from callmaybe.core.catalog import parse_catalog
from callmaybe.core.errors import SchemaError
from callmaybe.server.app import create_app
from callmaybe.server.compiling import NICE, ProcessCompiler
from callmaybe.server.limits import CompileRate
from callmaybe.server.tools import IndexCache

from ..compiler.test_counters import VOCAB
from .fake import FakeEngine
from .serving import running

MODEL = "tiny-model"
USER = [{"role": "user", "content": "send it"}]
EMAIL = {"name": "send_email", "parameters": {"type": "object", "properties": {
    "to": {"type": "string", "format": "email"}, "subject": {"type": "string", "maxLength": 120}},
    "required": ["to", "subject"]}}


@pytest.fixture(scope="module")
def compiler():
    c = ProcessCompiler(partial(runtime_compiler, limits=CompileLimits(pattern=5000)), VOCAB, prepare_vocabulary)
    yield c
    c.close()


def test_a_tool_list_compiles_in_a_niced_worker_process_to_what_compiles_here(compiler):
    functions = parse_catalog([EMAIL], "t")
    there = compiler(functions, VOCAB, {"parameters_key": "parameters"}, True)
    here = runtime_compiler(functions, VOCAB, {"parameters_key": "parameters"}, True)
    assert there.header == here.header and sorted(there.arrays) == sorted(here.arrays)
    for name in here.arrays:
        assert np.array_equal(there.arrays[name], here.arrays[name]), name
    pid = compiler.pid()
    assert pid != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, pid) - os.getpriority(os.PRIO_PROCESS, 0) == NICE


def serve_with(compiler, calls):
    def tools(functions):
        calls.append([fn.name for fn in functions])
        return compiler(functions, VOCAB, {"parameters_key": "parameters"}, True)

    engine = FakeEngine()
    cache = IndexCache(tools, lambda name, schema: None, {"parameters_key": "parameters"}, 8, CompileRate(100))
    return engine, create_app(engine, cache, MODEL)


def test_a_compile_past_its_limit_is_a_400_naming_the_tool_and_the_keyword_and_one_list_compiles_once(compiler):
    calls: list = []
    engine, app = serve_with(compiler, calls)
    code = {"type": "function", "function": {"name": "lookup_code", "parameters": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[ab]*a[ab]{12}$"}}, "required": ["code"]}}}
    email = {"type": "function", "function": EMAIL}
    with running(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=60)
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model=MODEL, messages=USER, tools=[code])
        assert info.value.status_code == 400 and info.value.body["param"] == "tools"
        assert info.value.body["message"] == (
            "function 'lookup_code' at '#/properties/code': the regex of this string (its pattern, format or "
            "length) needs more than 5,000 automaton states; the compile limit is pattern=5000 (raise it with "
            "--compile-limits pattern=N)")
        ask = lambda _: client.chat.completions.create(model=MODEL, messages=USER, tools=[email])  # noqa: E731
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(ask, range(4)))
        assert [a.choices[0].message.tool_calls[0].function.name for a in answers] == ["send_email"] * 4
        assert calls == [["lookup_code"], ["send_email"]]  # the same new list, asked four times at once: once
    engine.close()


def test_a_worker_that_dies_mid_compile_fails_that_list_only():
    compiler = ProcessCompiler(runtime_compiler, VOCAB)
    slow = parse_catalog([{"name": "slow", "parameters": {"type": "object", "properties": {  # seconds: 40
        f"p{i}": {"type": "string", "pattern": f"^[ab]*a[ab]{{9}}x{i}$"} for i in range(40)}}}], "t")  # patterns
    pid = compiler.pid()
    failed: list = []

    def compile_slow():
        try:
            compiler(slow, VOCAB, {}, True)
        except SchemaError as exc:
            failed.append(str(exc))

    t = threading.Thread(target=compile_slow)
    t.start()
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    t.join(60)
    try:
        assert failed == ["the compiler's process ended while compiling the tools slow (out of memory?); this "
                          "tool list cannot be compiled here"]
        small = parse_catalog([{"name": "ping", "parameters": {"type": "object", "properties": {}}}], "t")
        assert compiler(small, VOCAB, {}, True).header["functions"] == ["ping"]
        assert compiler.pid() != pid
    finally:
        compiler.close()


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie nobody has reaped yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads processes' states in /proc")
def test_the_worker_ends_when_the_server_is_killed_without_closing_it():
    import subprocess
    import sys

    server = ("import os, signal\n"
              "from callmaybe.compiler.build import runtime_compiler\n"
              "from callmaybe.core.vocabulary import Vocabulary\n"
              "from callmaybe.server.compiling import ProcessCompiler\n"
              "vocab = Vocabulary(name='v', token_bytes=(b'a', b'{', None), eos_ids=(2,), vocab_size=3)\n"
              "print(ProcessCompiler(runtime_compiler, vocab).pid(), flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.Popen([sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
    worker = int(proc.stdout.readline())  # the worker keeps the pipe open while it runs: no read to its end
    assert proc.wait(60) == -signal.SIGKILL
    proc.stdout.close()
    deadline = time.monotonic() + 10
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert not _running(worker)
    finally:
        if _running(worker):
            os.kill(worker, signal.SIGKILL)
