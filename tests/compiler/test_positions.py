"""The character DFA by positions (compiler/automata/positions.py) against interegular's own construction: the
same minimal byte DFA for every kind of node the compiler's regexes use; lookarounds and flags left to
interegular; an exploding automaton stopped by the pattern limit."""

import interegular
import numpy as np
import pytest

from callmaybe.compiler import limits
from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.automata import positions
from callmaybe.compiler.automata.lexical import LOOSE_INTEGRAL, STRING, STRING_CHAR, WIDE_EXPONENT
from callmaybe.compiler.automata.pattern import pattern_regex
from callmaybe.core.errors import SchemaError

REGEXES = [
    "abc", "a|b|", "(?:ab|a)c?", "[a-c]*d", "[^a-c]+", "x{3}", "x{2,5}", "x{0,3}y", "(?:ab|c){1,4}", "(?:a?){3}",
    "(?:a*b?){2,}", "(?:(?:ab){1,3}c){0,2}", ".", ".*\\n?", "\\d+\\.\\d{2}", "[\\s\\S]{2}", "é|ü+|日本", "\\x00-",
    "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+\\-]?[0-9]+)?", STRING, '"' + STRING_CHAR + '{1,80}"',
    LOOSE_INTEGRAL, WIDE_EXPONENT, pattern_regex("^[a-z]+@[a-z]+\\.(?:com|org)$"), pattern_regex("\\S+,\\S+"),
    pattern_regex("^(?:\\p{Lu}\\p{Ll}*)+$"), "(?:)", "a(?:)b", "(?:a|b|)*c", "(?:ab){3,}", "(?:a?b){2,}c",
    "(?:a|b?){1,}", "x(?:(?:a+)*b)+", "(?:(?:a){2,})+", "(?:(?:(?:[ab]c?)+)+)+",
]


def _byte_dfa(fsm) -> D.ByteDFA:
    return D._expand(fsm)


@pytest.mark.parametrize("regex", REGEXES)
def test_positions_give_interegulars_automaton(regex):
    parsed = interegular.parse_pattern(regex)
    ours, theirs = _byte_dfa(positions.character_fsm(parsed)), _byte_dfa(parsed.to_fsm())
    assert np.array_equal(ours.transitions, theirs.transitions)
    assert np.array_equal(ours.accepting, theirs.accepting) and ours.start == theirs.start


def test_a_long_repeat_is_built_in_linear_steps():
    """200 copies of one JSON string character (interegular: 0.7 s, its time the square of the copies): 2,003
    character states as interegular's, the same byte DFA."""
    parsed = interegular.parse_pattern('"' + STRING_CHAR + '{1,200}"')
    fsm = positions.character_fsm(parsed)
    assert len(fsm.states) == len(parsed.to_fsm().states) == 2003
    assert np.array_equal(_byte_dfa(fsm).transitions, _byte_dfa(parsed.to_fsm()).transitions)


def test_nested_plus_is_one_copy_per_level():
    """``X+`` is one copy of X that follows itself, not ``X X*``: 30 nested ``+`` are 2 character states (as
    two copies per level they were 2**30 positions; a helper's harness with the pattern limit raised ran out of
    memory at 14 levels)."""
    fsm = positions.character_fsm(interegular.parse_pattern("(?:" * 30 + "a" + ")+" * 30))
    assert len(fsm.states) == 2 and _byte_dfa(fsm).accepts(b"aaa") and not _byte_dfa(fsm).accepts(b"")


def test_lookarounds_and_flags_are_left_to_interegular():
    """Anywhere in the tree, under a repeat of no copies too (where interegular still refuses a lookahead);
    a repeat whose maximum is below its minimum is refused as interegular refuses it (a helper's random
    regexes: both had built a DFA here)."""
    assert positions.character_fsm(interegular.parse_pattern("a(?=b)b")) is None
    assert positions.character_fsm(interegular.parse_pattern("(?i:ab)")) is None
    assert positions.character_fsm(interegular.parse_pattern("(?:(?=a)(\\w|)|\\D{2,5}|){0,0}x")) is None
    assert D.from_regex("a(?=b)b").accepts(b"ab") and not D.from_regex("a(?=b)b").accepts(b"a")
    with pytest.raises(SchemaError, match=r"^cannot compile regex: Unsupported: Group can not have lookbacks"):
        D.from_regex("(?:(?=a)(\\w|)|\\D{2,5}|){0,0}x")
    with pytest.raises(SchemaError, match=r"^cannot compile regex: ValueError: a repeat \{1,0\} whose maximum is "
                                          r"below its minimum$"):
        D.from_regex("b{1,0}|a")


def test_an_exploding_automaton_stops_at_the_pattern_limit():
    """``[ab]*a[ab]{20}``: 2**21 sets of positions; the budget's pattern limit stops it."""
    budget = limits.Budget(limits.CompileLimits(pattern=5000), lambda at: "schema 's'")
    with limits.active(budget), pytest.raises(limits.CompileLimitError, match="needs more than 5,000 automaton states"):
        D.from_regex("[ab]*a[ab]{20}")
