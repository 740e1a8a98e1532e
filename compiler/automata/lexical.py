"""Regexes of JSON's lexical pieces (RFC 8259) in interegular's dialect, and literal escaping.

* strings in their canonical spelling (:data:`STRING_CHAR`, :data:`STRING`): any code point as itself except
  ``"``, ``\\`` and U+0000-U+001F, which are written as Python's ``json.dumps`` writes them (``\\" \\\\ \\b \\f
  \\n \\r \\t``, the other controls ``\\u00XX`` in lower-case hex); no ``\\/``, no other ``\\uXXXX``. Each string
  value has one text, so the difference of two languages (``not``, ``oneOf``, ``if``/``else``) is the
  difference of their values: a language subtracted need hold each value's canonical text only;
* numbers (:data:`NUMBER`, the forms of :mod:`..schema.numbers`): an integer of any number of digits; a point form
  ``I.F`` with at most 16 digits before the point (Python writes every double below 1e16 so) and, after
  ``0.``, at most 20 zeros before the first nonzero digit (or zeros only); an exponent form, either of them
  then ``e X``, whose value is at most the largest double 1.7976931348623157e308 (so nothing reads as
  infinity: after one digit before the point the exponent goes up to that value, after more digits up to
  292 and after ``0.`` up to 308); integers (:data:`INTEGER`) have no fraction or exponent and any number
  of digits (runaway digits are the runtime's token budget's concern). ``-0`` is written too (valid JSON: the
  value 0, as ``-0.0`` and ``-0e0`` are).

For length-bounded strings each *decoded code point* must be one unit: in the canonical spelling each
character of :data:`STRING_CHAR` is one code point, so :data:`COUNTED_CHAR` is the same regex.
"""

from __future__ import annotations

import json
from typing import Any

#: One character of a JSON string's text, canonical: itself, a short escape, or a control's ``\\u00XX``
#: (lower-case, as ``json.dumps`` writes it; U+0008-U+000A, U+000C and U+000D have short escapes).
STRING_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))'
STRING = '"' + STRING_CHAR + '*"'
#: One decoded code point of a counted string (``minLength``/``maxLength``): one :data:`STRING_CHAR`.
COUNTED_CHAR = STRING_CHAR
INTEGER = r"-?(?:0|[1-9][0-9]*)"


def fraction_at_most(digits: str) -> str:
    """The regex of the nonempty digit strings F with 0.F <= 0.``digits`` (``digits``: no trailing zeros)."""
    rest = "0*"
    for i in range(len(digits) - 1, 0, -1):  # the digits after position i, possibly none
        d = int(digits[i])
        lower = "" if d == 0 else ("0" if d == 1 else f"[0-{d - 1}]") + "[0-9]*|"
        rest = f"(?:{lower}{digits[i]}{rest})?"
    d = int(digits[0])
    lower = "" if d == 0 else ("0" if d == 1 else f"[0-{d - 1}]") + "[0-9]*|"
    return f"(?:{lower}{digits[0]}{rest})"


_POINT = r"(?:[1-9][0-9]{0,15}\.[0-9]+|0\.(?:0{0,20}[1-9][0-9]*|0+))"
# exponents after one nonzero digit: up to 307, 308 while the value is at most 1.7976931348623157e308 (the
# largest double); after 2 to 16 integer digits up to 292 and after 0. up to 308 (the value below 1e308);
# after a zero mantissa any
_EXPONENT = (r"[1-9](?:\.[0-9]+)?[eE](?:-[0-9]+|\+?0*(?:[0-9]{1,2}|[12][0-9]{2}|30[0-7]))"
             r"|1(?:\." + fraction_at_most("7976931348623157") + r")?[eE]\+?0*308"
             r"|[1-9][0-9]{1,15}(?:\.[0-9]+)?[eE](?:-[0-9]+|\+?0*(?:[0-9]{1,2}|1[0-9]{2}|2[0-8][0-9]|29[0-2]))"
             r"|0\.0{0,20}[1-9][0-9]*[eE](?:-[0-9]+|\+?0*(?:[0-9]{1,2}|[12][0-9]{2}|30[0-8]))"
             r"|0(?:\.0+)?[eE][+\-]?[0-9]+")
NUMBER = r"-?(?:0|[1-9][0-9]*|" + _POINT + "|" + _EXPONENT + ")"


def _near_integers() -> str:
    """Point forms whose double may be integral: after ``d`` integer digits the fraction holds only zeros, or
    begins with ``16 - d`` zeros or nines (a double near 10**(d-1) has a spacing above 10**(d-17), so any
    fraction it rounds away starts so); after 16 digits any fraction (the spacing reaches 2 past 2**53)."""
    parts = [r"0\.(?:0+|9{15}[0-9]*)"]
    for d in range(1, 17):
        k = 16 - d
        fraction = "[0-9]+" if k == 0 else f"(?:0+|0{{{k}}}[0-9]*|9{{{k}}}[0-9]*)"
        parts.append(f"[1-9][0-9]{{{d - 1}}}\\.{fraction}" if d > 1 else f"[1-9]\\.{fraction}")
    return "(?:" + "|".join(parts) + ")"


#: Numbers that json.loads may read as an integral value, written other than as integers, and more: point forms
#: near an integer (``3.0``, ``0.99999999999999999999``) and every exponent form (``1.5e+16``, ``150e-1``,
#: ``1e-400``, which reads as 0.0). JSON Schema counts them as integers; only loose languages use it (the
#: grammar writes integers without a fraction or exponent).
LOOSE_INTEGRAL = r"-?(?:" + _near_integers() + r"|[0-9]+(?:\.[0-9]+)?[eE][+\-]?[0-9]+)"
#: Numbers in an exponent form after a mantissa other than one nonzero digit (``12.5e-3``, ``0.5e1``, ``0e5``),
#: of any value: a superset of the exponent forms only unbounded numbers are written in (bounded ones take
#: ``1.25e-2``); only loose languages use it (:func:`~..schema.scalars.loose_value`).
WIDE_EXPONENT = r"-?(?:[1-9][0-9]+(?:\.[0-9]+)?|0(?:\.[0-9]+)?)[eE][+\-]?[0-9]+"
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
