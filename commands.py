"""What each CLI command does, apart from parsing flags: compile a catalog, find or build the index of a run,
answer a file of requests."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .core.files import atomic_write_text, cache_dir
from .core.catalog import Function, catalog_fingerprint, load_catalog, read_json
from .core.errors import IndexFileError, InputError
from .core.indexfile import IndexData, load_index, read_header
from .core.vocabulary import Vocabulary

PACKAGE_DIR = Path(__file__).resolve().parent
INDEXES_DIR = PACKAGE_DIR / "indexes"


def log(message: str) -> None:
    """One line on stderr."""
    print(message, file=sys.stderr, flush=True)


def slug(text: str) -> str:
    """A file-name-safe form of a model or tokenizer name: ``Qwen/Qwen3-0.6B`` -> ``qwen-qwen3-0.6b``."""
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "index"


def human_size(n: int) -> str:
    """``n`` bytes as B / KB / MB (powers of 1000)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def check_strict(functions: list[Function]) -> None:
    """Raise SchemaError when some keyword of ``functions`` is not enforced by the grammar (``--strict``)."""
    from .compiler.grammar import compile_grammar

    report_notes(compile_grammar(functions).notes, strict=True)


def compile_catalog(functions: list[Function], vocabulary: Vocabulary, path: Path, quiet: bool = False,
                    options: dict | None = None):
    """Compile ``functions`` for ``vocabulary`` into the index file ``path``; prints the phase times and
    what the grammar does not enforce. ``options``: :class:`~callmaybe.compiler.compile.CompileOptions` fields."""
    from .compiler.compile import CompileOptions, compile_to_file

    index, report = compile_to_file(functions, vocabulary, path, CompileOptions(**(options or {})))
    if not quiet:
        report_notes(report.notes, strict=False)
    if not quiet:
        phases = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in report.timings.items())
        log(f"compiled {len(functions)} functions for {vocabulary.name}: {report.states} states "
            f"({report.accepting_states} accepting), {report.entries:,} allowed-token entries, "
            f"{report.rows} distinct rows, {human_size(report.size_bytes)} -> {path}")
        log(f"  compile time {report.compile_seconds:.3f} s (vocabulary preparation excluded); {phases}")
    return index, report


def index_candidates(extra_dirs: list[Path] = ()) -> list[Path]:
    """Index files shipped in ``indexes/`` and cached in the user cache, newest first within each."""
    dirs = [INDEXES_DIR, *extra_dirs, cache_dir("indexes")]
    out: list[Path] = []
    for d in dirs:
        if d.is_dir():
            out.extend(sorted(d.rglob("*.safetensors")))
    return out


def _options_match(header: dict, options: dict) -> bool:
    have = header.get("options", {})
    return all(have.get(k, "") == v for k, v in options.items())


def find_index(vocabulary: Vocabulary, functions: list[Function], explicit: Path | None = None,
               options: dict | None = None) -> IndexData:
    """The index for this vocabulary, catalog and compile ``options``: ``explicit`` (must match), else a
    matching shipped or cached one, else compiled now into the cache (said on stderr).

    Raises IndexFileError when ``explicit`` is corrupt, fingerprinted to another tokenizer/catalog, or
    compiled with other options.
    """
    options = options or {}
    vfp, cfp = vocabulary.fingerprint(), catalog_fingerprint(functions)
    if explicit is not None:
        index = load_index(explicit, vfp, cfp)
        if not _options_match(index.header, options):
            raise IndexFileError(f"{explicit}: index was compiled with options {index.header.get('options')}, "
                                 f"this run needs {options}")
        return index
    for path in index_candidates():
        try:
            header = read_header(path)
        except IndexFileError:
            continue
        if (header.get("vocabulary_fingerprint") == vfp and header.get("catalog_fingerprint") == cfp
                and _options_match(header, options)):
            try:
                return load_index(path, vfp, cfp)
            except IndexFileError as exc:
                log(f"skipping {exc}")
    tag = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:8]
    path = cache_dir("indexes") / f"{cfp[:16]}-{vfp[:16]}-{tag}.safetensors"
    log(f"no compiled index matches this catalog, tokenizer and prompt format; compiling one into {path}")
    compile_catalog(functions, vocabulary, path, options=options)
    return load_index(path, vfp, cfp)


def check_output_path(path: Path) -> None:
    """Raise InputError now (before any model is loaded) when ``path`` cannot be written as a file."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: output path is a folder")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{path}: cannot create the output file ({parent} is not a folder)")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{path}: the folder {parent} is not writable")


def write_output(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically; raises InputError when it cannot be written."""
    try:
        atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def read_requests(path: Path) -> list[Any]:
    """Read a requests file (a JSON list of ``{"prompt": ...}``); raises InputError for a bad file."""
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of {{\"prompt\": ...}} objects")
    return data


def model_vocabulary(spec: str, loaded) -> Vocabulary:
    """The vocabulary of a loaded model: read from its GGUF for registry models (token types mark padding
    and control ids), else from its tokenizer; the vocab_size is the model's vocabulary size.

    Raises VocabularyError when the tokenizer is wider than the model's logits.
    """
    from .core.registry import MODELS
    from .core.vocabulary import load_vocabulary, vocabulary_from_tokenizer

    if spec in MODELS:
        return load_vocabulary(spec, loaded.vocab_size)
    return vocabulary_from_tokenizer(loaded.tokenizer, loaded.vocab_size, name=loaded.name)


def load_runtime(model: str, threads: int | None, prompt_format: str):
    """Load ``model`` and return (LoadedModel, its Vocabulary, the compile options of the call format).

    Raises ModelError / VocabularyError with one line.
    """
    from .core.callformat import grammar_options
    from .runtime.model import load_model
    from .runtime.prompt import choose_format

    loaded = load_model(model, threads=threads)
    vocabulary = model_vocabulary(model, loaded)
    return loaded, vocabulary, grammar_options(choose_format(loaded.tokenizer, prompt_format))


@dataclass
class RunOutcome:
    results: list[dict]
    stats: Any
    seconds: float


def run(functions_path: Path, input_path: Path, output_path: Path, model: str, index_path: Path | None,
        max_tokens: int, threads: int | None = None, trace: bool = False, prompt_format: str = "plain",
        prefix_cache: bool = True, keep_unstated: bool = False,
        on_answer: Callable[[dict], None] | None = None) -> RunOutcome:
    """Answer ``input_path`` with ``model`` under the catalog's index and write ``output_path`` atomically.

    Input problems raise before anything is loaded or written.
    """
    t0 = time.perf_counter()
    functions = load_catalog(functions_path)
    requests = read_requests(input_path)
    check_output_path(output_path)
    from .runtime.masks import TokenIndex
    from .runtime.runner import run_requests

    loaded, vocabulary, options = load_runtime(model, threads, prompt_format)
    index = TokenIndex(find_index(vocabulary, functions, index_path, options), vocabulary.token_bytes)
    results, stats = run_requests(loaded.model, loaded.tokenizer, index, functions, requests, max_tokens, trace,
                                  prefix_cache=prefix_cache, keep_unstated=keep_unstated, on_answer=on_answer)
    write_output(output_path, results)
    return RunOutcome(results, stats, time.perf_counter() - t0)


def match(schema_path: Path | None, functions_path: Path | None, texts: list[str], strict: bool = False):
    """Yield ``{"text", "accepted"}`` for each text against a schema's values or a catalog's whole calls.

    Raises InputError / SchemaError (one line) when the schema or catalog cannot be read or compiled.
    """
    from .compiler.grammar import compile_grammar, schema_dfa

    if schema_path is not None:
        dfa, notes = schema_dfa(read_json(schema_path), name=str(schema_path))
    else:
        grammar = compile_grammar(load_catalog(functions_path))
        dfa, notes = grammar.dfa, grammar.notes
    report_notes(notes, strict)
    for text in texts:
        data = text.encode("utf-8", "surrogateescape")  # a command-line byte that is not UTF-8 stays a byte
        yield {"text": text.encode("utf-8", "replace").decode("utf-8"), "accepted": dfa.accepts(data)}


def report_notes(notes, strict: bool) -> None:
    """Print what the grammar does not enforce (checked after generation); with ``strict``, raise instead."""
    from .core.errors import SchemaError

    missing = [n for n in notes if n.kind == "not enforced"]
    if strict and missing:
        raise SchemaError(f"not enforced by the grammar (--strict): {missing[0]}" +
                          (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    if missing:
        log("not enforced by the grammar (checked after generation):")
        for n in missing:
            log(f"  {n}")
    for n in notes:
        if n.kind != "not enforced":
            log(f"{n.kind}: {n}")


def inspect_index(path: Path) -> list[str]:
    """Lines describing an index file; raises IndexFileError for a corrupt one."""
    from .core.indexfile import ROW_BITS, read_index

    t = time.perf_counter()
    index = read_index(path)
    load_ms = 1000 * (time.perf_counter() - t)
    h, a = index.header, index.arrays
    kinds = a["row_kind"]
    entries = int(sum(int(a["row_count"][r]) for r in a["state_row"]))
    return [
        f"file: {path} ({human_size(Path(path).stat().st_size)}, read and checked in {load_ms:.1f} ms)",
        f"format version: {h.get('format_version')}, compiler {h.get('compiler_version')}",
        f"functions: {len(h.get('functions', []))} ({', '.join(h.get('functions', [])[:8])}"
        + (", ..." if len(h.get("functions", [])) > 8 else "") + ")",
        f"states: {index.num_states} ({int(a['accepting'].sum())} accepting), byte classes: {a['transitions'].shape[1]}",
        f"allowed-token entries: {entries:,}; distinct rows: {len(kinds)} "
        f"({int((kinds == ROW_BITS).sum())} bitmasks, {int((kinds != ROW_BITS).sum())} id lists)",
        f"fewest tokens to complete a call: {int(a['min_tokens'][h['start']])}",
        f"vocabulary: {h.get('vocabulary_name')} vocab_size {h.get('vocab_size'):,}, EOS {h.get('eos_ids')}",
        f"vocabulary fingerprint: {h.get('vocabulary_fingerprint')}",
        f"catalog fingerprint: {h.get('catalog_fingerprint')}",
        f"options: {json.dumps(h.get('options'))}",
        f"not enforced by the grammar: {len(h.get('not_enforced', []))}"
        + "".join(f"\n  {n}" for n in h.get("not_enforced", [])),
    ]


def grounding_notes(restated: dict[str, dict], dropped: list[str]) -> list[str]:
    """Trace lines for what grounding did: arguments restated from the request, arguments left out."""
    lines = [f"  restated from the request: {k} {json.dumps(r['from'], ensure_ascii=False)} -> "
             f"{json.dumps(r['to'], ensure_ascii=False)} (p={r['probability']})" for k, r in restated.items()]
    if dropped:
        lines.append(f"  left out as unstated: {', '.join(dropped)}")
    return lines


def interactive_session(functions_path: Path, model: str, index_path: Path | None, max_tokens: int,
                        threads: int | None, trace: bool, prompt_format: str = "plain",
                        keep_unstated: bool = False) -> None:
    """Read requests from stdin (one per line, empty line or EOF to stop) and print one call per line."""
    from .runtime.masks import TokenIndex
    from .runtime.runner import Answerer

    functions = load_catalog(functions_path)
    loaded, vocabulary, options = load_runtime(model, threads, prompt_format)
    data = find_index(vocabulary, functions, index_path, options)
    answerer = Answerer(loaded.model, loaded.tokenizer, TokenIndex(data, vocabulary.token_bytes), functions,
                        max_tokens, keep_unstated=keep_unstated)
    log(f"{len(functions)} functions, model {loaded.name}; type a request (empty line to quit)")
    while True:
        try:
            line = input("> ")
        except EOFError:
            break
        if not line.strip():
            break
        entry, gen = answerer.answer({"prompt": line}, trace)
        if trace and gen is not None:
            for step in gen.trace:
                log("  " + json.dumps(step, ensure_ascii=False))
            for line in grounding_notes(gen.restated, gen.dropped):
                log(line)
        print(json.dumps({k: v for k, v in entry.items() if k != "prompt"}, ensure_ascii=False), flush=True)
