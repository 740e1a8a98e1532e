"""Unicode property classes of patterns (``\\p{L}``, ``\\p{Letter}``, ``\\p{gc=Lu}``, ``\\p{Script=Greek}``) as
sets of code points: sorted disjoint intervals ``(lo, hi)`` (:mod:`~callmaybe.core.intervals`).

* General categories and ``Any``, ``ASCII``, ``Assigned`` come from :mod:`callmaybe.core.unicode` (Python's
  :mod:`unicodedata`), which the check after generation reads too;
* scripts (``Script=Greek``, ``sc=Greek``, ``Script_Extensions=Greek``, ``scx=Greek``, and a lone script name
  such as ``Greek``, which ECMA-262 does not allow but other engines read as the script) and the other binary
  properties (``Alphabetic``, ``White_Space``, ``Emoji`` ...) come from the ``regex`` package when it is
  installed (a dependency of ``transformers``): the runs its ``\\p{...}`` matches over a string of every
  code point, kept per name in :data:`_OTHER`.

:func:`property_set` raises :class:`UnknownProperty` for a name none of these knows.
"""

from __future__ import annotations

import itertools
import threading

from ...core.intervals import SURROGATES, Interval
from ...core.unicode import UnknownProperty, basic_property

__all__ = ["UnknownProperty", "property_set"]

_LOCK = threading.Lock()
#: property text (as written between the braces) -> its code points, for names read through ``regex``.
_OTHER: dict[str, list[Interval]] = {}
_EVERY_CHAR: list[str] = []  # one string of every scalar value, for ``regex`` (made on first use)

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
    runs = basic_property(text)
    if runs is not None:
        return runs
    name, _, value = text.partition("=")
    if value and name not in ("Script", "sc", "Script_Extensions", "scx"):
        raise UnknownProperty(f"unknown Unicode property {name!r}")
    runs = _through_regex(text)
    if runs is None:
        raise UnknownProperty(f"unknown Unicode property {text!r} (general categories, Any, ASCII and Assigned "
                              "are known; scripts and other properties need the regex package)")
    return runs
