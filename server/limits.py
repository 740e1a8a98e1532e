"""Bounds on what clients may make the server do: how large and how deeply nested a request body may be
(:func:`json_body`), and how many distinct new tool lists (or response schemas) it compiles per minute. (The
bound on queued turns is the engine's ``max_queue``: it raises QueueFull.)
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from typing import Any, Callable

import numpy as np

from ..core.jsonio import loads
from .errors import ApiError, bad_request

#: The largest request body read, in bytes (4 MiB: a prompt filling a 32k-token context is about 130 KB).
MAX_BODY_BYTES = 4 * 2**20
#: The deepest nesting of arrays and objects a request body may have (a tool's schema, a response schema or
#: anything else): past it Python's JSON reader, jsonschema and the compiler run out of recursion.
MAX_DEPTH = 64

#: A JSON string literal (escapes included), matched in linear time: its brackets do not nest anything.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def nesting_depth(raw: bytes) -> int:
    """How deeply arrays and objects nest in the JSON text ``raw`` (0 for a scalar), counted outside string
    literals, in linear time (numpy over the bytes left once strings are blanked)."""
    data = np.frombuffer(_STRING.sub(b'""', raw), dtype=np.uint8)
    if not len(data):
        return 0
    steps = np.zeros(len(data), dtype=np.int32)
    steps[(data == ord("[")) | (data == ord("{"))] = 1
    steps[(data == ord("]")) | (data == ord("}"))] = -1
    return max(int(np.cumsum(steps).max()), 0)


def decode_body(raw: bytes) -> Any:
    """The JSON value of a request body ``raw``. Raises ApiError 413 past :data:`MAX_BODY_BYTES`, 400 past
    :data:`MAX_DEPTH` levels of nesting (checked before it is parsed: the parser recurses) or for text that is
    not JSON."""
    if len(raw) > MAX_BODY_BYTES:
        raise too_large(len(raw))
    depth = nesting_depth(raw)
    if depth > MAX_DEPTH:
        raise bad_request(f"the request body nests arrays and objects {depth:,} levels deep; this server takes at "
                          f"most {MAX_DEPTH}", code="nested_too_deeply")
    try:
        return loads(raw)  # NaN, Infinity and 1e400 refused: they would come back as Infinity, which is not JSON
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


def too_large(size: int | None) -> ApiError:
    """413: a body past :data:`MAX_BODY_BYTES` (``size``: its length when known)."""
    said = f"is {size:,} bytes" if size is not None else "is longer"
    return ApiError(413, f"the request body {said}; this server takes at most {MAX_BODY_BYTES:,} bytes",
                    param=None, code="request_too_large")


async def json_body(request) -> Any:
    """The JSON value of a Starlette ``request``'s body, read up to :data:`MAX_BODY_BYTES` (a larger
    ``content-length`` is refused before reading; a chunked body once it passes the bound). Raises ApiError
    (:func:`decode_body`); ``starlette.requests.ClientDisconnect`` when the client hangs up first."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise too_large(int(length))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large(None)
        chunks.append(chunk)
    return decode_body(b"".join(chunks))


class CompileRate:
    """At most ``per_minute`` new compiles in any 60-second window (a sliding window of start times).

    ``clock``: seconds, monotonic (injectable for tests). ``per_minute`` 0 refuses every new compile.
    """

    WINDOW = 60.0

    def __init__(self, per_minute: int = 30, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._starts: deque[float] = deque()
        self._lock = threading.Lock()

    def try_take(self) -> bool:
        """Count one new compile now and return True, or return False (nothing counted) when the window is
        full."""
        with self._lock:
            now = self.clock()
            while self._starts and now - self._starts[0] >= self.WINDOW:
                self._starts.popleft()
            if len(self._starts) >= self.per_minute:
                return False
            self._starts.append(now)
            return True

    def retry_after(self) -> int:
        """Whole seconds until the window has room again (at least 1)."""
        with self._lock:
            if not self._starts:
                return 1
            return max(1, int(self.WINDOW - (self.clock() - self._starts[0])) + 1)
