"""Bounds on the compiler's work, so that a hostile or mistaken schema fails fast with one line instead of
running for minutes and exhausting memory.

What can grow without bound, and the limit that stops it (per function, or per schema for ``match``):

* ``bytes``: the size of the parameters schema (compact JSON), checked first, before any work;
* ``nodes``: the sub-schemas compiled, counting every copy that ``$ref`` inlining (recursion unrolled) and
  the multiplying out of ``anyOf``/``oneOf``/``allOf`` make (a product is checked before it is made);
* ``properties``: the optional properties of one object; the automaton and the regex of an object hold
  every subset of its optional members in order, which grows with the square of their number;
* ``states``: the automaton states built, every intermediate automaton counted (tries of keys and enum
  values, copies of array items, product states of alternatives), each counted before it is allocated;
* ``pattern``: the states of the character automaton interegular builds for one string regex (a
  ``pattern``; formats and lengths are fixed and smaller), its steps together; ``^[ab]*a[ab]{20}$`` needs
  2**20;
* ``seconds``: the CPU time of one function's compile (the compiling thread's, ``time.thread_time``: what
  the compile itself did, not what its neighbours on the machine made it wait, so that a schema is refused
  or compiled alike on a busy and an idle machine), checked wherever work is counted and in the loops of
  trimming and minimization: the backstop for growth the others do not model (minimization rounds of a
  long automaton, unions of many alternatives). The only limit that depends on the machine's speed;
* ``entries``: the allowed (state, token) entries of the whole catalog's index, counted by the token walk
  (:mod:`.index.walk`) as it finds them: every state inside a string value allows most of the vocabulary
  (~150,000 of Qwen's tokens), so a catalog with thousands of string values would need tens of GB.

Counted repetitions of strings (``minLength``/``maxLength`` and ``{m,n}`` in patterns) are enforced up to
64, and up to 256 where the schema affords it (:mod:`.automata.long_counts`: a first attempt past a limit gives way
to one that leaves them to the check after generation; larger counts always are); item counts
(``minItems``/``maxItems``) are not capped: an array is one copy of its item per count (:mod:`.automata.arrays`), so
``states`` refuses a count too large for its item; a number range has a few states per digit of its bounds
and a ``multipleOf`` one per remainder, bounded (:data:`~.schema.numbers.MAX_REMAINDERS`,
:data:`~.schema.numbers.MAX_PRODUCT`; a larger step is left to the check), so each is cheap alone; nested ones
multiply, and ``states`` bounds the product.

Each limit exceeded raises :class:`CompileLimitError` (a SchemaError: the command line prints one line and
exits 2) naming the limit, its value, the function and the place in its schema (a JSON pointer in the
``$ref`` spelling, ``'#/properties/p'``; ``entries`` names the catalog). ``--compile-limits`` raises them
(:meth:`CompileLimits.parse`). Reading the catalog (its JSON Schema check) is not counted here.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from ..core.errors import SchemaError

#: name -> (default, what it bounds); see :class:`CompileLimits` for why these values.
LIMITS: dict[str, tuple[int, str]] = {
    "bytes": (1_000_000, "size of one parameters schema as compact JSON"),
    "nodes": (20_000, "sub-schemas compiled for one function, $ref copies and anyOf/allOf products counted"),
    "properties": (200, "optional properties of one object"),
    "states": (1_000_000, "automaton states built for one function, intermediate automata counted"),
    "pattern": (10_000, "states of the character automaton of one pattern"),
    "seconds": (30, "CPU seconds of compile time for one function, the backstop for any other growth"),
    "entries": (50_000_000, "allowed (state, token) entries of a catalog's index, found by the token walk"),
}


def cpu_clock() -> float:
    """Seconds of CPU time the calling thread has used (``time.thread_time``): the ``seconds`` limit's clock."""
    return time.thread_time()


class CompileLimitError(SchemaError):
    """A schema needs more work than a compile limit allows; the message names the limit and the place,
    ``limit`` the limit's name (a key of :data:`LIMITS`)."""

    def __init__(self, message: str, limit: str = ""):
        super().__init__(message)
        self.limit = limit

    def __reduce__(self):  # pickled whole (a compile in another process raises it to the server)
        return type(self), (str(self), self.limit)


@dataclass(frozen=True)
class CompileLimits:
    """The compile limits (see the module docstring). Defaults: :data:`LIMITS`.

    Chosen so that nothing the JSONSchemaBench subset (1,937 schemas), the shipped catalogs or the tests
    compile today is refused, each with room above the largest there (measured on the 2-core development
    machine), while a schema past one fails within seconds:

    * ``bytes`` 1,000,000: the largest schema is 146,164 bytes (a Kubernetes one);
    * ``nodes`` 20,000: the most is 1,894 (JsonSchemaStore dss-2.0.0); three schemas that ran past 30 s or
      out of stack unrolling ``$ref`` now stop here in under 0.5 s;
    * ``properties`` 200: the most is 163; 200 optional string properties take 3.3 s and 0.4 GB for the
      grammar, 5 s and 1.1 GB for a whole index with Qwen's vocabulary (the cost grows with their square);
    * ``states`` 1,000,000: the most is 527,687 (dss-2.0.0, 11 s); a state is 1 KB of transitions;
    * ``pattern`` 10,000: the most was 5,513 (a string of 64 characters at most, when 64 was the largest count); a
      pattern stops here in about 7 s (interegular's construction is quadratic in its states);
    * ``seconds`` 30: the per-schema limit of the JSONSchemaBench harness; the slowest schema that compiles
      takes 15 s;
    * ``entries`` 50,000,000: the 30-function benchmark catalog needs 7.3 million, the shipped one 0.5
      million; 50 million is about 330 string values, 1.5 GB at the peak and 6 s. The positions of a counted
      string derive their entries from one shared walk (:class:`~.index.walk.GroupWalk`) and count one tenth.
    """

    bytes: int = LIMITS["bytes"][0]
    nodes: int = LIMITS["nodes"][0]
    properties: int = LIMITS["properties"][0]
    states: int = LIMITS["states"][0]
    pattern: int = LIMITS["pattern"][0]
    seconds: int = LIMITS["seconds"][0]
    entries: int = LIMITS["entries"][0]

    @classmethod
    def parse(cls, text: str | None) -> CompileLimits:
        """Limits from ``--compile-limits`` text: comma-separated ``NAME=N`` (``states=4000000``) and/or one
        multiplier ``Nx`` (``4x``: every limit not named is its default times N). Empty or None: the
        defaults. Raises ValueError naming what is wrong."""
        if text is None or not text.strip():
            return cls()
        factor = 1.0
        named: dict[str, int] = {}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            if "=" not in item:
                factor = _multiplier(item)
                continue
            name, _, value = (s.strip() for s in item.partition("="))
            if name not in LIMITS:
                raise ValueError(f"unknown compile limit {name!r} (names: {', '.join(LIMITS)})")
            try:
                number = int(value.replace("_", ""))
            except ValueError:
                number = 0
            if number < 1:
                raise ValueError(f"{name}={value}: expected a positive whole number")
            named[name] = number
        return replace(cls().scaled(factor), **named)

    def scaled(self, factor: float) -> CompileLimits:
        """Every limit times ``factor``."""
        return replace(self, **{f.name: int(getattr(self, f.name) * factor) for f in fields(self)})


def _multiplier(item: str) -> float:
    """The N of a ``--compile-limits`` item ``Nx`` (a positive finite number); raises ValueError."""
    try:
        factor = float(item[:-1]) if item.lower().endswith("x") else 0.0
    except ValueError:
        factor = 0.0
    if not 0 < factor < float("inf"):  # also refuses nan
        raise ValueError(f"{item!r}: expected NAME=N (names: {', '.join(LIMITS)}) or a multiplier such as 4x")
    return factor


def entries_error(limit: int) -> CompileLimitError:
    """The error of a token walk that finds more than ``limit`` allowed-token entries (the whole catalog's)."""
    return CompileLimitError(f"the index would hold more than {limit:,} allowed-token entries (each state of a "
                             "string value allows most of the vocabulary; those derived from a walk shared by "
                             "the positions of a counted string count one in ten); the compile limit is "
                             f"entries={limit} (raise it with --compile-limits entries=N)", limit="entries")


def help_text() -> str:
    """The ``--compile-limits`` help: the syntax, each limit with its default."""
    names = "; ".join(f"{name}={default} ({what})" for name, (default, what) in LIMITS.items())
    return ("Raise the bounds on the compiler's work; a schema past one fails at once, naming the limit and "
            "the place. Comma-separated NAME=N, and/or Nx to multiply the limits not named, e.g. "
            f"'states=4000000,properties=400' or '4x'. Limits and defaults: {names}.")


class Budget:
    """The work done so far on one function's schema against its :class:`CompileLimits`.

    ``where``: a function giving the one-line location prefix of a JSON pointer (``function 'f' at '#/p'``).
    ``at`` is the place being compiled, for errors raised from the automaton side (set by :meth:`place`).
    ``used``: per limit, what the compile has needed so far (totals for ``nodes`` and ``states``, the largest
    one for ``bytes``, ``properties`` and ``pattern``).
    """

    def __init__(self, limits: CompileLimits, where):
        self.limits = limits
        self.where = where
        self.used: dict[str, float] = {name: 0 for name in LIMITS}
        self.at = "#"
        self.joined = 0  # states of joins (see count_states)
        self._since: float | None = None  # when the running phase began (None: not running)
        self._no_read_before = 0.0  # wall clock (perf_counter) before which the limit cannot be passed

    def error(self, name: str, at: str, what: str) -> CompileLimitError:
        """The CompileLimitError for limit ``name`` at ``at`` (a JSON pointer): ``what`` says what was needed."""
        value = getattr(self.limits, name)
        return CompileLimitError(f"{self.where(at)}: {what}; the compile limit is {name}={value} "
                                 f"(raise it with --compile-limits {name}=N)", limit=name)

    def check_bytes(self, schema: Any, at: str = "#") -> None:
        """Raise when ``schema`` written as compact JSON is over the ``bytes`` limit."""
        size = len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
        self.used["bytes"] = max(self.used["bytes"], size)
        if size > self.limits.bytes:
            raise self.error("bytes", at, f"the schema is {size:,} bytes")

    @contextmanager
    def running(self) -> Iterator[None]:
        """CPU time this thread spends inside the block counts against the ``seconds`` limit (nested blocks
        count once)."""
        if self._since is not None:
            yield
            return
        self._since = cpu_clock()
        self._no_read_before = 0.0
        try:
            yield
        finally:
            self.used["seconds"] += cpu_clock() - self._since
            self._since = None

    def tick(self, at: str | None = None) -> None:
        """Raise when the compile has used more CPU time than the ``seconds`` limit (called wherever work is
        counted, and in the loops of trimming and minimization).

        The CPU clock is a system call (~3 us; JSONSchemaBench o11666 ticks 100,000 times), so it is read
        only when the limit could have been passed: a thread's CPU time grows no faster than the wall clock,
        so not before the CPU time left at the last reading has passed on the (cheap) wall clock. The verdict
        is the same as reading it at every tick."""
        if self._since is None:
            return
        now = time.perf_counter()
        if now < self._no_read_before:
            return
        used = self.used["seconds"] + cpu_clock() - self._since
        if used > self.limits.seconds:
            raise self.error("seconds", self.at if at is None else at,
                             f"compiling took more than {self.limits.seconds} s of CPU time")
        self._no_read_before = now + (self.limits.seconds - used)

    def count_nodes(self, n: int, at: str) -> None:
        """Count ``n`` more sub-schemas to compile; raise past the ``nodes`` limit."""
        self.tick(at)
        self.used["nodes"] += n
        if self.used["nodes"] > self.limits.nodes:
            raise self.error("nodes", at, f"more than {self.limits.nodes:,} sub-schemas to compile ($ref "
                                          "inlined, anyOf/allOf multiplied out)")

    def check_nodes(self, n: int, at: str) -> None:
        """Raise when ``n`` more sub-schemas (a product of ``anyOf`` branches about to be made) would pass
        the ``nodes`` limit; nothing is counted."""
        if self.used["nodes"] + n > self.limits.nodes:
            raise self.error("nodes", at, f"{n:,} anyOf/oneOf/allOf combinations to compile")

    def check_properties(self, optional: int, at: str) -> None:
        """Raise when one object has more optional properties than the ``properties`` limit."""
        self.used["properties"] = max(self.used["properties"], optional)
        if optional > self.limits.properties:
            raise self.error("properties", at, f"{optional:,} optional properties in one object (every "
                                               "subset in order: the work grows with their square)")

    def count_states(self, n: int, leaf: bool = False) -> None:
        """Count ``n`` more automaton states built; raise past the ``states`` limit, or (joins only, which
        no cache makes depend on what the process compiled before) past :data:`~.automata.long_counts.LONG_STATES`
        while long counts are enforced (the check :func:`checking_joins` set)."""
        self.tick()
        self.used["states"] += n
        if not leaf:
            self.joined += n
            check = _JOINS_CHECK.get()
            if check is not None:
                check(self.joined)
        if self.used["states"] > self.limits.states:
            raise self.error("states", self.at, f"more than {self.limits.states:,} automaton states to build")

    def pattern_states(self, n: int) -> None:
        """Raise when a pattern's character automaton reaches ``n`` states, over the ``pattern`` limit."""
        self.used["pattern"] = max(self.used["pattern"], n)
        if n % 64 == 0:
            self.tick()
        if n > self.limits.pattern:
            raise self.error("pattern", self.at, f"the regex of this string (its pattern, format or length) "
                                                 f"needs more than {self.limits.pattern:,} automaton states")

    @contextmanager
    def place(self, at: str) -> Iterator[None]:
        """Errors raised inside the block name ``at`` (automata are built node by node)."""
        outer, self.at = self.at, at
        try:
            yield
        finally:
            self.at = outer


_ACTIVE: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("callmaybe_compile_budget", default=None)
#: Called with the states of joins counted so far, after each join (:meth:`Budget.count_states`); set by
#: :mod:`.automata.long_counts` while an attempt runs (:func:`checking_joins`), which raises past its own bound.
_JOINS_CHECK: contextvars.ContextVar[Callable[[int], None] | None] = contextvars.ContextVar(
    "callmaybe_joins_check", default=None)


@contextmanager
def checking_joins(check: Callable[[int], None]) -> Iterator[None]:
    """Inside the block, every join counted calls ``check(states of joins so far)``, which may raise
    CompileLimitError (:func:`~.automata.long_counts.check_states`: the states a first attempt with long counts may
    build). A callback, so that the attempts (above this module) are not imported here."""
    token = _JOINS_CHECK.set(check)
    try:
        yield
    finally:
        _JOINS_CHECK.reset(token)


@contextmanager
def active(budget: Budget) -> Iterator[Budget]:
    """Make ``budget`` the one that automaton building in this thread counts against (:func:`current`)."""
    token = _ACTIVE.set(budget)
    try:
        with budget.running():
            yield budget
    finally:
        _ACTIVE.reset(token)


def current() -> Budget | None:
    """The budget of the compile running in this thread, or None (nothing counted)."""
    return _ACTIVE.get()


def count_states(n: int, leaf: bool = False) -> None:
    """Count ``n`` automaton states against the current budget, if any (:mod:`.automata.compose`, :mod:`.automata.dfa`);
    ``leaf``: states of a leaf automaton (a regex, a length, a number range), which the process caches (a
    cache hit counts nothing), as opposed to those of joins, built anew by every compile."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.count_states(n, leaf)


def tick() -> None:
    """Check the current budget's ``seconds`` limit, if any (the loops of :mod:`.automata.dfa`)."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.tick()


@contextmanager
def place(at: str | None) -> Iterator[None]:
    """Name ``at`` in the errors of the current budget inside the block (no-op without a budget or place)."""
    budget = _ACTIVE.get()
    if budget is None or at is None:
        yield
        return
    with budget.place(at):
        yield
