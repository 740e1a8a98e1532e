"""Long counted repetitions: string lengths (``minLength``/``maxLength``) and pattern repeats (``{m,n}``)
from :data:`SHORT_COUNT` + 1 to :data:`LONG_COUNT` are enforced when the schema around them can afford it.

The attempts (:func:`attempts`) first use counters (:mod:`.counters`), which make a maximum of any size one
loop; what counters cannot carry raises CounterClash and the attempts are made again without them. What
follows is about copies: a minimum, and every count of an attempt without counters.

A counted string position is about 20 automaton states (:mod:`.lengths`) and, inside a string, a row of
most of the vocabulary. Up to :data:`SHORT_COUNT` the cost is always paid. A longer count (``maxLength:
255``, the most common long bound) is enforced by a first attempt; when that attempt passes a compile limit
long counts can cause (the function's ``states`` or ``pattern``, the catalog's ``entries``) or builds
more than :data:`LONG_STATES` states of joins, the schema is compiled again with the long counts left to
the check after generation, each noted with the reason (:func:`attempts`). A count above
:data:`LONG_COUNT` is always left to the check.

Measured on JSONSchemaBench (2-core machine, Qwen3's vocabulary): one ``maxLength: 255`` string compiles its
index in 2 s (5,139 states, 42 million allowed-token entries derived from one shared walk); Github_medium
o55361 (three long strings in an object under a two-branch ``oneOf``: 516,000 states built, 26 s) falls back.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from . import counters
from ..limits import CompileLimitError, checking_joins

#: Counts up to this are always enforced.
SHORT_COUNT = 64
#: Counts up to this are enforced when the schema affords them; above it, never.
LONG_COUNT = 256
#: The states a first attempt with long counts may build before it gives way to the second.
LONG_STATES = 200_000

T = TypeVar("T")


@dataclass
class Policy:
    """The long-count policy of one attempt: ``allowed`` (long counts are built), ``used`` (one was), and
    ``reason`` (why they are not allowed: the limit the first attempt passed)."""

    allowed: bool = True
    used: bool = False
    reason: str = ""
    counters: bool = True


_POLICY: contextvars.ContextVar[Policy | None] = contextvars.ContextVar("callmaybe_long_counts", default=None)


def current() -> Policy:
    """The policy of the attempt running in this context (outside any attempt: a fresh one allowing long
    counts, recording nothing)."""
    policy = _POLICY.get()
    return Policy() if policy is None else policy


def inside() -> bool:
    """True inside an attempt (:func:`attempts`)."""
    return _POLICY.get() is not None


def cap() -> int:
    """The largest count the running attempt enforces."""
    return LONG_COUNT if current().allowed else SHORT_COUNT


def use(count: int) -> None:
    """Record that a count above :data:`SHORT_COUNT` is being enforced."""
    if count > SHORT_COUNT:
        current().used = True


def why_not(count: int) -> str:
    """Why ``count`` is left to the check after generation (it is above :func:`cap`)."""
    if count > LONG_COUNT:
        return f"{count} above {LONG_COUNT}"
    return f"{count} above {SHORT_COUNT}: {current().reason}"


def check_states(joined: int) -> None:
    """Raise CompileLimitError (limit ``long counts``) when an attempt that enforces long counts has built
    more than :data:`LONG_STATES` states of joins (so that the second attempt starts early)."""
    policy = _POLICY.get()
    if policy is not None and policy.allowed and policy.used and joined > LONG_STATES:
        raise CompileLimitError(f"more than {LONG_STATES:,} automaton states with long counts enforced",
                                limit=LONG_COUNTS_LIMIT)


#: The limit name of :func:`check_states`'s error (never seen by a user: the second attempt follows).
LONG_COUNTS_LIMIT = "long counts"
#: The limits whose error long counts can cause, so that a first attempt past one gives way to a second;
#: past any other (``nodes``, ``properties``, ``bytes``, ``seconds``: the second attempt would not fit in
#: the time left) the error stands.
RETRIED = frozenset({LONG_COUNTS_LIMIT, "states", "pattern", "entries"})


def _reason(limit: str) -> str:
    if limit == LONG_COUNTS_LIMIT:
        return f"enforcing it would build more than {LONG_STATES:,} automaton states (long_counts.LONG_STATES)"
    if limit == "entries":
        return "enforcing it, the catalog's index would pass the compile limit entries"
    return f"enforcing it passes the compile limit {limit}"


def attempts(build: Callable[[], T]) -> T:
    """``build()`` with long counts allowed (unless the enclosing attempt leaves them to the check); when it
    raises a CompileLimitError they can cause (:data:`RETRIED`) after enforcing one, ``build()`` again with
    them left to the check (each noted with the reason). The enclosing attempt learns whether a long count
    was enforced. Raises what the last call raises."""
    return attempts_with_policy(build)[0]


def attempts_with_policy(build: Callable[[], T]) -> tuple[T, Policy]:
    """:func:`attempts`, and the policy the result was built under (to build a twin under it: :func:`under`).

    With counters (:mod:`.counters`) allowed by the enclosing attempt, the first attempt counts long
    repetitions with counters; where they cannot be carried exactly (CounterClash) the attempts are made
    again without them."""
    outer = _POLICY.get()
    use_counters = True if outer is None else outer.counters
    if use_counters:
        try:
            return _attempts(build, outer, True)
        except counters.CounterClash:
            pass
    return _attempts(build, outer, False)


def _attempts(build: Callable[[], T], outer: Policy | None, use_counters: bool) -> tuple[T, Policy]:
    first = Policy(counters=use_counters) if outer is None else Policy(allowed=outer.allowed, reason=outer.reason,
                                                                        counters=use_counters)
    try:
        return _run(build, first, outer), first
    except CompileLimitError as exc:
        if not (first.allowed and first.used and exc.limit in RETRIED):
            raise
        second = Policy(allowed=False, reason=_reason(exc.limit), counters=use_counters)
    return _run(build, second, outer), second


def under(policy: Policy, build: Callable[[], T]) -> T:
    """``build()`` under a copy of ``policy`` (long counts allowed or not, and why), in one attempt."""
    return _run(build, Policy(allowed=policy.allowed, reason=policy.reason, counters=policy.counters), _POLICY.get())


def _run(build: Callable[[], T], policy: Policy, outer: Policy | None) -> T:
    reg = counters.registry()
    if policy.counters and reg is None:
        reg = counters.Registry()  # the outermost attempt numbers the compile's counters
    token = _POLICY.set(policy)
    reg_token = counters.set_registry(reg if policy.counters else None)
    try:
        with checking_joins(check_states):
            result = build()
    finally:
        counters.restore(reg_token)
        _POLICY.reset(token)
    if outer is not None:  # only a result that stands counts
        outer.used |= policy.used
    return result
