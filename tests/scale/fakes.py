"""Actors without a model for the pool's tests: each answers an item with its own value, and one dies on the items
it is told to (its process ends at once, as a killed one does)."""

from __future__ import annotations

import os
import time


class Echo:
    """Answers ``(position, value)`` with ``{"value": value}``; ``die_on``: values that end the actor's process
    when they come (every time, on every actor: a request that kills whoever answers it); ``pause``: seconds
    per item."""

    def __init__(self, die_on: tuple = (), pause: float = 0.0):
        self.die_on, self.pause = set(die_on), pause

    def ready(self):
        return os.getpid(), None

    def answer(self, chunk):
        for position, value in chunk:
            if value in self.die_on:
                os._exit(1)
            time.sleep(self.pause)
            yield "answer", position, {"value": value, "pid": os.getpid()}, None
        yield "profile", {"seconds": {}, "calls": {}, "tokens": {}}


class Broken:
    """An actor that could not load: ``ready`` returns the error, as :class:`callmaybe.scale.workers.Worker`
    does."""

    def __init__(self, error):
        self.error = error

    def ready(self):
        return os.getpid(), self.error

    def answer(self, chunk):
        raise self.error
        yield
