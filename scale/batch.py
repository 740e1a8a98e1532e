"""``run --ray`` and ``eval --ray``: the requests answered by a pool of Ray actors (:mod:`.pool`,
:mod:`.workers`), into the same journal and output as a local run.

``run``: the index of the catalog is found or compiled once, before the job, by one Ray task on the cluster
(:func:`_prepare_index`; from ``--index`` on the driver when one is given), and its file's bytes go to every
actor as one Ray object. The driver keeps the journal: :func:`callmaybe.runtime.answering.session.run_file` journals
each answer as it arrives (in the order answers come, as a local ``--max-batch`` run does; positions say which
request each answers) and writes the output in the requests' order, so ``--resume`` continues a Ray run
locally and a local one on Ray. ``eval``: each case's catalog is found or compiled by the actor answering it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterator

from ..core.catalog import Function
from ..core.errors import CallmaybeError
from ..runtime.decoding.profile import Profile
from ..runtime.answering.runner import RunStats
from ..runtime.answering.session import Compile, RunConfig, Runtime, collect
from .cluster import cluster_cpus, connect
from .pool import ActorPool
from .workers import Worker, add_profile

#: the most requests one actor gets at once, in batches of ``--max-batch`` (more keeps its batch full)
CHUNK_BATCHES = 4


def _prepare_index(config: RunConfig, compile: Compile, functions: list[Function]) -> bytes:
    """The index file of ``functions`` for ``config``'s model, as bytes: found (shipped, beside the model,
    cached) or compiled and cached on the node that runs this task. Loads the model once (its vocabulary and
    call format decide the index). Raises what :meth:`Runtime.index_for` raises."""
    from ..core.indexfile import to_bytes

    return to_bytes(Runtime(config, compile).index_for(functions))


class RayPlan:
    """How a job uses the cluster: ``actors`` actors (None: one per ``cpus`` CPUs of the cluster), each with
    ``cpus`` CPUs (torch threads: ``config.threads`` or ``cpus``) and one GPU under ``--device cuda``."""

    def __init__(self, address: str | None, actors: int | None, cpus: int = 1):
        self.address, self.actors, self.cpus = address, actors, max(1, cpus)

    def connect(self):
        """Connect to Ray (:func:`~.cluster.connect`) and return the ``ray`` module."""
        return connect(self.address)

    def size(self) -> int:
        """How many actors: as asked, else as many as the cluster's CPUs hold (at least 1)."""
        return self.actors if self.actors else max(1, cluster_cpus() // self.cpus)

    def actor_options(self, config: RunConfig) -> dict[str, Any]:
        """Ray resources and fault handling of one actor: no restart (the pool replaces a dead actor itself,
        so that its requests go to the live ones meanwhile)."""
        options = {"num_cpus": self.cpus, "max_restarts": 0, "max_task_retries": 0}
        if config.device == "cuda":
            options["num_gpus"] = 1
        return options

    def actor_config(self, config: RunConfig) -> RunConfig:
        """``config`` as an actor runs it: torch threads as many as its CPUs unless ``--threads`` says."""
        return config if config.threads is not None else replace(config, threads=self.cpus)


class RayAnswering:
    """:class:`~callmaybe.runtime.answering.session.Answering` on a Ray cluster (``run --ray``): :meth:`prepare`
    compiles or finds the index once and starts the actors; :meth:`answer` sends them the requests
    (:class:`~.pool.ActorPool`: each answered once, whatever actor dies); :meth:`close` kills them.
    ``profile`` sums the actors' phases (seconds of parallel actors add up, so they may pass the wall time)."""

    def __init__(self, config: RunConfig, compile: Compile, plan: RayPlan):
        self.config, self.compile, self.plan = config, compile, plan
        self.profile = Profile()
        self.pool: ActorPool | None = None

    def prepare(self, functions: list[Function]) -> None:
        ray = self.plan.connect()
        if self.config.index_path is not None:
            index = self.config.index_path.read_bytes()  # read_index checked it already (run_file)
        else:
            task = ray.remote(_prepare_index).options(num_cpus=self.plan.cpus)
            index = _get(ray, task.remote(self.plan.actor_config(self.config), self.compile, functions))
        actor = ray.remote(Worker).options(**self.plan.actor_options(self.config))
        config, index_ref = self.plan.actor_config(self.config), ray.put(index)
        self.pool = ActorPool(lambda: actor.remote(config, self.compile, functions, index_ref), self.plan.size(),
                              "answer", CHUNK_BATCHES * self.config.max_batch,
                              on_profile=lambda delta: add_profile(self.profile, delta))
        self.pool.start()

    def answer(self, requests: list[Any], on_result: Callable[[int, dict], None],
               on_answer: Callable[[dict], None] | None) -> RunStats:
        def failed(position: int, reason: str) -> dict:
            request = requests[position]
            return {"prompt": request.get("prompt") if isinstance(request, dict) else None, "error": reason}

        return collect(self.pool.run(requests, failed), len(requests), on_result, on_answer)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def ray_case_answers(config: RunConfig, compile: Compile, plan: RayPlan,
                     ) -> Callable[[list[dict]], tuple[Iterator[tuple[int, dict, Any]], Profile]]:
    """``eval --ray``: a :data:`~callmaybe.runtime.evaluation.evaluate.CaseAnswering` that starts the actors, then
    answers the cases on them (each case's catalog found or compiled by the actor that answers it); the actors
    are killed once every case is answered, or when the iteration is given up."""

    def answering(cases: list[dict]) -> tuple[Iterator[tuple[int, dict, Any]], Profile]:
        ray = plan.connect()
        profile = Profile()
        actor = ray.remote(Worker).options(**plan.actor_options(config))
        pool = ActorPool(lambda: actor.remote(plan.actor_config(config), compile), plan.size(), "answer_cases",
                         CHUNK_BATCHES * config.max_batch, on_profile=lambda delta: add_profile(profile, delta))
        try:
            pool.start()
        except BaseException:
            pool.close()
            raise
        items = [{"functions": c["functions"], "prompt": c["prompt"], "rules": c["rules"]} for c in cases]

        def answers() -> Iterator[tuple[int, dict, Any]]:
            try:
                yield from pool.run(items, lambda p, reason: {"prompt": cases[p]["prompt"], "error": reason})
            finally:
                pool.close()

        return answers(), profile

    return answering


def _get(ray, ref):
    """``ray.get(ref)``, with the CallmaybeError a task raised raised as itself (one line), not wrapped."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, CallmaybeError):
            raise cause from None
        raise CallmaybeError(f"preparing the index on Ray failed: {str(exc).splitlines()[0]}") from None
