"""Regexes of JSON's lexical pieces (RFC 8259) in interegular's dialect, and literal escaping.

* strings: any code point except ``"``, ``\\`` and U+0000-U+001F, or the escapes ``\\" \\\\ \\/ \\b \\f \\n \\r
  \\t \\uXXXX`` (:data:`STRING_CHAR`, :data:`STRING`);
* numbers: no leading zeros, optional fraction and exponent; the integer and fraction parts are capped at 15
  digits and the exponent at 2, so every number is a finite double and a model cannot run away
  (:data:`NUMBER`); integers have no fraction or exponent (:data:`INTEGER`).

For length-bounded strings each *decoded code point* must be one unit, so :data:`COUNTED_CHAR` reads a
surrogate-pair escape ``\\ud83d\\ude00`` as one unit and refuses lone surrogate escapes.
"""

from __future__ import annotations

import json
from typing import Any

STRING_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
STRING = '"' + STRING_CHAR + '*"'
_HEX = "[0-9a-fA-F]"
COUNTED_CHAR = (
    r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-CefEF]" + _HEX + "{3}|[dD][0-7]" + _HEX + "{2})"
    r"|\\u[dD][89abAB]" + _HEX + r"{2}\\u[dD][c-fC-F]" + _HEX + "{2})"
)
INTEGER = r"-?(?:0|[1-9][0-9]{0,14})"
FRACTION_EXPONENT = r"(?:\.[0-9]{1,15})?(?:[eE][+\-]?[0-9]{1,2})?"
NUMBER = INTEGER + FRACTION_EXPONENT
NONNEGATIVE_NUMBER = r"(?:0|[1-9][0-9]{0,14})" + FRACTION_EXPONENT
#: Numbers with an integral value written as floats (``3.0``, ``1.5e+16``, and more: a superset), which JSON
#: Schema counts as integers; only loose languages use it (the grammar writes integers without a fraction).
INTEGRAL_FLOAT = r"-?(?:0|[1-9][0-9]*)(?:\.0+|(?:\.[0-9]+)?[eE]\+?[0-9]+)"
BOOLEAN = "(?:true|false)"
NULL = "null"

_META = set("\\.^$|?*+()[]{}-/")


def escape(text: str) -> str:
    """Escape ``text`` so that interegular matches it literally.

    Regex metacharacters get a backslash; control characters become ``\\xNN``; anything else (including
    non-ASCII) stays as it is.
    """
    out = []
    for ch in text:
        if ch in _META:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def canonical(value: Any) -> str:
    """``value`` as canonical JSON text: one space after ``:`` and ``,``, non-ASCII kept as UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def literal(value: Any) -> str:
    """The regex of one JSON value written canonically."""
    return escape(canonical(value))


def alternation(parts: list[str]) -> str:
    """``(?:a|b|...)`` of distinct parts in first-seen order; a single part is returned as it is."""
    unique = list(dict.fromkeys(parts))
    if len(unique) == 1:
        return unique[0]
    return "(?:" + "|".join(unique) + ")"


def string_of(content: str) -> str:
    """The regex of a JSON string whose content (between the quotes) matches ``content``."""
    return '"' + content + '"'
