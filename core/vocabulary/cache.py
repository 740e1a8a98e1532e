"""The cache of prepared vocabulary tables: one ``.npz`` per source under ``cache_dir("vocab")``.

A table is stored as ``table_version`` (int64, :data:`TABLE_VERSION`), ``blob`` (uint8: the regular tokens'
bytes, concatenated in id order), ``lengths`` (int32 per id: the byte length, -1 for None), ``eos_ids`` (int64)
and ``vocab_size`` (int64). Files are written atomically, with their SHA-256 recorded beside them
(``<key>.npz.sha256``, :func:`callmaybe.core.files.record_digest`); a cached file is read once, hashed in full
and used only if it matches that record. A missing, corrupt, unrecorded, changed or other-version file is
rebuilt from its source (a changed one is named in one line on stderr). A cached load takes a few tens of
milliseconds, of which the check is about 1 ms (Qwen's table: 1.6 MB).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..errors import VocabularyError
from ..files import atomic_write_bytes, cache_dir, digest_path, read_checked, record_digest, sha256_file
from .base import Table, Vocabulary, make_vocabulary

#: Version of the cached table layout and of the byte-decoding rules; part of every cache key and of every file.
#: Version 2 stores the size as ``vocab_size`` (a version-1 file may call it ``width``) and the version as
#: ``table_version``.
TABLE_VERSION = 2


def cache_key(*parts: Any) -> str:
    """SHA-256 hex of :data:`TABLE_VERSION` and ``parts`` (JSON, non-JSON values by ``str``): the name of the
    table prepared from a source that ``parts`` identify (content digests, pins, sizes)."""
    text = json.dumps([TABLE_VERSION, *parts], default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 hex of a file's contents (:func:`callmaybe.core.files.sha256_file`), computed in full at every
    call: size and modification time are never trusted (a local GGUF of 1 GB costs about 1-1.3 s per load; a
    tokenizer.json a few ms). Raises VocabularyError when the file cannot be read.
    """
    try:
        return sha256_file(path)
    except OSError as e:
        raise VocabularyError(f"cannot read '{path}': {e}") from None


def cached_vocabulary(spec: str, key: str, build: Callable[[], Table], vocab_size: int | None) -> Vocabulary:
    """The vocabulary named ``spec`` from the table cached under ``key``, or from ``build()`` (then cached).

    ``build`` returns (token bytes, EOS ids, the source's vocabulary size); ``vocab_size``, when given,
    replaces that size (and must be part of ``key``). A cached file is used only if its contents match the
    SHA-256 recorded when it was written; one that does not is rebuilt, and said in one line on stderr when
    its record exists (a file without one, e.g. written by an earlier version, is rebuilt silently). A table
    that fails validation is not cached; a cache that cannot be written is reported with
    :func:`callmaybe.core.messages.say` and skipped. Raises VocabularyError from ``build`` or from validation
    (see :func:`make_vocabulary`).
    """
    path = cache_dir("vocab") / f"{key}.npz"
    hit = None
    if path.exists():
        data, problem = read_checked(path)
        if data is not None:
            hit = load_table(io.BytesIO(data))
        elif digest_path(path).exists():
            from ..messages import say  # lazily: it loads the progress bars, which a cached load never needs

            say(f"vocabulary cache {path}: {problem}; rebuilding it")
    if hit is not None:
        table, eos_ids, size = hit
    else:
        table, eos_ids, size = build()
        if vocab_size is not None:
            size = vocab_size
        make_vocabulary(spec, table, eos_ids, size)  # validate before caching
        try:
            save_table(path, table, eos_ids, size)
        except OSError as e:
            from ..messages import say  # lazily: it loads the progress bars, which a cached load never needs

            say(f"vocabulary {spec}: cannot write cache {path}: {e}")
    if vocab_size is not None:
        size = vocab_size
    return make_vocabulary(spec, table, eos_ids, size)


def save_table(path: Path, table: Sequence[bytes | None], eos_ids: Sequence[int], vocab_size: int) -> None:
    """Write a table to ``path`` atomically in the module's layout and record its SHA-256 beside it
    (:func:`callmaybe.core.files.record_digest`). Raises OSError."""
    lengths = np.fromiter((-1 if b is None else len(b) for b in table), dtype=np.int32, count=len(table))
    blob = np.frombuffer(b"".join(b for b in table if b is not None), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(
        out,
        table_version=np.array(TABLE_VERSION, dtype=np.int64),
        blob=blob,
        lengths=lengths,
        eos_ids=np.asarray(eos_ids, dtype=np.int64),
        vocab_size=np.array(vocab_size, dtype=np.int64),
    )
    data = out.getvalue()
    atomic_write_bytes(path, data)
    record_digest(path, data)


def load_table(path: Path | IO[bytes]) -> Table | None:
    """The (token bytes, EOS ids, vocabulary size) stored in ``path`` (a file, or its contents already read),
    or None when it is missing, corrupt or of another :data:`TABLE_VERSION`. Does not check its recorded
    SHA-256 (:func:`cached_vocabulary` does)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if int(z["table_version"]) != TABLE_VERSION:
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
