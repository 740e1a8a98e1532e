"""How much the request supports a value the model wrote: the value's pointwise mutual information with it.

    PMI(value) = log p(value | the chat) - log p(value | the chat with the request's text taken out)

(nats, summed over the tokens that carry the value's bytes; the call's text before the value, its name and
earlier arguments, is in both contexts). A value written from the request should gain from it; a guess
should not. :func:`support` measures it for chosen arguments of a decoded call, in any language, with no word
list.

Measured as a replacement for the word rules of grounding (``bench/value_pmi.py`` over the calls of ``callmaybe
eval`` on BFCL live's development part, even ids; figures in docs/call-or-answer.md, "Ninth session"), it did
not beat them: the word rules left out 18 values that should go and 8 that should stay (net +10 values);
keeping in addition every value whose PMI reaches 2 nats, 11 and 4 (+7); 0 nats, 6 and 0 (+6). Guesses that
copy the request (a return time equal to the departure the request gives, PMI +5 to +7) gain as much as
reformatted dates (+4 to +10), and right ``enum`` labels can score below zero (``quality: "high"`` -0.32). It
is used where the word rules have nothing to go on: an ``enum`` label of a parameter whose ``default`` is none
of its labels (:func:`~.evidence.chosen_label`), which BFCL live's ``cmd_controller.execute`` guesses on 20
requests (``unit: "seconds"``, PMI -0.18 to +0.10). :data:`SUPPORT_PMI_MIN` is above all of them.

Costs two forward passes over the request, the rest of the chat after the shared prefix and the call (the
catalog's prefix comes from the prefix cache); only calls with such a label the request does not state pay it.
"""

from __future__ import annotations

import json

import torch

from ..decoding.decoder import PrefixCache, forward
from ..decoding.profile import Profile
from .restate import value_start

#: An ``enum`` label whose PMI with the request (nats) reaches this is the request's (kept): above every label
#: no request asked for on BFCL live's development part (at most +0.10 nats; module docstring).
SUPPORT_PMI_MIN = 0.5


def is_label(value, schema) -> bool:
    """True when ``value`` is one of the ``enum`` labels of the parameter ``schema`` and the parameter's
    ``default`` is none of them (a dict; anything else: False): the only values :func:`support` weighs (see
    the module docstring)."""
    labels = schema.get("enum") if isinstance(schema, dict) else None
    if not isinstance(labels, list) or isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    return value in labels and "default" in schema and schema["default"] not in labels


def value_span(data: bytes, key: str) -> tuple[int, int] | None:
    """The byte span of top-level argument ``key``'s value in the call's bytes ``data`` (leading spaces left
    out), or None when the key is not there or its value does not parse."""
    start = value_start(data, key)
    if start is None:
        return None
    text = data[start:].decode("utf-8", errors="replace")
    stripped = text.lstrip()
    try:
        _, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return None
    lead = len(text) - len(stripped)
    begin = start + len(text[:lead].encode("utf-8"))
    return begin, begin + len(stripped[:end].encode("utf-8"))


def without_request(context: list[int], token_bytes, request: str) -> list[int] | None:
    """``context`` with the tokens that spell ``request`` taken out (its last occurrence, where its bytes begin and
    end on token boundaries), or None when they cannot be found so. ``token_bytes``: bytes per token id
    (None for a special token: no bytes)."""
    want = request.encode("utf-8")
    if not want:
        return None
    pieces = [(token_bytes[t] or b"") if t < len(token_bytes) else b"" for t in context]
    starts, pos = {}, 0  # byte offset -> the first token starting there
    for i, piece in enumerate(pieces):
        starts.setdefault(pos, i)
        pos += len(piece)
    starts.setdefault(pos, len(pieces))
    data = b"".join(pieces)
    at = data.rfind(want)
    while at >= 0:
        if at in starts and at + len(want) in starts:
            return context[:starts[at]] + context[starts[at + len(want)]:]
        at = data.rfind(want, 0, at + len(want) - 1)
    return None


def support(model, token_bytes, context: list[int], tokens: list[int], request: str, keys: list[str],
            prefix: PrefixCache | None = None, prefix_len: int = 0,
            profile: Profile | None = None) -> dict[str, float]:
    """The PMI (nats, module docstring) of each of ``keys``' values in the decoded call ``tokens`` (ids after
    ``context``, the prompt up to the call) with ``request``: two forward passes, float32 log-softmax. Keys whose
    value cannot be found, and every key when the request cannot be taken out of ``context``, are left out of
    the result (empty: no pass run)."""
    data = b"".join(token_bytes[t] or b"" for t in tokens)
    ends, pos = [], 0
    for t in tokens:
        pos += len(token_bytes[t] or b"")
        ends.append(pos)
    spans = {}
    for key in keys:
        span = value_span(data, key)
        if span is not None:
            a, b = span
            spans[key] = [i for i, e in enumerate(ends) if e > a and (e - len(token_bytes[tokens[i]] or b"")) < b]
    emptied = without_request(context, token_bytes, request)
    if not spans or emptied is None:
        return {}
    sums = []
    for ctx in (context, emptied):
        ids = list(ctx) + list(tokens)
        past, cached = prefix.lookup(ids, min(prefix_len, len(ctx))) if prefix is not None else (None, 0)
        try:
            wanted = sorted({i for toks in spans.values() for i in toks})
            keep = [len(ctx) + i - 1 - cached for i in wanted]
            logits, _ = forward(model, ids[cached:], past, profile, "support pass", keep=keep)
            logp = torch.log_softmax(logits.float(), -1)
            chosen = logp[torch.arange(len(wanted)), torch.tensor([tokens[i] for i in wanted])].tolist()
            sums.append(dict(zip(wanted, chosen)))
        finally:
            if prefix is not None:
                prefix.release()
    return {key: sum(sums[0][i] for i in toks) - sum(sums[1][i] for i in toks) for key, toks in spans.items()}
