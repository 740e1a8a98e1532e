"""Issue 30, item 11: the check after generation searches patterns in linear time (RE2, :mod:`callmaybe.core.linear`)
with ECMA-262's meanings; a pattern it cannot decide in linear time is refused with the catalog, never handed to a
backtracking engine."""

from __future__ import annotations

import threading

import jsonschema
import pytest

from callmaybe.core.catalog import parse_function
from callmaybe.core.errors import CatalogError
from callmaybe.core.linear import UncheckablePattern, re2_syntax, search
from callmaybe.core.validation import Checker
from callmaybe.runtime.decoding.calls import schema_error

SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(x+x+)+y"}}, "required": ["a"]}


def finished(target, seconds=30.0):
    """Run ``target`` in a thread; its result, or a failure when it has not returned after ``seconds`` (a guard
    against a hang: Python's re took 12.6 s at 28 characters here and four times longer per two more)."""
    out = []
    thread = threading.Thread(target=lambda: out.append(target()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, "the check did not finish: a backtracking search"
    return out[0]


@pytest.mark.parametrize("xs", [24, 28, 60, 100_000])
def test_the_issues_pattern_is_checked_without_backtracking(xs):
    assert finished(lambda: schema_error({"a": "x" * xs + "z xxy"}, SCHEMA)) is None  # "xxy" matches
    assert finished(lambda: schema_error({"a": "x" * xs + "z"}, SCHEMA)) == f"{'x' * xs + 'z'!r} does not match '(x+x+)+y'"


def test_jsonschema_itself_searches_in_linear_time():
    """Every keyword that reads a pattern goes through the linear search: pattern, patternProperties and the
    key lookups of additionalProperties (jsonschema's own functions, installed by core.validation)."""
    evil = "(x+x+)+y"
    key = "x" * 60 + "z"
    schema = {"type": "object", "patternProperties": {evil: {"type": "integer"}}, "additionalProperties": False}
    assert finished(lambda: Checker(schema).is_valid({key: 1})) is False
    assert finished(lambda: jsonschema.Draft202012Validator(schema).is_valid({key + " xxy": 1})) is True


@pytest.mark.parametrize("pattern, text, ok", [
    ("^abc$", "abc\n", False),  # ECMA's $ is the end of the text (Python's re matched before a final newline)
    ("^abc$", "abc", True),
    ("a.b", "a\rb", False), ("a.b", "a\u2028b", False), ("a.b", "axb", True),  # . is not a line terminator
    ("^\\d+$", "٣", False), ("^\\d+$", "123", True),  # ECMA's \d is ASCII
    ("^\\w$", "é", False), ("\\p{Lu}", "É", True), ("^\\P{L}$", "1", True),
    ("^a{2500}$", "a" * 2500, True), ("^a{2500}$", "a" * 2499, False),  # counts past RE2's 1,000
    ("^a{0,2500}$", "a" * 2500, True), ("^a{0,2500}$", "a" * 2501, False),
    ("^(?:ab{600}){3}$", ("a" + "b" * 600) * 3, True), ("^(?:ab{600}){3}$", ("a" + "b" * 600) * 2, False),
    ("^x{3,}$", "x" * 5000, True), ("^x{3,}$", "xx", False),
    ("\\bcat\\b", "a cat!", True), ("\\bcat\\b", "concat", False),
    ("^.$", "\ud800", True),  # a lone surrogate (JSON allows "\ud800") is searched as one character
])
def test_ecma_262_meanings(pattern, text, ok):
    assert search(pattern, text) is ok


def test_the_issue_30_item_2_pattern_is_read():
    assert search("^(a|aa)*(b|c){50,900}[^x]{1000}$", "b" * 50 + "y" * 1000)
    assert re2_syntax("^abc$") == "\\A\\x{61}\\x{62}\\x{63}\\z"


@pytest.mark.parametrize("pattern, what", [
    ("^(?=.*\\d)\\w+$", "a lookahead"), ("(?<!a)b", "a lookbehind"), ("(a)\\1", "a backreference"),
    ("(?>a+)b", "an atomic group"), ("a*+", "a possessive repeat"), ("(a)?(?(1)b|c)", "a conditional group"),
])
def test_what_re2_cannot_decide_is_refused_with_the_catalog(pattern, what):
    with pytest.raises(UncheckablePattern) as err:
        search(pattern, "a")
    message = f"pattern {pattern!r} holds {what}, which the check after generation cannot decide in linear time"
    assert str(err.value) == message
    entry = {"name": "f", "parameters": {"a": {"type": "string", "pattern": pattern}}}
    with pytest.raises(CatalogError) as err:
        parse_function(entry, "cat.json: function 0")
    assert str(err.value) == f"cat.json: function 0 (f): {message}"


def test_a_pattern_too_large_for_the_check_is_refused_at_once():
    """Found trying it again as a hostile client: ``^a{99999999}$`` made RE2 spend 13 s (and log thousands
    of lines) before refusing it; a repeat past 10,000 copies is refused before RE2 sees it, and a program
    past RE2's 32 MiB fails in about a second (``\\p{L}`` is 1,167 instructions a copy)."""
    from callmaybe.core.linear import linear_regex

    with pytest.raises(UncheckablePattern) as err:
        re2_syntax("^(?:a{1000}){11}$")
    assert str(err.value) == ("pattern '^(?:a{1000}){11}$' holds a repeat of 11,000 copies (at most 10,000), which "
                              "the check after generation cannot decide in linear time")
    with pytest.raises(UncheckablePattern) as err:
        linear_regex("^\\p{L}{1,10000}$")
    assert str(err.value) == ("pattern '^\\\\p{L}{1,10000}$' is too large for the check after generation (pattern "
                              "too large - compile failed)")
