"""Whether a string value writes, in another format, what the request states: a date, a time, a number, a
unit or a code.

A model asked for ``"date"`` in ``YYYY-MM-DD`` rightly writes ``"2021-03-03"`` for "March 3, 2021", and
``"km"`` for "kilometers"; neither is written in the request, yet both come from it. :func:`reformat`
splits the value into numbers and words and accounts for each piece:

* a number: one the request states as digits ("3", "1,000", "2.5"), in words ("two", "twenty-one", "third"),
  as a month ("March" -> 3) or as a clock hour ("2 pm" -> 14); zeros are format padding ("14:00") and count
  once another number is accounted for;
* a word: a word of the request up to an ending (:func:`~.grounding.close`); a month or number written out
  whose number the request states ("March" for "3/3/2021"); a shortening of a request word (:func:`shortens`:
  "sec" for "seconds", "hrs" for "hours", "km" for "kilometers") or the initials of consecutive request
  words ("NY" for "New York", "USA" for "United States of America", small linking
  words skipped); an ordinal ending after a number ("3rd"); the ISO 8601 separators "T" and "Z" between
  numbers; a single letter that begins a request word, beside another piece accounted for ("h" in "km/h"
  for "kilometers per hour").

Month names, number words and the 12-hour clock are English: the requests this was measured on are.
Codes that need knowledge rather than letters ("GBP" for "pound") are not recognised.
"""

from __future__ import annotations

import re
from collections import Counter

from .grounding import close, fold, words

MONTHS = {name: n for n, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
     ("november", "nov"), ("december", "dec")], 1) for name in names}
UNITS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                    "thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}
TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
ORDINALS = {w: n for n, w in enumerate("first second third fourth fifth sixth seventh eighth ninth tenth "
                                       "eleventh twelfth thirteenth fourteenth fifteenth sixteenth "
                                       "seventeenth eighteenth nineteenth".split(), 1)}
ORDINALS.update({w: 10 * n for n, w in enumerate(
    "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split(), 2)})
SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12}
SI_PREFIXES = {"kilo": "k", "centi": "c", "milli": "m", "micro": "u", "nano": "n", "mega": "m", "giga": "g",
               "tera": "t", "deci": "d", "hecto": "h"}
LINKING = {"of", "and", "the", "for", "de", "du", "la", "del", "da"}
ORDINAL_ENDINGS = {"st", "nd", "rd", "th"}
ISO_SEPARATORS = {"t", "z"}

_NUMERAL = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|\d+(?:\.\d+)?")
_CLOCK = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\b")
_PIECE = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")


def request_numbers(request: str) -> set[float]:
    """Every number ``request`` states, as a magnitude: numerals (``1,000`` -> 1000, ``1,234.56``), numbers
    and ordinals in words
    (``twenty-one`` -> 21, also 20 and 1), months (``March`` -> 3) and clock hours (``2:30 pm`` -> 14, 30)."""
    return {abs(n) for n in number_mentions(request)}


def number_mentions(request: str, every_form: bool = False) -> Counter[float]:
    """How many times ``request`` states each number, read as :func:`request_numbers` reads them ("a = 1 ...
    c = 1" states 1 twice), except that a numeral after a minus sign that starts a word is counted as its
    negative ("b = -3" or "b = \u22123" states -3, not 3; "1-5" states 5). A number written in digits is
    counted by its digits only: in "the first one has a = 1", "first" and "one" are words, not values; a
    clock hour adds its 24-hour number only where that differs ("2 pm" states 2 and 14, "10 am" 10 once).
    With ``every_form``, numbers in words count too, ordinals left out ("two adults and 2 children" states 2
    twice; "one hundred" then counts 1 and 100; "the second setup" states no 2: ordinals enumerate)."""
    said = fold(request)
    digits = Counter(written_numbers(request, signed=True))
    for m in _CLOCK.finditer(said):
        hour = int(m.group(1)) % 12 + (12 if m.group(3) == "p" else 0)
        if hour != int(m.group(1)):
            digits[float(hour)] += 1
    found: Counter[float] = Counter()
    cardinals: Counter[float] = Counter()  # found, ordinals left out

    def add(number: float, cardinal: bool) -> None:
        found[float(number)] += 1
        cardinals[float(number)] += cardinal

    spoken = words(request)
    for i, w in enumerate(spoken):
        n = MONTHS.get(w, UNITS.get(w, TENS.get(w, ORDINALS.get(w, SCALES.get(w)))))
        if n is None:
            continue
        ordinal = w in ORDINALS or (w in TENS and i + 1 < len(spoken) and spoken[i + 1] in ORDINALS)  # twenty-first
        scaled = w in SCALES and i > 0 and spoken[i - 1] in UNITS  # two hundred: one number, 200
        add(n, not (ordinal or scaled))
        if w in TENS and i + 1 < len(spoken):  # twenty-one, twenty-first
            after = UNITS.get(spoken[i + 1], ORDINALS.get(spoken[i + 1]))
            if after is not None and 0 < after < 10:
                add(n + after, spoken[i + 1] in UNITS)
        if scaled:
            add(UNITS[spoken[i - 1]] * SCALES[w], True)
    if every_form:
        return digits + cardinals
    return digits + Counter({n: k for n, k in found.items() if n not in digits})


def written_numbers(request: str, signed: bool = False) -> list[float]:
    """The numbers ``request`` writes in digits, in order (``1,000`` -> 1000, ``1,234.56``); with ``signed``,
    one after a minus sign that starts a word is negative (:func:`number_mentions`)."""
    said = fold(request)
    return [float(m.group().replace(",", "")) * (-1 if signed and _signed(said, m.start()) else 1)
            for m in _NUMERAL.finditer(said)]


def _signed(text: str, at: int) -> bool:
    """Whether the numeral at ``text[at]`` has a minus sign (``-`` or ``\u2212``) that starts a word ("b =
    -3", not "1-5")."""
    before = text[at - 2] if at >= 2 else " "
    return text[at - 1:at] in ("-", "\u2212") and not (before.isalnum() or before in "._")


def abbreviates(short: str, said: list[str]) -> str | None:
    """The request text ``short`` (2 to 5 letters, folded) abbreviates, else None: a word of ``said`` it
    :func:`shortens`, or consecutive words whose initials it spells, small linking words skipped
    ("usa" <- "united states of america")."""
    if not 2 <= len(short) <= 5 or not short.isalpha():
        return None
    for word in said:
        if shortens(short, word):
            return word
    for i in range(len(said)):
        if said[i] in LINKING:
            continue
        j, k = i, 0
        while j < len(said) and k < len(short):
            if said[j][0] == short[k]:
                k += 1
            elif said[j] not in LINKING:
                break
            j += 1
        if k == len(short) and j - i >= 2:
            return " ".join(said[i:j])
    return None


def shortens(short: str, word: str) -> bool:
    """True when ``short`` is a shortening of the longer ``word`` by one of the usual ways: truncation, its
    start, 3 letters or more ("sec" <- "seconds"; "ca" is not "calculate"); contraction, its first and last
    letters with letters of it in order between ("hrs" <- "hours", "ft" <- "feet"); or an SI prefix's symbol then a shortening of the unit after the
    prefix's name ("km" <- "kilometers", "mhz" <- "megahertz"; prefixes from the SI Brochure, 9th edition,
    table 7). Letters in order alone are not enough: "cm" is not "circumference"."""
    if len(word) <= len(short):
        return False
    if len(short) >= 3 and word.startswith(short):
        return True
    if short[0] == word[0] and short[-1] == word[-1] and _in_order(short, word):
        return True
    for name, symbol in SI_PREFIXES.items():
        unit = word[len(name):]
        if word.startswith(name) and short.startswith(symbol) and len(short) > len(symbol) and unit:
            rest = short[len(symbol):]
            if unit.startswith(rest) or (rest[0] == unit[0] and _in_order(rest, unit)):
                return True
    return False


def _in_order(letters: str, word: str) -> bool:
    it = iter(word)
    return all(ch in it for ch in letters)


def reformat(value: str, request: str) -> str | None:
    """Why ``value`` writes what ``request`` states in another format (``"2021, 3 (March), 3"``), or None
    when some piece of it is not accounted for (rules in the module docstring) or nothing needed a
    reformat beyond words the request states."""
    pieces = _PIECE.findall(fold(value))
    if not pieces:
        return None
    said, numbers = words(request), request_numbers(request)
    notes, reformatted, previous_number = [], False, False
    for piece in pieces:
        note = None
        if piece[0].isdigit():
            if float(piece) in numbers:
                note, reformatted = piece.lstrip("0") or "0", True
            elif float(piece) == 0:
                note = ""  # zero padding
        elif any(close(piece, r) for r in said):
            note = piece
        elif piece in MONTHS and float(MONTHS[piece]) in numbers:
            note, reformatted = f"{piece} ({MONTHS[piece]})", True
        elif float(UNITS.get(piece, TENS.get(piece, ORDINALS.get(piece, -1)))) in numbers:
            note, reformatted = piece, True
        elif previous_number and (piece in ORDINAL_ENDINGS or piece in ISO_SEPARATORS):
            note = ""
        elif (source := abbreviates(piece, said)) is not None:
            note, reformatted = f"{piece} ({source})", True
        elif len(piece) == 1 and any(r.startswith(piece) for r in said):
            note = piece  # a single letter: an initial
        if note is None:
            return None
        if note:
            notes.append(note)
        previous_number = piece[0].isdigit()
    if not reformatted:  # padding and single letters alone are no evidence
        return None
    return ", ".join(notes)
