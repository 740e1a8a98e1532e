"""The :class:`Vocabulary` type, its fingerprint, and the EOS rule every source applies."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import VocabularyError

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

#: What a source reads: (token bytes indexed by id, EOS ids, vocabulary size or the number of ids).
Table = tuple[list[bytes | None], list[int], int]


@dataclass(frozen=True)
class Vocabulary:
    """The bytes of every token id of one tokenizer, with its EOS ids and the model's vocabulary size (logits per position).

    * ``name``: how the user named the tokenizer (a built-in name, a path, a hub id); not part of the fingerprint.
    * ``token_bytes``: index = token id; the exact bytes the token appends to the output, or ``None`` for
      special, added, control, unused and EOS tokens (never allowed by a mask). ``len(token_bytes) <= vocab_size``.
    * ``eos_ids``: every EOS id, sorted, unique, each ``< vocab_size`` (see the package's EOS rule).
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
        """SHA-256 hex (64 characters) of the regular tokens' byte table, the EOS ids and the size (nothing else).

        Hashed stream: ``b"callmaybe-vocabulary-v1\\0"``; then for every id whose bytes are not None, in id
        order, the id (uint32 LE), the byte length (uint32 LE) and the bytes; then ``b"eos"``, the number of EOS
        ids (uint32 LE) and each (uint32 LE); then ``b"width"`` and the size (uint64 LE). (``width`` is the
        field's old name, kept so that fingerprints, and the indexes that carry them, do not change.) The name
        and the special tokens' text are not hashed, so one tokenizer read from different sources (Qwen3
        built-in, Qwen2.5-Coder's GGUF) gives one fingerprint. Computed once per object.
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


def make_vocabulary(name: str, table: Sequence[bytes | None], eos_ids: Sequence[int], vocab_size: int) -> Vocabulary:
    """The Vocabulary of a source's table; ``eos_ids`` may be unsorted and repeat.

    Raises VocabularyError when the table has more tokens than ``vocab_size`` (with a hint to pass a larger
    one), or when the EOS ids fall outside it.
    """
    if vocab_size < len(table):
        raise VocabularyError(
            f"tokenizer '{name}' has {len(table)} tokens, more than the vocabulary size {vocab_size} "
            "(pass a larger vocab_size)"
        )
    return Vocabulary(name=name, token_bytes=tuple(table), eos_ids=tuple(sorted(set(eos_ids))), vocab_size=vocab_size)


def clear_eos(table: list[bytes | None], eos_ids: Iterable[int]) -> list[bytes | None]:
    """Set the bytes of every EOS id inside ``table`` to None (an EOS id is never a regular token); return it."""
    for i in eos_ids:
        if 0 <= i < len(table):
            table[i] = None
    return table
