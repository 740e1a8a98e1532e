"""The actor of a Ray batch job: one :class:`~callmaybe.runtime.answering.session.Runtime` (the model loaded once) that
answers chunks of ``run`` requests or ``eval`` cases, as :class:`~.pool.ActorPool` asks.

For ``run`` the index comes from the driver, compiled once before the job, as the bytes of its file (a Ray
object, so it reaches every node): the actor writes them to a temporary file and loads them as ``--index``
would (fingerprints checked). For ``eval`` each case's catalog is found or compiled by the actor that answers
it, as a local ``eval`` does.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from ..core.catalog import Function
from ..core.errors import CallmaybeError
from ..runtime.evaluation.evaluate import case_answers
from ..runtime.answering.session import Compile, RunConfig, Runtime, request_answers

#: the file name of the index an actor gets from the driver, in a temporary folder of its own
INDEX_NAME = "index.safetensors"


class Worker:
    """One actor (made with ``ray.remote(Worker)``): loads ``config``'s model once and, given ``functions``,
    their answerer with the index whose file bytes are ``index``.

    A CallmaybeError met while loading (a model that cannot be loaded, an index of another tokenizer) is kept
    and returned by :meth:`ready`, then raised by every answering method, so the driver reports it in one
    line instead of restarting the actor.
    """

    def __init__(self, config: RunConfig, compile: Compile, functions: list[Function] | None = None,
                 index: bytes | None = None):
        self.error: CallmaybeError | None = None
        self.config = config
        self._folder = tempfile.TemporaryDirectory(prefix="callmaybe-ray-")
        self._engine = None
        try:
            if index is not None:
                path = Path(self._folder.name) / INDEX_NAME
                path.write_bytes(index)
                config = replace(config, index_path=path)
            self.runtime = Runtime(config, compile)
            self.answerer = self.runtime.answerer(functions) if functions is not None else None
        except CallmaybeError as exc:
            self.error = exc
        self._reported = _snapshot(self.runtime.profile) if self.error is None else None

    def ready(self) -> tuple[int, CallmaybeError | None]:
        """(this actor's process id, the CallmaybeError met while loading or None)."""
        return os.getpid(), self.error

    def answer(self, chunk: list[tuple[int, Any]]) -> Iterator[tuple]:
        """Answer ``run`` requests ``(position, request entry)`` of the job's catalog, up to
        ``config.max_batch`` decoding together: yields ``("answer", position, entry, result)`` as each is
        answered, then ``("profile", seconds, calls and tokens per phase since the last report)``."""
        self._check()
        requests = [request for _, request in chunk]
        for k, entry, result in request_answers(self.answerer, requests, self.config, self._turns()):
            yield "answer", chunk[k][0], entry, result
        yield "profile", self._profile_delta()

    def answer_cases(self, chunk: list[tuple[int, dict]]) -> Iterator[tuple]:
        """Answer ``eval`` cases ``(position, case)`` (each with its own ``functions``): yields as
        :meth:`answer` does."""
        self._check()
        cases = [case for _, case in chunk]
        for k, entry, result in case_answers(self.runtime, self.config, cases, self._turns()):
            yield "answer", chunk[k][0], entry, result
        yield "profile", self._profile_delta()

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    def _turns(self):
        """The actor's one :class:`~callmaybe.runtime.answering.engine.Engine` under ``config.turns``, else None."""
        if self.config.turns and self._engine is None:
            from ..runtime.answering.engine import Engine

            self._engine = Engine(self.runtime, self.config.max_batch, max_queue=1 << 30)
        return self._engine

    def _profile_delta(self) -> dict[str, dict[str, float]]:
        now = _snapshot(self.runtime.profile)
        delta = {kind: {phase: value - self._reported[kind].get(phase, 0) for phase, value in values.items()}
                 for kind, values in now.items()}
        self._reported = now
        return delta


def _snapshot(profile) -> dict[str, dict[str, float]]:
    return {"seconds": dict(profile.seconds), "calls": dict(profile.calls), "tokens": dict(profile.tokens)}


def add_profile(profile, delta: dict[str, dict[str, float]]) -> None:
    """Add an actor's ``("profile", delta)`` report to the driver's :class:`~callmaybe.runtime.decoding.profile.Profile`."""
    for phase, seconds in delta["seconds"].items():
        calls, tokens = delta["calls"].get(phase, 0), delta["tokens"].get(phase, 0)
        if seconds or calls or tokens:
            profile.add(phase, seconds, tokens=tokens, calls=calls)
