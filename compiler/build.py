"""What the ``compile`` and ``match`` commands do, and the compiler the runtime is handed: compile a catalog into
an index (in memory or to a file), say what was compiled and what the grammar does not enforce, and check
texts against a schema's or a catalog's automaton. Errors leave here with the file they concern named.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.catalog import Function, load_catalog
from ..core.errors import InputError, SchemaError
from ..core.files import human_size
from ..core.indexfile import IndexData
from ..core.jsonio import read_json
from ..core.messages import say
from ..core.vocabulary import Vocabulary
from .compile import CompileOptions, CompileReport, compile_index, write_index
from .grammar import compile_grammar, schema_dfa
from .limits import CompileLimits
from .schema.compiler import Note


def report_notes(notes: list[Note], strict: bool) -> None:
    """Say what the grammar does not enforce (checked after generation) and the other notes; with ``strict``,
    raise SchemaError naming the first keyword not enforced or unknown (ignored) instead."""
    missing = [n for n in notes if n.kind == "not enforced"]
    unknown = [n for n in notes if n.kind == "ignored"]
    if strict and (missing or unknown):
        first, what = (missing[0], "not enforced by the grammar") if missing else (unknown[0], "unknown keyword")
        more = len(missing) + len(unknown) - 1
        raise SchemaError(f"{what} (--strict): {first}" + (f" and {more} more" if more else ""))
    if missing:
        say("not enforced by the grammar (checked after generation):\n" + "\n".join(f"  {n}" for n in missing))
    for n in notes:
        if n.kind != "not enforced":
            say(f"{n.kind}: {n}")


def check_strict(functions: list[Function], limits: CompileLimits | None = None,
                 source: str | Path | None = None) -> None:
    """Raise SchemaError (naming ``source``, the catalog, when given) when some keyword of ``functions`` is not
    enforced by the grammar or unknown (``--strict``); ``limits``: the compile limits (the defaults when
    None). The grammar alone: a catalog's index may leave more to the check (:func:`build_index`)."""
    with _named(source):
        notes = compile_grammar(functions, limits=limits).notes
    strict_notes(notes, source)


@contextmanager
def _named(source: str | Path | None):
    """Errors of a compile with ``source`` (the catalog or schema file) named: a schema nested past Python's
    recursion limit becomes one SchemaError line, as in :func:`_compile`."""
    try:
        yield
    except RecursionError:
        raise SchemaError(f"{source}: schema nested too deeply" if source is not None
                          else "schema nested too deeply") from None


def strict_notes(notes: list[Note], source: str | Path | None = None) -> None:
    """Raise SchemaError (naming ``source``, the catalog, when given) when ``notes`` hold a keyword not
    enforced by the grammar or unknown (``--strict``)."""
    try:
        report_notes(notes, strict=True)
    except SchemaError as exc:
        raise SchemaError(f"{source}: {exc}" if source is not None else str(exc)) from None


def say_compiled(report: CompileReport, functions: list[Function], vocabulary: Vocabulary,
                 path: Path | None = None) -> None:
    """Say the figures of one compile: states, allowed-token entries, rows, size, time per phase (ms)."""
    where = f", {human_size(report.size_bytes)} -> {path}" if path is not None else ""
    say(f"compiled {len(functions)} functions for {vocabulary.name}: {report.states} states "
        f"({report.accepting_states} accepting), {report.entries:,} allowed-token entries, "
        f"{report.rows} distinct rows{where}")
    phases = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in report.timings.items())
    say(f"  compile time {report.compile_seconds:.3f} s (vocabulary preparation excluded); {phases}")


def _compile(functions: list[Function], vocabulary: Vocabulary, options: dict[str, str],
             source: str | Path | None, limits: CompileLimits | None = None) -> tuple[IndexData, CompileReport]:
    """compile_index (in memory) with errors naming ``source`` (the catalog)."""
    prefix = f"{source}: " if source is not None else ""
    with _named(source):
        try:
            return compile_index(functions, vocabulary, CompileOptions(**options), limits)
        except SchemaError as exc:  # the same kind (a CompileLimitError stays one), with the catalog named
            raise type(exc)(f"{prefix}{exc}") from None


def compile_notes(functions: list[Function], vocabulary: Vocabulary, options: dict[str, str] | None = None,
                  source: str | Path | None = None, limits: CompileLimits | None = None) -> list[Note]:
    """The notes of the whole compile of ``functions``' index for ``vocabulary`` (token walk included, nothing
    written): what ``compile`` would leave to the check after generation. Raises as :func:`build_index`."""
    return _compile(functions, vocabulary, options or {}, source, limits)[1].notes


def _save(index: IndexData, report: CompileReport, path: Path) -> None:
    """Write ``index`` atomically to ``path`` (an index compiled in memory), with its size and write time in
    ``report``; raises InputError when it cannot be written."""
    try:
        write_index(path, index, report)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the index: {exc.strerror or exc}") from None


def build_index(functions: list[Function], vocabulary: Vocabulary, path: Path | None = None,
                options: dict[str, str] | None = None, source: str | Path | None = None,
                quiet: bool = False, limits: CompileLimits | None = None, strict: bool = False) -> IndexData:
    """Compile ``functions`` for ``vocabulary`` into an index, written atomically to ``path`` when given.

    ``options``: :class:`~.compile.CompileOptions` fields (the call format's). ``source`` names the catalog in
    errors. ``limits``: the compile limits (:mod:`.limits`; the defaults when None). Unless ``quiet``, says
    what the grammar does not enforce and the compile's figures. With ``strict``, a keyword the compile
    leaves to the check after generation (or an unknown one) raises SchemaError and nothing is written.
    Raises SchemaError / CatalogError (naming ``source``) for a catalog that cannot be compiled (a
    CompileLimitError past a limit), InputError when ``path`` cannot be written.
    """
    index, report = _compile(functions, vocabulary, options or {}, source, limits)
    if strict:  # the notes of the whole compile (a catalog's entries limit may leave a long count to the check)
        strict_notes(report.notes, source)
    if path is not None:
        _save(index, report, path)
    if not quiet:
        report_notes(report.notes, strict=False)
        say_compiled(report, functions, vocabulary, path)
    return index


def runtime_compiler(functions: list[Function], vocabulary: Vocabulary, options: dict[str, str],
                     quiet: bool, limits: CompileLimits | None = None) -> IndexData:
    """The compiler handed to the runtime (``callmaybe.runtime.answering.session.Compile``): in memory, see
    :func:`build_index` (``limits``: the compile limits, the defaults when None)."""
    return build_index(functions, vocabulary, None, options, quiet=quiet, limits=limits)


def prepare_vocabulary(vocabulary: Vocabulary) -> None:
    """Build what every compile for ``vocabulary`` needs, ahead of the first: its token trie (with the tokens
    below each node, :attr:`~.index.trie.TokenTrie.below`) and its token bytes matrix (kept per process; a
    compile worker calls this when it starts)."""
    from .compile import token_trie
    from .index.counted_index import token_matrix

    token_trie(vocabulary).below  # noqa: B018 (made and kept on first use)
    token_matrix(vocabulary.token_bytes)


def match_texts(schema_path: Path | None, functions_path: Path | None, texts: list[str],
                strict: bool = False, limits: CompileLimits | None = None) -> Iterator[dict[str, Any]]:
    """Yield ``{"text", "accepted"}`` for each text against a schema's values or a catalog's whole calls.

    ``limits``: the compile limits (the defaults when None). Raises InputError / SchemaError (one line) when
    the schema or catalog cannot be read or compiled.
    """
    if schema_path is not None:
        schema = read_json(schema_path)
        with _named(schema_path):
            dfa, notes = schema_dfa(schema, name=str(schema_path), limits=limits)
    else:
        functions = load_catalog(functions_path)
        with _named(functions_path):
            grammar = compile_grammar(functions, limits=limits)
        dfa, notes = grammar.dfa, grammar.notes
    report_notes(notes, strict)
    for text in texts:
        data = text.encode("utf-8", "surrogateescape")  # a command-line byte that is not UTF-8 stays a byte
        yield {"text": text.encode("utf-8", "replace").decode("utf-8"), "accepted": dfa.accepts(data)}


def compile_catalog(functions: list[Function], vocabulary: Vocabulary, path: str | Path | None = None,
                    call_format: str = "plain", limits: CompileLimits | None = None) -> IndexData:
    """Public API: compile ``functions`` for ``vocabulary`` into an index for ``call_format`` ("plain" or
    "tools"), written atomically to ``path`` when given, silently. ``limits``: the compile limits
    (:class:`~.limits.CompileLimits`; the defaults when None).

    Raises SchemaError / CatalogError for a catalog that cannot be compiled (CompileLimitError past a limit),
    InputError when ``path`` cannot be written, ValueError for an unknown call format.
    """
    from ..core.callformat import compile_options

    return build_index(functions, vocabulary, None if path is None else Path(path), compile_options(call_format),
                       quiet=True, limits=limits)
