"""Bounds on what clients may make the server do: how many distinct new tool lists (or response schemas) it
compiles per minute. (The bound on queued turns is the engine's ``max_queue``: it raises QueueFull.)
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable


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
