"""Greedy constrained decoding of one call with the KV cache, jump-forward, a token budget and loop breaking.

Each step: if the state forces text (one path of bytes), append its canonical tokens (the tokenizer's own
encoding of the whole forced text, as in SGLang's jump-forward decoding) without asking the model, and feed
them in the next forward pass together with whatever is pending; otherwise run the model on the pending
tokens, mask its last logits with the state's mask (an O(1) lookup), take the argmax and move to the next
state. Decoding stops at EOS or at an accepting state with no continuation.

* Token healing: when the last token of the forced text could merge with what follows (``fn_`` before
  ``greet``), that token is left to the model, masked to tokens that start with it or extend it.
* Budget: the index stores, per state, the fewest tokens that complete the call. When the tokens left are
  close to that number, the mask keeps only tokens whose next state can still complete within what is left,
  so a call is always complete, valid JSON within ``max_tokens``; it is never truncated.
* Loops: when the chosen tokens end with the same n-gram (n <= 8 tokens) repeated 4 times, the budget is
  cut to the shortest completion from the current state, which closes the string (or array) at once.
* Shared prompt prefix: :class:`PrefixCache` keeps the keys and values of the prompt prefix shared by all
  requests (the system message listing the catalog) and crops the cache back to it after each request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..errors import CallmaybeError
from .masks import Mask, TokenIndex

REPEAT_TIMES = 4
REPEAT_MAX_N = 8


class BudgetExhausted(CallmaybeError):
    """The token budget is smaller than the shortest completion of the call."""


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
    trace: list[dict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # optional arguments left out as unstated


class PrefixCache:
    """Keys and values of a prompt prefix shared by requests, computed once and reused.

    ``lookup(prompt_ids)`` returns (cache to continue from, number of prompt tokens it covers); after a
    request, :meth:`release` crops the cache back to the prefix so it can serve the next one.
    """

    def __init__(self, model, enabled: bool = True):
        self.model = model
        self.enabled = enabled
        self.ids: list[int] = []
        self.cache = None

    def lookup(self, prompt_ids: list[int], prefix_len: int):
        if not self.enabled or prefix_len <= 0:
            return None, 0
        prefix = prompt_ids[:prefix_len]
        if self.cache is None or self.ids != prefix:
            _, self.cache = forward(self.model, prefix, None)
            self.ids = prefix
        return self.cache, prefix_len

    def release(self) -> None:
        if self.cache is not None:
            extra = self.cache.get_seq_length() - len(self.ids)
            if extra > 0:
                self.cache.crop(-extra)  # transformers 5: a negative count removes that many tokens


def forward(model, ids: list[int], past):
    """Run ``model`` on ``ids`` after ``past``; returns (float logits of the last position (width,), cache)."""
    input_ids = torch.tensor([ids], dtype=torch.long)
    with torch.inference_mode():
        out = model(input_ids=input_ids, cache=past, use_cache=True)
    return out.logits[0, -1], out.cache


def repeating(tokens: list[int]) -> bool:
    """True when ``tokens`` ends with one n-gram (n <= REPEAT_MAX_N) repeated REPEAT_TIMES times."""
    for n in range(1, REPEAT_MAX_N + 1):
        span = n * REPEAT_TIMES
        if len(tokens) < span:
            break
        tail = tokens[-span:]
        gram = tail[-n:]
        if all(tail[i] == gram[i % n] for i in range(span)):
            return True
    return False


def generate(
    model, tokenizer, index: TokenIndex, prompt_ids: list[int], max_tokens: int = 256, trace: bool = False,
    prefix: PrefixCache | None = None, prefix_len: int = 0,
) -> Generation:
    """Decode one call greedily under ``index``'s masks after ``prompt_ids``.

    ``max_tokens`` bounds the generated tokens (forced ones included); the call is always complete within
    it. ``prefix``/``prefix_len``: reuse the cached keys and values of ``prompt_ids[:prefix_len]``.
    Raises BudgetExhausted when even the shortest completion needs more than ``max_tokens`` tokens.
    """
    t0 = time.perf_counter()
    state = index.start
    if index.min_tokens(state) > max_tokens:
        raise BudgetExhausted(f"a call needs at least {index.min_tokens(state)} tokens; --max-tokens is {max_tokens}")
    past, cached = prefix.lookup(prompt_ids, prefix_len) if prefix is not None else (None, 0)
    pending = list(prompt_ids[cached:])
    generated: list[int] = []
    chosen_ids: list[int] = []
    data = bytearray()
    passes = chosen = forced = 0
    budget = max_tokens
    loop_closed = False
    steps: list[dict] = []
    try:
        while True:
            left = budget - len(generated)
            ids = _forced_ids(index, tokenizer, state, left)
            if ids:
                for tok in ids:
                    state = index.next_state(state, tok)
                    if trace:
                        steps.append({"step": len(generated), "kind": "forced", "token": tok,
                                      "text": tokenizer.decode([tok])})
                    generated.append(tok)
                    data += index.token_bytes[tok]
                pending += ids
                forced += len(ids)
                continue
            if index.is_terminal(state):
                break
            logits, past = forward(model, pending, past)
            passes += 1
            if index.budget_is_loose(left):
                mask = index.mask(state)
                masked = index.apply(state, logits)
            else:
                mask = index.budget_mask(state, left)
                masked = torch.where(mask[: logits.shape[0]], logits, torch.tensor(float("-inf")))
            tok = int(torch.argmax(masked))
            if trace:
                probs = torch.softmax(logits.float(), dim=-1)
                top = torch.topk(probs, 3)
                steps.append({
                    "step": len(generated), "kind": "chosen", "allowed": mask.count() if isinstance(mask, Mask) else int(mask.sum()), "token": tok,
                    "text": tokenizer.decode([tok]), "prob": round(float(probs[tok]), 4),
                    "top": [[tokenizer.decode([int(i)]), round(float(p), 4)] for p, i in zip(top.values, top.indices)],
                })
            chosen += 1
            if tok in index.eos_ids:
                break
            state = index.next_state(state, tok)
            generated.append(tok)
            chosen_ids.append(tok)
            data += index.token_bytes[tok]
            pending = [tok]
            if not loop_closed and repeating(chosen_ids):
                # close the loop: from here, only the shortest completion fits the budget
                budget = len(generated) + index.min_tokens(state)
                loop_closed = True
    finally:
        if prefix is not None:
            prefix.release()
    return Generation(
        text=bytes(data).decode("utf-8", errors="replace"),
        tokens=generated,
        forward_passes=passes,
        chosen_tokens=chosen,
        forced_tokens=forced,
        seconds=time.perf_counter() - t0,
        prompt_tokens=len(prompt_ids),
        cached_prompt_tokens=cached,
        loop_closed=loop_closed,
        trace=steps,
    )


def _forced_ids(index: TokenIndex, tokenizer, state: int, left: int) -> list[int]:
    """The canonical tokens of the text forced from ``state`` (minus a last token that could merge with
    what follows), or [] when nothing is forced or they do not fit the budget."""
    text = index.forced_bytes(state)
    if not text:
        return []
    ids = tokenizer.encode(text.decode("utf-8"), add_special_tokens=False)
    s = before_last = state
    for tok in ids:
        before_last, s = s, index.next_state(s, tok)
        if s < 0:  # the tokenizer's encoding left the grammar: let the model choose instead
            return []
    if ids and index.extends_past(before_last, len(index.token_bytes[ids[-1]])):
        ids = ids[:-1]
        s = before_last
    if not ids or len(ids) + index.min_tokens(s) > left:
        return []
    return ids
