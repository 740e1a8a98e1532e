"""How a parallel turn's calls are settled at its end, once every call is decoded.

Small models write several calls well but not always one call per value. At the turn's end
(:func:`settle`), in this order:

1. **values joined with "and"**: a string argument whose value joins two values the request states with
   "and" (``"Egypt and Turkey"``, ``"rock and jazz"``) becomes two calls, one per value, the other arguments
   unchanged (BFCL parallel_34 and parallel_43: the model joins them whatever the system message says). A
   pair the model reads as one name is left whole: ``pair`` gives the probability the model writes the second
   value after ``{"<key>": "<first> and`` with no request in sight (:func:`pair_probability`), and a pair at
   :data:`ONE_NAME_MIN` or above is one name. Measured with Qwen2.5-Coder-1.5B (int8): rock and roll 0.84,
   Bosnia and Herzegovina 0.996, Procter and Gamble 0.999, Research and Development 0.76, Smith and Associates
   0.31, Minneapolis and St. Paul 0.50, basketball and football 0.11; against Egypt and Turkey 0.0007, rock
   and jazz 0.0009, Paris and Rome 0.008, Italian and Japanese 0.028. Only a call with exactly one such
   argument is split, only when its two values have as many words each (in "Italian and Japanese
   restaurants" the last word belongs to both, and the model cannot tell: it puts p 0.91 on the value ending
   after "pizza" in "pizza and pasta places"), and only when both new calls match the function's schema.
2. **joined first call**: the first call is left out when three calls or more were made and later calls of
   its function spell what it joined (:func:`~.evidence.joined`: 510 for "5,10 and 15" beside 5, 10 and 15).
3. **drafts**: a call that leaves out optional arguments to which two other calls of its function, equal
   to it on every argument it gives, give different values, is one of them written early (BFCL parallel_72:
   ``integrate(f, -1, 3)`` before the same call with ``method`` "trapezoid" and "simpson"): left out, unless
   the left-out arguments' defaults are known (``default``, or a description's "Default is 'trapezoid'") and
   neither of the other calls gives them (``{"city": "Paris"}`` beside 3 and 5 ``days`` of default 1 asks for
   one day).
4. **repeats**: a call equal to an earlier one (name and arguments) is left out.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

from ...core.catalog import Function
from .evidence import defaults, joined
from .grounding import fold, is_stated, normalize, words
from .relevance import continuation_logprob
from ..decoding.turn import ToolCall

#: A pair of values joined with "and" whose second value the model writes after the first with at least this
#: probability (no request in sight) is one name, not two values (see the module docstring).
ONE_NAME_MIN = 0.05
_AND = re.compile(r"\s+(?:and|&)\s+")


def settle(calls: list[ToolCall], grounding: list[dict], functions: dict[str, Function], request: str,
           pair: Callable[[str, str, str], float] | None = None) -> tuple[list[ToolCall], list[dict], int]:
    """The calls of a parallel turn (and their grounding notes, one dict per call) as the turn reports them
    (see the module docstring), and the forward passes ``pair`` ran. ``functions`` maps a name to its
    function; ``request`` is the text the calls answer; ``pair(key, first, second)`` is
    :func:`pair_probability` bound to the model (None: no value is split; each pair is asked once)."""
    calls, grounding = list(calls), list(grounding)
    asked: dict[tuple[str, str, str], float] = {}

    def once(*key: str) -> float:
        if key not in asked:
            asked[key] = pair(*key)
        return asked[key]

    if pair is not None:
        split_calls, split_notes = [], []
        for call, notes in zip(calls, grounding):
            parts, note = split(call, functions[call.name], request, once)
            split_calls += parts
            split_notes += [{k: dict(v) if isinstance(v, dict) else v for k, v in {**notes, **note}.items()}
                            for _ in parts]
        calls, grounding = split_calls, split_notes
    if len(calls) > 2:
        first = calls[0]
        later = [c.arguments for c in calls[1:] if c.name == first.name]
        if not joined(first.arguments, later, request).keep:
            del calls[0], grounding[0]
    canonical = [{k: _canonical(v) for k, v in c.arguments.items()} for c in calls]
    dropped = drafts(calls, functions, canonical)
    seen: set[tuple[str, str]] = set()
    out_calls, out_notes = [], []
    for i, call in enumerate(calls):
        key = (call.name, json.dumps(canonical[i], sort_keys=True))
        if i not in dropped and key not in seen:
            seen.add(key)
            out_calls.append(call)
            out_notes.append(grounding[i])
    return out_calls, out_notes, len(asked)


def split(call: ToolCall, fn: Function, request: str,
          pair: Callable[[str, str, str], float]) -> tuple[list[ToolCall], dict]:
    """``call`` as the calls it stands for: two when exactly one of its string arguments joins two different
    values of as many words each, both stated in the request, with "and" and the model does not read the pair
    as one name (``pair`` below :data:`ONE_NAME_MIN`), else ``[call]``; and the grounding note of the split
    argument ({} when none)."""
    from ..decoding.calls import schema_error

    candidates = []
    for key, value in call.arguments.items():
        if not isinstance(value, str) or "," in value or ";" in value:
            continue
        parts = [p.strip() for p in _AND.split(value.strip())]
        if len(parts) == 2 and all(parts) and normalize(parts[0]) != normalize(parts[1]) \
                and len(words(parts[0])) == len(words(parts[1])) and all(is_stated(p, request) for p in parts):
            candidates.append((key, parts))
    if len(candidates) != 1:
        return [call], {}
    key, (first, second) = candidates[0]
    p = pair(key, first, second)
    if not p < ONE_NAME_MIN:  # one name (or no answer: NaN)
        return [call], {}
    calls = [ToolCall(call.name, {**call.arguments, key: part}, call.model_arguments) for part in (first, second)]
    if any(schema_error(c.arguments, fn.parameters) is not None for c in calls):
        return [call], {}
    note = {key: {"action": "split", "evidence": f"{call.arguments[key]!r} joins two values the request states "
                                                 f"(p({second!r} after {first!r} and) {p:.3f} < {ONE_NAME_MIN})"}}
    return calls, note


def drafts(calls: list[ToolCall], functions: dict[str, Function],
           canonical: list[dict[str, str]] | None = None) -> set[int]:
    """Positions of the calls that are drafts of two others (see the module docstring, rule 3).
    ``canonical``: each call's arguments as :func:`_canonical` strings (made here when not given)."""
    if canonical is None:
        canonical = [{k: _canonical(v) for k, v in c.arguments.items()} for c in calls]
    out = set()
    for i, c in enumerate(calls):
        schema = functions[c.name].parameters
        required = set(schema.get("required", []))
        mine = canonical[i]
        alternatives: dict[frozenset, list[dict]] = {}
        for j, d in enumerate(calls):
            theirs = canonical[j]
            if j == i or d.name != c.name or len(theirs) <= len(mine) \
                    or any(theirs.get(k) != v for k, v in mine.items()):
                continue  # not a call giving every argument of this one the same value, and more
            extra = frozenset(theirs) - frozenset(mine)
            if not extra & required:
                alternatives.setdefault(extra, []).append({k: d.arguments[k] for k in extra})
        for extra, values in alternatives.items():
            if len({_canonical(v) for v in values}) < 2:
                continue
            known = {k: _defaults(schema, k) for k in extra}
            if all(known.values()) and not any(all(_folded(v[k]) in known[k] for k in extra) for v in values):
                continue  # the defaults are known and no other call gives them: the call asks for them
            out.add(i)
            break
    return out


def _defaults(schema: dict, key: str) -> set[str]:
    """The default of the argument ``key`` of a function's ``parameters`` schema as :func:`_folded` text (its
    ``default`` keyword, or what its description names as the default: :func:`~.evidence.defaults`);
    empty when none is known."""
    prop = (schema.get("properties") or {}).get(key)
    if not isinstance(prop, dict):
        return set()
    found = set(defaults(prop))
    if "default" in prop and not isinstance(prop["default"], str):
        found.add(_folded(prop["default"]))
    return found


def _folded(value: Any) -> str:
    """A value as :func:`_defaults` compares it: a string folded and stripped, anything else canonical."""
    return fold(value).strip() if isinstance(value, str) else _canonical(value)


def _canonical(value: Any) -> str:
    """A JSON value as one comparable string: 2 and 2.0 alike (integers stay exact at any size), keys
    sorted."""
    def norm(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        return v
    return json.dumps(norm(value), sort_keys=True, ensure_ascii=False)


def pair_probability(model, tokenizer, key: str, first: str, second: str) -> float:
    """The probability ``model`` (a transformers causal LM) gives ``second`` (all its tokens, after a space)
    after the raw text ``{"<key>": "<first> and``: how much the pair is one name ("rock and roll") rather than
    two values ("rock and jazz"). One forward pass over a dozen tokens, no KV cache."""
    head = "{" + json.dumps(key, ensure_ascii=False) + ": " + json.dumps(first, ensure_ascii=False)[:-1] + " and"
    return math.exp(continuation_logprob(model, tokenizer, head, " " + second))
