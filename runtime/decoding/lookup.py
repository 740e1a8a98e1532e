"""Drafts for speculative decoding taken from the prompt itself (prompt-lookup, or n-gram, drafting).

Argument values are very often copied from the request ("Paris", an e-mail address, a date, a number). Where
the model must choose a token, :class:`PromptLookup` finds the most recent place in the prompt where the bytes
of the call's last ``n`` tokens (chosen and forced ones alike; ``n`` = 3, then 2, then 1) occur, and proposes
the up to ``k`` tokens that follow them there. :func:`cut` then keeps the longest prefix of that draft the grammar
allows from the matcher's state (forced text inside it must be the forced tokens themselves), so the model
verifies only tokens it could pick (:meth:`~.decoder.Decoding.verify`, one forward pass for all of them).

Two drafts come from the grammar rather than the prompt, so that the forced text between two values rides in
the pass that writes the first: :func:`closing` (where the grammar cuts a copied value, or :func:`boundary`
stops it at punctuation that ends a value, the draft goes on with the value's closer and the text forced after
it) and :func:`healed` (the forced text token healing left to the model: the space after ``"a":``). Without
them each value's end cost a pass of its own (a forced chunk) and each value's start another (the space).

Sources: A. Saxena, "Prompt Lookup Decoding" (2023, github.com/apoorvumang/prompt-lookup-decoding), and
transformers' ``prompt_lookup_num_tokens`` (its ``PromptLookupCandidateGenerator``); the verification is the
greedy case of speculative decoding (Leviathan et al., ICML 2023; Chen et al., 2023). Our own code.
"""

from __future__ import annotations

from bisect import bisect_left

from ...core.errors import TokenNotAllowed
from .matcher import Matcher

#: The most tail tokens matched (then fewer), and the most tokens a draft proposes (measured on the public set
#: and BFCL simple with Qwen2.5-Coder-1.5B in int8: docs/model.md).
NGRAM_MAX = 3
DRAFT_MAX = 8
#: The bytes that close a JSON value, in the order :func:`closing` tries them: a string's quote, then the
#: separator before the next member, then the ends of an object and of an array.
CLOSERS = (b'"', b",", b"}", b"]")


class PromptLookup:
    """The prompt as one byte string, to find where the call's last tokens were written before.

    ``ids``: the prompt's token ids (the catalog listing too: function names are copied from it; the request
    comes later, so its occurrences are found first); ``token_bytes``: each
    id's bytes (None for a control token, which nothing matches across); ``tokenizer``: anything with
    ``encode(text, add_special_tokens=False) -> list[int]``, to draft the rest of a prompt token a match ends
    inside of (None: such a match drafts nothing); ``k``: the most tokens :meth:`propose` returns.

    Matching bytes, not token ids: a value is tokenized otherwise inside JSON than in the request (" shrek"
    after a space there, ``"`` then "sh", "rek" in the call; " San", " Francisco" there, "San" after the quote
    here), so the call's tail is looked up as text. Built once per call (O(prompt bytes))."""

    __slots__ = ("ids", "k", "ngram", "text", "ends", "token_bytes", "_pieces", "_tokenizer")

    def __init__(self, ids: list[int], token_bytes, tokenizer=None, k: int = DRAFT_MAX, ngram: int = NGRAM_MAX):
        self.ids, self.k, self.ngram, self._tokenizer = list(ids), k, ngram, tokenizer
        self.token_bytes = token_bytes
        self._pieces = [token_bytes[t] if 0 <= t < len(token_bytes) and token_bytes[t] is not None else b"\0"
                        for t in self.ids]  # a control token: a NUL byte, which no JSON text holds
        self.text = b"".join(self._pieces)
        self.ends: list[int] = []  # the byte offset where each prompt token ends
        offset = 0
        for piece in self._pieces:
            offset += len(piece)
            self.ends.append(offset)

    def propose(self, tail: list[int]) -> list[int]:
        """The up to ``k`` tokens the prompt writes after the most recent occurrence of the bytes of the last
        ``n`` tokens of ``tail`` (``n`` = ``ngram`` down to 1, the first whose occurrence drafts something), or
        [] when none does.
        A tail whose bytes hold no letter or digit (a quote, a colon, a space) drafts nothing: it occurs
        everywhere. A match that ends inside a prompt token drafts the rest of that token, tokenized."""
        for n in range(min(self.ngram, len(tail)), 0, -1):
            suffix = b"".join(self.token_bytes[t] or b"" for t in tail[-n:])
            if not any(c >= 0x80 or chr(c).isalnum() for c in suffix):
                continue
            at = self.text.rfind(suffix)
            draft = self._after(at + len(suffix)) if at >= 0 else []
            if draft:
                return draft
        return []

    def _after(self, offset: int) -> list[int]:
        """The up to ``k`` tokens that write the prompt's bytes from ``offset`` on."""
        i = bisect_left(self.ends, offset)  # the token that ends at or after offset
        if i >= len(self.ids):
            return []
        if self.ends[i] == offset:
            return self.ids[i + 1:i + 1 + self.k]
        if self._tokenizer is None:
            return []
        rest = self._pieces[i][len(self._pieces[i]) - (self.ends[i] - offset):]
        try:
            head = self._tokenizer.encode(rest.decode("utf-8"), add_special_tokens=False)
        except UnicodeDecodeError:  # a match inside a character's bytes
            return []
        return (head + self.ids[i + 1:i + 1 + self.k])[:self.k]


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


def closing(matcher: Matcher, tokenizer) -> list[int]:
    """Tokens that end the value being written at ``matcher``'s state and write the text forced after it, for a
    draft copied from the prompt that the grammar cut (:func:`cut`: the prompt goes on where the call's value
    may not, ``" and 345"`` after ``265``): the first of :data:`CLOSERS` the state allows after which text is
    forced or the call may end, that byte and the forced bytes encoded by ``tokenizer`` (as the model writes them:
    ``",`` then `` "b":`` rather than ``"`` then ``,``), as far as :func:`cut` takes them. [] when no closer
    fits (the matcher is left as it was).

    Where the model closes the value there, one pass takes the value, its closer and the forced text, and gives
    the model's next token; without it the closer is the model's own token and the forced text after it needs a
    pass of its own (a forced chunk)."""
    index = matcher.index
    for closer in CLOSERS:
        state = index.state_after(matcher.state, closer)
        if state < 0:
            continue
        forced = index.forced_bytes(state)
        if not forced and not index.is_accepting(state):
            continue
        try:
            ids = tokenizer.encode((closer + forced).decode("utf-8"), add_special_tokens=False)
        except UnicodeDecodeError:
            continue
        taken = cut(matcher, ids)
        if taken:
            return taken
    return []


def boundary(draft: list[int], token_bytes) -> int:
    """Where a draft copied from the prompt should stop for :func:`closing`: the index of the first token that
    starts with an ASCII punctuation byte followed by a space, another punctuation byte or a control token
    (``'`` then the end of the request, ``?`` then the end, ``"`` then a space), or ``len(draft)``. Such a byte
    ends a value more often than it continues one (``'hello'``, ``Paris?``); one followed by a letter or a
    digit (``I'm``, ``john@x.com``, ``3.5``) does not stop the draft. A wrong stop costs the draft tokens after
    it, never a different output (the model verifies every token)."""
    pieces = [token_bytes[t] if 0 <= t < len(token_bytes) and token_bytes[t] is not None else b"\0"
              for t in draft]
    for i, piece in enumerate(pieces):
        if not piece or not _punctuation(piece[0]):
            continue
        after = piece[1:2] or (pieces[i + 1][:1] if i + 1 < len(pieces) else b"")
        if after and (after in (b" ", b"\0") or _punctuation(after[0])):
            return i
    return len(draft)


def _punctuation(byte: int) -> bool:
    """An ASCII byte that is not a letter, a digit, a space or a control byte."""
    return 0x21 <= byte < 0x7F and not chr(byte).isalnum()


def healed(matcher: Matcher, tokenizer) -> list[int]:
    """A draft of the forced text that token healing left to the model (:meth:`~.masks.TokenIndex.forced_tokens`
    appends ``"a":`` but not the space after it, which `` "`` or `` 1`` may extend): the state's forced bytes
    encoded by ``tokenizer`` (`` "`` before a string, `` {"`` and the first key before an object, `` `` before a
    number), as far as :func:`cut` takes them; [] when nothing is forced. Where the model extends the text
    otherwise the draft costs nothing but its place in the pass, and its own token comes from that pass."""
    forced = matcher.index.forced_bytes(matcher.state)
    if not forced:
        return []
    try:
        ids = tokenizer.encode(forced.decode("utf-8"), add_special_tokens=False)
    except UnicodeDecodeError:
        return []
    return cut(matcher, ids)


def choice_points(matcher: Matcher, draft: list[int]) -> list[int]:
    """The offsets in a pass over ``pending + draft`` whose logits :meth:`~.decoder.Decoding.verify` can use:
    0 (after the pending tokens) and ``j`` (after ``draft[j - 1]``) wherever the state after ``draft[:j]``
    leaves the choice to the model, that is neither forces text nor ends the call. The logits of the other
    positions are never read (a forced token is taken as forced), so the output layer (151,936 x 1,536 for
    Qwen) runs only on these. ``draft`` must be one :func:`cut` returned from the matcher's state; the matcher
    is left as it was."""
    points = [0]
    start = len(matcher.tokens)
    try:
        for j, tok in enumerate(draft, 1):
            matcher.advance(tok)
            if not matcher.is_finished() and not matcher.forced_tokens():
                points.append(j)
    finally:
        matcher.rollback(len(matcher.tokens) - start)
    return points
