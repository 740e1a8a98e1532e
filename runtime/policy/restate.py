"""Decode an unstated optional string argument again, limited to text the request states.

Small models often write the default from a parameter's description where the request gives another value:
``"unit": "cm"`` for "a radius of 4 inches", ``"root_type": "real"`` for "find all the roots". Grounding
(:mod:`~callmaybe.runtime.policy.grounding`) finds such a value is not stated and would leave the argument out; that
loses the value the request did give. Before it does, :func:`restate` goes back to where the value starts and
decodes it again: at each step it takes the most likely token the index allows (among the
``RESTATE_CANDIDATES`` best) whose text keeps the string's contents, case-folded (NFKC), a substring of the
case-folded request, and it closes the string only on whole words of the request. The restated value
replaces the model's own when the model gave that path a probability of at least ``RESTATE_MIN_PROB``: the
product of its tokens' probabilities under the masked distribution the decoder takes its argmax from (the
softmax over the allowed tokens). Otherwise the argument is left out as before.

The threshold is a round 10%: the model must itself have put real weight on a value the request states. On
the 63 BFCL simple cases where grounding drops a value (Qwen2.5-Coder-0.5B), the restated paths had 0.29
("all") and 0.24 ("inches"), both right, and at most 0.063 on every other case, where a request substring
would have been wrong (a prototype without the whole-word rule). The full rule on those 63 cases: 2 won,
none lost.

Costs one forward pass over the request and the call up to the value (the catalog prefix comes from the
prefix cache) and one per restated token but the last; the search stops as soon as the path's probability is
below the threshold. Only calls with an unstated optional string pay it.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass

import torch

from ..decoding.decoder import PrefixCache, forward
from .grounding import fold
from ..decoding.loops import StringTracker
from ..decoding.masks import TokenIndex
from ..decoding.matcher import Matcher
from ..decoding.profile import Profile

RESTATE_MIN_PROB = 0.1
RESTATE_CANDIDATES = 200
RESTATE_MAX_TOKENS = 16

_VALUE = re.compile(rb'\s*"([^"\\]*)("?)', re.S)


@dataclass
class Restated:
    """The outcome of decoding a value again: ``value`` (str, or None when no stated value was found or its
    probability fell below ``min_prob`` on the way), its ``probability`` (0..1, the product over its tokens;
    0.0 without a value), ``tokens`` (ids from the opening quote's token to the closing quote's) and the
    ``forward_passes`` spent either way."""

    value: str | None
    probability: float
    tokens: list[int]
    forward_passes: int


def value_start(data: bytes, key: str) -> int | None:
    """Byte offset in generated call ``data`` just after the ``:`` of top-level argument ``key`` (depth 2:
    ``{"name": ..., "parameters": {key: ...}}``), or None when it is not there. Strings and escapes are
    followed (:class:`~..decoding.loops.StringTracker`), so a key-like text inside a value or a nested object's key
    of the same name never matches."""
    strings = StringTracker()
    depth, start, last = 0, 0, None
    for i in range(len(data)):
        was_inside = strings.inside
        strings.feed(data[i : i + 1])
        if strings.inside:
            if not was_inside:
                start = i + 1
            continue
        if was_inside:  # a string just closed
            last = (start, i, depth)
            continue
        b = data[i]
        if b in b"{[":
            depth += 1
        elif b in b"}]":
            depth -= 1
        elif b == 0x3A and depth == 2 and last is not None and last[2] == 2:
            try:
                name = json.loads(b'"' + data[last[0]:last[1]] + b'"')
            except ValueError:
                name = None
            if name == key:
                return i + 1
    return None


def grounded_prefix(text: bytes, said: str) -> bool | None:
    """Whether ``text`` (the bytes after the key's ``:``) is the start of a string value the request states;
    ``said`` is the request already :func:`~.grounding.fold`-ed (it is asked once per candidate token).

    Returns None when it is not (escapes are never restated), False when the string is still open, True when
    it is closed. The contents, decoded and :func:`~.grounding.fold`-ed, must occur in the folded request at
    the start of a word (so "in" can grow into "inches", but " inches" after "4" is refused at once);
    closed, they must be non-empty, begin and end with a letter or digit, and occur there as whole words
    ("all" in "find all the roots", not "hi" in "high"). Combining marks count as part of a word.
    """
    if not text.strip():
        return False
    m = _VALUE.match(text)
    if m is None or (m.end() < len(text) and not m.group(2)):
        return None
    contents = fold(m.group(1).decode("utf-8", errors="ignore"))  # a cut character waits for its end
    if contents and not _word_char(contents[0]):
        return None
    if not m.group(2):
        return False if _occurs(contents, said, whole=False) else None
    if contents and _word_char(contents[-1]) and _occurs(contents, said, whole=True):
        return True
    return None


def _word_char(ch: str) -> bool:
    """A letter, a digit or a combining mark (Devanagari vowel signs, the dot of a folded "İ")."""
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


def _occurs(part: str, text: str, whole: bool) -> bool:
    """True when ``part`` occurs in ``text`` at the start of a word (no word character right before it) and,
    with ``whole``, also at the end of one."""
    start = text.find(part)
    while start >= 0:
        end = start + len(part)
        if (start == 0 or not _word_char(text[start - 1])) and \
                (not whole or end == len(text) or not _word_char(text[end])):
            return True
        start = text.find(part, start + 1)
    return False


def restate(model, index: TokenIndex, prompt_ids: list[int], tokens: list[int], key: str, request: str,
            prefix: PrefixCache | None = None, prefix_len: int = 0,
            min_prob: float = RESTATE_MIN_PROB, profile: Profile | None = None) -> Restated | None:
    """Decode argument ``key`` of the generated call ``tokens`` again, limited to text ``request`` states.

    ``tokens`` are the call's generated ids after ``prompt_ids``; the value is decoded again from the token
    boundary after ``"key":``, under the index's full mask (the token budget is not applied: the call is
    already complete). Returns None, with no forward pass spent, when the key is not in the call or no token
    boundary falls after its colon; otherwise a :class:`Restated` whose ``value`` is None when no allowed
    candidate keeps the value stated, when ``RESTATE_MAX_TOKENS`` tokens do not close it, or as soon as the
    path's probability falls below ``min_prob`` (it can only fall further).
    """
    data = b"".join(index.token_bytes[t] for t in tokens)
    offset = value_start(data, key)
    if offset is None:
        return None
    cut, size = 0, 0
    while size < offset and cut < len(tokens):
        size += len(index.token_bytes[tokens[cut]])
        cut += 1
    if size != offset:
        return None
    matcher = Matcher(index)  # no budget: the call is already complete
    for tok in tokens:
        matcher.advance(tok)
    matcher.rollback(len(tokens) - cut)  # back to where the value starts
    ids = list(prompt_ids) + list(tokens[:cut])
    floor = math.log(min_prob) if min_prob > 0 else -math.inf
    past, cached = prefix.lookup(ids, prefix_len) if prefix is not None else (None, 0)
    passes, text, logp, chosen = 0, b"", 0.0, []
    try:
        logits, past = forward(model, ids[cached:], past, profile, "restate pass")
        passes = 1
        eos, said = set(index.eos_ids), fold(request)
        for _ in range(RESTATE_MAX_TOKENS):
            logprobs = torch.log_softmax(matcher.apply(logits).float(), dim=-1)
            top = torch.topk(logprobs, min(RESTATE_CANDIDATES, logprobs.shape[0]))
            pick, closed = None, False
            for lp, tok in zip(top.values.tolist(), top.indices.tolist()):
                if lp == -math.inf:
                    break
                if tok in eos:
                    continue
                status = grounded_prefix(text + index.token_bytes[tok], said)
                if status is not None:
                    pick, closed = (tok, lp), status
                    break
            if pick is None or logp + pick[1] < floor:
                break
            tok, lp = pick
            logp += lp
            chosen.append(tok)
            text += index.token_bytes[tok]
            matcher.advance(tok)
            if closed:
                value = _VALUE.match(text).group(1).decode("utf-8")
                return Restated(value, math.exp(logp), chosen, passes)
            logits, past = forward(model, [tok], past, profile, "restate pass")
            passes += 1
        return Restated(None, 0.0, chosen, passes)
    finally:
        if prefix is not None:
            prefix.release()
