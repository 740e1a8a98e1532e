"""Compiling new tool lists off the decoding path: in a separate process, at a lower priority.

The server's engine decodes in its own thread with torch's threads; a compile is CPU-bound Python and numpy
that, in the server's process, took the GIL and a core from decoding (a request with a known tool list took
5-6.7 s instead of 0.6 s while a new list compiled: issue 31). :class:`ProcessCompiler` is a compile function
of the runtime's kind (``callmaybe.runtime.answering.session.Compile``) that runs the injected compiler in one worker
process (``spawn``: the server's threads are not forked), niced so that the scheduler gives decoding the
cores first. The worker loads nothing of the model: it is handed the vocabulary once, when it starts, and
builds its token trie then, before the first tool list arrives. Which tool lists are compiled, and that two
requests with the same new list wait on one compile, is the index cache's business (:mod:`.tools`).

The server never imports the compiler: ``cli.py`` hands the compile function over (it is sent to the worker
by reference, module and name, and imported there).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from ..core.catalog import Function
from ..core.errors import SchemaError
from ..core.indexfile import IndexData
from ..core.vocabulary import Vocabulary

#: How much lower than the server the compile worker runs (``os.nice`` increment, 0-19). Measured with the
#: serve bench's "new tool lists under load" (SmolLM2, public set, 1 client, on a 2-core machine shared with
#: other work, load 4-6.5): nice 0: known-list p50 1.37x idle, compile wait 3.5 s; 4: 1.27x, 9.2 s; 10: 1.13x,
#: 14.7 s (starved by the neighbours). 2 keeps decoding ahead without starving the compile.
NICE = 2

#: How often the worker looks whether the server that started it is still there (seconds).
PARENT_POLL_S = 0.5

_COMPILE: Callable[..., IndexData] | None = None
_VOCABULARY: Vocabulary | None = None


def _watch_parent(parent: int, every: float = PARENT_POLL_S) -> None:
    """End this process once its parent ``parent`` (a pid) is gone: a server killed without its ``close``
    (SIGKILL, a crash) left its compile worker running, reparented to init (a break test of issue 29)."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(0)


def _start(compile: Callable[..., IndexData], vocabulary: Vocabulary, nice: int, prepare: Callable | None,
           parent: int | None = None) -> None:
    """The worker's initializer: watch the server process ``parent`` (the worker ends when it does), keep the
    compile function and the vocabulary, lower the priority, and prepare what every compile needs
    (``prepare(vocabulary)``: the token trie)."""
    global _COMPILE, _VOCABULARY
    if parent is not None:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="parent-watch").start()
    _COMPILE, _VOCABULARY = compile, vocabulary
    try:
        os.nice(nice)
    except OSError:  # not allowed here: run at the server's priority
        pass
    if prepare is not None:
        prepare(vocabulary)


def _ready() -> int:
    """Nothing: submitted at start so that the worker process starts (and prepares) at once; its pid."""
    return os.getpid()


def _compile(functions: list[Function], options: dict[str, str], quiet: bool) -> IndexData:
    assert _COMPILE is not None and _VOCABULARY is not None
    return _COMPILE(functions, _VOCABULARY, options, quiet)


class ProcessCompiler:
    """A compile function (``(functions, vocabulary, options, quiet) -> IndexData``) that runs ``compile`` in
    a worker process of its own, started now (and again after the worker dies).

    ``vocabulary``: the one every compile is for (sent to the worker once). ``prepare``: called in the worker
    with the vocabulary when it starts (a picklable function, e.g. building the token trie). ``nice``: how
    much lower the worker's priority is. A call for another vocabulary raises ValueError. Errors of the
    compile (SchemaError, CatalogError, CompileLimitError ...) reach the caller as raised; a worker that dies
    mid-compile (killed, out of memory) raises SchemaError naming the tool list's functions, and the next
    call starts a new worker. Thread-safe; compiles run one at a time. The worker ends by itself within
    :data:`PARENT_POLL_S` seconds of this process's end, ``close`` called or not.
    """

    def __init__(self, compile: Callable[..., IndexData], vocabulary: Vocabulary, prepare: Callable | None = None,
                 nice: int = NICE):
        self._args = (compile, vocabulary, nice, prepare, os.getpid())
        self.vocabulary = vocabulary
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._start()

    def _start(self) -> None:
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_start, initargs=self._args)
        self._pool.submit(_ready)

    def __call__(self, functions: list[Function], vocabulary: Vocabulary, options: dict[str, Any],
                 quiet: bool) -> IndexData:
        if vocabulary is not self.vocabulary and vocabulary.fingerprint() != self.vocabulary.fingerprint():
            raise ValueError("this compiler compiles for another vocabulary")
        with self._lock:
            if self._pool is None:
                raise RuntimeError("the compile worker is closed")
            pool = self._pool
        try:
            return pool.submit(_compile, functions, options, quiet).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    pool.shutdown(wait=False, cancel_futures=True)
                    self._start()
            names = ", ".join(fn.name for fn in functions[:5]) + (" ..." if len(functions) > 5 else "")
            raise SchemaError(f"the compiler's process ended while compiling the tools {names} (out of memory?); "
                              "this tool list cannot be compiled here") from None

    def pid(self) -> int:
        """The worker process's id (waits until it has started)."""
        with self._lock:
            pool = self._pool
        if pool is None:
            raise RuntimeError("the compile worker is closed")
        return pool.submit(_ready).result()

    def close(self) -> None:
        """Stop the worker (a compile under way is abandoned)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
