"""The tiktoken source: a ranks file (``<base64 of the token's bytes> <rank>`` per line), and the built-in Qwen
tokenizer read from the ``qwen.tiktoken`` ranks that :mod:`callmaybe.core.registry` pins (works offline).

Qwen's ids are the 151,643 ranks of ``qwen.tiktoken``, then its added tokens (special tokens, never regular):
22 for Qwen2.5 (``<|endoftext|>`` 151643 .. ``<|file_sep|>`` 151664), 26 for Qwen3 (the same, then
``<tool_response>``, ``</tool_response>``, ``<think>``, ``</think>``). EOS: ``<|endoftext|>`` and ``<|im_end|>``.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from ..errors import VocabularyError
from .base import Table

#: The patterns of the Qwen built-in names, for messages (matched case-insensitively by :func:`qwen_builtin`).
QWEN_PATTERNS = ("Qwen/Qwen3-*", "Qwen/Qwen2.5*")

QWEN_REGULAR = 151643  # ranks in qwen.tiktoken: ids 0..151642
_QWEN25_ADDED = 22  # ids 151643..151664
_QWEN3_ADDED = 26  # ids 151643..151668
_QWEN_EOS = (151643, 151645)  # <|endoftext|>, <|im_end|>
_QWEN_VOCAB_SIZE = 151936
_QWEN_VOCAB_SIZE_LARGE = 152064  # Qwen2.5 (and Qwen2) models of 7B parameters and more


def qwen_builtin(spec: str) -> tuple[int, int] | None:
    """(number of added tokens, vocabulary size) when ``spec`` names a built-in Qwen tokenizer, else None.

    ``Qwen/Qwen3-*`` (so not ``Qwen/Qwen3.5-*`` nor ``Qwen/Qwen3.6-*``): 26 added tokens, 151,936 logits.
    ``Qwen/Qwen2.5*``: 22 added tokens, 151,936 logits, or 152,064 when the name says ``-<N>B`` with N >= 7.
    Case-insensitive.
    """
    low = spec.lower()
    if low.startswith("qwen/qwen3-"):
        return _QWEN3_ADDED, _QWEN_VOCAB_SIZE
    if low.startswith("qwen/qwen2.5"):
        size = re.search(r"-(\d+(?:\.\d+)?)b(?![a-z])", low)
        large = size is not None and float(size.group(1)) >= 7
        return _QWEN25_ADDED, _QWEN_VOCAB_SIZE_LARGE if large else _QWEN_VOCAB_SIZE
    return None


def qwen_table(ranks: Path, n_added: int, vocab_size: int) -> Table:
    """(token bytes, EOS ids, vocabulary size) of the Qwen tokenizer from its ranks file ``ranks``, with
    ``n_added`` added tokens (None bytes) after the ranks. Raises VocabularyError for a malformed ranks file or
    one without exactly 151,643 ranks."""
    table = read_tiktoken(ranks)
    if len(table) != QWEN_REGULAR:
        raise VocabularyError(f"{ranks}: expected {QWEN_REGULAR} Qwen tokens, found {len(table)}")
    return table + [None] * n_added, list(_QWEN_EOS), vocab_size


def read_tiktoken(path: Path) -> list[bytes | None]:
    """Token bytes of a tiktoken ranks file, indexed by rank: the base64 on each line is the token's bytes.

    Raises VocabularyError for an unreadable file, a malformed line, or ranks that are not 0..n-1.
    """
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
