"""Unicode property classes of ECMA-262 patterns (``\\p{L}``, ``\\p{Letter}``, ``\\p{gc=Lu}``) as sets of code
points: sorted disjoint intervals ``(lo, hi)`` (:mod:`.intervals`).

General categories (ECMA-262 ``General_Category`` values and their aliases from Unicode's
PropertyValueAliases.txt: ``L``/``Letter``, ``Lu``/``Uppercase_Letter``, ``LC``/``Cased_Letter``,
``Nd``/``digit`` ...) come from Python's :mod:`unicodedata` (its Unicode version: 14.0 on Python 3.11): one
pass over the 1,114,112 code points, made once per process on the first use (~0.4 s) and kept in
:data:`_CATEGORIES`; ``Any``, ``ASCII`` and ``Assigned`` (ECMA-262 binary properties) are defined directly.
The compiler adds scripts and the other binary properties (``compiler.automata.unicode``); the check of values after
generation reads these (:mod:`.patterns`).
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata

from .intervals import Interval, complement, normalize

#: ECMA-262 General_Category values: every accepted name -> the two-letter categories it covers.
_GC_NAMES: dict[str, tuple[str, ...]] = {}
for _names, _cats in (
    (("C", "Other"), ("Cc", "Cf", "Cn", "Co", "Cs")), (("Cc", "Control", "cntrl"), ("Cc",)),
    (("Cf", "Format"), ("Cf",)), (("Cn", "Unassigned"), ("Cn",)), (("Co", "Private_Use"), ("Co",)),
    (("Cs", "Surrogate"), ("Cs",)),
    (("L", "Letter"), ("Ll", "Lm", "Lo", "Lt", "Lu")), (("LC", "Cased_Letter"), ("Ll", "Lt", "Lu")),
    (("Ll", "Lowercase_Letter"), ("Ll",)), (("Lm", "Modifier_Letter"), ("Lm",)),
    (("Lo", "Other_Letter"), ("Lo",)), (("Lt", "Titlecase_Letter"), ("Lt",)),
    (("Lu", "Uppercase_Letter"), ("Lu",)),
    (("M", "Mark", "Combining_Mark"), ("Mc", "Me", "Mn")), (("Mc", "Spacing_Mark"), ("Mc",)),
    (("Me", "Enclosing_Mark"), ("Me",)), (("Mn", "Nonspacing_Mark"), ("Mn",)),
    (("N", "Number"), ("Nd", "Nl", "No")), (("Nd", "Decimal_Number", "digit"), ("Nd",)),
    (("Nl", "Letter_Number"), ("Nl",)), (("No", "Other_Number"), ("No",)),
    (("P", "Punctuation", "punct"), ("Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps")),
    (("Pc", "Connector_Punctuation"), ("Pc",)), (("Pd", "Dash_Punctuation"), ("Pd",)),
    (("Pe", "Close_Punctuation"), ("Pe",)), (("Pf", "Final_Punctuation"), ("Pf",)),
    (("Pi", "Initial_Punctuation"), ("Pi",)), (("Po", "Other_Punctuation"), ("Po",)),
    (("Ps", "Open_Punctuation"), ("Ps",)),
    (("S", "Symbol"), ("Sc", "Sk", "Sm", "So")), (("Sc", "Currency_Symbol"), ("Sc",)),
    (("Sk", "Modifier_Symbol"), ("Sk",)), (("Sm", "Math_Symbol"), ("Sm",)), (("So", "Other_Symbol"), ("So",)),
    (("Z", "Separator"), ("Zl", "Zp", "Zs")), (("Zl", "Line_Separator"), ("Zl",)),
    (("Zp", "Paragraph_Separator"), ("Zp",)), (("Zs", "Space_Separator"), ("Zs",)),
):
    for _name in _names:
        _GC_NAMES[_name] = _cats

NAME = re.compile(r"[A-Za-z0-9_]+(?:=[A-Za-z0-9_]+)?")
_LOCK = threading.Lock()
#: two-letter general category -> its code points (filled on first use, all categories at once).
_CATEGORIES: dict[str, list[Interval]] = {}


class UnknownProperty(ValueError):
    """A ``\\p{...}`` name that no table here knows."""


def _categories() -> dict[str, list[Interval]]:
    """Every general category's intervals (one pass over all code points with :func:`unicodedata.category`)."""
    with _LOCK:
        if not _CATEGORIES:
            cats = list(map(unicodedata.category, map(chr, range(0x110000))))
            runs: dict[str, list[Interval]] = {}
            start = 0
            for cat, group in itertools.groupby(cats):
                n = sum(1 for _ in group)
                runs.setdefault(cat, []).append((start, start + n - 1))
                start += n
            _CATEGORIES.update(runs)
        return _CATEGORIES


def general_category(name: str) -> list[Interval] | None:
    """The code points of the General_Category value ``name`` (``L``, ``Letter``, ``Lu`` ...), or None when
    ``name`` is not one."""
    cats = _GC_NAMES.get(name)
    if cats is None:
        return None
    table = _categories()
    return normalize(run for c in cats for run in table.get(c, ()))


def basic_property(text: str) -> list[Interval] | None:
    """The code points of ``\\p{text}`` (``text``: what is written between the braces) for a general category
    (``L``, ``gc=Lu``, ``General_Category=Letter``) or ``Any``, ``ASCII``, ``Assigned``; None for any other
    well-formed name (a script, another binary property). Raises UnknownProperty for a malformed name or an
    unknown General_Category value."""
    if not NAME.fullmatch(text):
        raise UnknownProperty(f"malformed Unicode property {text!r}")
    name, _, value = text.partition("=")
    if value:
        if name in ("General_Category", "gc"):
            runs = general_category(value)
            if runs is None:
                raise UnknownProperty(f"unknown General_Category value {value!r}")
            return runs
        return None
    runs = general_category(name)
    if runs is not None:
        return runs
    if name == "Any":
        return [(0, 0x10FFFF)]
    if name == "ASCII":
        return [(0, 0x7F)]
    if name == "Assigned":
        return complement(general_category("Cn"))
    return None
