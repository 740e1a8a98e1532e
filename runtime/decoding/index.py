"""Opening a compiled index for decoding: :func:`open_index` gives the view an index needs (a
:class:`~.masks.TokenIndex`, or a :class:`~.counted.CountedTokenIndex` for an index with counters), and
:func:`load_index` (public API) reads and checks an index file first.
"""

from __future__ import annotations

from pathlib import Path

from ...core.indexfile import IndexData, check_fingerprints, read_index
from .counted import CountedTokenIndex
from .masks import TokenIndex


def open_index(data: IndexData, token_bytes: tuple[bytes | None, ...] | list[bytes | None]) -> TokenIndex:
    """The decode-time view of ``data``: a :class:`CountedTokenIndex` when its header lists counters (index
    versions 4 and 5), else a :class:`TokenIndex`. ``token_bytes``: the vocabulary's bytes per token id.

    Raises IndexFileError when the vocabulary has more tokens than the index's vocab_size.
    """
    if data.header.get("counters"):
        return CountedTokenIndex(data, token_bytes)
    return TokenIndex(data, token_bytes)


def load_index(index: str | Path | IndexData, vocabulary) -> TokenIndex:
    """Public API: the decode-time view of an index file (or of an :class:`IndexData` in memory) for
    ``vocabulary`` (a :class:`~callmaybe.core.vocabulary.Vocabulary`).

    Raises IndexFileError (one line naming the file) for a missing or corrupt file, or one compiled for another
    tokenizer.
    """
    in_memory = isinstance(index, IndexData)
    data = index if in_memory else read_index(index)
    check_fingerprints(data, "index" if in_memory else index, vocabulary.fingerprint(), None)
    return open_index(data, vocabulary.token_bytes)
