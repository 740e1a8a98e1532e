"""A transformers ``LogitsProcessor`` on the same index, for users of ``model.generate``.

It keeps one :class:`~.matcher.Matcher` per batch row, advances it by the token generated at each step (read
from ``input_ids`` after the prompt) and masks the scores with its mask: an O(1) lookup, the same as
:func:`~callmaybe.runtime.decoder.generate`. Given the tokenizer, it also allows only the canonical tokens of
forced text, and it applies the token budget, exactly as our loop does, so greedy ``generate`` returns the same
call; it still asks the model at every step (``generate`` cannot append several tokens in one pass).
The masks live on the CPU and are moved to the scores' device (a GPU model works too).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from .masks import TokenIndex
from .matcher import Matcher


class IndexLogitsProcessor(LogitsProcessor):
    """Constrain ``model.generate`` to the calls of a compiled index.

    ``prompt_length``: number of prompt tokens in each row of ``input_ids`` (generation starts after it).
    ``tokenizer`` (optional): force the canonical tokens of forced text, as our loop does.
    ``max_tokens`` (optional): keep every call completable within this many generated tokens.
    Rows whose call is finished are forced to EOS. Scores: float (batch, vocab_size); returns a new tensor.
    """

    def __init__(self, index: TokenIndex, prompt_length: int, tokenizer=None, max_tokens: int | None = None):
        self.index = index
        self.prompt_length = prompt_length
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.matchers: list[Matcher] | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.matchers is None:
            self.matchers = [Matcher(self.index, self.max_tokens, self.tokenizer) for _ in range(input_ids.shape[0])]
        elif input_ids.shape[1] > self.prompt_length:
            for matcher, token in zip(self.matchers, input_ids[:, -1].tolist()):
                if not matcher.is_finished():
                    matcher.advance(token)
        out = torch.full_like(scores, float("-inf"))
        for row, matcher in enumerate(self.matchers):
            if matcher.is_finished():
                out[row, self.index.eos_ids[0]] = 0.0
                continue
            forced = matcher.forced_tokens()
            if forced:
                out[row, forced[0]] = scores[row, forced[0]]
                continue
            out[row] = matcher.apply(scores[row])
        return out
