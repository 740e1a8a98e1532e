"""The tokenizer.json source: a ``tokenizers`` tokenizer saved as JSON (with a model folder's config files), or
one in memory.

Supported models: BPE (``vocab`` maps piece -> id) and Unigram (``vocab`` lists [piece, score] by id). The piece
rule (:mod:`.pieces`) is told from the decoder, pre-tokenizer and normalizer; added tokens, the unknown token and
the ``[PAD<id>]`` placeholders are never regular tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import VocabularyError
from .base import EOS_TOKEN_TEXTS, Table, Vocabulary, clear_eos, make_vocabulary
from .pieces import BYTE_LEVEL, SENTENCEPIECE, SPACE_MARK, PieceRule

#: The config files of a model folder that the EOS rule and the vocabulary size are read from.
SIDE_FILES = ("config.json", "tokenizer_config.json", "generation_config.json")


def vocabulary_from_tokenizer(tokenizer: Any, vocab_size: int, name: str = "") -> Vocabulary:
    """Build the vocabulary of an in-memory tokenizer (not cached).

    ``tokenizer`` is a ``tokenizers.Tokenizer`` or a transformers ``PreTrainedTokenizerFast`` (its
    ``backend_tokenizer`` is read; its ``eos_token_id`` joins the EOS ids). ``vocab_size`` is the number of
    logits per position. Raises VocabularyError for a tokenizer without a fast backend, of an unsupported
    family, or with more tokens than ``vocab_size``.
    """
    extra_eos: list[int] = []
    backend = tokenizer
    if not hasattr(tokenizer, "to_str") and hasattr(tokenizer, "backend_tokenizer"):
        backend = tokenizer.backend_tokenizer
        eos = getattr(tokenizer, "eos_token_id", None)
        if isinstance(eos, int):
            extra_eos.append(eos)
    if not hasattr(backend, "to_str"):
        raise VocabularyError(
            f"tokenizer {name or type(tokenizer).__name__!r} has no fast (tokenizers) backend to read token bytes from"
        )
    data = json.loads(backend.to_str())
    table, eos_ids, _ = table_from_tokenizer_json(data, name or "<tokenizer>", extra_eos=extra_eos)
    return make_vocabulary(name, table, eos_ids, vocab_size)


def read_json(path: Path) -> Any:
    """The parsed JSON file at ``path``. Raises VocabularyError when it cannot be read or parsed."""
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise VocabularyError(f"cannot read '{path}': {e}") from None


def read_tokenizer_json(tok_json: Path, side_files: Sequence[Path] = ()) -> Table:
    """(token bytes, EOS ids, vocabulary size) of a ``tokenizer.json`` file and its folder's ``side_files``
    (those of :data:`SIDE_FILES` that exist).

    The size is ``config.json``'s ``vocab_size`` (or its ``text_config``'s, for multimodal configs), else the
    number of ids. Raises VocabularyError for an unreadable file, one that is not a tokenizers tokenizer.json,
    or an unsupported tokenizer.
    """
    side = {p.name: read_json(p) for p in side_files}
    data = read_json(tok_json)
    if not isinstance(data, dict) or "model" not in data:
        raise VocabularyError(f"'{tok_json}' is not a tokenizers tokenizer.json (no 'model')")
    extra_eos, extra_eos_text = eos_from_side_files(side)
    table, eos_ids, n_tokens = table_from_tokenizer_json(
        data, str(tok_json), extra_eos=extra_eos, extra_eos_text=extra_eos_text
    )
    config = side.get("config.json", {})
    size = config.get("vocab_size")
    if not isinstance(size, int):
        text_config = config.get("text_config")
        size = text_config.get("vocab_size") if isinstance(text_config, dict) else None
    return table, eos_ids, size if isinstance(size, int) and size > 0 else n_tokens


def eos_from_side_files(side: dict[str, Any]) -> tuple[list[int], list[str]]:
    """(EOS ids, EOS token texts) of a model folder's parsed config files, keyed by file name: the ids of
    ``config.json`` / ``generation_config.json`` ``eos_token_id`` (an int or a list) and the text of
    ``tokenizer_config.json`` ``eos_token`` (a string or an added-token dict)."""
    ids: list[int] = []
    for name in ("config.json", "generation_config.json"):
        value = (side.get(name) or {}).get("eos_token_id")
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and v >= 0:
                ids.append(v)
    texts: list[str] = []
    value = (side.get("tokenizer_config.json") or {}).get("eos_token")
    if isinstance(value, dict):
        value = value.get("content")
    if isinstance(value, str):
        texts.append(value)
    return ids, texts


def table_from_tokenizer_json(
    data: dict,
    where: str,
    extra_eos: Sequence[int] = (),
    extra_eos_text: Sequence[str] = (),
) -> Table:
    """(token bytes, EOS ids, number of ids) of a parsed tokenizer.json.

    ``where`` names the tokenizer in errors. The EOS ids are ``extra_eos``, the special added tokens whose text
    is in :data:`EOS_TOKEN_TEXTS`, and the tokens whose text is in ``extra_eos_text``. Raises VocabularyError for
    a model other than BPE and Unigram, an empty tokenizer, an unknown piece rule, or a piece without bytes (see
    :meth:`PieceRule.bytes_of`).
    """
    model = data.get("model") or {}
    mtype = model.get("type")
    vocab = model.get("vocab")
    pieces: dict[int, str] = {}
    if mtype == "Unigram" or (mtype is None and isinstance(vocab, list)):
        for i, entry in enumerate(vocab or ()):
            pieces[i] = entry[0]
    elif mtype in ("BPE", None) and isinstance(vocab, dict):
        for piece, i in vocab.items():
            pieces[int(i)] = piece
    else:
        raise VocabularyError(f"'{where}': unsupported tokenizer model {mtype!r} (BPE and Unigram are supported)")

    added: dict[int, str] = {}
    special_text: dict[str, int] = {}
    for tok in data.get("added_tokens") or ():
        i = int(tok["id"])
        added[i] = tok["content"]
        if tok.get("special", False):
            special_text.setdefault(tok["content"], i)
    n_tokens = max([*pieces, *added, -1]) + 1
    if n_tokens == 0:
        raise VocabularyError(f"'{where}': the tokenizer has no tokens")

    rule = piece_rule(data)
    unk = model.get("unk_token")
    unk_id = model.get("unk_id")
    table: list[bytes | None] = [None] * n_tokens
    for i, piece in pieces.items():
        if i in added or piece == unk or i == unk_id or piece == f"[PAD{i}]":
            # ``[PAD<id>]``: the placeholder transformers' GGUF converter writes for unused padding ids
            # (Qwen's 151665..151935); a padding id is never a real token.
            continue
        try:
            table[i] = rule.bytes_of(piece) or None
        except ValueError as e:  # "<piece repr> is not in GPT-2's byte-level alphabet"
            raise VocabularyError(f"'{where}': token {i} {e}") from None

    eos = set(extra_eos)
    eos.update(special_text[t] for t in EOS_TOKEN_TEXTS if t in special_text)
    text_to_id = {**{p: i for i, p in pieces.items()}, **{t: i for i, t in added.items()}}
    eos.update(text_to_id[t] for t in extra_eos_text if t in text_to_id)
    return clear_eos(table, eos), sorted(eos), n_tokens


def piece_rule(data: dict) -> PieceRule:
    """The piece rule of a parsed tokenizer.json, told from its components (Sequences flattened), first match:
    a ``ByteLevel`` decoder or pre-tokenizer -> byte-level; a ``Metaspace`` (its replacement); a decoder
    ``Replace('▁', ' ')``; a ``ByteFallback`` decoder; a normalizer ``Replace(' ', '▁')`` -> SentencePiece.
    Byte fallback is on when the model says so or the decoder has a ``ByteFallback``.

    Raises VocabularyError when none of these is present.
    """
    decoder = list(_components(data.get("decoder")))
    pre = list(_components(data.get("pre_tokenizer")))
    norm = list(_components(data.get("normalizer")))
    byte_fallback = bool((data.get("model") or {}).get("byte_fallback")) or any(
        c.get("type") == "ByteFallback" for c in decoder
    )
    if any(c.get("type") == "ByteLevel" for c in decoder + pre):
        return PieceRule(BYTE_LEVEL)
    for c in decoder + pre:
        if c.get("type") == "Metaspace":
            return PieceRule(SENTENCEPIECE, c.get("replacement") or SPACE_MARK, byte_fallback)
    if (
        any(_is_replace(c, SPACE_MARK, " ") for c in decoder)
        or any(c.get("type") == "ByteFallback" for c in decoder)
        or any(_is_replace(c, " ", SPACE_MARK) for c in norm)
    ):
        return PieceRule(SENTENCEPIECE, SPACE_MARK, byte_fallback)
    kinds = sorted({str(c.get("type")) for c in decoder + pre})
    raise VocabularyError(
        "cannot tell how this tokenizer's pieces map to bytes: no ByteLevel, Metaspace, Replace('▁') or "
        f"ByteFallback in its decoder or pre-tokenizer (found: {', '.join(kinds) or 'none'})"
    )


def _is_replace(component: dict, pattern: str, content: str) -> bool:
    return (
        component.get("type") == "Replace"
        and (component.get("pattern") or {}).get("String") == pattern
        and component.get("content") == content
    )


def _components(node: Any) -> Iterator[dict]:
    """Every component dict of a tokenizer.json normalizer / pre_tokenizer / decoder (Sequences flattened)."""
    if isinstance(node, dict):
        yield node
        for k in ("pretokenizers", "decoders", "normalizers", "processors"):
            for child in node.get(k) or ():
                yield from _components(child)
    elif isinstance(node, list):
        for child in node:
            yield from _components(child)
