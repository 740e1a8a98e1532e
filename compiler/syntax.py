"""Regexes of JSON's structures (RFC 8259 objects and arrays) and of one whole call, in the canonical layout:
``", "`` between members and items, ``": "`` after keys, nothing else. Built from the regexes of the parts
(:mod:`.lexical` has the scalars); the schema compiler's nodes (:mod:`.nodes`) record their regex with these.
"""

from __future__ import annotations

from .lexical import alternation, escape, literal


def repeat(unit: str, lo: int, hi: int | None) -> str:
    """``(?:unit)`` repeated ``lo`` to ``hi`` times (``hi`` None: no upper bound)."""
    if hi is None:
        return f"(?:{unit})" + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}")
    if lo == hi:
        return f"(?:{unit}){{{lo}}}"
    return f"(?:{unit}){{{lo},{hi}}}"


def object_regex(members: list[tuple[str, str, bool]]) -> str:
    """The regex of an object whose members are ``(JSON-encoded key, value regex, required)``.

    The key is written as JSON text with its quotes (``'"a"'``); it is escaped here. Every subset of the
    optional members that keeps all required ones is allowed, in the given order, with ``", "`` between
    members. The first emitted member can only be one at or before the first required one; after it, each
    later member is either mandatory (``, K``) or optional (``(?:, K)?``). Size is O(n * first_required) in
    the number of members.
    """
    if not members:
        return r"\{\}"
    texts = [f"{escape(k)}: {v}" for k, v, _ in members]
    required = [r for _, _, r in members]

    def rest(i: int) -> str:
        return "".join(f", {texts[j]}" if required[j] else f"(?:, {texts[j]})?" for j in range(i, len(members)))

    first_required = required.index(True) if any(required) else len(members) - 1
    options = [texts[i] + rest(i + 1) for i in range(first_required + 1)]
    body = alternation(options)
    if not any(required):
        body = f"(?:{body})?"
    return r"\{" + body + r"\}"


def array_regex(prefix: list[str], rest: str | None, lo: int, hi: int | None) -> str:
    """The regex of an array of ``prefix`` items by position then ``rest`` items, ``lo``..``hi`` in all.

    ``prefix``: the regexes of the positional items; ``rest``: the regex of any later item (None: no more
    items); ``hi`` None: no upper bound.
    """
    cap = hi
    if rest is None:
        cap = len(prefix) if cap is None else min(cap, len(prefix))
    if not prefix and rest is not None:  # homogeneous: R(?:, R){lo-1,cap-1}
        if cap == 0:
            return r"\[\]"
        body = rest + repeat(f", {rest}", max(lo - 1, 0), None if cap is None else cap - 1)
        return r"\[" + (body if lo > 0 else f"(?:{body})?") + r"\]"
    count = cap if cap is not None else max(len(prefix), lo)
    body = f"(?:, {rest})*" if cap is None else ""
    for i in range(count - 1, -1, -1):
        element = prefix[i] if i < len(prefix) else rest
        piece = ("" if i == 0 else ", ") + element + body
        body = piece if i < lo else f"(?:{piece})?"
    return r"\[" + body + r"\]"


def map_regex(key: str, value: str) -> str:
    """The regex of an object of any number of ``key: value`` members (``key``, ``value``: regexes)."""
    pair = f"{key}: {value}"
    return r"\{(?:" + pair + "(?:, " + pair + r")*)?\}"


def call_regex(functions: list[tuple[str, str]], parameters_key: str = "parameters") -> str:
    """The regex of one whole call ``{"name": "<fn>", "parameters": {...}}``.

    ``functions`` holds ``(name, parameters regex)`` pairs; the name selects that function's parameters.
    ``parameters_key`` is the key that holds the arguments.
    """
    key = literal(parameters_key)
    branches = [f"{literal(name)}, {key}: {regex}" for name, regex in functions]
    return r'\{"name": ' + alternation(branches) + r"\}"
