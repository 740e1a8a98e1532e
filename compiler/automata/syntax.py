"""Regexes of JSON's structures (RFC 8259 objects and arrays) and of one whole call, in the canonical layout:
``", "`` between members and items, ``": "`` after keys, nothing else. Built from the regexes of the parts
(:mod:`.lexical` has the scalars); the schema compiler's nodes (:mod:`.nodes`) record their regex with these.
"""

from __future__ import annotations

from .lexical import alternation, escape, literal


#: A part's regex longer than this many characters is written once: where a structure would repeat it (the
#: items of an array, the members of a map, an object's members after an optional one), the structure's
#: regex is a description instead (``\[<items 0..: then (?:R)>\]``, ``\{<members (?:K: V)>\}``, ``\{<members
#: in order: (?:"a": A)?, (?:"b": B)>\}``), so that nested structures do not double their regex at every level
#: (an array of arrays 16 deep wrote a 4.7 MB regex into its index header; 40 deep took 8 GB). Above a
#: number's regex (about 1,100 characters), so that arrays, maps and objects of scalars keep a true regex.
SHARED_TEXT = 2000


def shared(text: str) -> bool:
    """Whether a structure writes ``text`` once, in a description, rather than repeat it (:data:`SHARED_TEXT`)."""
    return len(text) > SHARED_TEXT


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
    the number of members; when that would repeat a long value regex (:func:`object_repeats_long`), a
    description that writes each member once.
    """
    if not members:
        return r"\{\}"
    texts = [f"{escape(k)}: {v}" for k, v, _ in members]
    required = [r for _, _, r in members]
    if object_repeats_long(members):  # each member once, in order, "?" after the optional ones
        return r"\{<members in order: " + ", ".join(f"(?:{t})" + ("" if r else "?") for t, r in zip(texts, required)) \
            + r">\}"

    def rest(i: int) -> str:
        return "".join(f", {texts[j]}" if required[j] else f"(?:, {texts[j]})?" for j in range(i, len(members)))

    first_required = required.index(True) if any(required) else len(members) - 1
    options = [texts[i] + rest(i + 1) for i in range(first_required + 1)]
    body = alternation(options)
    if not any(required):
        body = f"(?:{body})?"
    return r"\{" + body + r"\}"


def object_repeats_long(members: list[tuple[str, str, bool]]) -> bool:
    """Whether :func:`object_regex` would repeat a member's value regex that is :func:`shared` (a member after
    an optional one before the first required member appears in several alternatives)."""
    required = [r for _, _, r in members]
    first_required = required.index(True) if any(required) else len(members) - 1
    return first_required > 0 and any(shared(v) for _, v, _ in members[1:])


def array_repeats_long(prefix: list[str], rest: str | None, lo: int, hi: int | None) -> bool:
    """Whether :func:`array_regex` would repeat a ``rest`` item regex that is :func:`shared`."""
    if rest is None or not shared(rest):
        return False
    if not prefix:  # R(?:, R){lo-1,hi-1}
        return hi != 0
    count = hi if hi is not None else max(len(prefix), lo)
    return max(0, count - len(prefix)) + (hi is None) > 1


def array_regex(prefix: list[str], rest: str | None, lo: int, hi: int | None) -> str:
    r"""The regex of an array of ``prefix`` items by position then ``rest`` items, ``lo``..``hi`` in all.

    ``prefix``: the regexes of the positional items; ``rest``: the regex of any later item (None: no more
    items); ``hi`` None: no upper bound. When it would repeat a long ``rest`` (:func:`array_repeats_long`),
    a description: ``\[<items lo..hi: (?:P1), (?:P2), then (?:R)>\]``.
    """
    if array_repeats_long(prefix, rest, lo, hi):
        head = "".join(f"(?:{p}), " for p in prefix)
        return r"\[<items " + f"{lo}..{'' if hi is None else hi}: {head}then (?:{rest})" + r">\]"
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
    r"""The regex of an object of any number of ``key: value`` members (``key``, ``value``: regexes); a
    description ``\{<members (?:K: V)>\}`` when the pair is :func:`shared`."""
    return members_regex(f"{key}: {value}")


def members_regex(pair: str) -> str:
    r"""The regex of an object of any number of members, each matching ``pair`` (``K: V``); a description
    ``\{<members (?:pair)>\}`` when ``pair`` is :func:`shared`."""
    if shared(pair):
        return r"\{<members (?:" + pair + r")>\}"
    return r"\{(?:" + pair + "(?:, " + pair + r")*)?\}"


def call_regex(functions: list[tuple[str, str]], parameters_key: str = "parameters") -> str:
    """The regex of one whole call ``{"name": "<fn>", "parameters": {...}}``.

    ``functions`` holds ``(name, parameters regex)`` pairs; the name selects that function's parameters.
    ``parameters_key`` is the key that holds the arguments.
    """
    key = literal(parameters_key)
    branches = [f"{literal(name)}, {key}: {regex}" for name, regex in functions]
    return r'\{"name": ' + alternation(branches) + r"\}"
