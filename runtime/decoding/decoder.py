"""Greedy constrained decoding of one call with the KV cache, jump-forward, a token budget and loop breaking.

Each step drives a :class:`~.matcher.Matcher`: if the state forces text, its canonical tokens are appended
without asking the model and fed in the next forward pass together with whatever is pending; otherwise the
model runs on the pending tokens, its last logits are masked with the matcher's mask (an O(1) lookup, narrowed
by the token budget when it is tight), and the argmax is taken. Decoding stops at EOS or when nothing may
follow. When the model loops (:mod:`.loops`), the budget is cut to the shortest completion, which closes the
call at once.

Speculation (``speculate``): where the model must choose, tokens copied from the prompt (:mod:`.lookup`) are fed
with the pending ones in one pass and verified under the mask (:meth:`Decoding.verify`); the cache drops the keys
and values of those not taken (``crop``), the matcher advances through the taken ones only.

Shared prompt prefix: :class:`~.prefix.PrefixCache` keeps the keys and values of the prompt prefixes shared by
requests (the system message listing a catalog, several catalogs at once) and crops the cache back to a prefix
after each request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .forward import forward
from .lookup import PromptLookup, boundary, choice_points, closing, cut, healed
from .loops import LoopGuard
from .masks import TokenIndex
from .matcher import BudgetExhausted, Matcher
from .prefix import PrefixCache
from .profile import Profile

__all__ = ["BudgetExhausted", "Decoding", "Generation", "PrefixCache", "forward", "generate"]


@dataclass
class Generation:
    """One decoded call: ``text`` (str), ``tokens`` (generated ids, forced included), counts, seconds."""

    text: str
    tokens: list[int]
    forward_passes: int
    chosen_tokens: int
    forced_tokens: int
    seconds: float
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    loop_closed: bool = False
    drafted_tokens: int = 0  # speculation: tokens drafted from the prompt, and those the model took
    accepted_tokens: int = 0
    trace: list[dict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # optional arguments left out as unstated
    restated: dict[str, dict] = field(default_factory=dict)  # name -> {"from", "to", "probability"}
    grounding: dict[str, dict] = field(default_factory=dict)  # name -> {"action", "evidence", ...}: why
    model_parameters: dict | None = None  # the arguments as decoded, before grounding (None: it did not run)


class Decoding:
    """One call being decoded: its :class:`~.matcher.Matcher`, loop guard, the tokens waiting to be fed to the
    model (``pending``: the prompt's uncached part first, then each chosen token with the forced text after
    it) and the counts. ``pick`` chooses a token from the masked logits (:func:`~.sampling.pick`; None: the
    most likely). The caller runs the model on ``pending`` whenever :meth:`take_forced` says the call
    goes on, and hands the last position's logits to :meth:`choose`; :func:`generate` does this for one call,
    :class:`~.batch.Batch` for several at once.

    Speculation (``lookup``, a :class:`~.lookup.PromptLookup` of the prompt; None, or a ``pick``: none): where
    the model must choose, :meth:`propose` drafts tokens copied from the prompt; the caller feeds ``pending``
    and the draft in one pass and hands the logits of the draft's positions to :meth:`verify`, which takes the
    draft tokens the model would have chosen itself, then the model's own next token. Greedy output is the
    same as without a draft (in exact arithmetic: a pass over several tokens may round a near-tie the other
    way). ``drafted``/``accepted``: draft tokens proposed and taken.

    Raises BudgetExhausted when even the shortest completion needs more than ``max_tokens`` tokens.
    """

    def __init__(self, index: TokenIndex, tokenizer, max_tokens: int, pending: list[int], trace: bool = False,
                 profile: Profile | None = None, pick=None, lookup: PromptLookup | None = None):
        self.index, self.tokenizer, self.trace = index, tokenizer, trace
        self.pick = pick  # (masked logits) -> token id; None: the argmax
        self.lookup = lookup if pick is None else None  # sampling: no speculation
        self.profile = profile if profile is not None else Profile()
        self.matcher = Matcher(index, max_tokens, tokenizer)
        self.pending = list(pending)
        self.draft: list[int] = []  # tokens proposed after pending, to be verified (propose)
        self.choices: list[int] = [0]  # the offsets whose logits verify reads (lookup.choice_points)
        self.loops = LoopGuard()
        self.passes = self.chosen = self.forced = 0
        self.drafted = self.accepted = 0
        self.loop_closed = False
        self.steps: list[dict] = []
        self.t0 = time.perf_counter()

    @property
    def phase(self) -> str:
        """The profile phase of the next forward pass: prefill, verify pass, decode step or forced chunk."""
        if self.passes == 0:
            return "prefill"
        return "verify pass" if self.draft else "decode step" if len(self.pending) == 1 else "forced chunk"

    def take_forced(self) -> bool:
        """Append the tokens of any forced text to ``pending`` without asking the model; returns True when the
        call is finished (nothing may follow), False when the model must choose the next token."""
        clock = time.perf_counter
        while True:
            t = clock()
            ids = self.matcher.forced_tokens()
            if not ids:
                self.profile.add("forced tokens", clock() - t, calls=0)  # looked, nothing forced
                return self.matcher.is_finished()
            self._force(ids)
            self.pending += ids
            self.profile.add("forced tokens", clock() - t, len(ids))

    def _force(self, ids: list[int]) -> None:
        """Advance through forced tokens ``ids`` (traced, followed by the loop guard, counted)."""
        for tok in ids:
            if self.trace:
                self.steps.append({"step": len(self.matcher.tokens), "kind": "forced", "token": tok,
                                   "text": self.tokenizer.decode([tok])})
            self.matcher.advance(tok)
            self.loops.forced(self.index.token_bytes[tok])
        self.forced += len(ids)

    def choose(self, logits: torch.Tensor) -> bool:
        """Take the most likely allowed token from ``logits`` (shape (vocab_size,), the model's output after
        ``pending``) and advance; returns True when the call is finished. When the model loops (:mod:`.loops`)
        the budget is cut to the shortest completion."""
        self.passes += 1
        tok = self._choose(logits)
        self.pending = [] if self.matcher.finished else [tok]
        return self.matcher.finished

    def _choose(self, logits: torch.Tensor) -> int:
        """Mask ``logits`` (vocab_size,), pick a token, advance, follow the loop guard; returns the token."""
        t = time.perf_counter()
        mask = self.matcher.mask()
        if self.pick is None:
            tok = self.index.best(mask, logits)
        else:
            tok = self.pick(self.index.apply_mask(mask, logits))
        self.profile.add("mask", time.perf_counter() - t)
        if self.trace:
            self.steps.append(_chosen_step(self.tokenizer, len(self.matcher.tokens), tok, logits, mask.count()))
        self.chosen += 1
        self.matcher.advance(tok)
        if not self.matcher.finished and self.loops.chosen(self.index.token_bytes[tok]) and not self.loop_closed:
            self.matcher.close_early()  # from here, only the shortest completion fits the budget
            self.loop_closed = True
        return tok

    def propose(self) -> list[int]:
        """Draft the tokens after ``pending`` (call when :meth:`take_forced` said the model must choose): the
        forced text token healing left to the model (:func:`~.lookup.healed`), else the prompt's tokens after
        the call's last tokens (:class:`~.lookup.PromptLookup`) up to a :func:`~.lookup.boundary`, cut where
        the grammar refuses one (:func:`~.lookup.cut`) and, where cut or stopped, the value's closer and the
        forced text after it (:func:`~.lookup.closing`). Sets and returns :attr:`draft` ([] without a
        lookup)."""
        self.draft = []
        if self.lookup is not None:
            if self.tokenizer is not None:
                self.draft = healed(self.matcher, self.tokenizer)
            proposed = [] if self.draft else self.lookup.propose(self.matcher.tokens)
            if proposed:
                self.draft = cut(self.matcher, proposed[:boundary(proposed, self.index.token_bytes)])
                if len(self.draft) < len(proposed) and self.tokenizer is not None:
                    self.draft += self._closing(self.draft)
            self.drafted += len(self.draft)
        self.choices = choice_points(self.matcher, self.draft) if self.draft else [0]
        return self.draft

    def needed_ids(self) -> torch.Tensor | None:
        """The token ids whose logits the next pass's choices can read (call after :meth:`propose`): int64
        (k,), sorted, the union of the masks' ids at :attr:`choices` (after ``pending``, and after the draft's
        tokens where the model chooses among them), when each of those masks is a short id row
        (:meth:`~.masks.Mask.is_sparse`: a digit, a name, a key); None when any allows more, or with ``trace``
        (its top 3 are the model's before masking). The model may then compute those logits alone: the token
        chosen is the same, as -inf stands where the mask would have put it anyway."""
        if self.trace:
            return None
        draft, matcher, masks = self.draft, self.matcher, []
        for offset in self.choices:
            for tok in draft[:offset]:
                matcher.advance(tok)
            try:
                masks.append(matcher.mask())
            finally:
                matcher.rollback(offset)
            if not masks[-1].is_sparse():
                return None
        ids = [m.token_ids() for m in masks]
        return ids[0] if len(ids) == 1 else torch.unique(torch.cat(ids))

    def _closing(self, draft: list[int]) -> list[int]:
        """:func:`~.lookup.closing` after ``draft`` (the matcher is left as it was)."""
        matcher = self.matcher
        for tok in draft:
            matcher.advance(tok)
        try:
            return [] if matcher.is_finished() else closing(matcher, self.tokenizer)
        finally:
            matcher.rollback(len(draft))

    def verify(self, logits: torch.Tensor) -> tuple[bool, int]:
        """Take what the model chooses given :attr:`draft`: ``logits`` (len(choices), vocab_size) are its
        outputs at :attr:`choices` (0: after the last pending token, ``j``: after draft token ``j - 1``; the
        positions where the model chooses, :func:`~.lookup.choice_points`), from one pass over ``pending +
        draft``. Each position is masked under the matcher's state after the tokens taken before it, so the
        token picked there is the one :meth:`choose` would pick; draft tokens are taken while they equal it
        (forced text inside the draft is taken as forced), and the first that does not gives the model's own
        token for free. Returns (finished, kept): whether the call is finished, and how many draft tokens were
        taken (the caller drops the keys and values of the others). ``pending`` is then the model's own token
        (or nothing, when forced text the draft does not hold comes next: :meth:`take_forced` appends it)."""
        draft, self.draft = self.draft, []
        row_of = {offset: i for i, offset in enumerate(self.choices)}
        self.choices = [0]
        self.passes += 1
        kept = 0
        while True:
            tok = self._choose(logits[row_of[kept]])
            if self.matcher.finished:
                self.pending = []
                return True, kept
            if kept >= len(draft) or tok != draft[kept]:
                self.pending = [tok]
                return False, kept
            kept += 1
            self.accepted += 1
            while True:  # forced text after it, as take_forced would append it
                forced = self.matcher.forced_tokens()
                if not forced:
                    if self.matcher.is_finished():
                        self.pending = []
                        return True, kept
                    break
                if draft[kept:kept + len(forced)] != forced:
                    self.pending = []  # take_forced appends it; the next pass feeds it
                    return False, kept
                self._force(forced)
                kept += len(forced)
                self.accepted += len(forced)

    def result(self, prompt_tokens: int = 0, cached_prompt_tokens: int = 0) -> Generation:
        """The decoded call as a :class:`Generation` (seconds since this Decoding was made)."""
        return Generation(
            text=self.matcher.data.decode("utf-8", errors="replace"),
            tokens=self.matcher.call_tokens(),
            forward_passes=self.passes,
            chosen_tokens=self.chosen,
            forced_tokens=self.forced,
            seconds=time.perf_counter() - self.t0,
            prompt_tokens=prompt_tokens,
            cached_prompt_tokens=cached_prompt_tokens,
            loop_closed=self.loop_closed,
            trace=self.steps,
            drafted_tokens=self.drafted,
            accepted_tokens=self.accepted,
        )


def generate(
    model, tokenizer, index: TokenIndex, prompt_ids: list[int], max_tokens: int = 256, trace: bool = False,
    prefix: PrefixCache | None = None, prefix_len: int = 0, profile: Profile | None = None,
    speculate: bool = False,
) -> Generation:
    """Decode one call greedily under ``index``'s masks after ``prompt_ids``.

    ``max_tokens`` bounds the generated tokens (forced ones included); the call is always complete within
    it. ``prefix``/``prefix_len``: reuse the cached keys and values of ``prompt_ids[:prefix_len]``.
    ``trace``: record every token (forced or chosen; for chosen ones the allowed count and the top 3).
    ``profile``: where the seconds of each phase are added (:mod:`.profile`). ``speculate``: draft tokens
    from the prompt and verify them in one pass (:meth:`Decoding.verify`; the cache drops the keys and values
    of the draft tokens not taken).
    Raises BudgetExhausted when even the shortest completion needs more than ``max_tokens`` tokens.
    """
    profile = profile if profile is not None else Profile()
    past, cached = prefix.lookup(prompt_ids, prefix_len) if prefix is not None else (None, 0)
    try:
        lookup = PromptLookup(prompt_ids, index.token_bytes, tokenizer) if speculate else None
        row = Decoding(index, tokenizer, max_tokens, prompt_ids[cached:], trace, profile, lookup=lookup)
        while not row.take_forced():
            draft = row.propose()
            allowed = row.needed_ids()
            if not draft:
                logits, past = forward(model, row.pending, past, profile, row.phase, allowed=allowed)
                if row.choose(logits):
                    break
                continue
            at = [len(row.pending) - 1 + offset for offset in row.choices]
            logits, past = forward(model, row.pending + draft, past, profile, row.phase, keep=at, allowed=allowed)
            finished, kept = row.verify(logits)
            if kept < len(draft):
                past.crop(kept - len(draft))  # transformers 5: a negative count removes that many tokens
            if finished:
                break
    finally:
        if prefix is not None:
            prefix.release()
    return row.result(len(prompt_ids), cached)


def _chosen_step(tokenizer, step: int, tok: int, logits: torch.Tensor, allowed: int) -> dict:
    """The trace record of a chosen token: its probability and the model's top 3 before masking."""
    probs = torch.softmax(logits.float(), dim=-1)
    top = torch.topk(probs, 3)
    return {"step": step, "kind": "chosen", "allowed": allowed, "token": tok, "text": tokenizer.decode([tok]),
            "prob": round(float(probs[tok]), 4),
            "top": [[tokenizer.decode([int(i)]), round(float(p), 4)] for p, i in zip(top.values, top.indices)]}
