"""The string formats the grammar enforces: regexes of the text between the quotes, and :func:`format_node`.

Each is stricter than or equal to its definition, and accepts nothing that jsonschema's format checker
(``Draft202012Validator.FORMAT_CHECKER`` with the packages of the test extra installed) refuses:

* ``date``: RFC 3339 full-date ``YYYY-MM-DD`` with the days of each month, February 29 in leap years only
  (divisible by 4, not by 100 unless by 400: a regular condition on the four digits), years 0001-9999
  (Python's ``date``, which the checker uses, has no year 0);
* ``time``: RFC 3339 full-time ``HH:MM:SS[.frac](Z|+HH:MM|-HH:MM)``, at most 9 fraction digits, no leap
  second (the checker refuses second 60), upper-case ``Z`` only;
* ``date-time``: ``date`` ``T`` ``time`` (upper-case ``T`` and ``Z`` only);
* ``duration``: RFC 3339 appendix A (ISO 8601 durations): ``P`` then years, months, days in order with
  nothing skipped after the first (``P1Y2M3D``, ``P1M``, ``P3D``), or weeks alone (``P2W``), each optionally
  followed by ``T`` and hours, minutes, seconds likewise (``PT1H30M``, ``PT5S``);
* ``uuid``: RFC 4122 ``8-4-4-4-12`` hex digits;
* ``email``: ``local@domain`` with an RFC 5321 dot-atom local part and at least two dotted domain labels (no
  quoted local parts, no address literals);
* ``ipv4``: RFC 2673 dotted quad, each part 0-255 without leading zeros;
* ``ipv6``: RFC 4291 section 2.2 text forms exactly (RFC 3986 ``IPv6address``): eight groups of 1-4 hex
  digits, one ``::`` for one or more zero groups, the last 32 bits optionally as an ``ipv4``; no zone;
* ``hostname``: RFC 1123 labels (letters, digits, hyphens inside), dot-separated, no final dot, *at most
  63 characters in all* (RFC 1123 allows labels of 63 and names of 253: both lengths at once need one
  state per pair of counts, about 14,000 states, each allowing most alphanumeric tokens; within 63 the
  label length needs no count of its own);
* ``uri``, ``uri-reference``: RFC 3986 ``URI`` / ``URI-reference`` (host ``IP-literal`` with ``ipv6`` or
  ``IPvFuture``; an IPv4 address is a ``reg-name``);
* ``json-pointer``, ``relative-json-pointer``: RFC 6901 and draft-bhutton-relative-json-pointer-00 (as
  JSON Schema patterns: their characters may need JSON escapes); the leading number of a relative pointer
  has no digit after a 0 (``10`` but not ``100``: jsonschema's check takes any digit after a 0 for a
  leading zero).

Other format names are not enforced (the schema compiler notes them); jsonschema checks the known ones
after generation.
"""

from __future__ import annotations

from . import dfa as D
from .compose import literals, seq, union, union_all
from .dfa import ByteDFA
from .lengths import cached_length_dfa
from .lexical import COUNTED_CHAR, STRING_CHAR, string_of
from .leaves import FastLeaf, Meet
from .nodes import LEAF_CACHE, Leaf, Node
from .pattern import pattern_dfa, pattern_regex

_DAY31 = "(?:0[1-9]|[12][0-9]|3[01])"
_DAY30 = "(?:0[1-9]|[12][0-9]|30)"
_DAY28 = "(?:0[1-9]|1[0-9]|2[0-8])"
_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001-9999
_BY4 = "(?:0[48]|[2468][048]|[13579][26])"  # two digits: a multiple of 4 other than 00
_LEAP_YEAR = f"(?:[0-9]{{2}}{_BY4}|{_BY4}00)"
DATE = (
    f"(?:{_YEAR}-(?:(?:0[13578]|1[02])-{_DAY31}|(?:0[469]|11)-{_DAY30}|02-{_DAY28})|{_LEAP_YEAR}-02-29)"
)
TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+\-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
DATE_TIME = DATE + "T" + TIME
_N = "[0-9]+"
_DUR_TIME = f"T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)"
_DUR_DATE = f"(?:{_N}D|{_N}M(?:{_N}D)?|{_N}Y(?:{_N}M(?:{_N}D)?)?)(?:{_DUR_TIME})?"
DURATION = f"P(?:{_DUR_DATE}|{_DUR_TIME}|{_N}W)"
UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_ATOM = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+"
_LABEL63 = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
EMAIL = _ATOM + r"(?:\." + _ATOM + ")*@" + _LABEL63 + r"(?:\." + _LABEL63 + ")+"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = _OCTET + r"(?:\." + _OCTET + "){3}"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{IPV4})"


def _ipv6_forms() -> list[str]:
    """RFC 3986 ``IPv6address``: the nine forms by the number of groups before and after ``::`` (the first
    seven end with ``ls32``)."""
    forms = [f"(?:{_H16}:){{6}}{_LS32}", f"::(?:{_H16}:){{5}}{_LS32}"]
    for before, after in ((0, 4), (1, 3), (2, 2), (3, 1), (4, 0)):
        head = f"(?:{_H16})?" if before == 0 else f"(?:(?:{_H16}:){{0,{before}}}{_H16})?"
        tail = f"(?:{_H16}:){{{after}}}" if after > 1 else (f"{_H16}:" if after == 1 else "")
        forms.append(f"{head}::{tail}{_LS32}")
    forms.append(f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}")
    forms.append(f"(?:(?:{_H16}:){{0,6}}{_H16})?::")
    return forms


IPV6 = "(?:" + "|".join(_ipv6_forms()) + ")"


def _ipv6_dfa() -> ByteDFA:
    """The minimal DFA of :data:`IPV6`, its forms joined: each form's groups before ``ls32`` from its regex,
    followed by one ``ls32`` automaton (an IPv4 address or two groups) made once, and the nine unioned. The
    same minimal automaton as interegular on the whole regex, in 0.05 s instead of 0.26 (interegular builds
    the IPv4 address's octets again in each of the seven forms that end with it)."""
    ls32 = D.from_regex(_LS32)
    parts = [seq([D.from_regex(form[: -len(_LS32)]), ls32]) if form.endswith(_LS32) else D.from_regex(form)
             for form in _ipv6_forms()]
    return D.minimize(union_all(parts))


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
#: hostname without its length bound (see HOSTNAME_MAX)
HOSTNAME_LABELS = _LABEL + r"(?:\." + _LABEL + ")*"
#: the longest hostname the grammar writes (each label is then within RFC 1123's 63 as well)
HOSTNAME_MAX = 63

_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = "%[0-9A-Fa-f]{2}"
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_USERINFO = f"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?"
_REG_NAME = f"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"  # an IPv4 address is one too
_IPVFUTURE = f"v[0-9A-Fa-f]+\\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
_PORT = "(?::[0-9]*)?"
_PATH_ABEMPTY = f"(?:/{_PCHAR}*)*"
_PATH_ABSOLUTE = f"/(?:{_PCHAR}+{_PATH_ABEMPTY})?"
_QUERY = f"(?:{_PCHAR}|[/?])*"
_TAIL = f"(?:\\?{_QUERY})?(?:#{_QUERY})?"
_PCHAR_NC = f"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})"  # segment-nz-nc: no colon
# URI and relative reference, each split by its host: a reg-name (or no authority) / an IP-literal
_URI_NAMED = (f"{_SCHEME}:(?://{_USERINFO}{_REG_NAME}{_PORT}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|"
              f"{_PCHAR}+{_PATH_ABEMPTY}|){_TAIL}")
_RELATIVE_NAMED = (f"(?://{_USERINFO}{_REG_NAME}{_PORT}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|"
                   f"{_PCHAR_NC}+{_PATH_ABEMPTY}|){_TAIL}")
_IP_LITERAL_TAIL = f"\\]{_PORT}{_PATH_ABEMPTY}{_TAIL}"
_URI_IP = f"{_SCHEME}://{_USERINFO}\\[(?:{IPV6}|{_IPVFUTURE})" + _IP_LITERAL_TAIL
_RELATIVE_IP = f"//{_USERINFO}\\[(?:{IPV6}|{_IPVFUTURE})" + _IP_LITERAL_TAIL
URI = f"(?:{_URI_NAMED}|{_URI_IP})"
URI_REFERENCE = f"(?:{_URI_NAMED}|{_URI_IP}|{_RELATIVE_NAMED}|{_RELATIVE_IP})"


def _email_dfa(timings: dict[str, float] | None = None) -> ByteDFA:
    """The minimal DFA of a JSON string holding an ``email`` (:data:`EMAIL`, quotes included), built state by
    state: the local part's atoms, then domain labels of 1 to 63 letters, digits and inner hyphens, one state
    per (characters read, last one a hyphen) and label kind (the first, which a dot must follow, or a later
    one, which may close the string). The regex through interegular takes ~50 ms (its 244 label copies);
    this takes ~2 ms, and minimizes to the same arrays (a test compares them)."""
    import numpy as np

    atext = np.frombuffer(b"!#$%&'*+-/=?^_`{|}~", dtype=np.uint8).tolist() + [
        *range(ord("0"), ord("9") + 1), *range(ord("A"), ord("Z") + 1), *range(ord("a"), ord("z") + 1)]
    alnum = [*range(ord("0"), ord("9") + 1), *range(ord("A"), ord("Z") + 1), *range(ord("a"), ord("z") + 1)]
    hyphen, dot, at, quote = ord("-"), ord("."), ord("@"), ord('"')
    n_label = 2 * 63  # (characters read 1..63, last a hyphen) per label kind
    start, atom_start, in_atom, accept = 0, 1, 2, 3
    first = 4  # first[i, h] = first + 2 * (i - 1) + h; the later labels follow
    later = first + n_label
    t = np.full((later + n_label, 256), -1, dtype=np.int32)
    t[start, quote] = atom_start
    t[atom_start, atext] = in_atom
    t[in_atom, atext] = in_atom
    t[in_atom, dot] = atom_start
    label_start = {first: len(t), later: len(t) + 1}  # the states before a label's first character
    t = np.concatenate([t, np.full((2, 256), -1, dtype=np.int32)])
    t[in_atom, at] = label_start[first]
    for base in (first, later):
        t[label_start[base], alnum] = base  # one character read, not a hyphen
        for i in range(1, 64):
            plain, after_hyphen = base + 2 * (i - 1), base + 2 * (i - 1) + 1
            if i < 63:
                t[plain, alnum] = t[after_hyphen, alnum] = base + 2 * i
                if i < 62:  # a hyphen is never last: the 63rd character is a letter or digit
                    t[plain, hyphen] = t[after_hyphen, hyphen] = base + 2 * i + 1
            t[plain, dot] = label_start[later]
            if base == later:
                t[plain, quote] = accept
    accepting = np.zeros(len(t), dtype=bool)
    accepting[accept] = True
    return D.minimize(ByteDFA(t, accepting, start))


def _ip_literal(head: str) -> ByteDFA:
    """The content DFA of ``head`` [userinfo@] ``[`` IPv6 or IPvFuture ``]`` [port] path-abempty [query]
    [fragment], joined from separately built parts (interegular on the whole regex takes 0.7 s and passes
    the ``pattern`` limit: the IPv6 forms multiply with what surrounds them)."""
    ip = union(LEAF_CACHE.get(IPV6, build=_ipv6_dfa), LEAF_CACHE.get(_IPVFUTURE))
    return seq([LEAF_CACHE.get(head + _USERINFO + r"\["), D.minimize(ip), LEAF_CACHE.get(_IP_LITERAL_TAIL)])


def _uri(reference: bool) -> ByteDFA:
    """The DFA of a JSON string holding a URI (``reference``: or a relative reference)."""
    parts = [LEAF_CACHE.get(_URI_NAMED), _ip_literal(_SCHEME + "://")]
    if reference:
        parts += [LEAF_CACHE.get(_RELATIVE_NAMED), _ip_literal("//")]
    quote = literals([b'"'])
    return seq([quote, union_all(parts), quote])


#: format name -> regex of the JSON string's content (between the quotes, as JSON text).
FORMATS = {
    "date": DATE, "time": TIME, "date-time": DATE_TIME, "duration": DURATION, "uuid": UUID, "email": EMAIL,
    "ipv4": IPV4, "ipv6": IPV6, "uri": URI, "uri-reference": URI_REFERENCE,
}
#: formats given as JSON Schema patterns (over the decoded value; see :mod:`.pattern`).
PATTERN_FORMATS = {
    "json-pointer": "^(?:/(?:[^~/]|~[01])*)*$",
    # jsonschema's check reads any digit after a 0 as a leading zero ("100" fails): no digit follows a 0 here
    "relative-json-pointer": "^(?:0|[1-9]+0?)(?:#|(?:/(?:[^~/]|~[01])*)*)$",
}


_ANY = f"(?:{STRING_CHAR})"  # one code point, canonically spelled
_LOOSE_TIME = r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+\-][0-9]{2}:[0-9]{2})"
_LOOSE_DATE = "[0-9]{4}-[0-9]{2}-[0-9]{2}"
_URI_CHAR = r"[A-Za-z0-9\-._~!$&'()*+,;=%@:/?#\[\]]"  # RFC 3986's characters, ASCII
_SEGMENT = r"[A-Za-z0-9\-._~!$&'()*+,;=%@\[\]]"  # a relative reference's first segment: no ":" (nor "/?#")
_FINAL_NEWLINE = r"(?:\\n)?"  # a regex's $ matches before a final newline: rfc3339-validator's, fqdn's, rfc3986's
#: format name -> regex of a string content (canonical JSON text) that holds every value of the format: what
#: its definition allows and what jsonschema's format checker (:data:`FORMATS` and their packages) passes,
#: and more. A language subtracted (the other ``oneOf`` branches, ``not``, an ``if`` condition's else side)
#: must contain every valid value, and :data:`FORMATS` are written narrower than their definitions, so these
#: stand for a format there; a format not listed, or one the schema's draft does not check (draft 7 checks no
#: ``uuid``), stands for any string. The checker's readings they hold: dates and times by ASCII-digit regexes
#: whose ``$`` lets a final newline through (``12:00:00Z\n``), ``t``/``z`` in either case (it upper-cases a
#: date-time), a duration with a sign, ``email`` any text with an ``@``, ``ipv4``/``ipv6`` by :mod:`ipaddress` (ASCII
#: digits, no IPv6 zone), ``uuid`` by :class:`uuid.UUID` with dashes at code points 8, 13, 18 and 23 (``UUID``
#: also strips braces, ``urn:``/``uuid:`` and underscores), ``hostname`` by ``fqdn`` (case-insensitive in
#: Unicode mode: a Kelvin sign reads as ``k``, so any non-ASCII character is kept), ``uri`` by
#: ``rfc3986_validator`` (an ASCII scheme then ``:``; ``uri-reference`` RFC 3986's characters, a URI or a
#: relative reference whose first segment has no ``:``), ``json-pointer`` by ``jsonpointer`` (empty, or ``/``
#: first), ``relative-json-pointer`` characters that ``str.isdigit`` takes (any non-ASCII one kept), then
#: nothing, ``#`` or a JSON pointer.
LOOSE_FORMATS = {
    "date": _LOOSE_DATE,
    "time": _LOOSE_TIME + _FINAL_NEWLINE,
    "date-time": _LOOSE_DATE + "[Tt]" + _LOOSE_TIME + _FINAL_NEWLINE,
    "duration": f"[+\\-]?[Pp]{_ANY}*[DMYWHS]",
    "uuid": f"{_ANY}{{8}}-{_ANY}{{4}}-{_ANY}{{4}}-{_ANY}{{4}}-{_ANY}*",
    "email": f"{_ANY}*@{_ANY}*",
    "ipv4": r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}",
    "ipv6": r"[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*",
    "hostname": r"[^\x00-\x2c/:-@\[-\^`{-\x7f]+" + _FINAL_NEWLINE,
    "uri": f"[A-Za-z][A-Za-z0-9+.\\-]*:{_ANY}*",
    "uri-reference": f"(?:[A-Za-z][A-Za-z0-9+.\\-]*:{_URI_CHAR}*|[/?#]{_URI_CHAR}*|{_SEGMENT}*(?:[/?#]{_URI_CHAR}*)?)"
                     + _FINAL_NEWLINE,
    "json-pointer": f"(?:/{_ANY}*)?",
    "relative-json-pointer": f"(?:[0-9]|[^\\x00-\\x7f])+(?:#|/{_ANY}*)?",
}


def _kept(regex: str, make) -> FastLeaf:
    """A leaf of ``regex`` whose automaton ``make()`` builds from parts, minimized and kept in the leaf cache
    under ``regex`` (as a :class:`~.nodes.Leaf` of it would be): once per process, not once per compile. A
    URI's joins took 0.08-0.19 s a compile; ``ipv6`` through interegular 0.18-0.25 s, from its parts 0.04."""
    return FastLeaf(regex, lambda timings: LEAF_CACHE.get(regex, build=lambda: D.minimize(make())))


def format_node(name: str, loose: bool = False) -> Node | None:
    """The grammar node of the JSON strings of format ``name``, or None when the grammar does not enforce it
    (see the module docstring); ``loose``: of the strings that hold every value of the format
    (:data:`LOOSE_FORMATS`), None for a format that stands for any string there."""
    if loose:
        return Leaf(string_of(LOOSE_FORMATS[name])) if name in LOOSE_FORMATS else None
    if name in ("uri", "uri-reference"):
        return _kept(string_of(FORMATS[name]), lambda: _uri(name == "uri-reference"))
    if name == "ipv6":
        return _kept(string_of(IPV6), lambda: seq([literals([b'"']), LEAF_CACHE.get(IPV6, build=_ipv6_dfa),
                                                   literals([b'"'])]))
    if name == "email":
        return FastLeaf(string_of(EMAIL), _email_dfa)
    if name in FORMATS:
        return Leaf(string_of(FORMATS[name]))
    if name in PATTERN_FORMATS:
        pattern = PATTERN_FORMATS[name]
        return FastLeaf(string_of(pattern_regex(pattern)), lambda timings: pattern_dfa(pattern, timings))
    if name == "hostname":
        return Meet([Leaf(string_of(HOSTNAME_LABELS)),
                     FastLeaf(string_of(f"(?:{COUNTED_CHAR}){{1,{HOSTNAME_MAX}}}"),
                              lambda timings: cached_length_dfa(1, HOSTNAME_MAX))])
    return None
