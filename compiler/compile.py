"""Catalog + vocabulary -> index in memory (and on disk), with the time of each phase.

Phases: the vocabulary's token trie (:mod:`.index.trie`), the grammar (:mod:`.grammar`: regex and byte DFA), the
token walk (:mod:`.index.walk`: every token from every state), and the table (:mod:`.index.table`: deduplicated rows,
fewest tokens to completion). The arrays and header are those of :mod:`callmaybe.core.indexfile`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..core import __version__
from ..core.callformat import INDEX_FORMS
from ..core.catalog import Function, catalog_fingerprint
from ..core.indexfile import GRAMMAR_REVISION, IndexData, save_index
from ..core.malloc import release_free_memory
from ..core.vocabulary import Vocabulary
from .index.counted_index import counted_arrays, effect_classes
from .automata.counters import Transducer
from .automata.dfa import byte_classes
from .automata import long_counts
from .grammar import Grammar, compile_grammar, value_grammar
from .limits import CompileLimits
from .index.table import build_rows, min_tokens
from .index.trie import TRIE_CACHE, TokenTrie
from .index.walk import WalkResult, walk


@dataclass(frozen=True)
class CompileOptions:
    """Options that change the grammar (recorded in the index header).

    ``parameters_key``: the key that holds the arguments (``"parameters"``; Qwen's own format says
    ``"arguments"``). ``opening``: text the model writes before the call (Qwen: ``<tool_call>\\n``), which
    the runtime appends to the prompt; it is recorded, not part of the grammar. ``form``: what the grammar
    accepts: ``"call"``, one whole call of any function of the catalog; ``"value"``, one value of the
    parameters schema of the catalog's only function, alone (a ``response_format`` schema: no name, no
    ``parameters_key``; the opening should be empty).
    """

    parameters_key: str = "parameters"
    opening: str = ""
    form: str = "call"

    def __post_init__(self) -> None:
        if self.form not in INDEX_FORMS:
            raise ValueError(f"unknown index form {self.form!r} (expected one of {', '.join(INDEX_FORMS)})")


@dataclass
class CompileReport:
    """What a compile did: seconds per phase and the size of the result.

    ``timings``: seconds per phase, in order "vocabulary" (the token trie), "automaton", "byte expansion",
    "join" (see :func:`~.grammar.compile_grammar`), "token walk", "table", and "write" (file only).
    ``states``/``accepting_states``: of the call DFA; ``entries``: allowed (state, token) pairs; ``rows``:
    distinct rows of allowed tokens; ``size_bytes``: the index file's size (0 until written); ``notes``: the
    grammar's :class:`~.schema.compiler.Note` list.
    """

    timings: dict[str, float] = field(default_factory=dict)
    states: int = 0
    accepting_states: int = 0
    entries: int = 0
    rows: int = 0
    size_bytes: int = 0
    notes: list = field(default_factory=list)

    @property
    def compile_seconds(self) -> float:
        """Total compile time in seconds, vocabulary preparation and writing excluded."""
        return sum(v for k, v in self.timings.items() if k not in ("vocabulary", "write"))


#: The longest call regex the header stores (characters); a longer one is named by its length only (a
#: chain of ``$ref`` through ``if``/``then``/``else`` 11 deep wrote an 11 MB regex for 58 states).
HEADER_REGEX = 1_000_000


def token_trie(vocabulary: Vocabulary) -> TokenTrie:
    """The token trie of ``vocabulary`` from the process-wide :data:`~.index.trie.TRIE_CACHE` (kept per process,
    and on disk for large vocabularies; see :class:`~.index.trie.TrieCache`)."""
    return TRIE_CACHE.get(vocabulary)


def compile_index(
    functions: list[Function], vocabulary: Vocabulary, options: CompileOptions | None = None,
    limits: CompileLimits | None = None,
) -> tuple[IndexData, CompileReport]:
    """Compile ``functions`` for ``vocabulary`` into an index (not yet written) and a report of the compile.

    The index's arrays and header are described in :mod:`callmaybe.core.indexfile`. ``limits``: the compile
    limits (:mod:`.limits`; the defaults when None), which bound the work but not the result, so they are
    not recorded. With ``options.form == "value"`` the grammar is the values of the one function's
    parameters schema (:func:`~.grammar.value_grammar`). Once its intermediate arrays are freed, the heap's
    free pages go back to the system (:func:`~callmaybe.core.malloc.release_free_memory`). Raises SchemaError
    / CatalogError for an uncompilable catalog (CompileLimitError past a limit), ValueError for the value
    form of a catalog that does not hold exactly one function.
    """
    try:
        return _compile_index(functions, vocabulary, options, limits)
    finally:
        release_free_memory()


def _compile_index(functions: list[Function], vocabulary: Vocabulary, options: CompileOptions | None,
                   limits: CompileLimits | None) -> tuple[IndexData, CompileReport]:
    """:func:`compile_index`'s work."""
    options = options or CompileOptions()
    limits = limits or CompileLimits()
    report = CompileReport()
    t0 = time.perf_counter()
    trie = token_trie(vocabulary)
    t1 = time.perf_counter()
    report.timings["vocabulary"] = t1 - t0
    if options.form == "value" and len(functions) != 1:
        raise ValueError(f"the value form compiles one schema, got a catalog of {len(functions)} functions")

    def build() -> tuple[Grammar, WalkResult, np.ndarray, np.ndarray, float, Transducer | None]:
        # a catalog whose long counts pass the entries limit is compiled again without them (long_counts)
        if options.form == "value":
            grammar = value_grammar(functions[0].parameters, name=functions[0].name, timings=report.timings,
                                    limits=limits)
        else:
            grammar = compile_grammar(functions, parameters_key=options.parameters_key,
                                      timings=report.timings, limits=limits)
        t2 = time.perf_counter()
        tr = grammar.transducer()  # long counts with counters: walk the transducer's automaton
        if tr is None:
            transitions, class_eff = grammar.dfa.transitions, None
            byte_class, class_trans = byte_classes(transitions)  # for the walk's groups and the table
        else:  # groups only of states whose transitions have the same effects
            transitions = tr.transitions
            byte_class, class_trans, class_eff = effect_classes(tr)
        result = walk(transitions, trie, class_transitions=class_trans, max_entries=limits.entries,
                      class_effects=class_eff)
        return grammar, result, byte_class, class_trans, t2, tr

    grammar, result, byte_class, class_trans, t2, tr = long_counts.attempts(build)
    report.notes = grammar.notes
    t3 = time.perf_counter()
    report.timings["token walk"] = t3 - t2
    if tr is None:
        dfa = grammar.dfa
        arrays = build_rows(result, dfa.num_states, vocabulary.vocab_size)
        arrays["min_tokens"] = min_tokens(result, dfa.accepting)
        arrays["byte_class"] = byte_class
        arrays["transitions"] = class_trans
        arrays["accepting"] = dfa.accepting.astype(np.uint8)
        start, accepting = int(dfa.start), dfa.accepting
    else:  # the table's byte classes also tell effects apart
        arrays = counted_arrays(tr, result, vocabulary.token_bytes, vocabulary.vocab_size)
        start, accepting = tr.start, tr.accepting
    report.timings["table"] = time.perf_counter() - t3
    report.states = len(accepting)
    report.accepting_states = int(accepting.sum())
    report.entries = result.entries
    report.rows = len(arrays["row_kind"])
    header = {
        "vocabulary_fingerprint": vocabulary.fingerprint(),
        "vocabulary_name": vocabulary.name,
        "catalog_fingerprint": catalog_fingerprint(functions),
        "functions": [fn.name for fn in functions],
        "regex": grammar.regex if len(grammar.regex) <= HEADER_REGEX else
        f"<the call's regex: {len(grammar.regex):,} characters, not stored>",
        "regex_exact": grammar.exact and len(grammar.regex) <= HEADER_REGEX,
        "options": asdict(options),
        "vocab_size": vocabulary.vocab_size,
        "eos_ids": [int(e) for e in vocabulary.eos_ids],
        "start": start,
        "compiler_version": __version__,
        "grammar_revision": GRAMMAR_REVISION,
        "stats": {"states": report.states, "entries": report.entries, "rows": report.rows},
        "not_enforced": [str(n) for n in grammar.not_enforced],
    }
    if tr is not None:
        header["counters"] = [int(h) for h in tr.table.his]
    return IndexData(header=header, arrays=arrays), report


def compile_to_file(
    functions: list[Function], vocabulary: Vocabulary, path: str | Path, options: CompileOptions | None = None,
    limits: CompileLimits | None = None,
) -> tuple[IndexData, CompileReport]:
    """Compile and write the index atomically to ``path``; the report includes write time and file size."""
    index, report = compile_index(functions, vocabulary, options, limits)
    write_index(path, index, report)
    return index, report


def write_index(path: str | Path, index: IndexData, report: CompileReport) -> None:
    """Write ``index`` atomically to ``path``, its file size (bytes) and write time (``timings["write"]``,
    seconds) into ``report``. Raises OSError when it cannot be written."""
    t = time.perf_counter()
    report.size_bytes = save_index(path, index)
    report.timings["write"] = time.perf_counter() - t
