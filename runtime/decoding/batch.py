"""Decode several calls at once: each call is a row of one forward pass, with its own index state, budget and
keys and values; a row leaves the batch the moment its call is finished and another can join at once.

The rows share one key/value cache of shape (rows, kv_heads, slots, head_dim) per layer. Rows have different
lengths, and in a step each row feeds its own number of tokens (one chosen token, or the forced text after
it), so the cache holds padding: ``valid`` (rows, slots), 1 where a slot holds one of that row's tokens, is
the attention mask, and each row's tokens get their own positions (``position_ids``), so a row attends to its
own tokens only, at the positions it would have alone. Only the last fed position of each row goes through
the output layer. A row joins with the keys and values of its own prompt (computed alone, from the shared
catalog prefix, by :func:`start`), right-aligned to the batch's slots; when padding makes up more than
``REPACK_SLACK`` slots of every row, the valid slots are gathered to the right again (keys already carry
their rotary positions, so moving them changes nothing).

This is continuous batching in the sense of Orca (Yu et al., OSDI 2022: rows join and leave between
iterations) with a padded cache instead of paged attention.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .decoder import Decoding, PrefixCache, forward
from .profile import Profile

#: Padding slots tolerated in every row before the cache is repacked.
REPACK_SLACK = 64


@dataclass
class Started:
    """A call whose prompt went through the model alone (:func:`start`): its :class:`~.decoder.Decoding`
    (the first token already chosen) and its keys and values, ``kv`` one (keys, values) pair per layer, each
    of shape (1, kv_heads, tokens, head_dim); None when the call was finished by then."""

    row: Decoding
    kv: list[tuple[torch.Tensor, torch.Tensor]] | None


def start(model, row: Decoding, prompt_ids: list[int], prefix: PrefixCache | None, prefix_len: int) -> Started:
    """Run ``row``'s prompt through ``model`` alone (after the cached catalog prefix, when ``prefix`` has it),
    let ``row`` choose its first token, and return it with a copy of its keys and values for
    :meth:`Batch.join`. ``row.pending`` must be the prompt's tokens after ``prefix_len``."""
    if row.take_forced():
        return Started(row, None)
    past, _ = prefix.lookup(prompt_ids, prefix_len) if prefix is not None else (None, 0)
    try:
        logits, past = forward(model, row.pending, past, row.profile, row.phase)
        finished = row.choose(logits)
        kv = None if finished else [(layer.keys.clone(), layer.values.clone()) for layer in past.layers]
    finally:
        if prefix is not None:
            prefix.release()
    return Started(row, kv)


class Batch:
    """Rows decoding together in one forward pass per step (see the module docstring).

    ``rows`` lists the :class:`~.decoder.Decoding` of each row in cache order; ``valid`` is a long tensor
    (rows, slots) on the model's device; ``lengths[b]`` is the number of tokens row ``b`` holds (its next
    position).
    """

    def __init__(self, model, profile: Profile | None = None):
        self.model = model
        self.decoder = model.get_decoder()
        self.head = model.get_output_embeddings()
        self.profile = profile if profile is not None else Profile()
        self.device = getattr(model, "device", torch.device("cpu"))
        self.rows: list[Decoding] = []
        self.lengths: list[int] = []
        self.layers: list[list[torch.Tensor]] = []  # per layer [keys, values], (rows, kv_heads, slots, head_dim)
        self.valid = torch.zeros(0, 0, dtype=torch.long, device=self.device)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def slots(self) -> int:
        """The cache's length in slots (the longest row plus padding)."""
        return self.valid.shape[1]

    def join(self, started: Started) -> None:
        """Add a started call (:func:`start`, with its keys and values) as a new row."""
        kv = started.kv
        n = kv[0][0].shape[2]
        if not self.rows:
            self.layers = [[k, v] for k, v in kv]
            self.valid = torch.ones(1, n, dtype=torch.long, device=self.device)
        else:
            width = max(self.slots, n)
            self._pad_left(width - self.slots)
            for layer, (k, v) in zip(self.layers, kv):
                layer[0] = torch.cat([layer[0], _pad_slots(k, width - n)])
                layer[1] = torch.cat([layer[1], _pad_slots(v, width - n)])
            mine = torch.zeros(1, width, dtype=torch.long, device=self.device)
            mine[0, width - n:] = 1
            self.valid = torch.cat([self.valid, mine])
        self.rows.append(started.row)
        self.lengths.append(n)

    def step(self) -> list[Decoding]:
        """Feed every row its pending tokens in one forward pass and let each choose its next token; rows whose
        call is then finished leave the batch and are returned (in row order). Rows finished by forced text
        alone leave without a pass."""
        done = [row for row in self.rows if row.take_forced()]
        if done:
            self._keep([i for i, row in enumerate(self.rows) if row not in done])
        if not self.rows:
            return done
        self._truncate()
        t0 = time.perf_counter()
        counts = [len(row.pending) for row in self.rows]
        width = max(counts)
        ids = torch.zeros(len(self.rows), width, dtype=torch.long)
        fed = torch.zeros(len(self.rows), width, dtype=torch.long)
        for b, row in enumerate(self.rows):
            ids[b, :counts[b]] = torch.tensor(row.pending)
            fed[b, :counts[b]] = 1
        positions = torch.tensor(self.lengths)[:, None] + torch.arange(width)[None, :]
        mask = torch.cat([self.valid, fed.to(self.device)], dim=1)
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=[(k, v) for k, v in self.layers])
        with torch.inference_mode():
            out = self.decoder(input_ids=ids.to(self.device), attention_mask=mask,
                               position_ids=positions.to(self.device), cache=cache, use_cache=True)
            last = out.last_hidden_state[torch.arange(len(self.rows)), torch.tensor(counts) - 1]
            logits = self.head(last)
        self.layers = [[layer.keys, layer.values] for layer in out.cache.layers]
        self.valid = mask
        self.lengths = [n + c for n, c in zip(self.lengths, counts)]
        self.profile.add("batch step", time.perf_counter() - t0, sum(counts))
        finished = [row.choose(logits[b]) for b, row in enumerate(self.rows)]
        done += [row for row, f in zip(self.rows, finished) if f]
        self._keep([b for b, f in enumerate(finished) if not f])
        return done

    def _truncate(self) -> None:
        """Rows that went back to an earlier point (a turn that declined the call it decoded sets
        ``truncate_to``, a count of its tokens) keep the keys and values of their first ``truncate_to`` tokens
        only: the later slots leave the row's attention mask, and its next token takes position
        ``truncate_to``."""
        for b, row in enumerate(self.rows):
            n = getattr(row, "truncate_to", None)
            if n is None:
                continue
            row.truncate_to = None
            slots = torch.nonzero(self.valid[b], as_tuple=True)[0]
            self.valid[b, slots[n:]] = 0
            self.lengths[b] = n

    def remove(self, rows: list) -> None:
        """Take ``rows`` out of the batch (cancelled turns); the others go on."""
        self._keep([b for b, row in enumerate(self.rows) if not any(row is r for r in rows)])

    def drop_all(self) -> list[Decoding]:
        """Empty the batch (after a failed step); returns the rows it held."""
        rows = self.rows
        self._keep([])
        return rows

    def _keep(self, keep: list[int]) -> None:
        """Keep only rows ``keep`` (in that order), then repack when padding has grown."""
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[b] for b in keep]
        self.lengths = [self.lengths[b] for b in keep]
        if not keep:
            self.layers, self.valid = [], self.valid[:0, :0]
            return
        index = torch.tensor(keep, device=self.device)
        self.layers = [[k.index_select(0, index), v.index_select(0, index)] for k, v in self.layers]
        self.valid = self.valid.index_select(0, index)
        if self.slots - max(self.lengths) > REPACK_SLACK:
            self._repack()

    def _repack(self) -> None:
        """Gather each row's valid slots to the right of a cache as long as the longest row."""
        width = max(self.lengths)
        gather = torch.zeros(len(self.rows), width, dtype=torch.long, device=self.device)
        valid = torch.zeros_like(gather)
        for b, n in enumerate(self.lengths):
            gather[b, width - n:] = torch.nonzero(self.valid[b], as_tuple=True)[0]
            valid[b, width - n:] = 1
        rows = torch.arange(len(self.rows), device=self.device)[:, None]
        # (rows, width) advanced indices around a slice: the result is (rows, width, kv_heads, head_dim)
        self.layers = [[k[rows, :, gather].transpose(1, 2).contiguous(), v[rows, :, gather].transpose(1, 2).contiguous()]
                       for k, v in self.layers]
        self.valid = valid

    def _pad_left(self, count: int) -> None:
        if count <= 0:
            return
        self.layers = [[_pad_slots(k, count), _pad_slots(v, count)] for k, v in self.layers]
        self.valid = torch.nn.functional.pad(self.valid, (count, 0))


def _pad_slots(t: torch.Tensor, count: int) -> torch.Tensor:
    """``t`` (rows, heads, slots, dim) with ``count`` zero slots added on the left."""
    return torch.nn.functional.pad(t, (0, 0, count, 0)) if count > 0 else t
