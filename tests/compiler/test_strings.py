"""Strings: lengths with patterns and formats, long lengths, formats against jsonschema's format checker,
Unicode property classes in patterns (issue 13, items 6, 8, 9, 10 and the pattern part of 12).

Verdicts are on canonical JSON texts (``canonical``) unless a test is about another spelling (escapes);
"the checker" is ``Draft202012Validator.FORMAT_CHECKER`` with the packages of the test extra installed.
"""

from __future__ import annotations

import ipaddress
import json
import time
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.automata.formats import HOSTNAME_MAX
from callmaybe.compiler.grammar import schema_dfa
from callmaybe.compiler.automata.lengths import length_dfa, unit
from callmaybe.compiler.automata.lexical import canonical
from callmaybe.compiler.automata.pattern import PatternError, pattern_dfa, pattern_regex
from callmaybe.core.errors import SchemaError

from ..conftest import SHARED

CHECKER = Draft202012Validator.FORMAT_CHECKER
ENFORCED = ["date", "time", "date-time", "duration", "uuid", "email", "ipv4", "ipv6", "hostname", "uri",
            "uri-reference", "json-pointer", "relative-json-pointer"]
_DFAS: dict[str, tuple] = {}


def compiled(schema):
    key = json.dumps(schema, sort_keys=True)
    if key not in _DFAS:
        _DFAS[key] = schema_dfa(schema)
    return _DFAS[key]


def accepts(schema, value) -> bool:
    """The grammar's verdict on ``value`` written canonically."""
    return accepts_text(schema, canonical(value))


def accepts_text(schema, text: str) -> bool:
    """The grammar's verdict on the JSON text ``text``."""
    dfa, _ = compiled(schema)
    return dfa.accepts(text.encode("utf-8"))


def notes_of(schema) -> list[tuple[str, str, str]]:
    return [(n.kind, n.keyword, n.detail) for n in compiled(schema)[1]]


# ---------------------------------------------------------------------------------------------------------
# item 6: a length next to a pattern or a format is enforced


def test_pattern_with_max_length():
    schema = {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8}
    assert notes_of(schema) == []
    assert accepts(schema, "abcdefgh") and accepts(schema, "a")
    assert not accepts(schema, "abcdefghi")
    assert not accepts(schema, "") and not accepts(schema, "abC")


def test_pattern_with_min_and_max_length():
    schema = {"type": "string", "pattern": "ab", "minLength": 3, "maxLength": 4}
    assert [accepts(schema, v) for v in ("ab", "abc", "xaby", "xabyz", "xyzw", "é ab")] == [
        False, True, True, False, False, True]


def test_format_with_lengths():
    schema = {"type": "string", "format": "email", "maxLength": 10}
    assert notes_of(schema) == []
    assert accepts(schema, "a@b.cd") and accepts(schema, "abcd@ef.gh")
    assert not accepts(schema, "abcde@ef.gh") and not accepts(schema, "a@b")
    schema = {"type": "string", "format": "date", "pattern": "^2024-", "minLength": 10}
    assert accepts(schema, "2024-02-29") and not accepts(schema, "2023-02-28")


@pytest.mark.parametrize("text, ok", [
    (r'"a\""', True), (r'"\"\""', True), (r'"\"\"\""', False), (r'"\"a\"x"', False), ('"aa"', True), ('""', False),
])
def test_length_and_pattern_agree_on_escapes(text, ok):
    """A JSON escape is one character for both the pattern and the length."""
    assert accepts_text({"type": "string", "pattern": '^[a"]+$', "maxLength": 2}, text) is ok


@pytest.mark.parametrize("text, ok", [
    ('"ab"', True), ('"abé"', True), ('"éab"', True), ('"ab😀"', True), (r'"ab\u001f"', True), (r'"\u001fab"', True),
    (r'"ab\u00e9"', False), (r'"ab\ud83d\ude00"', False), ('"abéx"', False), (r'"ab\ud83d"', False),
    (r'"\n\tab"', False), (r'"\nab"', True), ('"a"', False),
])
def test_length_counts_escapes_in_unanchored_pattern(text, ok):
    """Outside the pattern's match a character is spelled as inside it, canonically (``é`` itself, a control
    as ``\\u001f``); each decoded code point counts once; other spellings and lone surrogates are refused."""
    assert accepts_text({"type": "string", "pattern": "ab", "maxLength": 3}, text) is ok


def test_astral_characters_count_once_with_pattern():
    schema = {"type": "string", "pattern": "^.+$", "maxLength": 2}
    assert accepts(schema, "😀😀") and accepts(schema, "é😀") and not accepts(schema, "😀😀😀")
    assert not accepts(schema, "\n")  # "." is not a line terminator


def test_contradictory_keywords():
    with pytest.raises(SchemaError, match=r"^schema 'schema': the schema admits no value \(unsatisfiable\)$"):
        schema_dfa({"type": "string", "format": "date", "maxLength": 9})
    # an impossible anyOf branch or optional property is left out, not an error
    dfa, _ = schema_dfa({"anyOf": [{"type": "null"}, {"type": "string", "pattern": "^a{3}$", "maxLength": 2}]})
    assert dfa.accepts(b"null") and not dfa.accepts(b'"aaa"')
    dfa, _ = schema_dfa({"type": "object", "properties": {
        "a": {"type": "string", "pattern": "^a{3}$", "maxLength": 2}, "b": {"type": "null"}}})
    assert dfa.accepts(b'{"b": null}') and dfa.accepts(b"{}") and not dfa.accepts(b'{"a": "aaa"}')


# ---------------------------------------------------------------------------------------------------------
# item 10: lengths above 64


def test_max_length_above_64():
    schema = {"type": "string", "maxLength": 65}
    assert notes_of(schema) == []
    assert accepts(schema, "a" * 65) and not accepts(schema, "a" * 70) and not accepts(schema, "a" * 66)
    schema = {"type": "string", "minLength": 100}
    assert notes_of(schema) == []
    assert accepts(schema, "é" * 100) and accepts(schema, "x" * 300) and not accepts(schema, "x" * 99)


def test_integral_float_lengths():
    """The JSON Schema Test Suite's ``minLength: 2.0``: an integral number is a length."""
    assert accepts({"minLength": 2.0, "type": "string"}, "fo") and not accepts({"minLength": 2.0, "type": "string"}, "f")
    with pytest.raises(SchemaError, match=r"malformed minLength/maxLength \(0, 2.5\)"):
        schema_dfa({"type": "string", "maxLength": 2.5})
    with pytest.raises(SchemaError, match=r"malformed minLength/maxLength \(-1, None\)"):
        schema_dfa({"type": "string", "minLength": -1})


def test_length_automaton_is_minimal_and_exact():
    u = unit()
    assert u.num_states == 15 and not (u.transitions[np.flatnonzero(u.accepting)[0]] >= 0).any()
    for lo, hi in [(0, 0), (0, 3), (2, 2), (2, 5), (3, None), (0, 64)]:
        dfa = D.trim(length_dfa(lo, hi))
        assert D.minimize(dfa).num_states == dfa.num_states
        regex = '"(?:' + r'(?:[^"\\\x00-\x1f]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))' + ")" + (f"{{{lo},{hi}}}" if hi is not None else f"{{{lo},}}") + '"'
        if hi is None or hi <= 8:
            ref = D.from_regex(regex)
            assert np.array_equal(D.minimize(dfa).transitions, ref.transitions)


def test_lengths_up_to_256_are_exact_and_longer_ones_are_named():
    dfa, notes = schema_dfa({"type": "object", "properties": {"s": {"type": "string", "maxLength": 255}}})
    assert notes == []
    assert dfa.accepts(canonical({"s": "x" * 255}).encode()) and not dfa.accepts(canonical({"s": "x" * 256}).encode())
    # past 256 a maximum is counted by a counter (compiler/automata/counters.py); a minimum is named
    dfa, notes = schema_dfa({"type": "object", "properties": {"s": {"type": "string", "maxLength": 1000}}})
    assert notes == [] and dfa.counters == (1000,)
    assert dfa.accepts(canonical({"s": "x" * 1000}).encode()) and not dfa.accepts(canonical({"s": "x" * 1001}).encode())
    dfa, notes = schema_dfa({"type": "object", "properties": {"s": {"type": "string", "minLength": 1000}}})
    assert [str(n) for n in notes] == ["schema 'schema', parameter 's': minLength (1000 above 256)"]
    assert dfa.accepts(canonical({"s": "x"}).encode())
    # without counters (a composition they cannot carry) the maximum is named too
    from callmaybe.compiler.automata import long_counts

    dfa, notes = long_counts.under(long_counts.Policy(counters=False), lambda: schema_dfa(
        {"type": "object", "properties": {"s": {"type": "string", "maxLength": 1000}}}))
    assert [str(n) for n in notes] == ["schema 'schema', parameter 's': maxLength (1000 above 256)"]
    assert dfa.accepts(canonical({"s": "x" * 1001}).encode())


def test_pattern_repeats_up_to_256_are_exact():
    """JSONSchemaBench Github_easy/o9925: ``^[0-9a-zA-Z_-]{1,255}$``."""
    dfa, notes = schema_dfa({"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"})
    assert notes == []
    assert dfa.accepts(canonical("a" * 255).encode()) and not dfa.accepts(canonical("a" * 256).encode())
    assert not dfa.accepts(b'""') and not dfa.accepts(b'"example-key!"')
    dfa, notes = schema_dfa({"type": "string", "pattern": "^a{300}$"})
    assert [str(n) for n in notes] == ["schema 'schema': pattern (a repeat count 300 above 256)"]


def test_escapes_are_written_once_with_their_common_beginnings():
    """A pattern's padding and classes holding escaped characters write the escapes factored (``\\`` once,
    ``u00`` once), not as one alternative each: the same language, built by interegular 3-20x faster."""
    assert pattern_regex("^a") == 'a(?:[^\\x00-\\x1f"\\\\]|\\\\(?:["\\\\bfnrt]|u00(?:0[0-7be-f]|1[0-9a-f])))*'
    assert pattern_regex('^[\\s"]$') == ('(?:[ \xa0\u1680\u2000-\u200a\u2028-\u2029\u202f\u205f\u3000\ufeff]'
                                         '|\\\\(?:["fnrt]|u000b))')
    dfa, notes = schema_dfa({"type": "string", "pattern": '^[\\s"]$'})
    assert notes == [] and [t for t in ["\t", "\n", "\u000b", "\"", "\u00a0", " ", "x", "\\"]
                            if dfa.accepts(canonical(t).encode())] == ["\t", "\n", "\u000b", "\"", "\u00a0", " "]


def test_an_alternation_of_escaping_classes_fits_the_pattern_limit():
    """Rules of the kind JSONSchemaStore's statamic blueprint validates (``between:\\S+,\\S+|...``): each ``\\S``
    holds the escaped characters. Written with one alternative per escape, interegular's automaton passed the
    ``pattern`` limit (10,000 states) already at eight rules, and the schema was refused; factored, 69 byte
    states."""
    names = ["sum", "avg", "min", "max", "first", "last", "count", "join"]
    rule = "^(" + "|".join(f"{n}:\\S+,\\S+" for n in names) + ")$"
    dfa, notes = schema_dfa({"type": "string", "pattern": rule})
    assert notes == [] and dfa.num_states == 69
    texts = ["sum:a,b", "join:\\,\"", "count:x\u00e9,y", "avg:a", "max:a b,c", "median:a,b", "first:a,b\n"]
    assert [t for t in texts if dfa.accepts(canonical(t).encode())] == ["sum:a,b", "join:\\,\"", "count:x\u00e9,y"]


def test_a_long_repeat_is_refused_by_its_characters_before_interegular_runs():
    """``^.{1,256}$`` as a key pattern (JSONSchemaStore's vercel, where counters cannot carry it): 256 copies of
    ``.``'s 10 characters pass 2,500, which interegular would build into more than 10,000 states in ~1.5 s."""
    with pytest.raises(PatternError, match=r"^a repeat count 256 of a part of 10 characters \(its copies would "
                                           r"pass 2,500 characters\)$"):
        pattern_regex("^.{1,256}$", max_copies=2500)
    assert pattern_regex("^.{1,250}$", max_copies=2500).endswith("{1,250}")


def test_functions_that_share_parameters_share_the_long_count_policy(monkeypatch):
    """Two functions with the same parameters share one automaton: the second gets the note (and the regex)
    of the attempt that automaton was built by, not a first attempt of its own that builds nothing."""
    from callmaybe.compiler.automata import long_counts
    from callmaybe.compiler.grammar import compile_grammar
    from callmaybe.core.catalog import parse_catalog

    monkeypatch.setattr(long_counts, "LONG_STATES", 500)
    p = {"s": {"type": "string", "maxLength": 100}, "t": {"type": "object", "properties": {"u": {"type": "integer"}}}}
    g = long_counts.under(long_counts.Policy(counters=False), lambda: compile_grammar(  # copies, not counters
        parse_catalog([{"name": "f", "parameters": p}, {"name": "g", "parameters": p}], "t")))
    assert [(n.where, n.keyword) for n in g.notes] == [("function 'f', parameter 's'", "maxLength"),
                                                      ("function 'g', parameter 's'", "maxLength")]
    assert "{0,100}" not in g.regex


def test_a_limit_long_counts_cannot_cause_is_not_retried():
    """Past ``nodes`` (or ``properties``, ``bytes``, ``seconds``) the first attempt's error stands."""
    from callmaybe.compiler.limits import CompileLimitError, CompileLimits

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 200},
                                               **{f"p{i}": {"type": "integer"} for i in range(10)}}}
    with pytest.raises(CompileLimitError, match="the compile limit is properties=5"):
        schema_dfa(schema, limits=CompileLimits(properties=5))


def test_long_counts_give_way_when_the_schema_cannot_afford_them(monkeypatch):
    """Without counters, long lengths (65..256) are enforced by a first attempt of copies; when it passes a
    compile limit (here the states it may build with long counts), the schema is compiled again with them
    left to the check, each named with the limit; short ones stay exact."""
    from callmaybe.compiler.automata import long_counts

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 200},
                                               "b": {"type": "string", "pattern": "^x{0,100}$"},
                                               "c": {"type": "string", "maxLength": 3}}}
    dfa, notes = schema_dfa(schema)
    assert notes == [] and not dfa.accepts(b'{"a": "' + b"x" * 201 + b'"}')
    monkeypatch.setattr(long_counts, "LONG_STATES", 1000)
    dfa, notes = schema_dfa(schema)  # counters build no copies: nothing to give way
    assert notes == [] and dfa.counters and not dfa.accepts(b'{"a": "' + b"x" * 201 + b'"}')
    dfa, notes = long_counts.under(long_counts.Policy(counters=False), lambda: schema_dfa(schema))
    why = "enforcing it would build more than 1,000 automaton states (long_counts.LONG_STATES)"
    assert [str(n) for n in notes] == [
        f"schema 'schema', parameter 'a': maxLength (200 above 64: {why})",
        f"schema 'schema', parameter 'b': pattern (a repeat count 100 above 64: {why})"]
    assert dfa.accepts(b'{"a": "' + b"x" * 201 + b'"}') and not dfa.accepts(b'{"c": "xxxx"}')


def test_a_huge_length_is_named_not_built():
    dfa, notes = schema_dfa({"type": "string", "minLength": 10**6, "pattern": "a"})
    assert [n.keyword for n in notes] == ["minLength"]
    assert dfa.accepts(b'"a"')


# ---------------------------------------------------------------------------------------------------------
# items 8, 9 and the other formats: exact examples


@pytest.mark.parametrize("value, ok", [
    ("2000-02-29", True), ("2024-02-29", True), ("1600-02-29", True), ("0004-02-29", True), ("2400-02-29", True),
    ("1900-02-29", False), ("2023-02-29", False), ("2100-02-29", False), ("0000-02-29", False),
    ("0000-01-01", False), ("0001-01-01", True), ("9999-12-31", True), ("2023-04-31", False), ("2023-13-01", False),
    ("2023-00-10", False), ("2023-01-00", False), ("2023-1-01", False), ("20230101", False),
])
def test_date(value, ok):
    assert accepts({"type": "string", "format": "date"}, value) is ok
    assert CHECKER.conforms(value, "date") is ok


@pytest.mark.parametrize("value, ok", [
    ("300.1.2.3", False), ("1.2.3.4", True), ("0.0.0.0", True), ("255.255.255.255", True), ("256.1.1.1", False),
    ("01.2.3.4", False), ("1.2.3", False), ("1.2.3.4.5", False), ("1.2.3.04", False), ("1..2.3", False),
    (" 1.2.3.4", False), ("1.2.3.4\n", False),
])
def test_ipv4(value, ok):
    assert accepts({"type": "string", "format": "ipv4"}, value) is ok
    assert CHECKER.conforms(value, "ipv4") is ok


@pytest.mark.parametrize("value, ok", [
    ("::", True), ("::1", True), ("1::", True), ("1:2:3:4:5:6:7:8", True), ("1:2:3:4:5:6:7::", True),
    ("::2:3:4:5:6:7:8", True), ("1::8", True), ("fe80::1:2", True), ("::ffff:1.2.3.4", True),
    ("1:2:3:4:5:6:1.2.3.4", True), ("::1.2.3.4", True), ("ABCD:EF01:2345:6789:ABCD:EF01:2345:6789", True),
    ("0000:0000:0000:0000:0000:0000:0000:0001", True),
    ("1:2:3:4:5:6:7:8:9", False), ("1:2:3:4:5:6:7", False), (":::", False), ("1::2::3", False),
    ("12345::", False), ("::ffff:01.2.3.4", False), ("::ffff:1.2.3.256", False), ("1:2:3:4:5:6:7:1.2.3.4", False),
    ("1:2:3:4:5:6:7:8::", False), ("fe80::1%eth0", False), (":1::", False), ("g::", False), ("1.2.3.4", False),
])
def test_ipv6(value, ok):
    assert accepts({"type": "string", "format": "ipv6"}, value) is ok
    assert CHECKER.conforms(value, "ipv6") is ok


@pytest.mark.parametrize("value, ok", [
    ("example.com", True), ("a", True), ("a-b.c-d", True), ("123", True), ("xn--bcher-kva.example", True),
    ("a" * 63, True), ("a" * 30 + "." + "b" * 32, True),
    ("a" * 64, False), ("a" * 31 + "." + "b" * 32, False), ("-a", False), ("a-", False), ("a..b", False),
    ("a.", False), (".a", False), ("a_b", False), ("", False), ("é.com", False),
])
def test_hostname(value, ok):
    """RFC 1123 labels; at most 63 characters in all (stricter than the checker's 253)."""
    assert accepts({"type": "string", "format": "hostname"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "hostname")


@pytest.mark.parametrize("value, ok", [
    ("12:30:00Z", True), ("23:59:59.123456789+05:30", True), ("00:00:00-23:59", True),
    ("23:59:60Z", False), ("24:00:00Z", False), ("12:30:00", False), ("12:30Z", False), ("12:30:00z", False),
    ("12:30:00.Z", False), ("12:30:00+24:00", False), ("12:30:00.1234567890Z", False),
])
def test_time(value, ok):
    assert accepts({"type": "string", "format": "time"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "time")


@pytest.mark.parametrize("value, ok", [
    ("2024-02-29T12:00:00Z", True), ("2023-02-29T12:00:00Z", False), ("2024-02-29t12:00:00Z", False),
    ("2024-02-29 12:00:00Z", False), ("0001-01-01T00:00:00+00:00", True),
])
def test_date_time(value, ok):
    assert accepts({"type": "string", "format": "date-time"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "date-time")


@pytest.mark.parametrize("value, ok", [
    ("P1D", True), ("P1Y", True), ("P1Y2M", True), ("P1Y2M3D", True), ("P1M3D", True), ("P2W", True),
    ("PT1H", True), ("PT1H30M", True), ("PT1H30M5S", True), ("PT30M5S", True), ("PT5S", True),
    ("P1DT12H", True), ("P0D", True), ("P10Y0M0DT0H0M0S", True),
    ("P", False), ("PT", False), ("P1DT", False), ("P1Y3D", False), ("PT1H5S", False), ("P1W2D", False),
    ("P1.5D", False), ("1D", False), ("P1D2Y", False), ("PT1D", False), ("p1d", False),
])
def test_duration(value, ok):
    """RFC 3339 appendix A; the checker (isoduration) also takes fractions and skipped units."""
    assert accepts({"type": "string", "format": "duration"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "duration")


@pytest.mark.parametrize("value, ok", [
    ("123e4567-e89b-12d3-a456-426614174000", True), ("123E4567-E89B-12D3-A456-426614174000", True),
    ("123e4567e89b12d3a456426614174000", False), ("{123e4567-e89b-12d3-a456-426614174000}", False),
    ("123e4567-e89b-12d3-a456-42661417400", False), ("g23e4567-e89b-12d3-a456-426614174000", False),
])
def test_uuid(value, ok):
    assert accepts({"type": "string", "format": "uuid"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "uuid")


@pytest.mark.parametrize("value, ok", [
    ("http://example.com/a/b?c=d#e", True), ("https://user:pw@host:8080/p", True), ("urn:isbn:0451450523", True),
    ("mailto:a@b.c", True), ("http://[::1]:80/", True), ("http://[v7.x:y]/", True), ("a:", True),
    ("file:///etc/hosts", True), ("http://h/%C3%A9", True), ("x:/a//b", True),
    ("//host/p", False), ("/p", False), ("a:#[", False), ("a:b#c#d", False), ("http://[::g]/", False),
    ("http://h/%G1", False), ("http://h/a b", False), ("1a:b", False), ("http://h/é", False), ("a:[", False),
])
def test_uri(value, ok):
    assert accepts({"type": "string", "format": "uri"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "uri")


@pytest.mark.parametrize("value, ok", [
    ("", True), ("/p", True), ("//host/p", True), ("../a", True), ("?q", True), ("#f", True), ("a/b:c", True),
    ("http://h/p", True), ("//[::1]/", True), ("a:b", True),
    ("a b", False), ("#a#b", False), ("//[::g]", False), ("%zz", False),
])
def test_uri_reference(value, ok):
    assert accepts({"type": "string", "format": "uri-reference"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "uri-reference")


@pytest.mark.parametrize("value, ok", [
    ("", True), ("/", True), ("/a~0b/c~1d", True), ('/"\\\n', True), ("/é/😀", True),
    ("a", False), ("/a~", False), ("/a~2", False),
])
def test_json_pointer(value, ok):
    assert accepts({"type": "string", "format": "json-pointer"}, value) is ok
    assert CHECKER.conforms(value, "json-pointer") is ok


@pytest.mark.parametrize("value, ok", [
    ("0", True), ("1#", True), ("12/a/b", True), ("0/", True), ("10", True), ("100", False), ("01", False), ("#", False), ("1/a~", False),
    ("-1", False), ("1a", False),
])
def test_relative_json_pointer(value, ok):
    assert accepts({"type": "string", "format": "relative-json-pointer"}, value) is ok
    assert CHECKER.conforms(value, "relative-json-pointer") is ok


@pytest.mark.parametrize("value, ok", [
    ("a@b.cd", True), ("first.last+tag@sub.example.org", True), ("a@b", False), ("@b.cd", False),
    ("a..b@c.de", False), (".a@b.cd", False), ("a@-b.cd", False), ('"a"@b.cd', False), ("a@[1.2.3.4]", False),
])
def test_email(value, ok):
    assert accepts({"type": "string", "format": "email"}, value) is ok
    if ok:
        assert CHECKER.conforms(value, "email")


def test_enforced_formats_have_no_note_and_others_are_named():
    for fmt in ENFORCED:
        assert notes_of({"type": "string", "format": fmt}) == [], fmt
    assert notes_of({"type": "string", "format": "iri"}) == [
        ("not enforced", "format", "format 'iri' is checked after generation")]
    assert notes_of({"type": "string", "format": "zip-code"}) == [
        ("not enforced", "format", "unknown format 'zip-code'")]
    assert accepts({"type": "string", "format": "zip-code"}, "anything")


# ---------------------------------------------------------------------------------------------------------
# formats: every text the grammar accepts is valid for the checker (random accepted texts), and values
# from independent generators are accepted


@st.composite
def accepted_texts(draw, dfa: D.ByteDFA) -> bytes:
    """A random text ``dfa`` accepts: a walk through live transitions that may stop in an accepting state."""
    alive = D.coreachable(dfa.transitions, dfa.accepting)
    s, out = dfa.start, bytearray()
    for _ in range(400):
        if dfa.accepting[s] and (len(out) > 200 or draw(st.integers(0, 5)) == 0):
            return bytes(out)
        row = dfa.transitions[s]
        live = np.flatnonzero((row >= 0) & alive[np.maximum(row, 0)])
        if not len(live):
            break
        b = int(draw(st.sampled_from(live.tolist())))
        out.append(b)
        s = int(row[b])
    if not dfa.accepting[s]:  # too long: finish by the shortest way (breadth-first)
        from collections import deque
        prev = {s: None}
        queue = deque([s])
        while queue:
            q = queue.popleft()
            if dfa.accepting[q]:
                path = []
                while prev[q] is not None:
                    q, b = prev[q]
                    path.append(b)
                out += bytes(reversed(path))
                break
            for b in np.flatnonzero(dfa.transitions[q] >= 0).tolist():
                t = int(dfa.transitions[q, b])
                if t not in prev:
                    prev[t] = (q, b)
                    queue.append(t)
    return bytes(out)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), fmt=st.sampled_from(ENFORCED))
def test_every_accepted_text_is_valid_for_the_checker(data, fmt):
    dfa, _ = compiled({"type": "string", "format": fmt})
    text = data.draw(accepted_texts(dfa))
    value = json.loads(text.decode("utf-8"))
    assert CHECKER.conforms(value, fmt), (fmt, value)
    if fmt == "hostname":
        assert len(value) <= HOSTNAME_MAX


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), fmt=st.sampled_from(ENFORCED), lo=st.integers(0, 12), span=st.integers(0, 30))
def test_accepted_texts_with_lengths_are_valid(data, fmt, lo, span):
    schema = {"type": "string", "format": fmt, "minLength": lo, "maxLength": lo + span}
    try:
        dfa, _ = compiled(schema)
    except SchemaError:  # no value of this format has such a length
        return
    value = json.loads(data.draw(accepted_texts(dfa)).decode("utf-8"))
    assert Draft202012Validator(schema, format_checker=CHECKER).is_valid(value), (schema, value)


def _v6(words: list[int], start: int, stop: int, v4: str | None) -> str:
    """Hextets ``words`` with ``words[start:stop]`` compressed to ``::`` (start == stop: none), the last 32
    bits written as ``v4`` when given."""
    parts = [f"{w:x}" for w in words]
    if v4 is not None:
        parts = parts[:6] + [v4]
    if start >= stop:
        return ":".join(parts)
    stop = min(stop, len(parts))
    return ":".join(parts[:start]) + "::" + ":".join(parts[stop:])


_octet = st.integers(0, 255).map(str)
FORMAT_VALUES = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.one_of(
        st.ip_addresses(v=6).map(lambda a: a.compressed),
        st.ip_addresses(v=6).map(lambda a: a.exploded),
        st.builds(_v6, st.lists(st.integers(0, 0xFFFF), min_size=8, max_size=8), st.integers(0, 8),
                  st.integers(0, 8), st.one_of(st.none(), st.builds("{}.{}.{}.{}".format, _octet, _octet, _octet,
                                                                      _octet)))),
    "uuid": st.uuids().map(str),
    "date-time": st.datetimes(timezones=st.timezones()).map(
        lambda d: d.replace(microsecond=d.microsecond).isoformat(timespec="seconds")).filter(lambda s: len(s) == 25),
}


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), fmt=st.sampled_from(sorted(FORMAT_VALUES)))
def test_generated_values_are_accepted(data, fmt):
    value = data.draw(FORMAT_VALUES[fmt])
    ok = CHECKER.conforms(value, fmt)
    if fmt == "ipv6":  # exact: every form the checker takes
        assert accepts({"type": "string", "format": fmt}, value) is ok, value
    else:
        assert ok
        assert accepts({"type": "string", "format": fmt}, value), value


# near-format strings: the verdict equals the checker's (the formats enforced exactly)
EXACT = {
    "date": st.text("0123456789-", max_size=11) | st.dates().map(lambda d: d.isoformat()[:8] + "29"),
    "ipv4": st.text("0123456789.", max_size=16) | st.builds("{}.{}.{}.{}".format, *[st.integers(0, 300)] * 4),
    "ipv6": st.text("0123456789abcdefABCDEF:.", max_size=20) | st.text("01:.f", max_size=16),
    "json-pointer": st.text("ab~01/\"\\\n", max_size=8),
    "relative-json-pointer": st.text("0123~/#a", max_size=6),
}


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), fmt=st.sampled_from(sorted(EXACT)))
def test_exact_formats_agree_with_the_checker(data, fmt):
    value = data.draw(EXACT[fmt])
    assert accepts({"type": "string", "format": fmt}, value) is CHECKER.conforms(value, fmt), value


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=st.text("ab.-1_", max_size=12))
def test_hostname_agrees_with_the_checker_without_trailing_dot(value):
    expected = CHECKER.conforms(value, "hostname") and not value.endswith(".") and len(value) <= HOSTNAME_MAX
    assert accepts({"type": "string", "format": "hostname"}, value) is expected


def test_ipv6_all_compressions_exhaustive():
    """Every way of writing 1:0:0:2:0:0:0:3 and 0:...:0 (each run of zeros compressed or not) gets the
    checker's verdict."""
    for words in ([1, 0, 0, 2, 0, 0, 0, 3], [0] * 8, [0, 0, 0, 0, 0, 0xFFFF, 0x102, 0x304]):
        for start in range(9):
            for stop in range(start, 9):
                for v4 in (None, "1.2.3.4"):
                    value = _v6(words, start, stop, v4)
                    ok = CHECKER.conforms(value, "ipv6")
                    assert accepts({"type": "string", "format": "ipv6"}, value) is ok, value
                    if ok:
                        ipaddress.IPv6Address(value)


# ---------------------------------------------------------------------------------------------------------
# pattern part of item 12: Unicode property classes


@pytest.mark.parametrize("value, ok", [("Hello", True), ("π", True), ("日本", True), ("123", False), ("", False),
                                       ("a b", False), ("é", True), ("e\u0301", False)])
def test_letter_property(value, ok):
    for pattern in ("^\\p{Letter}+$", "^\\p{L}+$", "^\\p{gc=L}+$", "^\\p{General_Category=Letter}+$"):
        schema = {"type": "string", "pattern": pattern}
        assert notes_of(schema) == []
        assert accepts(schema, value) is ok, pattern


@pytest.mark.parametrize("pattern, accepted, rejected", [
    ("^\\p{Lu}\\p{Ll}*$", ["Hello", "É", "Σσ"], ["hello", "HELLO", ""]),
    ("^\\P{L}+$", ["123", " -", "😀", '"\\'], ["a1", "π"]),
    ("^[\\p{L}\\d_]+$", ["a_1", "π3"], ["a-1", "٣"]),
    ("^[^\\p{L}]+$", ["12", "\n"], ["1a"]),
    ("^\\p{Nd}+$", ["123", "٣"], ["1a", "½"]),
    ("^\\p{Greek}+$", ["αβγ", "Ω"], ["abc", "αa"]),
    ("^\\p{Script=Greek}+$", ["αβγ"], ["abc"]),
    ("^\\p{sc=Cyrillic}{2}$", ["жд"], ["ж", "жa"]),
    ("^\\p{Zs}$", [" ", "\u3000"], ["\t", "a"]),
    ("^\\p{Cc}$", ["\n", "\x00", "\x7f"], ["a"]),
    ("^[\\p{Lu}\\p{Nd}]{2}$", ["A1", "ÉΩ"], ["a1", "A"]),
    ("\\p{N}", ["a1b", "½"], ["abc", ""]),
    ("^\\u{1F600}$", ["😀"], ["x"]),
    ("^\\uD83D\\uDE00$", ["😀"], ["x"]),
    ("^(?<year>\\d{4})$", ["2024"], ["24"]),
    ("^a$|^b$", ["a", "b"], ["ab", "c"]),
    ("^x|y$", ["xa", "ay", "x", "y"], ["axa", "yx"]),
])
def test_property_classes_and_ecma_spellings(pattern, accepted, rejected):
    schema = {"type": "string", "pattern": pattern}
    assert notes_of(schema) == [], pattern
    for v in accepted:
        assert accepts(schema, v), (pattern, v)
    for v in rejected:
        assert not accepts(schema, v), (pattern, v)


def test_property_class_with_lengths():
    schema = {"type": "string", "pattern": "^\\p{L}+$", "minLength": 2, "maxLength": 3}
    assert [accepts(schema, v) for v in ("ab", "αβγ", "a", "abcd", "a1")] == [True, True, False, False, False]


@pytest.mark.parametrize("pattern", ["\\p{Foo}", "\\p{gc=Foo}", "\\p{L", "[\\p{L}-z]", "[a-\\p{L}]", "(?i)a",
                                     "(?=a)", "a\\1", "\\U00000041", "a^b"])
def test_untranslatable_patterns_are_noted(pattern):
    schema = {"type": "string", "pattern": pattern}
    [(kind, keyword, _)] = notes_of(schema)
    assert (kind, keyword) == ("not enforced", "pattern")
    with pytest.raises(PatternError):
        pattern_regex(pattern)


def test_wide_classes_compile_quickly_and_agree_with_the_plain_regex():
    """The atoms route (pattern_dfa) builds the same automaton as interegular on the explicit classes."""
    for pattern in ("^\\p{L}{1,2}$", "^[\\p{Lu}\\d]{2}$", "ab\\P{N}"):
        t = time.perf_counter()
        fast = pattern_dfa(pattern)
        assert time.perf_counter() - t < 2.5
        plain = D.from_regex('"' + pattern_regex(pattern) + '"')
        assert np.array_equal(fast.transitions, plain.transitions) and np.array_equal(fast.accepting, plain.accepting)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=st.text(st.characters(codec="utf-8"), max_size=4))
def test_letter_class_agrees_with_unicodedata(value):
    expected = len(value) >= 1 and all(unicodedata.category(c).startswith("L") for c in value)
    assert accepts({"type": "string", "pattern": "^\\p{L}+$"}, value) is expected
    expected_upper = all(unicodedata.category(c) != "Lu" for c in value)
    assert accepts({"type": "string", "pattern": "^\\P{Lu}*$"}, value) is expected_upper


# ---------------------------------------------------------------------------------------------------------
# the JSON Schema Test Suite files of this area


SUITE_EXCLUSIONS = {
    # formats are assertions here (the grammar enforces them), annotations only in 2020-12
    ("format.json", "invalid email string is only an annotation by default"),
    ("format.json", "invalid ipv4 string is only an annotation by default"),
    ("format.json", "invalid ipv6 string is only an annotation by default"),
    ("format.json", "invalid hostname string is only an annotation by default"),
    ("format.json", "invalid date string is only an annotation by default"),
    ("format.json", "invalid date-time string is only an annotation by default"),
    ("format.json", "invalid time string is only an annotation by default"),
    ("format.json", "invalid json-pointer string is only an annotation by default"),
    ("format.json", "invalid relative-json-pointer string is only an annotation by default"),
    ("format.json", "invalid uri string is only an annotation by default"),
    ("format.json", "invalid uri-reference string is only an annotation by default"),
    ("format.json", "invalid uuid string is only an annotation by default"),
    ("format.json", "invalid duration string is only an annotation by default"),
}


def suite_cases():
    folder = SHARED / "data" / "json_schema_test_suite" / "draft2020-12"
    for name in ("minLength.json", "maxLength.json", "pattern.json", "format.json"):
        path = folder / name
        if not path.exists():
            continue
        for group in json.loads(path.read_text()):
            for test in group["tests"]:
                yield pytest.param(name, group["schema"], test, id=f"{name}:{group['description']}:{test['description']}")


@pytest.mark.parametrize("name, schema, test", list(suite_cases()))
def test_json_schema_test_suite(name, schema, test):
    if "type" not in schema and isinstance(test["data"], (dict, list)):
        pytest.skip("a schema without 'type' allows no objects or arrays unless its keywords name them "
                    "(noted 'limited'; untyped schemas are not this area's)")
    if (name, test["description"]) in SUITE_EXCLUSIONS:
        assert not accepts(schema, test["data"])  # refused, as the grammar enforces the format
        return
    assert accepts(schema, test["data"]) is test["valid"]


# ---------------------------------------------------------------------------------------------------------
# minimization of long chains (dfa.minimize recomputes only the states that may split after FULL_ROUNDS)


def _moore_only(dfa: D.ByteDFA) -> D.ByteDFA:
    saved, D.FULL_ROUNDS = D.FULL_ROUNDS, 10**9
    try:
        return D.minimize(dfa)
    finally:
        D.FULL_ROUNDS = saved


def _same(a: D.ByteDFA, b: D.ByteDFA) -> bool:
    return (a.start == b.start and np.array_equal(a.transitions, b.transitions)
            and np.array_equal(a.accepting, b.accepting))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(n=st.integers(1, 60), data=st.data(), full=st.integers(0, 3))
def test_incremental_refinement_equals_moore(n, data, full):
    """Random automata (few bytes, some chains) minimize to the same arrays either way."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    trans = np.full((n, 256), -1, dtype=np.int32)
    for b in (0x61, 0x62, 0x63)[: data.draw(st.integers(1, 3))]:
        targets = rng.integers(-1, n, size=n)
        if data.draw(st.booleans()):  # a chain: each state to the next
            targets = np.where(rng.random(n) < 0.8, np.minimum(np.arange(n) + 1, n - 1), targets)
        trans[:, b] = targets
    accepting = rng.random(n) < data.draw(st.sampled_from([0.1, 0.5]))
    accepting[rng.integers(0, n)] = True
    dfa = D.ByteDFA(trans, accepting, 0)
    try:
        expected = _moore_only(dfa)
    except SchemaError:
        return
    saved, D.FULL_ROUNDS = D.FULL_ROUNDS, full
    try:
        assert _same(D.minimize(dfa), expected)
    finally:
        D.FULL_ROUNDS = saved


def test_incremental_refinement_on_counters_and_patterns():
    for dfa in (length_dfa(0, 300), length_dfa(7, None), length_dfa(40, 90), pattern_dfa("^[a-c]{5,60}x?$"),
                compiled({"type": "string", "pattern": "^\\p{L}+$", "maxLength": 50})[0]):
        assert _same(D.minimize(dfa), _moore_only(dfa))


def test_an_escaped_code_point_never_stands_for_a_property_class():
    # a breaking session's find: U+10FFFD written as an escape was taken for the placeholder of \p{L}
    schema = {"type": "string", "pattern": "^\\uDBFF\\uDFFD\\p{L}$"}
    dfa, _ = schema_dfa(schema)
    assert [dfa.accepts(canonical(v).encode()) for v in ["aa", "\U0010FFFDa", "\U0010FFFD1"]] == [False, True, False]


def test_email_automaton_built_directly_is_the_regexs():
    """Issue 31: the ``email`` format's automaton is built state by state (its 63-character labels), not
    through interegular; minimized, it is the regex's automaton array for array."""
    import numpy as np

    from callmaybe.compiler.automata import dfa as D
    from callmaybe.compiler.automata.formats import EMAIL, _email_dfa, format_node
    from callmaybe.compiler.automata.lexical import string_of

    direct, regex = _email_dfa(), D.from_regex(string_of(EMAIL))
    assert direct.num_states == regex.num_states == 254
    assert np.array_equal(direct.transitions, regex.transitions)
    assert np.array_equal(direct.accepting, regex.accepting) and direct.start == regex.start
    assert format_node("email").regex == string_of(EMAIL)
    assert direct.accepts(b'"a.b@c-d.e"') and not direct.accepts(b'"a@b"') and not direct.accepts(b'"a@-b.c"')
    assert direct.accepts(b'"a@' + b"b" * 63 + b'.c"') and not direct.accepts(b'"a@' + b"b" * 64 + b'.c"')
