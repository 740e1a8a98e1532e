"""The regexes of the string formats the grammar enforces (the text between the quotes).

Each is stricter than or equal to its definition, so every accepted value is valid:

* ``date``: RFC 3339 full-date ``YYYY-MM-DD`` with the days of each month; February 29 is never
  produced (it is valid only in leap years, which a regular language of this size cannot tell apart).
* ``time``: RFC 3339 full-time ``HH:MM:SS[.frac](Z|+HH:MM|-HH:MM)`` (second 60 allowed for leap seconds).
* ``date-time``: ``date`` ``T`` ``time`` (upper-case T and Z only).
* ``uuid``: RFC 4122 ``8-4-4-4-12`` hex digits.
* ``email``: ``local@domain`` with an RFC 5321 dot-atom local part and dotted domain labels (no quoted
  local parts, no IP literals).
* ``uri``: RFC 3986 ``scheme:`` followed by unreserved, reserved and percent-encoded characters.
"""

from __future__ import annotations

_DAY31 = "(?:0[1-9]|[12][0-9]|3[01])"
_DAY30 = "(?:0[1-9]|[12][0-9]|30)"
_DAY28 = "(?:0[1-9]|1[0-9]|2[0-8])"
DATE = (
    "[0-9]{4}-(?:(?:0[13578]|1[02])-" + _DAY31 + "|(?:0[469]|11)-" + _DAY30 + "|02-" + _DAY28 + ")"
)
TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]{1,9})?(?:Z|[+\-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
DATE_TIME = DATE + "T" + TIME
UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_ATOM = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
EMAIL = _ATOM + r"(?:\." + _ATOM + ")*@" + _LABEL + r"(?:\." + _LABEL + ")+"
URI = r"[A-Za-z][A-Za-z0-9+\-.]*:(?:[A-Za-z0-9\-._~:/@!$&'()*+,;=?#\[\]]|%[0-9A-Fa-f]{2})+"

#: format name -> regex of the JSON string's content (between the quotes, as JSON text).
FORMATS = {"date": DATE, "time": TIME, "date-time": DATE_TIME, "uuid": UUID, "email": EMAIL, "uri": URI}
