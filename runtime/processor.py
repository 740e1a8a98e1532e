"""A transformers ``LogitsProcessor`` on the same index, for users of ``model.generate``.

It keeps one DFA state per batch row, advances it by the token generated at each step (read from
``input_ids`` after the prompt) and masks the scores with the state's mask: an O(1) lookup, the same as
:func:`~callmaybe.runtime.decoder.generate`. Given the tokenizer, it also allows only the canonical tokens of
forced text and applies the token budget, exactly as our loop does, so greedy ``generate`` returns the same
call; it still asks the model at every step (``generate`` cannot append several tokens in one pass).
The masks live on the CPU and are moved to the scores' device (a GPU model works too).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from .decoder import _forced_ids
from .masks import TokenIndex


class IndexLogitsProcessor(LogitsProcessor):
    """Constrain ``model.generate`` to the calls of a compiled index.

    ``prompt_length``: number of prompt tokens in each row of ``input_ids`` (generation starts after it).
    ``tokenizer`` (optional): force the canonical tokens of forced text, as our loop does.
    ``max_tokens`` (optional): keep every call completable within this many generated tokens.
    Rows that reach a terminal state are forced to EOS.
    """

    def __init__(self, index: TokenIndex, prompt_length: int, tokenizer=None, max_tokens: int | None = None):
        self.index = index
        self.prompt_length = prompt_length
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.states: list[int] | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = input_ids.shape[0]
        done = input_ids.shape[1] - self.prompt_length
        if self.states is None:
            self.states = [self.index.start] * batch
        elif done > 0:
            last = input_ids[:, -1].tolist()
            for row in range(batch):
                s = self.states[row]
                if s >= 0 and last[row] not in self.index.eos_ids:
                    self.states[row] = self.index.next_state(s, last[row])
        vocab_size = scores.shape[1]
        left = 1 << 30 if self.max_tokens is None else self.max_tokens - done
        out = torch.full_like(scores, float("-inf"))
        for row, s in enumerate(self.states):
            if s < 0 or self.index.is_terminal(s):
                out[row, self.index.eos_ids[0]] = 0.0
                continue
            forced = _forced_ids(self.index, self.tokenizer, s, left) if self.tokenizer is not None else []
            if forced:
                out[row, forced[0]] = scores[row, forced[0]]
                continue
            if self.index.budget_is_loose(left):
                out[row] = self.index.apply(s, scores[row])
            else:
                mask = self.index.budget_mask(s, left)[:vocab_size]
                out[row] = torch.where(mask.to(scores.device), scores[row], out[row])
        return out
