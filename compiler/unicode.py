"""Unicode property classes of patterns (``\\p{L}``, ``\\p{Letter}``, ``\\p{gc=Lu}``, ``\\p{Script=Greek}``) as
sets of code points: sorted disjoint intervals ``(lo, hi)`` (:mod:`.intervals`).

* General categories (ECMA-262 ``General_Category`` values and their aliases from Unicode's
  PropertyValueAliases.txt: ``L``/``Letter``, ``Lu``/``Uppercase_Letter``, ``LC``/``Cased_Letter``,
  ``Nd``/``digit`` ...) come from Python's :mod:`unicodedata` (its Unicode version: 14.0 on Python 3.11):
  one pass over the 1,114,112 code points, made once per process on the first use (~0.4 s) and kept in
  :data:`_CATEGORIES`;
* ``Any``, ``ASCII`` and ``Assigned`` (ECMA-262 binary properties) are defined directly;
* scripts (``Script=Greek``, ``sc=Greek``, ``Script_Extensions=Greek``, ``scx=Greek``, and a lone script name
  such as ``Greek``, which ECMA-262 does not allow but other engines read as the script) and the other binary
  properties (``Alphabetic``, ``White_Space``, ``Emoji`` ...) come from the ``regex`` package when it is
  installed (a dependency of ``transformers``): the runs its ``\\p{...}`` matches over a string of every
  code point, kept per name in :data:`_OTHER`.

:func:`property_set` raises :class:`UnknownProperty` for a name none of these knows.
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata

from .intervals import SURROGATES, Interval, complement, normalize

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

_NAME = re.compile(r"[A-Za-z0-9_]+(?:=[A-Za-z0-9_]+)?")
_LOCK = threading.Lock()
#: two-letter general category -> its code points (filled on first use, all categories at once).
_CATEGORIES: dict[str, list[Interval]] = {}
#: property text (as written between the braces) -> its code points, for names read through ``regex``.
_OTHER: dict[str, list[Interval]] = {}
_EVERY_CHAR: list[str] = []  # one string of every scalar value, for ``regex`` (made on first use)


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


def _through_regex(text: str) -> list[Interval] | None:
    """The code points that the ``regex`` package's ``\\p{text}`` matches, or None (no ``regex`` package, or
    a name it does not know)."""
    with _LOCK:
        if text in _OTHER:
            return _OTHER[text]
    try:
        import regex  # optional: installed with transformers
    except ImportError:
        return None
    try:
        rx = regex.compile(r"\p{" + text + "}+")
    except regex.error:
        return None
    with _LOCK:
        if not _EVERY_CHAR:
            lo, hi = SURROGATES
            _EVERY_CHAR.append("".join(map(chr, itertools.chain(range(lo), range(hi + 1, 0x110000)))))
        every = _EVERY_CHAR[0]
    gap = SURROGATES[1] - SURROGATES[0] + 1

    def code_point(i: int) -> int:  # index in ``every`` -> code point
        return i if i < SURROGATES[0] else i + gap

    runs = [(code_point(m.start()), code_point(m.end() - 1)) for m in rx.finditer(every)]
    with _LOCK:
        _OTHER[text] = runs
    return runs


def property_set(text: str) -> list[Interval]:
    """The code points of ``\\p{text}`` (``text``: what is written between the braces), sorted disjoint
    intervals; surrogates are included only where the property names them (``Cs``).

    Raises UnknownProperty for a name that is malformed or not known (see the module docstring)."""
    if not _NAME.fullmatch(text):
        raise UnknownProperty(f"malformed Unicode property {text!r}")
    name, _, value = text.partition("=")
    if value:
        if name in ("General_Category", "gc"):
            runs = general_category(value)
            if runs is None:
                raise UnknownProperty(f"unknown General_Category value {value!r}")
            return runs
        if name not in ("Script", "sc", "Script_Extensions", "scx"):
            raise UnknownProperty(f"unknown Unicode property {name!r}")
    else:
        runs = general_category(name)
        if runs is not None:
            return runs
        if name == "Any":
            return [(0, 0x10FFFF)]
        if name == "ASCII":
            return [(0, 0x7F)]
        if name == "Assigned":
            return complement(general_category("Cn"))
    runs = _through_regex(text)
    if runs is None:
        raise UnknownProperty(f"unknown Unicode property {text!r} (general categories, Any, ASCII and Assigned "
                              "are known; scripts and other properties need the regex package)")
    return runs
