"""A call written as text inside a text answer: where it starts, whether it is still forming.

Small models that answer in text often go on to write the call they mean as JSON, in their template's shape
(``{"name": "get_weather", "arguments": {...}}``), bare or in a code fence (three backquotes, an optional
info word such as ``json``, a newline). The shape this module finds is that opening: an optional fence, then
``{``, then the key ``"name"``, its colon and, as a JSON string, the name of one of the catalog's functions,
with any whitespace between (what Qwen2.5's and SmolLM2's templates show and what Qwen2.5-Coder-1.5B wrote in
10 of 13 declined answers of the issue 29 break test). A JSON object whose "name" is anything else (an example
person the user asked for) is text. Nothing here reads a word of the request: the shape is JSON punctuation,
one key and the catalog's own names, the same in every language.

:func:`find_shape` tells the text answer how much of its end to hold back (a shape may still be forming) and
where a complete one starts; :class:`~.turns.TurnDecoding` turns it into a call under ``tool_choice="auto"`` or
leaves it out of the answer otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

#: How far back (characters), beyond the longest function name, a shape's start is looked for: a fence, an info
#: word, the key and the whitespace between the parts fit in it; a shape spread wider is not one.
SHAPE_REACH = 48
_SPACE = " \t\r\n"
_KEY = '"name"'


@dataclass(frozen=True)
class Shape:
    """``start``: the character offset in the text where a call shape begins (its fence or its ``{``);
    ``complete``: the shape's opening is all there (``{"name": "<function>"``), else it may still become one."""

    start: int
    complete: bool


def find_shape(text: str, names: Iterable[str]) -> Shape | None:
    """The earliest call shape (module docstring) of a function named in ``names`` that starts in the last
    :data:`SHAPE_REACH` characters of ``text`` (plus the longest name's length) and is complete or may still be
    completed by what follows; None when there is none."""
    names = tuple(names)
    reach = SHAPE_REACH + max((len(name) for name in names), default=0)
    for start in range(max(0, len(text) - reach), len(text)):
        if text[start] not in "`{":
            continue
        state = _match(text, start, names)
        if state is not None:
            return Shape(start, state)
    return None


#: What a step of :func:`_match` returns when the text ends inside the shape (it may still become one) or
#: leaves it (it is none); else the position after the part it read.
_ENDS, _NONE = -1, -2


def _match(text: str, i: int, names: tuple[str, ...]) -> bool | None:
    """True: ``text[i:]`` begins with a whole call shape of one of ``names``; False: it is a proper prefix of
    one (it may still become one); None: neither."""
    for step in (_fence, _key):
        i = step(text, i)
        if i < 0:
            return False if i == _ENDS else None
    return _name(text, i, names)


def _fence(text: str, i: int) -> int:
    """Past an optional code fence (three backquotes, an info word, a newline) and the whitespace after it."""
    if text[i] != "`":
        return i
    n = len(text)
    for _ in range(3):
        if i == n:
            return _ENDS
        if text[i] != "`":
            return _NONE
        i += 1
    while i < n and text[i].isascii() and text[i].isalnum():  # the info word
        i += 1
    if i == n:
        return _ENDS
    if text[i] != "\n":
        return _NONE
    i = _skip_space(text, i + 1)
    return _ENDS if i == n else i


def _key(text: str, i: int) -> int:
    """Past ``{``, the key ``"name"``, its colon and the whitespace between them and after."""
    if text[i] != "{":
        return _NONE
    i = _skip_space(text, i + 1)
    for ch in _KEY:
        if i == len(text):
            return _ENDS
        if text[i] != ch:
            return _NONE
        i += 1
    i = _skip_space(text, i)
    if i == len(text):
        return _ENDS
    if text[i] != ":":
        return _NONE
    i = _skip_space(text, i + 1)
    return _ENDS if i == len(text) else i


def _name(text: str, i: int, names: tuple[str, ...]) -> bool | None:
    """The function's name as a JSON string at ``i``: True when it is one of ``names``, False while what is
    there may still become one, None otherwise."""
    if text[i] != '"':
        return None
    end = text.find('"', i + 1)
    if end < 0:  # the name so far: a call while it may still be one of the catalog's
        value = text[i + 1:]
        return False if any(name.startswith(value) for name in names) else None
    return True if text[i + 1:end] in names else None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i
