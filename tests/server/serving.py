"""Run an app with uvicorn in a background thread on a free local port, for tests that talk HTTP to it."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(app, timeout: float = 30.0):
    """Serve ``app`` on 127.0.0.1 in a thread; yields the base URL (``http://127.0.0.1:PORT``)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)


def streamed_calls(chunks) -> dict[int, dict[str, str]]:
    """The tool calls of a stream of ``chat.completion.chunk`` s (openai client objects), reassembled as a
    client does: per index, the name and the arguments concatenated."""
    calls: dict[int, dict[str, str]] = {}
    for ch in chunks:
        for choice in ch.choices:
            for t in choice.delta.tool_calls or []:
                entry = calls.setdefault(t.index, {"name": "", "arguments": ""})
                entry["name"] += t.function.name or ""
                entry["arguments"] += t.function.arguments or ""
    return calls
