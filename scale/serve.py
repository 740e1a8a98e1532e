"""``serve --ray``: the HTTP API (:mod:`callmaybe.server`) as a Ray Serve application of N replicas behind one
OpenAI-compatible endpoint.

Each replica is the server ``callmaybe serve`` runs, whole: a :class:`~callmaybe.runtime.answering.session.Runtime`, its
:class:`~callmaybe.runtime.answering.engine.Engine` batching the replica's own requests (``--max-batch``, ``--max-queue``)
and the FastAPI app (:func:`callmaybe.server.serve.runtime_app`), given to Ray Serve through
``serve.ingress()`` and ``__serve_build_asgi_app__`` (the app is built in the replica, after the model loads).
Ray Serve's proxy spreads requests over the replicas, sends at most ``max_batch + max_queue`` at once to one,
and restarts a replica that dies; a request that was on it fails with a 5xx (the ``openai`` client retries
it). New tool lists are compiled once per cluster through the shared index folder
(:class:`~.shared_index.SharedCompile`); the compile rate (``--max-new-tool-lists-per-minute``) is per replica.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import CallmaybeError
from ..core.messages import say
from ..runtime.answering.session import Compile, RunConfig
from .cluster import connect

#: the Ray Serve application's and deployment's name
APP_NAME = "callmaybe"


@dataclass(frozen=True)
class ServeOptions:
    """What every replica is given: the model's name as clients send it, the API key (None: none), the
    index cache's size and compile rate, the engine's batch and queue, the shared index folder (None:
    each replica's own index cache, which the replicas of one machine share) and the engine's prefill chunk
    and share (``serve --prefill-chunk``, ``--prefill-share``; None: prompts fed at once, a fixed chunk)."""

    model: str
    api_key: str | None = None
    index_cache_size: int = 32
    per_minute: int = 30
    max_batch: int = 8
    max_queue: int = 64
    index_dir: str | None = None
    prefill_chunk: int | None = 16
    prefill_share: float | None = None


class Replica:
    """One Ray Serve replica (module docstring): loads the model, starts the engine and builds the app
    (``api``: Ray Serve's wrapper owns the name ``app``)."""

    def __init__(self, config: RunConfig, compile: Compile, options: ServeOptions):
        from ..core.files import cache_dir
        from ..runtime.answering.engine import Engine
        from ..runtime.answering.session import Runtime
        from ..server.serve import runtime_app
        from .shared_index import SharedCompile

        shared = SharedCompile(compile, options.index_dir or cache_dir("indexes"))
        self.runtime = Runtime(config, shared)
        self.engine = Engine(self.runtime, max_batch=options.max_batch, max_queue=options.max_queue,
                             prefill_chunk=options.prefill_chunk, prefill_share=options.prefill_share)
        self.api = runtime_app(self.runtime, self.engine, options.model, options.api_key, options.index_cache_size,
                               options.per_minute, info={"max_batch": options.max_batch,
                                                         "max_queue": options.max_queue, "replica": os.getpid(),
                                                         "index_compiles": shared.counts})
        self.engine.start()

    def __serve_build_asgi_app__(self):
        """The replica's FastAPI app (Ray Serve calls this once the replica is made)."""
        return self.api

    def __del__(self):
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()
            self.api.state.indexes.close()


def deployment(config: RunConfig, compile: Compile, options: ServeOptions, replicas: int, cpus: int = 1):
    """The Ray Serve application (bound, for ``serve.run``): ``replicas`` replicas of :class:`Replica`, each
    with ``cpus`` CPUs (torch threads as many, unless ``config.threads``) and one GPU under ``--device
    cuda``."""
    from dataclasses import replace

    from ray import serve

    resources: dict[str, Any] = {"num_cpus": max(1, cpus)}
    if config.device == "cuda":
        resources["num_gpus"] = 1
    if config.threads is None:
        config = replace(config, threads=max(1, cpus))
    ingress = serve.ingress()(Replica)
    return serve.deployment(ingress, name=APP_NAME, num_replicas=replicas,
                            max_ongoing_requests=options.max_batch + options.max_queue,
                            ray_actor_options=resources).bind(config, compile, options)


def serve_on_ray(address: str | None, config: RunConfig, compile: Compile, options: ServeOptions, host: str,
                 port: int, replicas: int, cpus: int = 1) -> None:
    """Start Ray Serve's proxy on ``host``:``port``, deploy the replicas, and serve until SIGINT or SIGTERM;
    then take the application down (and the local Ray, when this process started it). Raises RayMissing
    without Ray, CallmaybeError (one line) when the cluster cannot be reached or Ray Serve does not start (a
    port taken, replicas that cannot load)."""
    joined = _joined()
    ray = connect(address)
    from ray import serve

    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            serve.start(http_options={"host": host, "port": port})
            serve.run(deployment(config, compile, options, replicas, cpus), name=APP_NAME, route_prefix="/")
        except Exception as exc:  # a port taken, a replica that cannot load: Ray Serve's error, in one line
            raise CallmaybeError(f"Ray Serve did not start: {_cause(exc)}") from None
        say(f"serving {options.model} on http://{host}:{port}/v1 with Ray Serve: {replicas} replicas (max batch "
            f"{options.max_batch}, max queue {options.max_queue} each)" + (", API key required" if options.api_key
                                                                            else ""))
        while not stop.wait(1.0):
            pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        try:
            serve.delete(APP_NAME)
        except Exception:  # Serve never started: nothing to take down
            pass
        if not address and not joined:  # the local Ray this process started: Serve and Ray go with it
            serve.shutdown()
            ray.shutdown()


def _joined() -> bool:
    """True when this process had joined a Ray cluster before (a test's, say): it is left as it was."""
    import ray

    return ray.is_initialized()


def _cause(exc: BaseException) -> str:
    """The first line of a Ray Serve deployment error (the replicas' own errors are in their log lines)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def index_folder(path: str | None) -> str | None:
    """``--ray-index-dir`` as every replica reads it: an absolute path (a relative one means nothing on another
    node), or None."""
    return str(Path(path).resolve()) if path else None
