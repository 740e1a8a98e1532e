"""The keys and values of prompt prefixes shared by requests (the chat up to the end of the catalog listing),
computed once and reused, for several catalogs at once.

A server meets requests with different tool lists in turn; with one cached prefix, every change of list
recomputed the whole catalog prompt (989 tokens of a six-function list in Qwen2.5's template, about 5 s of the
1.5B model on two CPU cores), and the known list's requests paid for it again when the new list's were done.
:class:`PrefixCache` keeps the prefixes most recently used, up to :data:`PREFIX_CACHE_BYTES` of keys and
values, and continues a new prefix from the cached one that shares most tokens with it (the template's header
and instructions before the listing: ~130 tokens of a BFCL prompt): keys and values at a position depend only
on the tokens up to it.
This is the prefix reuse of vLLM's automatic prefix caching and SGLang's RadixAttention (Zheng et al.,
2024), with whole prefixes as entries instead of blocks or a radix tree: the runtime asks for one catalog
prefix per request.
"""

from __future__ import annotations

import copy

from .forward import forward
from .profile import Profile
from .prompt import common_length

#: The keys and values the cache keeps, in bytes (least recently used prefixes out first; the prefix just
#: used always stays). Qwen2.5-1.5B in bfloat16 holds 28 KiB per token (28 layers, 2 key/value heads of 128),
#: so 64 MiB is about 2,300 tokens: four catalogs of six functions, a bounded share of the 2.2 GB that
#: ``make run`` may take (issue 33) when an evaluation gives every case its own catalog. The count is of the tokens
#: held; the plain decoder's buffers (:class:`~..model.llama.CacheLayer`) have up to a quarter more room after them.
PREFIX_CACHE_BYTES = 64 * 2**20


class _Entry:
    """One cached prefix: its token ids and the model's cache after them (``layers[l].keys``/``values`` of
    shape (1, kv_heads, len(ids), head_dim))."""

    __slots__ = ("ids", "cache")

    def __init__(self, ids: list[int], cache):
        self.ids, self.cache = ids, cache

    @property
    def bytes(self) -> int:
        if self.cache is None:
            return 0
        return sum(t.nelement() * t.element_size() for layer in self.cache.layers for t in (layer.keys, layer.values)
                   if t is not None)


def copies(cache, n: int | None = None) -> list[tuple]:
    """Copies of the keys and values of the first ``n`` tokens of ``cache`` (all when None): one (keys,
    values) pair per layer, each (1, kv_heads, n, head_dim), for a row of :class:`~.batch.Batch`."""
    end = cache.get_seq_length() if n is None else n
    return [(layer.keys[:, :, :end].clone(), layer.values[:, :, :end].clone()) for layer in cache.layers]


def _crop_to(cache, n: int) -> None:
    """Keep the first ``n`` tokens of ``cache`` (in place)."""
    extra = cache.get_seq_length() - n
    if extra > 0:
        cache.crop(-extra)  # transformers 5: a negative count removes that many tokens


def _first(cache, n: int):
    """A cache of the first ``n`` tokens of ``cache`` whose layers are views of ``cache``'s tensors (no copy);
    extending or cropping it leaves ``cache`` as it is. Works for this project's
    :class:`~..model.llama.Cache` and transformers' ``DynamicCache`` (both keep ``layers`` whose ``keys`` and
    ``values`` a forward pass replaces rather than writes into)."""
    twin = copy.copy(cache)
    twin.layers = [copy.copy(layer) for layer in cache.layers]
    _crop_to(twin, n)
    return twin


class PrefixCache:
    """Keys and values of prompt prefixes shared by requests, computed once and reused (module docstring).

    ``lookup(prompt_ids, prefix_len)`` returns (the cache to continue from, the number of prompt tokens it
    covers: ``prefix_len``; (None, 0) when disabled or ``prefix_len`` is 0); the caller runs the model on the
    rest after it, which extends that cache, and calls :meth:`release` afterwards, which crops it back to the
    prefix so it serves the next request. One lookup at a time (the engine's thread). ``max_bytes``: the bound
    on the keys and values kept (:data:`PREFIX_CACHE_BYTES`). ``profile``: the tokens and seconds of the
    prefixes computed go to its ``prefix`` phase. Raises what the model raises (out of memory).
    """

    def __init__(self, model, enabled: bool = True, profile: Profile | None = None,
                 max_bytes: int = PREFIX_CACHE_BYTES):
        self.model = model
        self.enabled = enabled
        self.profile = profile if profile is not None else Profile()
        self.max_bytes = max_bytes
        self.entries: list[_Entry] = []  # least recently used first
        self._lent: tuple[object, int] | None = None  # (cache, its prefix length) until release

    @property
    def ids(self) -> list[int]:
        """The token ids of the prefix used last ([] when none)."""
        return self.entries[-1].ids if self.entries else []

    def lookup(self, prompt_ids: list[int], prefix_len: int):
        if not self.enabled or prefix_len <= 0:
            return None, 0
        prefix = prompt_ids[:prefix_len]
        best, shared = self._closest(prefix)
        if best is not None and shared == len(prefix):  # all of it cached: a view of that entry
            self._touch(best)
            cache = best.cache if shared == len(best.ids) else _first(best.cache, shared)
            self._lent = (cache, shared)
            return cache, prefix_len
        if best is not None and shared == len(best.ids):  # the entry is a prefix of this one: extend it
            entry = best
        else:
            entry = _Entry(prefix[:shared], None if best is None else _first(best.cache, shared))
            self.entries.append(entry)
        _, entry.cache = forward(self.model, prefix[shared:], entry.cache, self.profile, "prefix")
        entry.ids = prefix
        self._touch(entry)
        self._evict()
        self._lent = (entry.cache, len(prefix))
        return entry.cache, prefix_len

    def share(self, prompt_ids: list[int], prefix_len: int) -> tuple[list | None, int]:
        """The keys and values the cache already holds for the start of ``prompt_ids[:prefix_len]``, computing
        nothing: (one (keys, values) pair per layer, copies of shape (1, kv_heads, n, head_dim); n), from the
        entry that shares most tokens with it; (None, 0) when disabled, ``prefix_len`` is 0 or no entry shares
        a token. The caller feeds the rest itself and may :meth:`store` the prefix once computed."""
        if not self.enabled or prefix_len <= 0:
            return None, 0
        best, shared = self._closest(prompt_ids[:prefix_len])
        if best is None:
            return None, 0
        self._touch(best)
        return copies(best.cache, shared), shared

    def store(self, ids: list[int], kv: list) -> None:
        """Keep ``kv`` (one (keys, values) pair per layer, each (1, kv_heads, len(ids), head_dim), not written
        to afterwards) as the keys and values of the prefix ``ids``, computed elsewhere (a row of a running
        batch, :func:`~.batch.enter`); nothing when disabled or when a cached entry holds ``ids`` already."""
        if not self.enabled or not ids or any(entry.ids == ids for entry in self.entries):
            return
        from transformers import DynamicCache

        # transformers' cache serves every model: this project's decoder calls layers[l].update(keys, values)
        self.entries.append(_Entry(list(ids), DynamicCache(ddp_cache_data=kv)))
        self._evict()

    def release(self) -> None:
        if self._lent is None:
            return
        cache, n = self._lent
        self._lent = None
        _crop_to(cache, n)

    def _closest(self, prefix: list[int]) -> tuple[_Entry | None, int]:
        """The entry sharing most leading tokens with ``prefix`` (ties: the most recently used) and how many;
        (None, 0) when none shares one."""
        best, shared = None, 0
        for entry in self.entries:
            n = common_length(entry.ids, prefix)
            if n >= shared and n > 0:
                best, shared = entry, n
        return best, shared

    def _touch(self, entry: _Entry) -> None:
        self.entries.remove(entry)
        self.entries.append(entry)

    def _evict(self) -> None:
        """Drop the least recently used prefixes while the cache holds more than ``max_bytes`` (the last one
        stays)."""
        while len(self.entries) > 1 and sum(e.bytes for e in self.entries) > self.max_bytes:
            self.entries.pop(0)
