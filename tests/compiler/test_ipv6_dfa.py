"""Issue 31 (ninth round): the IPv6 address automaton (under the ``uri`` formats' IP literals) joined from its
nine forms and one ``ls32`` automaton is interegular's minimal automaton of the whole regex."""

import numpy as np

from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.automata import formats as F


def test_the_ipv6_automaton_from_its_forms_is_the_regex_automaton():
    built, whole = F._ipv6_dfa(), D.from_regex(F.IPV6)
    assert built.num_states == whole.num_states == 151 and built.start == whole.start == 0
    assert built.transitions.dtype == whole.transitions.dtype
    assert np.array_equal(built.transitions, whole.transitions)
    assert np.array_equal(built.accepting, whole.accepting)
    assert F.IPV6 == "(?:" + "|".join(F._ipv6_forms()) + ")" and len(F._ipv6_forms()) == 9
    for text, ok in [(b"::", True), (b"::1", True), (b"1:2:3:4:5:6:7:8", True), (b"::ffff:192.168.0.1", True),
                     (b"1::2::3", False), (b"1:2:3:4:5:6:7:8:9", False), (b"::256.1.1.1", False), (b"", False)]:
        assert (built.state_after(text) >= 0 and bool(built.accepting[built.state_after(text)])) is ok, text


def test_the_ipv6_format_leaf_is_the_regex_leaf_and_kept_once():
    """format ``ipv6`` was a Leaf of its regex through interegular (0.18-0.25 s a compile); it is now joined from
    the forms between quotes, the same minimal automaton, built once per process (the leaf cache)."""
    from callmaybe.compiler.automata.lexical import string_of
    from callmaybe.compiler.automata.nodes import LEAF_CACHE

    LEAF_CACHE.clear()
    node = F.format_node("ipv6")
    got, whole = node.build(), D.from_regex(string_of(F.IPV6))
    assert node.regex == string_of(F.IPV6) and got.num_states == whole.num_states == 153
    assert np.array_equal(got.transitions, whole.transitions) and np.array_equal(got.accepting, whole.accepting)
    assert F.format_node("ipv6").build() is got  # from the leaf cache
    uri = F.format_node("uri").build()
    assert F.format_node("uri").build() is uri and uri.num_states == 181
