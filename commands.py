"""What each CLI command does, apart from parsing flags: compile a catalog, find or build the index of a run,
answer a file of requests."""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cache import atomic_write_text, cache_dir
from .catalog import Function, catalog_fingerprint, load_catalog, read_json
from .errors import IndexFileError, InputError
from .indexfile import IndexData, load_index, read_header
from .vocabulary import Vocabulary

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


def compile_catalog(functions: list[Function], vocabulary: Vocabulary, path: Path, quiet: bool = False):
    """Compile ``functions`` for ``vocabulary`` into the index file ``path``; prints the phase times and
    what the grammar does not enforce."""
    from .compiler.compile import compile_to_file

    index, report = compile_to_file(functions, vocabulary, path)
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


def find_index(vocabulary: Vocabulary, functions: list[Function], explicit: Path | None = None) -> IndexData:
    """The index for this vocabulary and catalog: ``explicit`` (must match), else a matching shipped or
    cached one, else compiled now into the cache (said on stderr).

    Raises IndexFileError when ``explicit`` is corrupt or fingerprinted to another tokenizer/catalog.
    """
    vfp, cfp = vocabulary.fingerprint(), catalog_fingerprint(functions)
    if explicit is not None:
        return load_index(explicit, vfp, cfp)
    for path in index_candidates():
        try:
            header = read_header(path)
        except IndexFileError:
            continue
        if header.get("vocabulary_fingerprint") == vfp and header.get("catalog_fingerprint") == cfp:
            try:
                return load_index(path, vfp, cfp)
            except IndexFileError as exc:
                log(f"skipping {exc}")
    path = cache_dir("indexes") / f"{cfp[:16]}-{vfp[:16]}.safetensors"
    log(f"no compiled index matches this catalog and tokenizer; compiling one into {path}")
    index, _ = compile_catalog(functions, vocabulary, path)
    return load_index(path, vfp, cfp)


def read_requests(path: Path) -> list[Any]:
    """Read a requests file (a JSON list of ``{"prompt": ...}``); raises InputError for a bad file."""
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of {{\"prompt\": ...}} objects")
    return data


def model_vocabulary(spec: str, loaded) -> Vocabulary:
    """The vocabulary of a loaded model: read from its GGUF for registry models (token types mark padding
    and control ids), else from its tokenizer; the width is the model's logits width.

    Raises VocabularyError when the tokenizer is wider than the model's logits.
    """
    from .registry import MODELS
    from .vocabulary import load_vocabulary, vocabulary_from_tokenizer

    if spec in MODELS:
        return load_vocabulary(spec, loaded.logits_width)
    return vocabulary_from_tokenizer(loaded.tokenizer, loaded.logits_width, name=loaded.name)


@dataclass
class RunOutcome:
    results: list[dict]
    stats: Any
    seconds: float


def run(functions_path: Path, input_path: Path, output_path: Path, model: str, index_path: Path | None,
        max_tokens: int, threads: int | None = None, trace: bool = False) -> RunOutcome:
    """Answer ``input_path`` with ``model`` under the catalog's index and write ``output_path`` atomically.

    Input problems raise before anything is loaded or written.
    """
    t0 = time.perf_counter()
    functions = load_catalog(functions_path)
    requests = read_requests(input_path)
    from .runtime.masks import TokenIndex
    from .runtime.model import load_model
    from .runtime.runner import run_requests
    from .vocabulary import vocabulary_from_tokenizer

    loaded = load_model(model, threads=threads)
    vocabulary = model_vocabulary(model, loaded)
    data = find_index(vocabulary, functions, index_path)
    index = TokenIndex(data, vocabulary.token_bytes)
    results, stats = run_requests(loaded.model, loaded.tokenizer, index, functions, requests, max_tokens, trace)
    atomic_write_text(output_path, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
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
        yield {"text": text, "accepted": dfa.accepts(text.encode("utf-8"))}


def report_notes(notes, strict: bool) -> None:
    """Print what the grammar does not enforce (checked after generation); with ``strict``, raise instead."""
    from .errors import SchemaError

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
