"""Greedy constrained decoding of one call with the KV cache and jump-forward over forced text.

Each step: if the state forces text (one path of bytes), append its canonical tokens (the tokenizer's own
encoding of the whole forced text, as in SGLang's jump-forward decoding) without asking the model, and feed
them in the next forward pass together with whatever is pending; otherwise run the model on the pending
tokens, mask its last logits with the state's mask (an O(1) lookup), take the argmax and move to the next
state. Decoding stops at EOS or at an accepting state with no continuation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..errors import CallmaybeError
from .masks import TokenIndex


class BudgetExhausted(CallmaybeError):
    """The token budget ran out before the call was complete."""


@dataclass
class Generation:
    """One decoded call: ``text`` (str), ``tokens`` (generated ids, forced included), counts, seconds."""

    text: str
    tokens: list[int]
    forward_passes: int
    chosen_tokens: int
    forced_tokens: int
    seconds: float
    trace: list[dict] = field(default_factory=list)


def _forward(model, ids: list[int], past):
    input_ids = torch.tensor([ids], dtype=torch.long)
    with torch.inference_mode():
        out = model(input_ids=input_ids, cache=past, use_cache=True)
    return out.logits[0, -1], out.cache


def generate(
    model, tokenizer, index: TokenIndex, prompt_ids: list[int], max_tokens: int = 256, trace: bool = False
) -> Generation:
    """Decode one call greedily under ``index``'s masks after ``prompt_ids``.

    ``max_tokens`` bounds the generated tokens (forced ones included). Raises BudgetExhausted when the call
    is not complete within it. Returns the generated text (UTF-8 of the tokens' bytes) and counts.
    """
    t0 = time.perf_counter()
    state = index.start
    pending = list(prompt_ids)
    past = None
    generated: list[int] = []
    data = bytearray()
    passes = chosen = forced = 0
    steps: list[dict] = []
    while True:
        text = index.forced_bytes(state)
        ids = tokenizer.encode(text.decode("utf-8"), add_special_tokens=False) if text else []
        if ids and index.extends_past(_state_after(index, state, ids[:-1]), len(index.token_bytes[ids[-1]])):
            # Token healing: the last forced token could merge with what follows (``fn_`` before
            # ``greet``), so leave it to the model, masked to tokens that start with it or extend it.
            ids = ids[:-1]
            text = b"".join(index.token_bytes[t] for t in ids)
        if ids:
            for tok in ids:
                nxt = index.next_state(state, tok)
                if nxt < 0:  # the tokenizer's encoding left the grammar: should not happen
                    raise CallmaybeError(f"forced text {text!r} does not tokenize within the grammar")
                state = nxt
                if trace:
                    steps.append({"step": len(generated), "kind": "forced", "token": tok,
                                  "text": tokenizer.decode([tok])})
                generated.append(tok)
            data += text
            pending += ids
            forced += len(ids)
            if len(generated) > max_tokens:
                raise BudgetExhausted(f"token budget of {max_tokens} exhausted before the call was complete")
            continue
        if index.is_terminal(state):
            break
        if len(generated) >= max_tokens:
            raise BudgetExhausted(f"token budget of {max_tokens} exhausted before the call was complete")
        logits, past = _forward(model, pending, past)
        passes += 1
        mask = index.mask(state)
        masked = torch.where(mask[: logits.shape[0]], logits, torch.tensor(float("-inf")))
        tok = int(torch.argmax(masked))
        if trace:
            probs = torch.softmax(logits.float(), dim=-1)
            top = torch.topk(probs, 3)
            steps.append({
                "step": len(generated), "kind": "chosen", "allowed": int(mask.sum()), "token": tok,
                "text": tokenizer.decode([tok]), "prob": float(probs[tok]),
                "top": [(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)],
            })
        chosen += 1
        if tok in index.eos_ids:
            break
        state = index.next_state(state, tok)
        generated.append(tok)
        data += index_bytes(index, tok)
        pending = [tok]
    return Generation(
        text=bytes(data).decode("utf-8", errors="replace"),
        tokens=generated,
        forward_passes=passes,
        chosen_tokens=chosen,
        forced_tokens=forced,
        seconds=time.perf_counter() - t0,
        trace=steps,
    )


def _state_after(index: TokenIndex, state: int, ids: list[int]) -> int:
    for tok in ids:
        state = index.next_state(state, tok)
    return state


def index_bytes(index: TokenIndex, token: int) -> bytes:
    """The bytes of ``token`` in the vocabulary the index was built on."""
    return index.token_bytes[token] or b""
