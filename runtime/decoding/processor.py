"""A transformers ``LogitsProcessor`` on the same index, for users of ``model.generate``.

It keeps one :class:`~.matcher.Matcher` per batch row, advances it by the token generated at each step (read
from ``input_ids`` after the prompt) and masks the scores with its mask: an O(1) lookup, the same as
:func:`~callmaybe.runtime.decoding.decoder.generate`. Given the tokenizer, it also allows only the canonical tokens of
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
    Rows whose call is finished are forced to EOS. Each call syncs every row's matcher with the tokens in
    ``input_ids`` after the prompt (advancing, or rolling back where they diverge), so reusing the processor or
    a generation strategy that rewrites tokens keeps it right. Scores: float (batch, vocab_size); returns a new
    tensor. Raises TokenNotAllowed when ``input_ids`` holds a token the mask did not allow.
    """

    def __init__(self, index: TokenIndex, prompt_length: int, tokenizer=None, max_tokens: int | None = None):
        self.index = index
        self.prompt_length = prompt_length
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.matchers: list[Matcher] | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.matchers is None or len(self.matchers) != input_ids.shape[0]:
            self.matchers = [Matcher(self.index, self.max_tokens, self.tokenizer) for _ in range(input_ids.shape[0])]
        generated = input_ids.shape[1] - self.prompt_length
        for row, matcher in enumerate(self.matchers):
            if len(matcher.tokens) + 1 == generated and not matcher.finished:  # the usual step: one new token
                matcher.advance(int(input_ids[row, -1]))
            elif len(matcher.tokens) != generated:
                _sync(matcher, input_ids[row, self.prompt_length :].tolist())
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


def _sync(matcher: Matcher, generated: list[int]) -> None:
    """Bring ``matcher`` to the tokens ``generated`` after the prompt: roll back to the common prefix, then
    advance the rest (a finished call ignores what follows its EOS: padding)."""
    common = 0
    for have, want in zip(matcher.tokens, generated):
        if have != want:
            break
        common += 1
    matcher.rollback(len(matcher.tokens) - common)
    for token in generated[common:]:
        if matcher.finished:
            break
        matcher.advance(token)
