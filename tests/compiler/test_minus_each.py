"""Issue 31 (eighth round): a ``oneOf`` branch minus the others skips the differences that remove nothing (the
other branch shares no first byte, or no text at all, with what is left), and gives the automaton and the count
of states against the budget that the difference by products gives."""

import numpy as np
import pytest

from callmaybe.compiler import limits
from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.automata.compose import _apart, _disjoint, _minus_each, _successors, is_empty, product
from callmaybe.compiler.limits import Budget, CompileLimits


def _by_products(part, others):
    """``_minus_each`` as it was: one product per other part, minimized after each."""
    out = D.minimize(part)
    for q in others:
        rest = product(out, q, "minus")
        if is_empty(rest):
            return None
        out = D.minimize(rest)
    return out


def _counted(fn, *args):
    budget = Budget(CompileLimits(), lambda at: at)
    with limits.active(budget):
        got = fn(*args)
    return budget.used["states"], got


def _arrays(dfa):
    return None if dfa is None else (dfa.transitions.tolist(), dfa.accepting.tolist(), dfa.start)


def m(regex):
    return D.minimize(D.from_regex(regex))


def test_apart_by_first_byte_and_empty_text():
    assert _apart(m("(ab)*c"), m('"q"')) is True
    assert _apart(m("a[0-9]+"), m("a1")) is False  # both start with "a"
    assert _apart(m("a*"), m("b*")) is False  # both accept the empty text
    assert _apart(m("a*"), m("b+")) is True


def test_apart_counts_the_states_the_product_builds():
    # (ab)*c: start s0 (a -> s1, c -> s2), s1 (b -> s0), s2 accepting; minus '"q"', pairs: (s0, start), then
    # (s1, dead), (s2, dead), (s0, dead): 4, one more than the states since a transition leads back to s0
    a, b = m("(ab)*c"), m('"q"')
    assert a.num_states == 3
    assert _counted(product, a, b, "minus")[0] == 4
    assert _counted(_apart, a, b) == (4, True)
    # x(ab)*: no transition back to the start: as many pairs as states
    a = m("x(ab)*")
    assert _counted(product, a, b, "minus")[0] == a.num_states == 3
    assert _counted(_apart, a, b) == (3, True)
    assert _counted(_apart, m("a[0-9]+"), m("a1")) == (0, False)


@pytest.mark.parametrize("part, others, left, gone", [
    ("(ab)*c", ['"q"', "[0-9]+"], [b"c", b"abc"], [b"ab"]),  # apart from both: nothing built
    ("ab|ac", ["ad", "ae+"], [b"ab", b"ac"], [b"ad"]),  # same first byte, nothing in common: the product only
    ("a[0-9]+", ["a1", '"x"', "a2[0-9]"], [b"a0", b"a3", b"a200"], [b"a1", b"a20"]),  # texts of both: subtracted
    ("a*", ["b*"], [b"a", b"aa"], [b""]),  # the empty text of both: subtracted
])
def test_minus_each_is_the_difference_by_products(part, others, left, gone):
    p, qs = D.from_regex(part), [m(q) for q in others]
    n_products, by_products = _counted(_by_products, p, qs)
    n, got = _counted(_minus_each, p, qs)
    assert _arrays(got) == _arrays(by_products)
    assert n == n_products
    assert [got.accepts(t) for t in left + gone] == [True] * len(left) + [False] * len(gone)


def test_minus_each_gives_none_when_nothing_is_left():
    p, qs = D.from_regex("a[0-9]"), [m('"q"'), m("a[0-4]"), m("a[5-9]")]
    assert _counted(_minus_each, p, qs) == _counted(_by_products, p, qs)
    assert _minus_each(p, qs) is None


def test_apart_is_exact_on_random_unions():
    # branches of alternatives over a few first bytes: skipped or not, the same automaton and count
    rng = np.random.default_rng(8)
    words = ["a1", "a2", "b1", "b22", "c", "cc", "d[0-9]", "e+"]
    for _ in range(30):
        pick = [words[i] for i in rng.choice(len(words), size=rng.integers(1, 4), replace=False)]
        others = [m("|".join(words[i] for i in rng.choice(len(words), size=rng.integers(1, 3), replace=False)))
                  for _ in range(3)]
        part = D.from_regex("|".join(pick))
        assert _counted(_minus_each, part, others)[0] == _counted(_by_products, part, others)[0]
        assert _arrays(_minus_each(part, others)) == _arrays(_by_products(part, others))


def test_disjoint_counts_the_pairs_and_the_escapes():
    # a = {"a": [0-9]+} (9 states); b = {"b": 1|"ab": 1}: the pairs of one text are the start, {, {", {"a
    # (4); from {"a the byte '"' leaves b: then a's 5 states from '"' on (", :, the space, digits, }), alone
    a, b = m('\\{"a": [0-9]+\\}'), m('\\{"b": 1\\}|\\{"ab": 1\\}')
    assert a.num_states == 9
    successors = _successors(a.transitions)
    assert _counted(_disjoint, a, b, successors) == (4 + 5, True)
    assert _counted(product, a, b, "minus")[0] == 4 + 5
    # a text of both: False, nothing counted
    assert _counted(_disjoint, a, m('\\{"a": 7\\}'), successors) == (0, False)
    assert _disjoint(m("a*"), m("b*"), _successors(m("a*").transitions)) is False  # the empty text


def test_disjoint_is_the_product_on_random_automata():
    # loops, shared prefixes: whether the languages meet (the "and" product is empty or not), and the pairs the
    # "minus" product builds when they do not
    rng = np.random.default_rng(81)
    words = ["ab", "a(bc)*d", "(ab)+", "b[0-9]", "ba*c", "abc", "a[b-d]+e", "x?y", "ab*"]
    seen = set()
    for _ in range(60):
        a, b = (m("|".join(words[i] for i in rng.choice(len(words), size=rng.integers(1, 3), replace=False)))
                for _ in range(2))
        meet = not is_empty(product(a, b, "and"))
        n, got = _counted(_disjoint, a, b, _successors(a.transitions))
        assert got is not meet
        if got:
            assert n == _counted(product, a, b, "minus")[0]
        seen.add(got)
    assert seen == {True, False}
