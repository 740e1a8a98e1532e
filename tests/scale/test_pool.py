"""The actor pool of callmaybe.scale on a local Ray, with actors that need no model (tests/scale/fakes.py):
every item answered exactly once, whatever actor dies, and a request that kills every actor it reaches gets an
error entry of its own after MAX_ATTEMPTS."""

from __future__ import annotations

import os
import signal

import pytest

from callmaybe.core.errors import ModelError
from callmaybe.scale.pool import MAX_ATTEMPTS, ActorPool, Flight, Slot, running_flight

from . import fakes


@pytest.fixture
def remote(ray_cluster):
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(fakes)  # the workers need not import the tests
    return lambda cls, *args: ray_cluster.remote(cls).options(num_cpus=0.5, max_restarts=0).remote(*args)


def failed(position, reason):
    return {"error": reason}


def test_every_item_is_answered_once_in_any_order(remote):
    pool = ActorPool(lambda: remote(fakes.Echo), 2, "answer", chunk=3)
    pool.start()
    try:
        answers = list(pool.run([f"r{i}" for i in range(20)], failed))
    finally:
        pool.close()
    assert sorted(p for p, _, _ in answers) == list(range(20))
    assert all(entry["value"] == f"r{p}" for p, entry, _ in answers)
    assert len({entry["pid"] for _, entry, _ in answers}) == 2  # both actors answered
    assert (pool.replaced, pool.retried) == (0, 0)


def test_a_killed_actor_loses_and_repeats_nothing(remote):
    pool = ActorPool(lambda: remote(fakes.Echo, (), 0.2), 2, "answer", chunk=3)
    pool.start()
    victim = pool.pids()[0]
    seen = []
    try:
        for position, entry, _ in pool.run([f"r{i}" for i in range(16)], failed):
            seen.append((position, entry["value"]))
            if len(seen) == 1:
                os.kill(victim, signal.SIGKILL)
    finally:
        pool.close()
    assert sorted(seen) == [(i, f"r{i}") for i in range(16)]  # each once, none lost
    assert pool.replaced == 1
    assert pool.retried >= 1  # its chunks' unanswered items went to another actor


def test_a_request_that_kills_every_actor_gets_an_error_entry_and_the_others_are_answered(remote):
    pool = ActorPool(lambda: remote(fakes.Echo, ("poison",)), 2, "answer", chunk=4)
    pool.start()
    items = ["a", "b", "poison", "c", "d", "e"]
    try:
        answers = {p: entry for p, entry, _ in pool.run(items, failed)}
    finally:
        pool.close()
    assert sorted(answers) == list(range(6))
    assert answers[2]["error"].startswith(f"the Ray actor answering it died {MAX_ATTEMPTS} times (last: ")
    assert [answers[p]["value"] for p in (0, 1, 3, 4, 5)] == ["a", "b", "c", "d", "e"]
    assert pool.replaced == MAX_ATTEMPTS


def test_an_actor_that_cannot_load_is_one_error(remote):
    pool = ActorPool(lambda: remote(fakes.Broken, ModelError("cannot load model 'x': no such file")), 2, "answer",
                     chunk=1)
    with pytest.raises(ModelError, match="^cannot load model 'x': no such file$"):
        pool.start()
    pool.close()


def test_a_chunk_waiting_behind_a_killing_request_is_not_charged_for_its_deaths(remote):
    """One actor holds the killing request's chunk and, waiting in its mailbox, another's: three deaths give
    the killing request its error entry, and the other request, never started on a dying actor, its answer."""
    pool = ActorPool(lambda: remote(fakes.Echo, ("poison",)), 1, "answer", chunk=1)
    pool.start()
    try:
        answers = {p: entry for p, entry, _ in pool.run(["poison", "x"], failed)}
    finally:
        pool.close()
    assert answers[1]["value"] == "x"
    assert answers[0]["error"].startswith(f"the Ray actor answering it died {MAX_ATTEMPTS} times (last: ")
    assert pool.replaced == MAX_ATTEMPTS


def test_a_death_is_charged_to_the_first_flight_with_items_left():
    """A flight whose items were all answered but whose stream's end had not reached the driver when its
    actor died (so it is still held) is not the one the actor was answering: the next one is, and its item is
    charged; before, the death went to the answered flight, and a killing item killed one slot's actors four
    times ("Ray actors keep dying (4 replaced)", seen under load)."""
    slot = Slot(handle=None)
    answered, poisoned, waiting = Flight(slot, set()), Flight(slot, {2, 3}), Flight(slot, {4})
    assert running_flight([answered, poisoned, waiting]) == 1
    assert running_flight([poisoned, waiting]) == 0
    assert running_flight([answered]) is None
