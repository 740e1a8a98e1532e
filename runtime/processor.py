"""A transformers ``LogitsProcessor`` on the same index, for users of ``model.generate``.

It keeps one DFA state per batch row, advances it by the token generated at each step (read from
``input_ids`` after the prompt) and masks the scores with the state's mask: an O(1) lookup, the same as
:func:`~callmaybe.runtime.decoder.generate`. Unlike that loop it cannot append forced text in one pass, so the
model is asked at every step; with greedy search the text is the same.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from .masks import TokenIndex


class IndexLogitsProcessor(LogitsProcessor):
    """Constrain ``model.generate`` to the calls of a compiled index.

    ``prompt_length``: number of prompt tokens in each row of ``input_ids`` (generation starts after it).
    Rows that reach a terminal state are forced to EOS.
    """

    def __init__(self, index: TokenIndex, prompt_length: int):
        self.index = index
        self.prompt_length = prompt_length
        self.states: list[int] | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = input_ids.shape[0]
        if self.states is None:
            self.states = [self.index.start] * batch
        elif input_ids.shape[1] > self.prompt_length:
            last = input_ids[:, -1].tolist()
            for row in range(batch):
                s = self.states[row]
                if s >= 0 and last[row] not in self.index.eos_ids:
                    self.states[row] = self.index.next_state(s, last[row])
        width = scores.shape[1]
        out = torch.full_like(scores, float("-inf"))
        for row, s in enumerate(self.states):
            if s < 0 or self.index.is_terminal(s):
                out[row, self.index.eos_ids[0]] = 0.0
                continue
            mask = self.index.mask(s)[:width]
            out[row] = torch.where(mask, scores[row], out[row])
        return out
