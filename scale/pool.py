"""A pool of Ray actors that answers every item exactly once, whatever actor dies.

The driver (this module, in the ``callmaybe`` process) holds the queue. Each actor gets chunks of items, at
most ``in_flight`` chunks at a time (the next one waits in the actor's mailbox, so its batch never waits for a
round trip), and answers a chunk through a streaming generator: every answer reaches the driver as soon as it
is made (``num_returns="streaming"``), and the driver hands it on once. When an actor dies (its process
killed, its node lost, out of memory), the items of its chunks not yet answered go back to the front of the
queue and a new actor takes its place; answers already handed on stay answered, and an answer that arrives
twice is dropped, so nothing is lost and nothing is written twice. An item that was in flight on two actors
that died is retried alone, so an item that kills whoever answers it cannot take its neighbours down with it
a third time; after :data:`MAX_ATTEMPTS` deaths it gets an error entry of its own (``failed``).

Why not Ray Data's ``map_batches``: it retries a failed block by restarting the same actor and running the
whole block again, so the driver sees answers per block, not per answer (a journal could only record whole
blocks, and a block's answers made before a crash are made again); it reassigns nothing to the live actors
while a dead one restarts (ray-project/ray#41029, open), and it gives an actor fixed batches, whose rows idle
until the batch's longest call ends, where callmaybe's batch takes the next request as soon as a row is free.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..core.errors import CallmaybeError

#: how many times an item may be in flight on an actor that dies before it gets an error entry
MAX_ATTEMPTS = 3
#: deaths after which an item is sent alone
ALONE_AFTER = 2


@dataclass
class Slot:
    """One place in the pool: its actor handle, the actor's process id once it said it is ready (None
    before), how many chunks it holds now, and how many actors this slot has lost."""

    handle: Any
    pid: int | None = None
    busy: int = 0
    lost: int = 0


@dataclass
class Flight:
    """A chunk sent to a slot's actor: the positions it holds that are not answered yet."""

    slot: Slot
    left: set[int] = field(default_factory=set)


class ActorPool:
    """``size`` actors made by ``make()`` (a Ray actor handle whose class has ``ready()`` and the answering
    method ``method``), answering items exactly once (module docstring).

    ``ready()`` returns ``(pid, error)``: an actor that could not load (its model, its index) returns the
    CallmaybeError it met, raised here by :meth:`start`. ``method(chunk)``, for ``chunk`` a list of
    ``(position, item)``, yields ``("answer", position, entry, result)`` per item and may yield
    ``("profile", delta)``, handed to ``on_profile``. ``chunk``: the most items sent at once to one actor;
    ``in_flight``: chunks held by one actor at once.
    """

    def __init__(self, make: Callable[[], Any], size: int, method: str, chunk: int, in_flight: int = 2,
                 on_profile: Callable[[Any], None] | None = None):
        self.make, self.size, self.method = make, max(1, size), method
        self.chunk, self.in_flight = max(1, chunk), max(1, in_flight)
        self.on_profile = on_profile
        self.slots: list[Slot] = []
        self.replaced = 0  # actors that died and were replaced
        self.retried = 0  # items sent again after the actor holding them died

    def start(self) -> None:
        """Make the actors and wait until each has loaded. Raises the CallmaybeError an actor met while
        loading, or CallmaybeError when one died while loading."""
        import ray

        self.slots = [Slot(self.make()) for _ in range(self.size)]
        for slot in self.slots:
            try:
                pid, error = ray.get(slot.handle.ready.remote())
            except ray.exceptions.RayError as exc:
                raise CallmaybeError(f"a Ray actor died while loading: {_one_line(exc)}") from None
            if error is not None:
                raise error
            slot.pid = pid

    def pids(self) -> list[int | None]:
        """The process id of each slot's actor (None for one that has not said it is ready)."""
        return [slot.pid for slot in self.slots]

    def close(self) -> None:
        """Kill every actor of the pool."""
        import ray

        for slot in self.slots:
            ray.kill(slot.handle)
        self.slots = []

    def run(self, items: list[Any], failed: Callable[[int, str], dict]) -> Iterator[tuple[int, dict, Any]]:
        """Answer ``items``: yields (position in ``items``, result entry, result) once per position, as the
        answers come. ``failed(position, reason)`` gives the error entry of an item whose actor died
        :data:`MAX_ATTEMPTS` times. Raises the CallmaybeError an actor's method raised (a model that cannot
        answer at all), or CallmaybeError when actors keep dying (more than ``MAX_ATTEMPTS`` per slot)."""
        import ray

        run = _Run(self, len(items))
        while True:
            while run.given_up:
                position, reason = run.given_up.pop()
                yield position, failed(position, reason), None
            self._fill(run.queue, run.attempts, items, run.flights)
            if not run.flights:
                return
            ready, _ = ray.wait(list(run.flights), num_returns=1)
            gen = ready[0]
            flight = run.flights[gen]
            value = run.receive(gen, flight)
            if value is None:
                continue
            if value[0] == "profile":
                if self.on_profile is not None:
                    self.on_profile(value[1])
                continue
            _, position, entry, result = value
            flight.left.discard(position)
            if not run.done[position]:
                run.done[position] = True
                yield position, entry, result

    def _fill(self, queue: deque[int], attempts: list[int], items: list[Any], flights: dict[Any, Flight]) -> None:
        """Send chunks from the front of ``queue`` to every actor holding fewer than ``in_flight``: an item
        that was on :data:`ALONE_AFTER` dead actors alone, others up to ``chunk`` at a time, fewer near the end
        so that the last items spread over the actors."""
        for slot in self.slots:
            while queue and slot.busy < self.in_flight:
                if attempts[queue[0]] >= ALONE_AFTER:
                    positions = [queue.popleft()]
                else:
                    share = math.ceil(len(queue) / (len(self.slots) * self.in_flight))
                    positions = []
                    while queue and len(positions) < min(self.chunk, share) and attempts[queue[0]] < ALONE_AFTER:
                        positions.append(queue.popleft())
                method = getattr(slot.handle, self.method)
                gen = method.options(num_returns="streaming").remote([(p, items[p]) for p in positions])
                flights[gen] = Flight(slot, set(positions))
                slot.busy += 1


class _Run:
    """The bookkeeping of one :meth:`ActorPool.run` over ``n`` items: the positions waiting (``queue``), the
    attempts and whether each is done, the chunks in flight (generator -> :class:`Flight`) and the items
    given up (position, reason), which the pool yields as error entries."""

    def __init__(self, pool: ActorPool, n: int):
        self.pool = pool
        self.queue: deque[int] = deque(range(n))
        self.attempts = [0] * n
        self.done = [False] * n
        self.flights: dict[Any, Flight] = {}
        self.given_up: list[tuple[int, str]] = []

    def receive(self, gen: Any, flight: Flight) -> Any:
        """The next value of ``flight`` (its generator ``gen``), or None when there is none to handle: the
        chunk ended, the actor's method raised (its items go back to the queue) or the actor died (replaced,
        :meth:`lose`). Raises the CallmaybeError the method raised, or what :meth:`lose` raises."""
        import ray

        try:
            return ray.get(next(gen))
        except StopIteration:
            del self.flights[gen]
            flight.slot.busy -= 1
            self.send_back(flight, "the Ray actor ended its chunk without answering it")
        except ray.exceptions.RayTaskError as exc:  # the actor lives; its method raised
            cause = getattr(exc, "cause", None)
            if isinstance(cause, CallmaybeError):
                raise cause from None
            del self.flights[gen]
            flight.slot.busy -= 1
            self.send_back(flight, f"answering it raised {_one_line(exc)}")
        except ray.exceptions.RayError as exc:  # the actor died, or its node
            self.lose(flight.slot, exc)
        return None

    def send_back(self, flight: Flight, reason: str, counted: bool = True) -> None:
        """Put the flight's unanswered items back at the front of the queue; ``counted``: they were being
        answered (not waiting in the actor's mailbox), so this counts as one of their attempts."""
        for position in sorted(flight.left, reverse=True):
            self.attempts[position] += counted
            if self.attempts[position] >= MAX_ATTEMPTS:
                self.done[position] = True
                self.given_up.append((position, reason))
            else:
                self.queue.appendleft(position)  # retried first
                self.pool.retried += 1
        flight.left.clear()

    def lose(self, slot: Slot, exc: BaseException) -> None:
        """``slot``'s actor died: its flights go back to the queue (the one it was answering counted,
        :func:`running_flight`) and a new actor takes the slot. Raises CallmaybeError when the slot lost
        :data:`MAX_ATTEMPTS` actors."""
        import ray

        pool = self.pool
        reason = f"the Ray actor answering it died {MAX_ATTEMPTS} times (last: {_one_line(exc)})"
        held = [g for g, f in self.flights.items() if f.slot is slot]  # in the order sent
        running = running_flight([self.flights[g] for g in held])
        for k in reversed(range(len(held))):
            self.send_back(self.flights.pop(held[k]), reason, counted=k == running)
        if slot.lost >= MAX_ATTEMPTS:
            raise CallmaybeError(f"Ray actors keep dying ({pool.replaced + 1} replaced): {_one_line(exc)}")
        ray.kill(slot.handle)  # gone already, or unreachable: never let it answer again
        slot.handle, slot.pid, slot.busy = pool.make(), None, 0
        slot.lost += 1
        pool.replaced += 1


def running_flight(held: list[Flight]) -> int | None:
    """Which of an actor's flights (in the order sent) it was answering when it died: the first with items
    not yet answered, or None when every item was answered. The first flight sent is not always it: a flight
    whose last answer came but whose stream's end did not (the actor died before the end reached the driver)
    is still held, and charging the death to it left the item that killed the actor uncharged, so that it
    killed one slot's actors past :data:`MAX_ATTEMPTS` ("Ray actors keep dying (4 replaced)" under load)."""
    return next((k for k, flight in enumerate(held) if flight.left), None)


def _one_line(exc: BaseException) -> str:
    """The first line of an exception's message, with its type when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
