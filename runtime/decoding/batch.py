"""Decode several calls at once: each call is a row of one forward pass, with its own index state, budget and
keys and values; a row leaves the batch the moment its call is finished and another can join at once.

The rows share one key/value cache of shape (rows, kv_heads, slots, head_dim) per layer. Rows have different
lengths, and in a step each row feeds its own number of tokens (one chosen token, or the forced text after
it), so the cache holds padding: ``valid`` (rows, slots), 1 where a slot holds one of that row's tokens, is
the attention mask, and each row's tokens get their own positions (``position_ids``), so a row attends to its
own tokens only, at the positions it would have alone. Only the last fed position of each row goes through
the output layer (the last ``1 + draft`` of a row that verifies a draft copied from its prompt,
:meth:`~.decoder.Decoding.verify`: the keys and values of the draft tokens it does not take leave its valid
slots). A row joins with the keys and values of its own prompt (computed alone, from the shared
catalog prefix, by :func:`start`; or of the prefix alone, by :func:`enter`); when padding makes up more than
``REPACK_SLACK`` slots of every row, the valid slots are gathered to the right again (keys already carry
their rotary positions, so moving them changes nothing).

A new row's prompt is folded into the running batch (:func:`enter`): it joins with the keys and values of the
shared catalog prefix only, and its own prompt tokens are fed in the next step together with the other rows'
tokens, so a request arriving stops no one. The step itself runs the decoder layers over the packed tokens
(:mod:`.rowpass`), writing keys and values in place. In the server (``chunk``), a long prompt, a new catalog's
included (:func:`enter` with ``fold``: the row joins with the part of the catalog prefix the cache shares), is
fed a chunk per step while other rows decode (:meth:`Batch._allot`), and the catalog prefix, once fed, goes to
the prefix cache for the next request.

Rows that start with the same cached catalog prefix (:attr:`Started.base`) share its keys and values: the
batch holds them once (``base_keys``/``base_values``), each such row only what follows them, and the
attention reads them once per step for all rows (:meth:`Batch._share`, :func:`~.rowpass.row_pass`).

This is continuous batching in the sense of Orca (Yu et al., OSDI 2022: rows join and leave between
iterations) with a padded cache instead of paged attention.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .decoder import Decoding, PrefixCache, forward
from .head import logits as head_logits
from .prefix import copies
from .profile import Profile
from .rowpass import row_pass, supported
from .stepcost import StepCost

#: Padding slots tolerated in every row before the cache is repacked.
REPACK_SLACK = 64

#: With a ``share``, how long (seconds) after a step with a decoding row the steps that feed only long prompts
#: keep to the share's budget too: a client that sends its next request as soon as it has an answer must not
#: find a whole :data:`PREFILL_STEP` step begun in the moment between (the serve bench's known-list requests
#: waited 0.8-1.1 s for one, with the 1.5B model on two cores).
BUSY_S = 1.0

#: With a ``share``, how long (seconds) a batch of long prompts only waits for a request after its last
#: decoding row left (:meth:`Batch.anticipation`).
ANTICIPATE_S = 0.1

#: With a ``chunk`` (the server's), the most prompt tokens a step feeds when no row decodes, so that a request
#: arriving meanwhile waits at most one such step. Larger steps buy nothing: a step's cost per prompt token is
#: flat from 64 tokens and grows past a few hundred (the 1.5B model on two cores, beside one decoding row:
#: 64 tokens 440 ms, 128 638 ms, 256 1.31 s; a new six-function list's 256-token steps 1.05-1.74 s in the
#: serve bench; 1,000 tokens beside a second row 13.3 s, against 4.96 s for a forward pass alone).
PREFILL_STEP = 128

#: With a ``chunk``, a row's pending tokens are fed whole up to this many (a request's own message after a
#: cached catalog prompt: 20-40 tokens of the public set): chunking them would add steps to the request, and
#: 16 new requests at once would wait for one another's messages.
SHORT_PROMPT = 64

#: Slots the key/value buffers grow by when a step needs more (and rows they start with).
SLOT_CHUNK = 256
ROWS_FIRST = 4


@dataclass
class Started:
    """A call whose prompt went through the model alone (:func:`start`): its :class:`~.decoder.Decoding`
    (the first token already chosen) and its keys and values, ``kv`` one (keys, values) pair per layer, each
    of shape (1, kv_heads, tokens, head_dim); None when the call was finished by then. ``store``: a row that
    feeds part of its catalog prefix itself (:func:`enter` with ``fold``) hands the prefix's keys and values
    to this (prefix cache, prefix ids) once fed. ``base``: the token ids of the cached catalog prefix whose keys
    and values are the first ``len(base)`` of ``kv`` (None when unknown): rows with the same base share them in
    the batch (:meth:`Batch._share`)."""

    row: Decoding
    kv: list[tuple[torch.Tensor, torch.Tensor]] | None
    store: tuple[PrefixCache, list[int]] | None = None
    base: tuple[int, ...] | None = None


def _needed_ids(row) -> torch.Tensor | None:
    """``row.needed_ids()`` (:meth:`Decoding.needed_ids`), None for a row without it (it reads every logit)."""
    needed = getattr(row, "needed_ids", None)
    return None if needed is None else needed()


def start(model, row: Decoding, prompt_ids: list[int], prefix: PrefixCache | None, prefix_len: int) -> Started:
    """Run ``row``'s prompt through ``model`` alone (after the cached catalog prefix, when ``prefix`` has it),
    let ``row`` choose its first token, and return it with a copy of its keys and values for
    :meth:`Batch.join`. ``row.pending`` must be the prompt's tokens after ``prefix_len``."""
    if row.take_forced():
        return Started(row, None)
    past, _ = prefix.lookup(prompt_ids, prefix_len) if prefix is not None else (None, 0)
    try:
        logits, past = forward(model, row.pending, past, row.profile, row.phase, allowed=_needed_ids(row))
        finished = row.choose(logits)
        kv = None if finished else copies(past)
    finally:
        if prefix is not None:
            prefix.release()
    return Started(row, kv, base=tuple(prompt_ids[:prefix_len]) if prefix is not None and prefix.enabled else None)


def enter(row: Decoding, prompt_ids: list[int], prefix: PrefixCache | None, prefix_len: int,
          fold: bool = False) -> Started | None:
    """Make ``row`` ready to join a running batch without a forward pass of its own: its prompt is fed in the
    batch's next step, after a copy of the cached catalog prefix's keys and values (``row.pending`` must be
    the prompt's tokens after ``prefix_len``). Returns None when the prefix cache holds nothing for it (then
    :func:`start` runs its prompt alone), or a Started whose ``kv`` is None when forced text alone finished the
    call. A new catalog's prefix is computed here, once, in a pass of its own (:class:`~.prefix.PrefixCache`);
    with ``fold``, the row joins with the part of it the cache shares (the chat template's header, from
    another catalog) and feeds the rest with its prompt in the batch's steps, so that no other row waits
    for it (:class:`Batch` ``chunk``), and the batch stores the prefix once fed (``Started.store``)."""
    if row.take_forced():
        return Started(row, None)
    if prefix is None:
        return None
    if fold:
        kv, shared = prefix.share(prompt_ids, prefix_len)
        if kv is None:
            return None
        if shared == prefix_len:
            return Started(row, kv, base=tuple(prompt_ids[:prefix_len]))
        row.pending = list(prompt_ids[shared:prefix_len]) + row.pending
        return Started(row, kv, (prefix, list(prompt_ids[:prefix_len])))
    try:
        past, cached = prefix.lookup(prompt_ids, prefix_len)
        if past is None or cached == 0:
            return None
        kv = copies(past, cached)
    finally:
        prefix.release()
    return Started(row, kv, base=tuple(prompt_ids[:prefix_len]))


class Batch:
    """Rows decoding together in one forward pass per step (see the module docstring).

    ``rows`` lists the :class:`~.decoder.Decoding` of each row in cache order; ``valid`` is a long tensor
    (rows, slots) on the model's device; ``lengths[b]`` is the number of tokens row ``b`` holds (its next
    position). Each layer's keys and values live in buffers of shape (row capacity, kv_heads, slot
    capacity, head_dim), grown by doubling the rows and by :data:`SLOT_CHUNK` slots; row ``b`` is buffer row
    ``b``, and its slots are the first :attr:`slots` of the buffer.
    """

    def __init__(self, model, profile: Profile | None = None, chunk: int | None = None,
                 share: float | None = None, rows: int = ROWS_FIRST):
        """``chunk`` and ``share``: see :meth:`_allot` (None: prompts fed whole; a fixed chunk). ``rows``: the
        rows the buffers hold from the first join (at least :data:`ROWS_FIRST`; they double past it): the
        server's ``--max-batch``, so that its first burst of requests does not wait for the buffers to grow
        (the serve bench's first 16 requests: 0.3, 0.5 and 0.8 s joins, growing 4 rows to 8 and 16, Qwen2.5-1.5B
        on two cores). Raises ValueError for a ``share`` that is not a positive finite number."""
        if share is not None and not 0 < share < float("inf"):
            raise ValueError(f"share must be a positive finite number, got {share}")
        self.model = model
        self.chunk = chunk
        self.share = share
        self.first_rows = max(ROWS_FIRST, rows)
        self.cost = StepCost()  # the steps' (tokens, seconds), for the share's budget
        self._busy = float("-inf")  # time.monotonic() at the end of the last step in which a row decoded
        self._decoding = False  # whether a row of this step decodes (not a long prompt's chunk): _allot
        self._feeding: set[int] = set()  # id() of rows whose prompt is part fed: no take_forced, no choice yet
        self._stores: dict[int, tuple[PrefixCache, list[int]]] = {}  # id(row) -> where its fed prefix goes
        self.decoder = model.get_decoder()
        self.head = model.get_output_embeddings()
        self.profile = profile if profile is not None else Profile()
        self.device = getattr(model, "device", torch.device("cpu"))
        self.own_pass = supported(self.decoder)
        self.rows: list[Decoding] = []
        self.lengths: list[int] = []
        self.keys: list[torch.Tensor] = []  # per layer, (row capacity, kv_heads, slot capacity, head_dim)
        self.values: list[torch.Tensor] = []
        self.kv_dtype = torch.float32  # the model's keys' dtype (the buffers may be wider: _buffer_dtype)
        self.used = 0
        self.valid = torch.zeros(0, 0, dtype=torch.long, device=self.device)
        # the shared base: a catalog prefix's ids and keys and values, per layer (kv_heads, tokens, head_dim)
        # in the buffers' dtype, held once for every row that starts with it (shares[b])
        self.base_ids: tuple[int, ...] | None = None
        self.base_keys: list[torch.Tensor] = []
        self.base_values: list[torch.Tensor] = []
        self.shares: list[bool] = []

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def slots(self) -> int:
        """The cache's length in slots (the longest row plus padding)."""
        return self.used

    def join(self, started: Started) -> None:
        """Add a started call (:func:`start` or :func:`enter`, with its keys and values) as a new row: its keys
        and values go into the buffers' next free row, at slots ``[0, n)``; those of its ``base`` (the catalog
        prefix) go to the batch's shared base instead, when the row can share it (:meth:`_share`)."""
        kv = started.kv
        total = kv[0][0].shape[2]
        b = len(self.rows)
        dtype = self._buffer_dtype(kv[0][0].dtype)
        if not self.keys or self.keys[0].dtype != dtype or self.keys[0].shape[1:2] != kv[0][0].shape[1:2]:
            self.kv_dtype = kv[0][0].dtype
            self.keys = [k.new_zeros(self.first_rows, k.shape[1], total + SLOT_CHUNK, k.shape[3], dtype=dtype)
                         for k, _ in kv]
            self.values = [v.new_zeros(self.first_rows, v.shape[1], total + SLOT_CHUNK, v.shape[3], dtype=dtype)
                           for _, v in kv]
        shared = self._share(started.base, kv)
        n = total - shared
        self._reserve(b + 1, max(n, self.used))
        for buf_k, buf_v, (k, v) in zip(self.keys, self.values, kv):
            buf_k[b, :, :n] = k[0, :, shared:]
            buf_v[b, :, :n] = v[0, :, shared:]
        if n > self.used:
            self.valid = torch.nn.functional.pad(self.valid, (0, n - self.used))
            self.used = n
        mine = torch.zeros(1, self.used, dtype=torch.long, device=self.device)
        mine[0, :n] = 1
        self.valid = torch.cat([self.valid, mine])
        self.rows.append(started.row)
        self.lengths.append(total)
        self.shares.append(shared > 0)
        if started.store is not None:
            self._stores[id(started.row)] = started.store

    def _share(self, base: tuple[int, ...] | None, kv: list) -> int:
        """How many leading tokens of a joining row's keys and values ``kv`` the batch's shared base holds for it
        (0: the row keeps all of them in its own slots). A row shares when it starts with ``base`` (its catalog
        prefix, :attr:`Started.base`) under this project's own pass: the base becomes the batch's when it has
        none or no row uses it any more. Every row of a server's catalog shares the catalog's prompt, so a step's
        attention reads its keys and values once for all rows instead of once per row (16 rows of a 480-token
        prefix: 28 x 16 x 480 x 2 x 1 KiB = 430 MB of float32 reads a step, rather than 27 MB), and rows leaving
        or repacked move only their own slots. Cascade attention in the sense of FlashInfer's shared-prefix
        batch decoding (Ye et al., 2024) and Hydragen (Juravsky et al., 2024)."""
        if not self.own_pass or not base or len(base) > kv[0][0].shape[2]:
            return 0
        if base != self.base_ids:
            if any(self.shares):
                return 0
            dtype = self.keys[0].dtype
            self.base_ids = base
            self.base_keys = [k[0, :, :len(base)].to(dtype, copy=True) for k, _ in kv]
            self.base_values = [v[0, :, :len(base)].to(dtype, copy=True) for _, v in kv]
        return len(base)

    def _shared(self, b: int) -> int:
        """Row ``b``'s tokens held by the shared base (0 when it does not share it)."""
        return len(self.base_ids) if self.shares[b] else 0

    def _own(self, b: int) -> int:
        """Row ``b``'s tokens in its own slots (those after the shared base, when it shares it)."""
        return self.lengths[b] - self._shared(b)

    def _buffer_dtype(self, kv_dtype: torch.dtype) -> torch.dtype:
        """The key/value buffers' dtype: float32 under :mod:`.rowpass` (its attention runs in float32; bfloat16
        or float16 keys widen exactly, and the buffers no longer need widening at every step of every layer:
        16 rows of 604 slots of Qwen2.5-1.5B, 19 of a 166 ms step, two cores), else the model's own."""
        return torch.float32 if self.own_pass and kv_dtype in (torch.bfloat16, torch.float16) else kv_dtype

    def _reserve(self, rows: int, slots: int) -> None:
        """Grow the buffers to hold at least ``rows`` rows and ``slots`` slots (copying what they hold)."""
        have_rows, have_slots = self.keys[0].shape[0], self.keys[0].shape[2]
        if rows <= have_rows and slots <= have_slots:
            return
        new_rows = max(have_rows, rows) if rows <= have_rows else max(rows, 2 * have_rows)
        new_slots = have_slots if slots <= have_slots else slots + SLOT_CHUNK
        r, s = len(self.rows), self.used

        def grown(buf: torch.Tensor) -> torch.Tensor:
            out = buf.new_zeros(new_rows, buf.shape[1], new_slots, buf.shape[3])
            out[:r, :, :s] = buf[:r, :, :s]
            return out

        self.keys = [grown(k) for k in self.keys]
        self.values = [grown(v) for v in self.values]

    def step(self) -> list[Decoding]:
        """Feed every row its pending tokens in one forward pass and let each choose its next token; rows whose
        call is then finished leave the batch and are returned (in row order). Rows finished by forced text
        alone leave without a pass."""
        done = [row for row in self.rows if id(row) not in self._feeding and row.take_forced()]
        if done:
            self._keep([i for i, row in enumerate(self.rows) if row not in done])
        if not self.rows:
            return done
        self._truncate()
        t0 = time.perf_counter()
        feeds = self._allot()
        whole = [n == len(row.pending) for row, n in zip(self.rows, feeds)]
        drafts = [row.propose() if w else [] for row, w in zip(self.rows, whole)]  # [] for a row that drafts nothing
        fed_ids = [row.pending[:n] + draft for row, n, draft in zip(self.rows, feeds, drafts)]
        counts = [len(ids) for ids in fed_ids]
        # the indices of each row's fed tokens whose logits it reads: its last pending token, and the draft
        # positions where it chooses; none for a row that feeds part of its pending tokens
        keeps = [[n - 1 + offset for offset in (row.choices if draft else [0])] if w else []
                 for row, n, w, draft in zip(self.rows, feeds, whole, drafts)]
        # the logits each kept position reads (None: all; head_logits computes only those where it can)
        wanted = [ids for row, keep in zip(self.rows, keeps) if keep
                  for ids in [_needed_ids(row)] * len(keep)]
        width = max(counts)
        if self.used + width > self.keys[0].shape[2] and self.used > self._longest():
            self._repack()
        self._reserve(len(self.rows), self.used + width)
        fed = torch.arange(width)[None, :] < torch.tensor(counts)[:, None]  # (rows, width) bool
        with torch.inference_mode():
            if self.own_pass:
                logits = self._own_pass(fed_ids, keeps, width, fed, wanted)
            else:
                logits = self._transformers_pass(fed_ids, keeps, width, fed, wanted)
        self.valid = torch.cat([self.valid, fed.long().to(self.device)], dim=1)
        self.used += width
        self.lengths = [n + c for n, c in zip(self.lengths, counts)]
        seconds = time.perf_counter() - t0
        self.profile.add("batch step", seconds, sum(counts))
        self._account(sum(counts), seconds)
        self._store_prefixes()
        finished = []
        for b, (row, part) in enumerate(zip(self.rows, torch.split(logits, [len(k) for k in keeps]))):
            if not whole[b]:  # the rest of its prompt goes in the next steps
                row.pending = row.pending[feeds[b]:]
                self._feeding.add(id(row))
                finished.append(False)
                continue
            self._feeding.discard(id(row))
            if not drafts[b]:
                finished.append(row.choose(part[0]))
                continue
            over, kept = row.verify(part)
            finished.append(over)
            self._drop(b, len(drafts[b]) - kept, self.used - width + counts[b])
        done += [row for row, f in zip(self.rows, finished) if f]
        self._keep([b for b, f in enumerate(finished) if not f])
        return done

    def _allot(self) -> list[int]:
        """How many of its pending tokens each row feeds in this step: all of them, except that with ``chunk``
        set, rows holding more than ``chunk`` and :data:`SHORT_PROMPT` tokens (a new catalog's prompt) share a
        budget, the row with the fewest left first: ``chunk`` tokens per step while another row of the batch
        decodes (it would wait for their whole prompts otherwise); when none does, as many as the fewest any of
        them holds, at most :data:`PREFILL_STEP`. Chunked prefill in the sense of Sarathi (Agrawal et al.,
        2023) and vLLM's ``max_num_batched_tokens``: a step's cost grows with its tokens (one row decoding
        with the 1.5B model on two cores: 141 ms a step, 208 ms with 16 prompt tokens besides, 358 ms with
        32, 1.3 s with 256).

        With ``share`` too, the budget beside decoding rows is what keeps their step within ``1 + share``
        times its time without it by the fitted cost line (:meth:`~.stepcost.StepCost.extra_tokens`, at most
        ``chunk``), and so is the budget of a step with no decoding row less than :data:`BUSY_S` after one
        that had some: the long prompts get about ``share / (1 + share)`` of the machine while others decode,
        all of it when alone. (Measured, the steps took 1.4-1.7x at share 0.5, 2.0-2.2x where the budget was
        9-13 tokens: the line underestimates small chunks. Feeding whole chunks only as often as their
        measured cost allowed, deficit round robin in seconds, did no better: docs/compile.md, "Nineteenth
        session".)"""
        counts = [len(row.pending) for row in self.rows]
        self._decoding = True
        if self.chunk is None:
            return counts
        shared = self.share is not None
        long = sorted(self._long(counts), key=lambda b: counts[b])
        now = time.monotonic()
        self._decoding = len(long) < len(counts)
        if not long:
            return counts
        out, busy = list(counts), self._decoding or (shared and now - self._busy < BUSY_S)
        budget = self.chunk if busy else min(PREFILL_STEP, counts[long[0]])
        if busy and shared:
            extra = self.cost.extra_tokens(self.share, sum(n for b, n in enumerate(counts) if b not in long))
            budget = budget if extra is None else min(budget, extra)
        for b in long:
            out[b] = min(counts[b], budget)
            budget -= out[b]
        return out

    def _account(self, tokens: int, seconds: float) -> None:
        """After a step that fed ``tokens`` tokens in ``seconds``: learn its cost (:attr:`cost`) and, when a
        row of it decoded, note when it ended (:data:`BUSY_S`, :meth:`anticipation`)."""
        self.cost.add(tokens, seconds)
        if self._decoding:
            self._busy = time.monotonic()

    def _long(self, counts: list[int]) -> list[int]:
        """The rows (indices) that feed a long prompt in chunks (:meth:`_allot`): more than ``chunk`` and
        :data:`SHORT_PROMPT` pending tokens, or, with ``share``, the rest of a prompt already part fed."""
        least = max(self.chunk, SHORT_PROMPT)
        return [b for b, (row, n) in enumerate(zip(self.rows, counts))
                if n > least or (self.share is not None and id(row) in self._feeding)]

    def anticipation(self) -> float:
        """Seconds to hold the next step for a request about to arrive: with ``share``, when every row feeds a
        long prompt and a row decoded less than :data:`ANTICIPATE_S` ago, what is left of that time (else 0).
        A client that gets its answer sends its next request within milliseconds; a step begun in between,
        however small, keeps it waiting for the whole step (about 0.1 s with the 1.5B model on two cores).
        Anticipatory scheduling in the sense of Iyer and Druschel (SOSP 2001), who hold a disk idle for the
        next request of the process just served."""
        if self.chunk is None or self.share is None or not self.rows:
            return 0.0
        if len(self._long([len(row.pending) for row in self.rows])) < len(self.rows):
            return 0.0
        return max(0.0, self._busy + ANTICIPATE_S - time.monotonic())

    def _store_prefixes(self) -> None:
        """Hand the keys and values of each row's catalog prefix, once all fed, to its prefix cache
        (:func:`enter` with ``fold``): the row's first valid slots, copied."""
        for b, row in enumerate(self.rows):
            store = self._stores.get(id(row))
            if store is None or self.lengths[b] < len(store[1]):
                continue
            del self._stores[id(row)]
            cache, ids = store
            slots = torch.nonzero(self.valid[b], as_tuple=True)[0][:len(ids)]
            cache.store(ids, [(k[b, :, slots][None].to(self.kv_dtype), v[b, :, slots][None].to(self.kv_dtype))
                              for k, v in zip(self.keys, self.values)])

    def _drop(self, b: int, rejected: int, end: int) -> None:
        """Drop row ``b``'s last ``rejected`` fed tokens (draft tokens not taken), whose slots end before slot
        ``end``: they leave the row's attention mask (padding from now on) and its next token takes their
        first position."""
        if rejected > 0:
            self.valid[b, end - rejected:end] = 0
            self.lengths[b] -= rejected

    def _own_pass(self, fed_ids: list[list[int]], keeps: list[list[int]], width: int,
                  fed: torch.Tensor, wanted: list[torch.Tensor | None]) -> torch.Tensor:
        """The step through :func:`~.rowpass.row_pass`: (total of len(keeps[b]), vocab_size) logits, row by row
        those of row ``b``'s fed tokens at indices ``keeps[b]``; ``wanted``: per logits row, the only ids read
        (:func:`~.head.logits`)."""
        counts = [len(ids) for ids in fed_ids]
        count = len(counts)
        counts_t = torch.tensor(counts)
        rows = torch.repeat_interleave(torch.arange(count), counts_t)
        starts = torch.cumsum(counts_t, 0) - counts_t
        cols = torch.arange(int(counts_t.sum())) - starts[rows]
        positions = torch.tensor(self.lengths)[rows] + cols
        ids = torch.tensor([t for row_ids in fed_ids for t in row_ids], dtype=torch.long)
        last = torch.tensor([int(start) + i for start, keep in zip(starts, keeps) for i in keep], dtype=torch.long)
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        allowed = torch.cat([self.valid.bool()[:, None, :].expand(count, width, self.used),
                             causal[None] & fed[:, None, :]], dim=2)
        dev = self.device
        base = None
        if any(self.shares):
            base = (self.base_keys, self.base_values, torch.tensor(self.shares, device=dev))
        hidden = row_pass(self.decoder, ids.to(dev), rows.to(dev), cols.to(dev), positions.to(dev), width,
                          self.keys, self.values, self.used, allowed.to(dev), last.to(dev), base)
        return head_logits(self.head, hidden, wanted)

    def _transformers_pass(self, fed_ids: list[list[int]], keeps: list[list[int]], width: int,
                           fed: torch.Tensor, wanted: list[torch.Tensor | None]) -> torch.Tensor:
        """The step through the model's own forward (an architecture :func:`~.rowpass.row_pass` does not
        know): the rows padded to ``width``; the new keys and values are copied into the buffers. Logits as
        :meth:`_own_pass` returns them."""
        from transformers import DynamicCache

        counts = [len(row_ids) for row_ids in fed_ids]
        count = len(counts)
        ids = torch.zeros(count, width, dtype=torch.long)
        ids[fed] = torch.tensor([t for row_ids in fed_ids for t in row_ids], dtype=torch.long)
        positions = torch.tensor(self.lengths)[:, None] + torch.arange(width)[None, :]
        mask = torch.cat([self.valid, fed.long().to(self.device)], dim=1)
        cache = DynamicCache(ddp_cache_data=[(k[:count, :, :self.used], v[:count, :, :self.used])
                                             for k, v in zip(self.keys, self.values)])
        out = self.decoder(input_ids=ids.to(self.device), attention_mask=mask,
                           position_ids=positions.to(self.device), cache=cache, use_cache=True)
        for layer, k, v in zip(out.cache.layers, self.keys, self.values):
            k[:count, :, self.used:self.used + width] = layer.keys[:, :, self.used:]
            v[:count, :, self.used:self.used + width] = layer.values[:, :, self.used:]
        rows = torch.tensor([b for b, keep in enumerate(keeps) for _ in keep], dtype=torch.long)
        cols = torch.tensor([i for keep in keeps for i in keep], dtype=torch.long)
        return head_logits(self.head, out.last_hidden_state[rows, cols], wanted)

    def _truncate(self) -> None:
        """Rows that went back to an earlier point (a turn that declined the call it decoded sets
        ``truncate_to``, a count of its tokens) keep the keys and values of their first ``truncate_to`` tokens
        only: the later slots leave the row's attention mask, and its next token takes position
        ``truncate_to``. A row going back into the shared base (a call's own prompt that shares only the
        template's header with the catalog's) stops sharing it: the base's first ``truncate_to`` tokens are
        copied into its own slots."""
        for b, row in enumerate(self.rows):
            n = getattr(row, "truncate_to", None)
            if n is None:
                continue
            row.truncate_to = None
            if n < self._shared(b):
                self._unshare(b, n)
                continue
            slots = torch.nonzero(self.valid[b], as_tuple=True)[0]
            self.valid[b, slots[n - self._shared(b):]] = 0
            self.lengths[b] = n

    def _unshare(self, b: int, n: int) -> None:
        """Row ``b`` keeps the shared base's first ``n`` tokens, in its own slots ``[0, n)``, and nothing
        else."""
        self._reserve(len(self.rows), n)
        if n > self.used:
            self.valid = torch.nn.functional.pad(self.valid, (0, n - self.used))
            self.used = n
        for buf, base in zip(self.keys + self.values, self.base_keys + self.base_values):
            buf[b, :, :n] = base[:, :n]
        self.valid[b] = 0
        self.valid[b, :n] = 1
        self.lengths[b] = n
        self.shares[b] = False

    def remove(self, rows: list) -> None:
        """Take ``rows`` out of the batch (cancelled turns); the others go on."""
        self._keep([b for b, row in enumerate(self.rows) if not any(row is r for r in rows)])

    def drop_all(self) -> list[Decoding]:
        """Empty the batch (after a failed step); returns the rows it held."""
        rows = self.rows
        self._keep([])
        return rows

    def _keep(self, keep: list[int]) -> None:
        """Keep only rows ``keep`` (ascending): the holes they leave below ``len(keep)`` are filled with the
        last rows kept (each moved once: a row leaving moves at most one other, where shifting every row above
        it down moved up to 15 at 16 rows, 10-90 ms a step of Qwen2.5-1.5B), then repack when padding has
        grown. The rows' order changes with it (nothing reads it)."""
        if len(keep) == len(self.rows):
            return
        kept = set(keep)
        tail = iter(b for b in reversed(keep) if b >= len(keep))
        keep = [b if b in kept else next(tail) for b in range(len(keep))]
        self.rows = [self.rows[b] for b in keep]
        alive = {id(row) for row in self.rows}
        self._feeding &= alive
        self._stores = {key: store for key, store in self._stores.items() if key in alive}
        self.lengths = [self.lengths[b] for b in keep]
        self.shares = [self.shares[b] for b in keep]
        if not keep:
            self.used, self.valid = 0, self.valid[:0, :0]
            return
        for to, b in enumerate(keep):
            if to != b:
                for buf in self.keys + self.values:
                    buf[to, :, :self.used] = buf[b, :, :self.used]
        self.valid = self.valid[torch.tensor(keep, device=self.device)]
        if self.slots - self._longest() > REPACK_SLACK:
            self._repack()

    def _longest(self) -> int:
        """The most tokens any row holds in its own slots."""
        return max(self._own(b) for b in range(len(self.rows)))

    def _repack(self) -> None:
        """Gather each row's valid slots to the right of the first :meth:`_longest` slots."""
        width = self._longest()
        count = len(self.rows)
        gather = torch.zeros(count, width, dtype=torch.long, device=self.device)
        valid = torch.zeros_like(gather)
        for b in range(count):
            n = self._own(b)
            gather[b, width - n:] = torch.nonzero(self.valid[b], as_tuple=True)[0]
            valid[b, width - n:] = 1
        rows = torch.arange(count, device=self.device)[:, None]
        for buf in self.keys + self.values:
            # (rows, width) advanced indices around a slice: the result is (rows, width, kv_heads, head_dim)
            buf[:count, :, :width] = buf[rows, :, gather].transpose(1, 2)
        self.valid = valid
        self.used = width
