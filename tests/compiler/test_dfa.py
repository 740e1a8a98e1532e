import json

import numpy as np
import pytest

from callmaybe.core.catalog import load_catalog, parse_catalog
from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.grammar import compile_grammar
from callmaybe.compiler.automata.lexical import INTEGER, NUMBER, STRING


def accepts(regex, text):
    return D.from_regex(regex).accepts(text.encode("utf-8") if isinstance(text, str) else text)


@pytest.mark.parametrize("text", [
    '""', '"abc"', '"\\"\\\\\\b\\f\\n\\r\\t"', '"\\u0000\\u0007\\u000b\\u000e\\u001f"', '"日本語"', '"😀"',
    '"\u2028"', '"\x7f"', '"a\'b"', '"/"',
])
def test_string_accepts_canonical_text(text):
    """Every string as json.dumps writes it (ensure_ascii=False)."""
    assert accepts(STRING, text) and json.dumps(json.loads(text), ensure_ascii=False) == text


@pytest.mark.parametrize("text", [
    '"\\/"', '"\\u00e9"', '"\\uD83D\\ude00"', '"\\u0041"', '"\\u001F"', '"\\u0009"', '"\\u000a"', '"\\u0022"',
    '"\\u005c"', '"\\ud83d"',
])
def test_string_rejects_other_spellings(text):
    """RFC 8259's other spellings of a string (``\\/``, ``\\uXXXX`` of a character that is written as itself or
    has a short escape, upper-case hex, a lone surrogate) are not written: each string has one text."""
    assert json.loads(text) is not None and not accepts(STRING, text)


@pytest.mark.parametrize("text", [
    '"a', 'a"', '"\n"', '"\x00"', '"\x1f"', '"\\x41"', '"\\u12"', '"\\u12g4"', '"\\a"', '"a"b"',
    b'"\xed\xa0\x80"',  # UTF-8 encoded surrogate
    b'"\xc0\xaf"',  # overlong
    b'"\xf4\x90\x80\x80"',  # above U+10FFFF
    b'"\xe6\x97"',  # truncated character
])
def test_string_rejects_invalid(text):
    assert not accepts(STRING, text)


@pytest.mark.parametrize("text, ok", [
    ("0", True), ("-0", True), ("-0.0", True), ("12", True), ("1.5", True), ("-2.5e-11", True), ("1E+2", True),
    ("-0.25e-10", True), ("12e3", True), ("12e293", False), ("1234567890123456789012", True),
    ("1234567890123456.5", True), ("12345678901234567.5", False), ("01", False), ("1.", False), (".5", False),
    ("1e", False), ("1e123", True),
    ("1e+308", True), ("1.7976931348623157e308", True), ("1.7976931348623158e308", False), ("1e309", False),
    ("1e-400", True), ("0.1234567890123456789", True), ("+1", False), ("NaN", False), ("Infinity", False),
])
def test_number(text, ok):
    assert accepts(NUMBER, text) is ok


@pytest.mark.parametrize("text, ok", [("0", True), ("-7", True), ("1.0", False), ("1e3", False), ("00", False),
                                      ("-0", True), ("2512292042121000001", True), ("-" + "9" * 40, True)])
def test_integer(text, ok):
    assert accepts(INTEGER, text) is ok


def test_utf8_split_states_are_shared():
    # "any character" needs: 1 state per remaining continuation byte count, plus the restricted leads
    d = D.from_regex('"[^"]*"')
    # start, body, end; 1, 2 or 3 continuation bytes left (any); after E0 (A0-BF next), ED (80-9F next),
    # F0 (90-BF next), F4 (80-8F next)
    assert d.num_states == 10
    assert d.accepts('"é日😀"'.encode())


def test_joined_call_equals_whole_regex(public_catalog_path):
    g = compile_grammar(load_catalog(public_catalog_path))
    whole = D.from_regex(g.regex)
    assert np.array_equal(whole.transitions, g.dfa.transitions)
    assert np.array_equal(whole.accepting, g.dfa.accepting)
    assert g.dfa.num_states == 453


def test_call_dfa_accepts_canonical_calls_only(public_catalog_path):
    d = compile_grammar(load_catalog(public_catalog_path)).dfa
    good = {"name": "fn_substitute_string_with_regex",
            "parameters": {"source_string": "Hello 34", "regex": "\\d+", "replacement": "N"}}
    assert d.accepts(json.dumps(good).encode())
    assert not d.accepts(json.dumps(good, indent=1).encode())  # not the canonical layout
    assert not d.accepts(b'{"name": "fn_greet", "parameters": {"s": "x"}}')  # fn_reverse_string's key
    assert d.accepts(b'{"name": "fn_reverse_string", "parameters": {"s": "x"}}')
    assert not d.accepts(b'{"name": "fn_add_numbers", "parameters": {"b": 1, "a": 2}}')  # order
    assert not d.accepts(b'{"name": "fn_add_numbers", "parameters": {"a": 1}}')  # missing required


def test_optional_properties_and_special_keys():
    fns = parse_catalog([{"type": "function", "function": {"name": "g", "parameters": {
        "type": "object",
        "properties": {'we"ird.key\\': {"type": "integer"}, "ü": {"enum": ["a|b", "x*"]}},
        "required": ["ü"]}}}], "t")
    d = compile_grammar(fns).dfa
    for args, ok in [
        ({"ü": "a|b"}, True), ({'we"ird.key\\': 3, "ü": "x*"}, True), ({}, False), ({"ü": "ab"}, False),
    ]:
        text = json.dumps({"name": "g", "parameters": args}, ensure_ascii=False)
        assert d.accepts(text.encode()) is ok, text


def test_accepting_states_are_terminal_in_calls(public_catalog_path):
    d = compile_grammar(load_catalog(public_catalog_path)).dfa
    acc = np.flatnonzero(d.accepting)
    assert len(acc) == 1 and (d.transitions[acc] < 0).all()


def test_byte_classes_survive_a_hash_collision(monkeypatch):
    """With every hash multiplier 1, columns (0, 1) and (1, 0) collide; the exact check must split them."""
    import numpy as np
    from callmaybe.compiler.automata import dfa as dfa_mod

    t = np.full((2, 256), -1, dtype=np.int32)
    t[:, ord("a")] = [0, 1]
    t[:, ord("b")] = [1, 0]
    t[:, ord("c")] = [0, 1]
    exact = dfa_mod.byte_classes(t)

    class Ones:
        def integers(self, low, high, size, dtype):
            return np.ones(size, dtype=dtype)

    monkeypatch.setattr(dfa_mod.np.random, "default_rng", lambda seed: Ones())
    byte_class, class_trans = dfa_mod.byte_classes(t)
    assert byte_class[ord("a")] == byte_class[ord("c")] != byte_class[ord("b")]
    assert len(set(byte_class.tolist())) == 3 and class_trans.shape == (2, 3)
    assert np.array_equal(byte_class, exact[0]) and np.array_equal(class_trans, exact[1])


def test_leaf_cache_is_bounded_and_times_only_what_it_builds():
    from callmaybe.compiler.automata.nodes import LeafCache

    cache = LeafCache(maxsize=2)
    timings = {}
    a = cache.get('"a"', timings)
    assert set(timings) == {"automaton", "byte expansion"} and a.accepts(b'"a"')
    hit = {}
    assert cache.get('"a"', hit) is a and hit == {}  # a hit costs nothing
    cache.get('"b"')
    cache.get('"c"')
    assert len(cache) == 2 and cache.get('"a"') is not a  # the least recently used one was dropped
    cache.clear()
    assert len(cache) == 0


def _coreachable_plain(transitions, accepting):
    """The states that reach acceptance, by a fixpoint over every transition."""
    src, byte = np.nonzero(transitions >= 0)
    dst = transitions[src, byte]
    alive = accepting.astype(bool).copy()
    while True:
        grown = alive.copy()
        np.logical_or.at(grown, src, alive[dst])
        if np.array_equal(grown, alive):
            return alive
        alive = grown


def test_coreachable_in_one_search_is_the_fixpoint():
    from callmaybe.compiler.automata.reach import coreachable

    # a chain 0 -> 1 -> 2 -> 3 (accepting) with a branch 1 -> 4 into a dead loop, and 5 unreached
    t = np.full((6, 256), -1, dtype=np.int32)
    t[0, ord("a")], t[1, ord("b")], t[2, ord("c")], t[1, ord("x")], t[4, ord("y")] = 1, 2, 3, 4, 4
    t[5, ord("z")] = 3
    accepting = np.array([0, 0, 0, 1, 0, 0], dtype=np.uint8)
    got = coreachable(t, accepting)
    assert got.dtype == bool and got.tolist() == [True, True, True, True, False, True]
    assert coreachable(np.full((2, 256), -1, dtype=np.int32), np.zeros(2, dtype=bool)).tolist() == [False, False]
    rng = np.random.default_rng(7)
    for n, dead in [(40, 0.5), (300, 0.97), (3000, 0.995)]:
        t = rng.integers(0, n, size=(n, 256)).astype(np.int32)
        t[rng.random((n, 256)) < dead] = -1
        accepting = rng.random(n) < 0.02
        accepting[n // 2] = True
        assert np.array_equal(coreachable(t, accepting), _coreachable_plain(t, accepting))
    for n in (50, 2000):  # rows of runs of bytes to one target (each run is one edge), a target in two runs
        t = _runs(rng, n)
        accepting = rng.random(n) < 0.01
        assert np.array_equal(coreachable(t, accepting), _coreachable_plain(t, accepting))


def _runs(rng, n):
    """A random automaton whose rows are a few runs of bytes to one target each (as string states are)."""
    t = np.full((n, 256), -1, dtype=np.int32)
    for s in range(n):
        for _ in range(int(rng.integers(0, 5))):
            lo = int(rng.integers(0, 256))
            t[s, lo:lo + int(rng.integers(1, 120))] = rng.integers(0, n)
    return t


def test_breadth_first_order_over_byte_classes_is_the_order_over_bytes():
    """minimize renumbers over its class table: the same order as over the bytes (each class's first byte
    orders the classes), so the same arrays."""
    from callmaybe.compiler.automata.reach import bfs_order

    rng = np.random.default_rng(3)
    for n in (30, 400, 3000):
        t = _runs(rng, n)
        byte_class, ct = D.byte_classes(t)
        for start in (0, n // 3):
            assert np.array_equal(bfs_order(ct, start), bfs_order(t, start))
    t = np.full((3, 256), -1, dtype=np.int32)
    t[0, ord("b")], t[0, ord("a")], t[0, ord("c")] = 1, 2, 1  # by byte: 2 (at "a") before 1 (at "b")
    byte_class, ct = D.byte_classes(t)
    assert ct.shape == (3, 3)  # the dead bytes, "a", "b" with "c"
    assert bfs_order(ct, 0).tolist() == bfs_order(t, 0).tolist() == [0, 2, 1]
