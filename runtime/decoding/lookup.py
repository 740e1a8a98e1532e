"""Drafts for speculative decoding taken from the prompt itself (prompt-lookup, or n-gram, drafting).

Argument values are very often copied from the request ("Paris", an e-mail address, a date, a number). Where
the model must choose a token, :class:`PromptLookup` finds the most recent place in the prompt where the last
``n`` tokens of the call (chosen and forced ones alike; ``n`` = 3, then 2, then 1) occur, and proposes the up
to ``k`` tokens that follow them there. :func:`cut` then keeps the longest prefix of that draft the grammar
allows from the matcher's state (forced text inside it must be the forced tokens themselves), so the model
verifies only tokens it could pick (:meth:`~.decoder.Decoding.verify`, one forward pass for all of them).

Sources: A. Saxena, "Prompt Lookup Decoding" (2023, github.com/apoorvumang/prompt-lookup-decoding), and
transformers' ``prompt_lookup_num_tokens`` (its ``PromptLookupCandidateGenerator``); the verification is the
greedy case of speculative decoding (Leviathan et al., ICML 2023; Chen et al., 2023). Our own code.
"""

from __future__ import annotations

from ...core.errors import TokenNotAllowed
from .matcher import Matcher

#: The longest n-gram looked up (then shorter ones), and the most tokens a draft proposes (measured on the
#: public set and BFCL simple with Qwen2.5-Coder-1.5B in int8: docs/model.md).
NGRAM_MAX = 3
DRAFT_MAX = 8


class PromptLookup:
    """Where each n-gram (n <= ``ngram``) of ``ids`` last occurs, so a draft is one dict lookup per n.

    ``ids``: the prompt's token ids (a list of int); ``k``: the most tokens :meth:`propose` returns. Built once
    per call decoded (O(len(ids) * ngram), ~1 ms for a 1,000-token prompt)."""

    __slots__ = ("ids", "k", "ngram", "_after")

    def __init__(self, ids: list[int], k: int = DRAFT_MAX, ngram: int = NGRAM_MAX):
        self.ids, self.k, self.ngram = list(ids), k, ngram
        self._after: dict[tuple[int, ...], int] = {}  # n-gram -> the position after its last occurrence
        for n in range(1, ngram + 1):
            for end in range(n, len(self.ids)):  # an n-gram at the very end has nothing after it
                self._after[tuple(self.ids[end - n:end])] = end

    def propose(self, tail: list[int]) -> list[int]:
        """The up to ``k`` prompt tokens after the most recent occurrence of the last ``n`` tokens of ``tail``
        (the longest ``n`` <= ``ngram`` that occurs), or [] when not even its last token occurs."""
        for n in range(min(self.ngram, len(tail)), 0, -1):
            at = self._after.get(tuple(tail[-n:]))
            if at is not None:
                return self.ids[at:at + self.k]
        return []


def cut(matcher: Matcher, draft: list[int]) -> list[int]:
    """The longest prefix of ``draft`` that ``matcher`` could take from its state: every token allowed (the
    grammar and the token budget), and where the state forces text, exactly the forced tokens (as
    :meth:`~.matcher.Matcher.forced_tokens` tokenizes it; another spelling of the same bytes is cut, since
    decoding without a draft appends the forced tokens). No token after EOS. The matcher is left as it was
    (it is advanced, then rolled back)."""
    start, taken = len(matcher.tokens), 0
    try:
        while taken < len(draft) and not matcher.is_finished():
            forced = matcher.forced_tokens()
            if forced:
                if draft[taken:taken + len(forced)] != forced:
                    break
                for tok in forced:
                    matcher.advance(tok)
                taken += len(forced)
                continue
            try:
                matcher.advance(draft[taken])
            except TokenNotAllowed:
                break
            taken += 1
    finally:
        matcher.rollback(len(matcher.tokens) - start)
    return draft[:taken]
