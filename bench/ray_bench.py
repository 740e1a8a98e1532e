"""Ray batch benchmark: requests per second of ``run --ray`` with 1 and 2 actors against a plain ``run`` of the
same requests, measured in the same process one after another, and the overhead per request of going
through Ray.

The requests are the public set (``../shared/data/public``) repeated ``--repeat`` times; every run goes through
``run_file`` (journal and output included) with the same model and flags (``--threads 1`` per process or
actor, ``--max-batch``), ``--rounds`` times each in the order plain, 1, 2, 2, 1, plain (a drift of the load
cancels out), with a local Ray of ``--cpus`` CPUs running throughout; the means are printed. Requests per second count the answering time (``RunOutcome.answer_seconds``: from the
first request to the written output), so the model loads of the plain run and of the actors, and the Ray
task that finds the index, are left out (they are printed apart as start-up seconds). Overhead per request:

* ``ray 1 actor - plain``: the answering time of one actor minus that of the plain run, per request (one
  actor and the plain run decode alike, so the difference is what Ray adds: a streamed answer per request, a
  chunk per ``4 x --max-batch`` requests, the driver's bookkeeping);
* ``pool round trip``: the same pool with actors that answer at once (no model), seconds per item, chunks
  of 1 and of 4: Ray's own cost, apart from the model.

The load average of the machine is printed before and after: on a shared 2-core machine the actors compete
with each other and with everything else, so 2 actors cannot reach twice 1. Usage::

    CALLMAYBE_SHARED=../shared python bench/ray_bench.py [--repeat 3] [--model smollm2-135m-instruct]
        [--dtype float32] [--max-batch 1] [--cpus 2] [--rounds 2]

Not a timed test: the figures go in the README and docs/scale.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CALLMAYBE_SHARED", REPO.parent / "shared"))


class Instant:
    """A pool actor that answers at once (no model): what Ray's round trip costs alone."""

    def ready(self):
        return os.getpid(), None

    def answer(self, chunk):
        for position, value in chunk:
            yield "answer", position, {"value": value}, None
        yield "profile", {"seconds": {}, "calls": {}, "tokens": {}}


def timed_run(config, catalog: Path, requests: Path, folder: Path, answering=None):
    """(outcome, wall seconds, output bytes) of one ``run_file``."""
    from callmaybe.compiler.build import runtime_compiler
    from callmaybe.runtime.answering.session import run_file

    out = folder / f"out-{time.monotonic_ns()}.json"
    t0 = time.perf_counter()
    outcome = run_file(config, catalog, requests, out, runtime_compiler, answering=answering)
    return outcome, time.perf_counter() - t0, out.read_bytes()


def round_trip(ray, items: int, chunk: int) -> float:
    """Seconds per item through an :class:`~callmaybe.scale.pool.ActorPool` of 2 :class:`Instant` actors."""
    from callmaybe.scale.pool import ActorPool

    remote = ray.remote(Instant).options(num_cpus=0.5, max_restarts=0)
    pool = ActorPool(lambda: remote.remote(), 2, "answer", chunk=chunk)
    pool.start()
    try:
        t0 = time.perf_counter()
        n = sum(1 for _ in pool.run(list(range(items)), lambda p, r: {"error": r}))
        assert n == items
        return (time.perf_counter() - t0) / items
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="times the public set's 11 requests are asked")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--max-batch", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each configuration, in ABC CBA order")
    args = parser.parse_args()

    import ray

    from callmaybe.compiler.build import runtime_compiler
    from callmaybe.runtime.answering.session import RunConfig
    from callmaybe.scale.batch import RayAnswering, RayPlan

    public = SHARED / "data" / "public"
    catalog = public / "functions_definition.json"
    prompts = json.loads((public / "function_calling_tests.json").read_text()) * args.repeat
    config = RunConfig(model=args.model, threads=1, dtype=args.dtype, max_batch=args.max_batch)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        requests = folder / "requests.json"
        requests.write_text(json.dumps(prompts))
        n = len(prompts)
        load_before = os.getloadavg()
        print(f"{n} requests ({args.repeat} x the public set), {args.model} {args.dtype}, --max-batch "
              f"{args.max_batch}, 1 thread per process or actor; {os.cpu_count()} cores, load average "
              f"{load_before[0]:.2f} before")
        ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
        names = ["plain run", "ray, 1 actor", "ray, 2 actors"]
        order = [0, 1, 2, 2, 1, 0] * ((args.rounds + 1) // 2)  # ABC CBA: a drift in the load cancels out
        times: dict[int, list[tuple[float, float]]] = {k: [] for k in range(3)}
        outputs = set()
        for k in order[:3 * args.rounds]:
            answering = None if k == 0 else RayAnswering(config, runtime_compiler, RayPlan("", k))
            outcome, wall, output = timed_run(config, catalog, requests, folder, answering)
            outputs.add(output)
            times[k].append((outcome.answer_seconds, wall - outcome.answer_seconds))
            print(f"  {names[k]}: {outcome.answer_seconds:.1f} s answering, load {os.getloadavg()[0]:.2f}",
                  flush=True)
        trips = {chunk: round_trip(ray, 2000, chunk) for chunk in (1, 4)}
        ray.shutdown()
        load_after = os.getloadavg()
    mean = {k: sum(a for a, _ in v) / len(v) for k, v in times.items()}
    print(f"{'mean of ' + str(args.rounds):<16}{'answering s':>12}{'requests/s':>12}{'x plain':>9}{'start-up s':>12}")
    for k, name in enumerate(names):
        start = sum(s for _, s in times[k]) / len(times[k])
        print(f"{name:<16}{mean[k]:>12.1f}{n / mean[k]:>12.2f}{mean[0] / mean[k]:>9.2f}{start:>12.1f}")
    print(f"outputs of every run equal: {'yes' if len(outputs) == 1 else 'NO'}")
    print(f"overhead per request, ray 1 actor - plain: {1000 * (mean[1] - mean[0]) / n:+.0f} ms "
          f"(plain {1000 * mean[0] / n:.0f} ms per request)")
    print(f"pool round trip (no model, 2 actors): {1e6 * trips[1]:.0f} us per item in chunks of 1, "
          f"{1e6 * trips[4]:.0f} us in chunks of 4")
    print(f"load average after: {load_after[0]:.2f} (1 min), {load_after[1]:.2f} (5 min)")


if __name__ == "__main__":
    main()
