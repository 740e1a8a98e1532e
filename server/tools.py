"""The index of each tool list (and each ``response_format`` schema), loaded once and kept in memory.

A request's tools are keyed by their catalog fingerprint (names and parameter schemas, in order) and the
runtime's compile options, so requests that send the same tools share one :class:`TokenIndex`. Finding or
compiling an index runs off the event loop, in one worker thread (compiles are CPU-bound and the engine's
thread needs the other cores); two requests that bring the same new tool list at once wait on one compile.
Memory is bounded: at most ``capacity`` indexes, the least recently used dropped first. New tool lists are
bounded per minute (:class:`~.limits.CompileRate`); lists already in memory, or being compiled, do not count.
A list the compiler refuses is remembered too (its error is raised again without compiling).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable, Generic, TypeVar

from ..core.catalog import Function, catalog_fingerprint
from ..core.errors import CallmaybeError
from .errors import too_many
from .limits import CompileRate

T = TypeVar("T")


class IndexCache(Generic[T]):
    """Indexes per tool list and per response schema, compiled once, at most ``capacity`` in memory.

    ``load_tools(functions)`` and ``load_schema(name, schema)`` find or compile an index (blocking; run in
    the worker thread): for a :class:`~callmaybe.runtime.answering.session.Runtime`, ``open_index(runtime.index_for(
    functions), token_bytes)`` and the same with ``index_for_schema``. ``options``: the runtime's compile
    options (part of every key). ``rate``: the bound on new compiles per minute. ``executor``: where loads
    run (default: one worker thread).
    """

    def __init__(self, load_tools: Callable[[list[Function]], T], load_schema: Callable[[str, Any], T],
                 options: dict[str, Any] | None = None, capacity: int = 32, rate: CompileRate | None = None,
                 executor: Executor | None = None):
        self.load_tools = load_tools
        self.load_schema = load_schema
        self.options = json.dumps(options or {}, sort_keys=True)
        self.capacity = max(1, capacity)
        self.rate = rate or CompileRate()
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="callmaybe-compile")
        self._ready: OrderedDict[tuple, T] = OrderedDict()
        self._refused: OrderedDict[tuple, CallmaybeError] = OrderedDict()
        self._pending: dict[tuple, asyncio.Task] = {}

    def __len__(self) -> int:
        """How many indexes are in memory."""
        return len(self._ready)

    @property
    def compiling(self) -> int:
        """How many distinct tool lists or schemas are being found or compiled now."""
        return len(self._pending)

    async def for_tools(self, functions: list[Function]) -> T:
        """The index of ``functions``. Raises SchemaError / CatalogError when the compiler refuses them
        (the message names the function and the keyword), ApiError 429 past the compile rate."""
        key = ("tools", catalog_fingerprint(functions), self.options)
        return await self._get(key, lambda: self.load_tools(functions))

    async def for_schema(self, name: str, schema: Any) -> T:
        """The index of the values of ``schema`` (a ``response_format``), named ``name`` in messages. Raises
        as :meth:`for_tools`."""
        key = ("schema", catalog_fingerprint([Function(name=name, description="", parameters=schema)]),
               self.options)
        return await self._get(key, lambda: self.load_schema(name, schema))

    async def _get(self, key: tuple, load: Callable[[], T]) -> T:
        if key in self._ready:
            self._ready.move_to_end(key)
            return self._ready[key]
        if key in self._refused:
            self._refused.move_to_end(key)
            raise self._refused[key]
        task = self._pending.get(key)
        if task is None:
            if not self.rate.try_take():
                raise too_many(f"more than {self.rate.per_minute} new tool lists (or response schemas) to compile "
                               "in one minute: retry later, or reuse a tool list already sent",
                               code="compile_rate_exceeded", retry_after=self.rate.retry_after())
            task = asyncio.get_running_loop().create_task(self._load(key, load))
            task.add_done_callback(_retrieved)
            self._pending[key] = task
        # shielded: a request that goes away does not stop the compile the others (and later ones) wait on
        return await asyncio.shield(task)

    async def _load(self, key: tuple, load: Callable[[], T]) -> T:
        try:
            value = await asyncio.get_running_loop().run_in_executor(self._executor, load)
        except CallmaybeError as exc:
            self._keep(self._refused, key, exc)
            raise
        finally:
            self._pending.pop(key, None)
        self._keep(self._ready, key, value)
        return value

    def _keep(self, store: OrderedDict, key: tuple, value: Any) -> None:
        store[key] = value
        store.move_to_end(key)
        while len(store) > self.capacity:
            store.popitem(last=False)

    def close(self) -> None:
        """Stop the worker thread (a compile under way finishes first)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def _retrieved(task: asyncio.Task) -> None:
    """Mark a load's outcome as seen, so that a load whose requests all went away logs no warning."""
    if not task.cancelled():
        task.exception()
