"""The application layer of ``run``, ``interactive`` and ``eval``: one configuration, one loading path.

``RunConfig`` holds what the three commands share. :class:`Runtime` loads the model, its vocabulary and the
call format once, then gives an :class:`~.runner.Answerer` for any catalog: the index comes from ``--index``,
else a shipped, model-folder or cached one (:mod:`callmaybe.core.indexes`), else the injected ``compile``
function builds it. The runtime never compiles by itself (it imports no regex engine): ``cli.py``, the
composition root, hands it the compiler.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from ...core import indexes
from ...core.callformat import call_format_of, compile_options
from ...core.catalog import Function, catalog_fingerprint, load_catalog
from ...core.errors import CallmaybeError, InputError, Interrupted, OutputError
from ...core.indexfile import IndexData, read_index, save_index
from ...core.journal import Journal, journal_path
from ...core.jsonio import check_distinct, check_output_path, read_requests, write_json
from ...core.messages import say
from ...core.registry import DEFAULT_MODEL
from ...core.sources import HUB, PATH, REGISTRY, classify
from ...core.vocabulary import Vocabulary, load_vocabulary, vocabulary_from_tokenizer
from ..decoding.decoder import PrefixCache
from ..decoding.prefix import PREFIX_CACHE_BYTES
from ..decoding.index import open_index
from ..decoding.profile import Profile
from .runner import Answerer, RunStats, answer_all

#: Builds an index in memory: (functions, vocabulary, compile options, quiet) -> IndexData; unless ``quiet`` it
#: reports what it compiled on stderr. Raises SchemaError / CatalogError for a catalog it cannot compile.
Compile = Callable[[list[Function], Vocabulary, dict[str, str], bool], IndexData]


from ..policy.decision import CALL_LOG_ODDS_MIN, COMBINED_LOG_ODDS_MIN
from ..policy.relevance import VERDICT_LOG_ODDS_MIN


@dataclass(frozen=True)
class RunConfig:
    """What ``run``, ``interactive`` and ``eval`` share.

    ``model``: a registry name, a local checkpoint folder or a hub id. ``index_path``: an explicit index
    (must match). ``max_tokens``: the token budget per call. ``threads``: torch CPU threads (None: torch's
    choice). ``call_format``: ``plain``, ``tools`` or ``auto``. ``prefix_cache``: reuse the catalog prompt's
    keys and values; ``prefix_cache_bytes``: the keys and values of catalog prompts kept, in bytes
    (:mod:`..decoding.prefix`; the server keeps more, ``serve --prefix-cache-mb``). ``keep_unstated``: keep
    optional arguments the request does not state. ``trace``: record every token. ``dtype``: the weights' dtype
    (``auto``, ``float32``, ``bfloat16``, ``int8``); ``device``: ``auto``, ``cpu`` or ``cuda``
    (:mod:`..model.load`). ``max_batch``: how many calls decode together
    (:mod:`..decoding.batch`; 1: one at a time). ``tool_choice``: ``required`` (one call per request), ``auto`` (a call
    or a text answer) or ``none`` (text); ``parallel_calls``: one or more calls (:mod:`.choices`).
    ``relevance_check``: under ``auto``, decline a first call of a function the model doubts does what the
    request asks (:mod:`..policy.relevance`); ``confirm_check``: under ``auto``, decline a decoded first call the
    model, shown it, doubts does what the request asks (:mod:`..policy.confirm`); ``result_check``: under
    ``auto`` after a tool result, keep a declined turn's answer written without the catalog only when it uses the
    result (:mod:`..policy.result_use`), else answer beside the catalog; ``evidence_check``: under
    ``auto``, decline a first call none of whose values the request states
    (:func:`~..policy.evidence.first_call`). ``call_threshold``: the call-or-answer decision's log-odds (nats,
    :mod:`..policy.decision`); ``verdict_threshold``: the relevance verdict's (:mod:`..policy.relevance`);
    ``combined_threshold``: the least sum of a first call's three log-odds (:mod:`..policy.decision`).
    ``speculate``: draft tokens copied from the prompt and verify them in one pass where the model chooses
    (:mod:`..decoding.lookup`; greedy output unchanged; a sampled turn never drafts).
    ``text_tokens``: ``eval`` only: a text answer is cut after this many tokens (None: ``DECLINE_TOKENS`` of
    :mod:`..evaluation.evaluate`); it is scored as no call, and a call it would write as text later is not seen.
    """

    model: str = DEFAULT_MODEL
    index_path: Path | None = None
    max_tokens: int = 256
    threads: int | None = None
    call_format: str = "plain"
    prefix_cache: bool = True
    prefix_cache_bytes: int = PREFIX_CACHE_BYTES
    keep_unstated: bool = False
    trace: bool = False
    dtype: str = "auto"
    device: str = "auto"
    max_batch: int = 1
    tool_choice: str = "required"
    parallel_calls: bool = False
    relevance_check: bool = True
    confirm_check: bool = True
    result_check: bool = True
    evidence_check: bool = False
    call_threshold: float = CALL_LOG_ODDS_MIN
    verdict_threshold: float = VERDICT_LOG_ODDS_MIN
    combined_threshold: float = COMBINED_LOG_ODDS_MIN
    speculate: bool = True
    text_tokens: int | None = None

    @property
    def turns(self) -> bool:
        """True when requests are answered as turns (:mod:`.choices`): a text answer may be allowed, or
        several calls; else each request gets exactly one call by the :class:`~.runner.Answerer`."""
        return self.tool_choice != "required" or self.parallel_calls


def model_vocabulary(spec: str, loaded) -> Vocabulary:
    """The vocabulary of a loaded model: read from its GGUF for registry models (token types mark padding
    and control ids), else from its tokenizer; the vocabulary size is the model's logits per position.

    Raises VocabularyError when the tokenizer is wider than the model's logits.
    """
    source = classify(spec)
    if source.kind == REGISTRY:
        return load_vocabulary(source.name, loaded.vocab_size)
    return vocabulary_from_tokenizer(loaded.tokenizer, loaded.vocab_size, name=loaded.name)


class Runtime:
    """A loaded model with its vocabulary and call format, ready to answer requests for any catalog.

    Raises ModelError / VocabularyError (one line) when the model cannot be loaded.
    """

    def __init__(self, config: RunConfig, compile: Compile):
        from ..model.load import load_model
        from ..decoding.prompt import choose_call_format

        self.config = config
        self.compile = compile
        self.loaded = load_model(config.model, threads=config.threads, dtype=config.dtype, device=config.device)
        self.vocabulary = model_vocabulary(config.model, self.loaded)
        self.options = compile_options(choose_call_format(self.loaded.tokenizer, config.call_format))
        # a local or hub checkpoint folder may carry its publisher's indexes in callmaybe/
        self.model_dir = self.loaded.path if classify(config.model).kind in (PATH, HUB) else None
        self.profile = Profile()  # the seconds of every answerer of this runtime, per phase
        # one prefix cache for every catalog: another catalog reuses the prompt's header and instructions
        self.prefix = PrefixCache(self.loaded.model, enabled=config.prefix_cache, profile=self.profile,
                                  max_bytes=config.prefix_cache_bytes)

    def index_for(self, functions: list[Function], store: bool = True) -> IndexData:
        """The index of ``functions`` for this model: ``config.index_path`` (must match), else a shipped,
        model-folder or cached one, else compiled now (said on stderr) and, with ``store``, cached on disk.

        Raises IndexFileError for an explicit index that is corrupt or compiled for something else, SchemaError
        for a catalog that cannot be compiled.
        """
        vfp, cfp = self.vocabulary.fingerprint(), catalog_fingerprint(functions)
        if self.config.index_path is not None:
            return indexes.load_matching(self.config.index_path, vfp, cfp, self.options)
        return self._found_or_compiled(functions, self.options, store)

    def index_for_schema(self, name: str, schema: Any, store: bool = True) -> IndexData:
        """The index of the values of one JSON schema (a ``response_format``), for this model: the schema as
        a one-function catalog (``Function(name, "", schema)``) compiled in the ``value`` form
        (:func:`callmaybe.core.callformat.compile_options`: no call around the value, no opening text), found
        or compiled and cached like :meth:`index_for` (``--index`` is not consulted: it holds calls).

        ``schema`` is taken as given, any root type; the caller validates it as a JSON Schema. Raises
        SchemaError / CatalogError for a schema that cannot be compiled or admits no value.
        """
        options = compile_options(call_format_of(self.options), form="value")
        return self._found_or_compiled([Function(name=name, description="", parameters=schema)], options, store)

    def _found_or_compiled(self, functions: list[Function], options: dict[str, str], store: bool) -> IndexData:
        """A shipped, model-folder or cached index of ``functions`` compiled with ``options``, else one compiled
        now (and, with ``store``, cached on disk)."""
        vfp, cfp = self.vocabulary.fingerprint(), catalog_fingerprint(functions)
        found = indexes.find(vfp, cfp, options, self.model_dir)
        if found is not None:
            return found
        if not store:
            return self.compile(functions, self.vocabulary, options, True)
        path = indexes.cache_path(cfp, vfp, options)
        say(f"no compiled index matches this catalog, tokenizer and call format; compiling one into {path}")
        index = self.compile(functions, self.vocabulary, options, False)
        try:
            save_index(path, index)
        except OSError as exc:
            say(f"cannot cache the index at {path}: {exc.strerror or exc}")
        else:
            indexes.used(path)
            indexes.prune_cache(keep=path)  # the cache stays within its bounds (core.indexes.CACHE_BOUNDS)
        return index

    def answerer(self, functions: list[Function], store: bool = True, prefix_cache: bool | None = None) -> Answerer:
        """An :class:`~.runner.Answerer` for ``functions`` under this runtime's configuration."""
        index = open_index(self.index_for(functions, store), self.vocabulary.token_bytes)
        c = self.config
        enabled = c.prefix_cache if prefix_cache is None else prefix_cache
        return Answerer(self.loaded.model, self.loaded.tokenizer, index, functions, c.max_tokens, enabled,
                        c.keep_unstated, self.profile, self.prefix if enabled else None, c.speculate)


def request_answers(answerer: Answerer, requests: list[Any], config: RunConfig, engine=None,
                    ) -> Iterator[tuple[int, dict[str, Any], Any]]:
    """Answer ``requests`` (entries ``{"prompt": ...}``) of ``answerer``'s catalog under ``config``: yields
    (position in ``requests``, result entry, its Generation, TurnResult or None) as each is answered, so not in
    order when ``config.max_batch`` is above 1. Under ``config.turns`` each request is a turn decoded by
    ``engine`` (an :class:`~.engine.Engine` of the answerer's runtime: ValueError when it is None)."""
    if config.turns:
        from .choices import answer_turns

        if engine is None:
            raise ValueError("answering turns needs the runtime's engine")
        return answer_turns(engine, ((answerer.functions, answerer.index, r) for r in requests), config)
    return answer_all(((answerer, r) for r in requests), config.max_batch, config.trace)


def collect(answers: Iterator[tuple[int, dict[str, Any], Any]], total: int,
            on_result: Callable[[int, dict], None], on_answer: Callable[[dict], None] | None = None,
            stats: RunStats | None = None) -> RunStats:
    """Take ``total`` answers (:func:`request_answers`' triples) as they come, with a progress bar: each goes
    to ``on_result`` (position, entry: to journal it) and its record (:meth:`~.runner.RunStats.add`) to
    ``on_answer``. Returns the totals (``stats``, when given, counted on)."""
    from ...core.messages import progress
    from ..decoding.turn import TurnResult

    stats = stats if stats is not None else RunStats()
    with progress(total=total, desc="requests", unit="req") as bar:
        for position, entry, result in answers:
            on_result(position, entry)
            record = stats.add_turn(entry, result) if isinstance(result, TurnResult) else stats.add(entry, result)
            bar.update(1)
            if on_answer is not None:
                on_answer(record)
    return stats


class Answering(Protocol):
    """Where :func:`run_file` answers its requests: in this process (:class:`LocalAnswering`) or on a Ray
    cluster (:class:`callmaybe.scale.batch.RayAnswering`). ``profile``: where the answering time went."""

    profile: Profile

    def prepare(self, functions: list[Function]) -> None:
        """Load what answering ``functions``' requests needs (the model, the index). Raises CallmaybeError."""

    def answer(self, requests: list[Any], on_result: Callable[[int, dict], None],
               on_answer: Callable[[dict], None] | None) -> RunStats:
        """Answer every request once (:func:`collect`'s contract: ``on_result`` gets each position in
        ``requests`` and its entry as it is answered); returns the totals."""

    def close(self) -> None:
        """Free what :meth:`prepare` took (called whatever happened)."""


class LocalAnswering:
    """:class:`Answering` in this process: one :class:`Runtime`, its answerer of the catalog, and under
    ``config.turns`` its :class:`~.engine.Engine`."""

    def __init__(self, config: RunConfig, compile: Compile):
        self.config, self.compile = config, compile
        self.profile = Profile()
        self.runtime: Runtime | None = None

    def prepare(self, functions: list[Function]) -> None:
        self.runtime = Runtime(self.config, self.compile)
        self.profile = self.runtime.profile
        self.answerer = self.runtime.answerer(functions)

    def answer(self, requests: list[Any], on_result: Callable[[int, dict], None],
               on_answer: Callable[[dict], None] | None) -> RunStats:
        engine = None
        if self.config.turns:
            from .engine import Engine

            engine = Engine(self.runtime, self.config.max_batch, max_queue=max(1, len(requests)))
        return collect(request_answers(self.answerer, requests, self.config, engine), len(requests), on_result,
                       on_answer)

    def close(self) -> None:
        self.runtime = None


@dataclass
class RunOutcome:
    """What :func:`run_file` did: the result entries (those taken from a resumed journal included), the totals
    of the requests answered in this run, its wall time in seconds (model loading included), the seconds spent
    answering (from the first request to the written output), where they went (:class:`~..decoding.profile.Profile`)
    and how many results came from the journal."""

    results: list[dict]
    stats: RunStats
    seconds: float
    answer_seconds: float
    profile: Profile
    resumed: int = 0

    @property
    def failed(self) -> int:
        """How many results are error entries."""
        return sum(1 for r in self.results if "error" in r)


def run_identity(config: RunConfig, functions: list[Function]) -> dict[str, Any]:
    """What decides a run's answers, as a journal records it (:mod:`callmaybe.core.journal`): the model, its
    dtype and device, the catalog's fingerprint, the index file's SHA-256 (or ``auto``), the token budget,
    the call format, grounding, and callmaybe's version. Threads, batching and tracing are left out."""
    from ...core import __version__
    from ...core.files import sha256_file

    return {"model": config.model, "dtype": config.dtype, "device": config.device,
            "catalog": catalog_fingerprint(functions),
            "index": sha256_file(config.index_path) if config.index_path is not None else "auto",
            "max_tokens": config.max_tokens, "call_format": config.call_format,
            "keep_unstated": config.keep_unstated, "tool_choice": config.tool_choice,
            "parallel_calls": config.parallel_calls, "relevance_check": config.relevance_check,
            "confirm_check": config.confirm_check, "result_check": config.result_check,
            "evidence_check": config.evidence_check, "call_threshold": config.call_threshold,
            "verdict_threshold": config.verdict_threshold, "combined_threshold": config.combined_threshold,
            "callmaybe": __version__}


def run_file(config: RunConfig, functions_path: Path, input_path: Path, output_path: Path, compile: Compile,
             on_answer: Callable[[dict], None] | None = None, resume: bool = False,
             answering: Answering | None = None) -> RunOutcome:
    """Answer the requests in ``input_path`` against the catalog ``functions_path`` and write ``output_path``
    atomically.

    Every answer is journaled as it is produced (:mod:`callmaybe.core.journal`); the journal is deleted once
    the output is written. ``resume`` continues the journal of an interrupted run: requests it holds (same
    position, same prompt) are not answered again. Before the model is loaded, input problems raise
    InputError / CatalogError / IndexFileError: a missing or malformed file, an output that is the input or
    the catalog, an unreadable ``--index``, a journal there without ``resume`` (or of another run). SIGINT or
    SIGTERM (:class:`~callmaybe.core.errors.Interrupted`; KeyboardInterrupt is turned into one) keeps the
    journal and raises Interrupted saying how to continue; a failed final write raises OutputError naming the
    journal that keeps the answers. ``answering``: where the requests are answered (default: this process,
    :class:`LocalAnswering`); the journal, the output and ``resume`` are the same wherever they are.
    """
    import signal

    t0 = time.perf_counter()
    functions = load_catalog(functions_path)
    requests = read_requests(input_path)
    check_output_path(output_path)
    check_distinct(output_path, {"requests file": input_path, "catalog": functions_path})
    if config.index_path is not None:
        read_index(config.index_path)  # a folder, a truncated or corrupt file: said now, not after loading
    journal = Journal(journal_path(output_path))
    journal.open(run_identity(config, functions), resume)
    try:
        by_name = {fn.name: fn for fn in functions}
        prompts = [r.get("prompt") if isinstance(r, dict) else None for r in requests]
        results: list[dict | None] = [_still_good(journal.done(i, p), by_name) for i, p in enumerate(prompts)]
        todo = [i for i, entry in enumerate(results) if entry is None]
        answering = answering if answering is not None else LocalAnswering(config, compile)
        answering.prepare(functions)
        t1 = time.perf_counter()

        def journaled(position: int, entry: dict) -> None:
            i = todo[position]
            results[i] = entry
            journal.add(i, prompts[i], entry)

        stats = answering.answer([requests[i] for i in todo], journaled, on_answer)
        try:
            write_json(output_path, results)  # the journal stays open, and locked, until the output is written
        except InputError as exc:
            raise OutputError(f"{exc}; the {len(results)} answers are kept in {journal.path}: rerun the same "
                              "command with --resume once it can be written") from None
    except CallmaybeError:
        if not journal.answers:  # nothing answered: no journal to leave behind
            journal.remove()
        journal.close()
        raise
    except (KeyboardInterrupt, Interrupted) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        if not journal.answers:  # nothing answered yet: nothing to resume
            journal.remove()
            raise Interrupted(signum, "interrupted before any request was answered") from None
        journal.close()
        raise Interrupted(signum, _interrupted(journal, len(requests))) from None
    except BaseException:
        journal.close()
        raise
    finally:
        if answering is not None:
            answering.close()
    journal.remove()
    t2 = time.perf_counter()
    return RunOutcome(results, stats, t2 - t0, t2 - t1, answering.profile, len(requests) - len(todo))


def _still_good(entry: Any, by_name: dict[str, Function]) -> dict | None:
    """A journaled entry as it may be reused: an error entry, or a call whose function is in the catalog and
    whose parameters match its schema (checked again: a journal is a file anyone can edit); else None, and
    the request is answered again."""
    from ..policy.grounding import valid

    if not isinstance(entry, dict):
        return None
    if "error" in entry and isinstance(entry.get("error"), str):
        return entry
    if isinstance(entry.get("calls"), list):  # --parallel-calls
        good = all(isinstance(c, dict) and _still_good(c, by_name) for c in entry["calls"])
        return entry if good and (entry["calls"] or isinstance(entry.get("content"), str)) else None
    if entry.get("name") is None and isinstance(entry.get("content"), str):  # a declined request
        return entry
    fn = by_name.get(entry.get("name"))
    params = entry.get("parameters")
    return entry if fn is not None and isinstance(params, dict) and valid(params, fn) else None


def _interrupted(journal: Journal, total: int) -> str:
    return (f"interrupted: {len(journal.answers)} of {total} answers are kept in {journal.path}; rerun the same "
            "command with --resume to continue")


def interactive(config: RunConfig, functions_path: Path, compile: Compile, read: Callable[[str], str] = input,
                write: Callable[[dict[str, Any]], None] | None = None,
                on_answer: Callable[[dict], None] | None = None) -> None:
    """Answer requests typed at a prompt (``read``; an empty line or EOF stops) with one call each, passed to
    ``write`` (default: print one JSON line). ``on_answer`` gets each request's record (for ``--trace``)."""
    import json

    functions = load_catalog(functions_path)
    runtime = Runtime(config, compile)
    answerer = runtime.answerer(functions)
    write = write or (lambda call: print(json.dumps(call, ensure_ascii=False), flush=True))
    say(f"{len(functions)} functions, model {runtime.loaded.name}; type a request (empty line to quit)")
    stats = RunStats()
    while True:
        try:
            line = read("> ")
        except EOFError:
            break
        if not line.strip():
            break
        entry, gen = answerer.answer({"prompt": line}, config.trace)
        record = stats.add(entry, gen)
        if on_answer is not None:
            on_answer(record)
        write({k: v for k, v in entry.items() if k != "prompt"})
