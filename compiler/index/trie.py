"""The tokens of a vocabulary as a trie laid out level by level in numpy arrays (what the token walk of
:mod:`.walk` descends), its file form, and :class:`TrieCache`, which keeps tries per process and on disk."""

from __future__ import annotations

import io
import threading
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import IO

import numpy as np

from ...core.vocabulary import Vocabulary


@dataclass
class TokenTrie:
    """The regular tokens of a vocabulary as a trie, level by level.

    For depth d = 1..max_len (index d-1 of each list):
    ``byte[d]``: uint8 (nodes,) the last byte of each node's prefix;
    ``child_start[d]``/``child_end[d]``: int64 (nodes,) the range of its children among depth d+1 nodes;
    ``end_start[d]``/``end_end[d]``: int64 (nodes,) the range in ``end_tokens[d]`` of token ids that end here;
    ``end_tokens[d]``: int32 token ids whose bytes end at depth d, grouped by node.
    """

    byte: list[np.ndarray]
    child_start: list[np.ndarray]
    child_end: list[np.ndarray]
    end_start: list[np.ndarray]
    end_end: list[np.ndarray]
    end_tokens: list[np.ndarray]
    num_tokens: int

    @cached_property
    def below(self) -> list[np.ndarray]:
        """Per depth index d, int64 (nodes,): the tokens that end at each node or below it (made on first
        use, kept with the trie: ~10 ms for Qwen's)."""
        out: list[np.ndarray] = [np.zeros(0, np.int64)] * len(self.byte)
        for d in range(len(self.byte) - 1, -1, -1):
            count = (self.end_end[d] - self.end_start[d]).astype(np.int64)
            if d + 1 < len(self.byte) and len(out[d + 1]):
                acc = np.concatenate([[0], np.cumsum(out[d + 1])])
                count += acc[self.child_end[d]] - acc[self.child_start[d]]
            out[d] = count
        return out

    @cached_property
    def end_one(self) -> list[np.ndarray] | None:
        """Per depth index d, int32 (nodes,): the one token that ends at each node (-1: none), when no node
        has more than one (two tokens of the same bytes); else None. Made on first use, kept with the trie."""
        out = []
        for d in range(len(self.byte)):
            count = self.end_end[d] - self.end_start[d]
            if len(count) and int(count.max()) > 1:
                return None
            one = np.full(len(count), -1, dtype=np.int32)
            has = count > 0
            one[has] = self.end_tokens[d][self.end_start[d][has]]
            out.append(one)
        return out

    @cached_property
    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The trie flattened across depths, for the walk in C (:func:`..automata.native.group_walk`):
        ``(off, byte, child_start, child_end, end)``: int64 (depths + 1,) the first flat node number of each
        depth; uint8 (nodes,) each node's last byte; int64 (nodes,) its children's flat numbers, start and
        end; int32 (nodes,) the one token that ends there (-1: none). None where a node ends two tokens
        (:attr:`end_one` is None). Made on first use, kept with the trie."""
        one = self.end_one
        if one is None:
            return None
        sizes = [len(b) for b in self.byte]
        off = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=off[1:])
        empty64 = np.zeros(0, np.int64)
        byte = np.concatenate(self.byte).astype(np.uint8) if sizes else np.zeros(0, np.uint8)
        cs = np.concatenate([c + off[d + 1] for d, c in enumerate(self.child_start)]) if sizes else empty64
        ce = np.concatenate([c + off[d + 1] for d, c in enumerate(self.child_end)]) if sizes else empty64
        end = np.concatenate(one).astype(np.int32) if sizes else np.zeros(0, np.int32)
        return off, byte, cs.astype(np.int64), ce.astype(np.int64), end

    @cached_property
    def flat_below(self) -> np.ndarray:
        """:attr:`below` flattened as :attr:`flat` numbers the nodes: int64 (nodes,)."""
        return np.concatenate(self.below).astype(np.int64) if self.below else np.zeros(0, np.int64)


def build_trie(token_bytes: list[bytes | None] | tuple[bytes | None, ...]) -> TokenTrie:
    """Build the trie of the non-empty, non-None entries of ``token_bytes`` (index = token id).

    Tokens are sorted by their bytes, so that each depth's nodes are runs of equal prefixes found with one
    vectorized comparison per depth.
    """
    ids = [i for i, t in enumerate(token_bytes) if t]
    ids.sort(key=lambda i: token_bytes[i])
    n = len(ids)
    lengths = np.fromiter((len(token_bytes[i]) for i in ids), dtype=np.int64, count=n)
    max_len = int(lengths.max()) if n else 0
    flat = np.frombuffer(b"".join(token_bytes[i] for i in ids), dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids_arr = np.asarray(ids, dtype=np.int32)

    byte, parents, ends_tok, ends_node = [], [], [], []
    active = np.arange(n)  # tokens (in sorted order) with length >= d
    prev_node = np.zeros(n, dtype=np.int64)  # node id at depth d-1 of each active token
    for d in range(1, max_len + 1):
        active_mask = lengths[active] >= d
        active = active[active_mask]
        prev = prev_node[active_mask]
        b = flat[offsets[active] + d - 1]
        new = np.ones(len(active), dtype=bool)
        new[1:] = (prev[1:] != prev[:-1]) | (b[1:] != b[:-1])
        node = np.cumsum(new) - 1
        first = np.flatnonzero(new)
        byte.append(b[first])
        parents.append(prev[first])
        ending = lengths[active] == d
        ends_tok.append(ids_arr[active[ending]])
        ends_node.append(node[ending])
        prev_node = node
    child_start, child_end, end_start, end_end, end_tokens = [], [], [], [], []
    for d in range(max_len):
        count = len(byte[d])
        if d + 1 < max_len:
            par = parents[d + 1]
            cs = np.searchsorted(par, np.arange(count), side="left")
            ce = np.searchsorted(par, np.arange(count), side="right")
        else:
            cs = ce = np.zeros(count, dtype=np.int64)
        child_start.append(cs.astype(np.int64))
        child_end.append(ce.astype(np.int64))
        order = np.argsort(ends_node[d], kind="stable")
        en = ends_node[d][order]
        end_tokens.append(ends_tok[d][order])
        end_start.append(np.searchsorted(en, np.arange(count), side="left").astype(np.int64))
        end_end.append(np.searchsorted(en, np.arange(count), side="right").astype(np.int64))
    return TokenTrie(byte, child_start, child_end, end_start, end_end, end_tokens, n)


TRIE_FIELDS = ("byte", "child_start", "child_end", "end_start", "end_end", "end_tokens")


def trie_to_bytes(trie: TokenTrie) -> bytes:
    """``trie`` as an uncompressed ``.npz``: each per-depth list concatenated, with its lengths."""
    arrays = {"num_tokens": np.asarray([trie.num_tokens], dtype=np.int64)}
    for name in TRIE_FIELDS:
        parts = getattr(trie, name)
        arrays[name] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        arrays[name + "_lengths"] = np.asarray([len(p) for p in parts], dtype=np.int64)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def trie_from_file(path: str | Path | IO[bytes]) -> TokenTrie:
    """The trie written by :func:`trie_to_bytes` (from a file, or its contents already read). Raises ValueError
    (or OSError) for a damaged file."""
    with np.load(path, allow_pickle=False) as f:
        fields = {}
        depth = None
        for name in TRIE_FIELDS:
            lengths = f[name + "_lengths"]
            flat = f[name]
            if int(lengths.sum()) != len(flat) or (depth is not None and len(lengths) != depth):
                raise ValueError(f"token trie cache {path}: inconsistent {name}")
            depth = len(lengths)
            fields[name] = np.split(flat, np.cumsum(lengths)[:-1]) if depth else []
        return TokenTrie(**fields, num_tokens=int(f["num_tokens"][0]))


class TrieCache:
    """Token tries per vocabulary fingerprint: kept for the process, and cached on disk
    (``cache_dir("vocab", "tries")/<fingerprint>.v<VERSION>.npz``) for vocabularies of at least
    ``min_tokens_on_disk`` entries: Qwen's loads in ~25 ms where building it takes ~0.25 s. Each file has its
    SHA-256 recorded beside it when written (``<file>.sha256``, :func:`callmaybe.core.files.record_digest`)
    and is read once, hashed in full and used only if it matches (Qwen's, 11.6 MB: ~7-12 ms of the load). A
    file that differs from its record (or cannot be read) is rebuilt and named in one line on stderr; one with
    no record (written by an earlier version, or by a process killed before recording it) or that does not
    parse is rebuilt silently; a cache that cannot be written is skipped.
    """

    #: The version of the file layout (:func:`trie_to_bytes`), part of the file name.
    VERSION = 1

    def __init__(self, min_tokens_on_disk: int = 4096):
        self.min_tokens_on_disk = min_tokens_on_disk
        self._tries: dict[str, TokenTrie] = {}
        self._lock = threading.Lock()

    def get(self, vocabulary: Vocabulary) -> TokenTrie:
        """The trie of ``vocabulary``'s token bytes (see :func:`build_trie`), built or loaded on a miss."""
        key = vocabulary.fingerprint()
        with self._lock:
            trie = self._tries.get(key)
        if trie is None:
            trie = self._load_or_build(key, vocabulary)
            with self._lock:
                self._tries[key] = trie
        return trie

    def clear(self) -> None:
        """Forget the tries kept in memory (the files on disk stay)."""
        with self._lock:
            self._tries.clear()

    def _load_or_build(self, key: str, vocabulary: Vocabulary) -> TokenTrie:
        if len(vocabulary.token_bytes) < self.min_tokens_on_disk:  # built in milliseconds: not worth a file
            return build_trie(vocabulary.token_bytes)
        from ...core.files import atomic_write_bytes, cache_dir, digest_path, read_checked, record_digest

        path = cache_dir("vocab", "tries") / f"{key}.v{self.VERSION}.npz"
        trie = None
        if path.exists():
            data, problem = read_checked(path)
            if data is None:
                if digest_path(path).exists():
                    from ...core.messages import say

                    say(f"token trie cache {path}: {problem}; rebuilding it")
            else:
                try:
                    trie = trie_from_file(io.BytesIO(data))
                    if trie.num_tokens != sum(1 for t in vocabulary.token_bytes if t):
                        trie = None
                except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
                    trie = None
        if trie is None:
            trie = build_trie(vocabulary.token_bytes)
            data = trie_to_bytes(trie)
            try:
                atomic_write_bytes(path, data)
                record_digest(path, data)
            except OSError:
                pass
        return trie


#: The process-wide token tries that :func:`~..compile.compile_index` uses. ``TRIE_CACHE.clear()`` empties it.
TRIE_CACHE = TrieCache()
