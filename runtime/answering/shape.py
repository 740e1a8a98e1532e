"""A call written as text inside a text answer: where it starts, whether it is still forming.

Small models that answer in text often go on to write the call they mean as JSON, in their template's shape
(``{"name": "get_weather", "arguments": {...}}``), bare or in a code fence (three backquotes, an optional
info word such as ``json``, a newline). The shape this module finds is that opening: an optional fence, then
``{``, then the key ``"name"`` and its colon, with any whitespace between (what Qwen2.5's and SmolLM2's
templates show and what Qwen2.5-Coder-1.5B wrote in 10 of 13 declined answers of the issue 29 break test).
Nothing here reads a word of the request: the shape is JSON punctuation and one key, the same in every
language.

:func:`find_shape` tells the text answer how much of its end to hold back (a shape may still be forming) and
where a complete one starts; :class:`~.turns.TurnDecoding` turns it into a call under ``tool_choice="auto"`` or
leaves it out of the answer otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How far back (characters) a shape's start is looked for: a fence, an info word and the whitespace between
#: its parts fit in it; a shape spread wider is not one.
SHAPE_REACH = 48
_SPACE = " \t\r\n"
_KEY = '"name"'


@dataclass(frozen=True)
class Shape:
    """``start``: the character offset in the text where a call shape begins (its fence or its ``{``);
    ``complete``: the shape's opening is all there (``{"name":``), else it may still become one."""

    start: int
    complete: bool


def find_shape(text: str) -> Shape | None:
    """The earliest call shape (module docstring) in the last :data:`SHAPE_REACH` characters of ``text``
    that is complete or may still be completed by what follows; None when there is none."""
    for start in range(max(0, len(text) - SHAPE_REACH), len(text)):
        if text[start] not in "`{":
            continue
        state = _match(text, start)
        if state is not None:
            return Shape(start, state)
    return None


def _match(text: str, i: int) -> bool | None:
    """True: ``text[i:]`` begins with a whole call shape; False: it is a proper prefix of one (it may still
    become one); None: neither."""
    n = len(text)
    if text[i] == "`":
        for _ in range(3):
            if i == n:
                return False
            if text[i] != "`":
                return None
            i += 1
        while i < n and text[i].isascii() and text[i].isalnum():  # the info word
            i += 1
        if i == n:
            return False
        if text[i] != "\n":
            return None
        i = _skip_space(text, i + 1)
        if i == n:
            return False
    if text[i] != "{":
        return None
    i = _skip_space(text, i + 1)
    for ch in _KEY:
        if i == n:
            return False
        if text[i] != ch:
            return None
        i += 1
    i = _skip_space(text, i)
    if i == n:
        return False
    return True if text[i] == ":" else None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i
