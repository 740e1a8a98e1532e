"""The cheaper joins give the languages of the plain constructions they replace (issue 31, third round):

* ``compose.structure``'s tries share equal sub-tries: the same language as one plain trie per choice
  list, and each trie counts the plain trie's nodes against the budget;
* ``compose.exactly_one`` without counters subtracts the other parts one at a time: the same language as
  each part minus the union of the others;
* ``object_automaton.tagged_product`` by levels: the same tagged language as state by state;
* ``dfa.minimize`` of an automaton it made returns it as it is.

The plain constructions are written out here as they were before this round; the minimal DFAs are
compared array for array (equal languages give equal arrays, :func:`~callmaybe.compiler.automata.dfa.minimize`).
The last test compiles JSONSchemaBench schemas both ways (skipped without ``../shared/data``).
"""

import json
from pathlib import Path

import numpy as np
import pytest

from callmaybe.compiler import limits
from callmaybe.compiler.automata import compose, nodes
from callmaybe.compiler.automata import dfa as D
from callmaybe.compiler.automata import object_automaton as OA
from callmaybe.compiler.automata.assembly import Assembly
from callmaybe.compiler.automata.compose import Clash, literals, merge_rows, product, union_all
from callmaybe.compiler.grammar import schema_dfa
from callmaybe.compiler.limits import Budget, CompileLimits

REPO = Path(__file__).resolve().parents[2]
JSB = REPO.parent / "shared" / "data" / "jsonschemabench"


# ------------------------------------------------------------------------------------------------------
# the plain constructions (before this round)


def plain_structure(prefix, items, boundaries, entry):
    """compose.structure with one plain trie per choice list."""
    compose.count_states(sum(d.num_states for d in items))
    b = Assembly()
    starts, accs = [], []
    for d in items:
        off = b.copy(d)
        starts.append(off + d.start)
        accs.append(np.flatnonzero(d.accepting) + off)
    trans, acc = b.table(), np.zeros(b.size, dtype=bool)
    rows, base, merges = [], len(trans), []

    def trie(choices, lead=b""):
        root = len(rows)
        rows.append({})
        for data, j in choices:
            merges.append((compose.insert_text(rows, root, lead + data), j))
        compose.count_states(len(rows) - root)
        return root

    start_row = trie(entry, prefix)
    boundary_rows = [trie(ch) if ch else None for ch in boundaries]
    more = compose._empty(len(rows))
    for r, row in enumerate(rows):
        for byte, t in row.items():
            more[r, byte] = base + t
    trans = np.concatenate([trans, more])
    acc = np.concatenate([acc, np.zeros(len(rows), dtype=bool)])
    original_starts = {j: trans[starts[j]].copy() for _, j in merges if j is not None}
    for r, j in merges:
        if j is None:
            if (trans[base + r] >= 0).any():
                raise Clash()
            acc[base + r] = True
        else:
            merge_rows(trans, np.array([base + r]), original_starts[j])
    for i, r in enumerate(boundary_rows):
        if len(accs[i]):
            if r is not None:
                merge_rows(trans, accs[i], trans[base + r].copy())
            acc[accs[i]] = False
    return D.ByteDFA(trans, acc, base + start_row)


def plain_exactly_one(parts, loose=None):
    """compose.exactly_one: each part minus the union of the others."""
    loose = list(parts) if loose is None else loose
    present = [q for q in loose if q is not None]
    if len(present) > 1 and compose._disjoint_starts(present):
        return union_all([p for p in parts if p is not None])
    pieces = []
    for i, p in enumerate(parts):
        if p is None:
            continue
        rest = [q for j, q in enumerate(loose) if j != i and q is not None]
        if not rest:
            pieces.append(D.minimize(p))
            continue
        only = product(D.minimize(p), union_all(rest), "minus")
        if not compose.is_empty(only):
            pieces.append(D.minimize(only))
    if not pieces:
        raise D.EmptyLanguage("the schema accepts no value (empty language)")
    return union_all(pieces)


def plain_tagged_product(parts, need_first=False, combine=None):
    """object_automaton.tagged_product state by state."""
    index, order = {}, []

    def state(tup):
        if tup not in index:
            index[tup] = len(order)
            order.append(tup)
        return index[tup]

    state(tuple(p.dfa.start for p in parts))
    rows, dead, i = [], np.full(256, -1, dtype=np.int64), 0
    while i < len(order):
        cols = np.stack([parts[j].dfa.transitions[s].astype(np.int64) if s >= 0 else dead
                         for j, s in enumerate(order[i])], axis=1)
        live = cols[:, 0] >= 0 if need_first else (cols >= 0).any(axis=1)
        row = np.full(256, -1, dtype=np.int32)
        if live.any():
            uniq, inv = np.unique(cols[live], axis=0, return_inverse=True)
            row[live] = np.asarray([state(tuple(int(x) for x in u)) for u in uniq], dtype=np.int32)[inv.reshape(-1)]
        rows.append(row)
        i += 1
    tags = np.full(len(order), -1, dtype=np.int32)
    for n, tup in enumerate(order):
        got = [int(parts[j].tags[s]) if s >= 0 else -1 for j, s in enumerate(tup)]
        if combine is not None:
            tags[n] = combine(got)
        else:
            present = [t for t in got if t >= 0]
            tags[n] = present[0] if present else -1
    return OA.Tagged(D.ByteDFA(np.stack(rows), tags >= 0, 0), tags)


def arrays(dfa):
    m = D.minimize(dfa)
    return m.transitions.tolist(), m.accepting.tolist(), m.start


def lits(*texts):
    return literals([t.encode() for t in texts])


# ------------------------------------------------------------------------------------------------------
# structure


OBJECTS = [
    {"type": "object", "properties": {k: {"type": "integer"} for k in ["a", "ab", "abc", "b", "ba", "x-a", "x-b"]}},
    {"type": "object", "properties": {"name": {"type": "string"}, "nick": {"type": "string"}, "n": {"type": "null"},
                                      "next": {"type": "boolean"}, "note": {"enum": [1, 2]}},
     "required": ["nick"]},
    {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(30)}, "required": ["p7", "p20"]},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                              "aa": {"type": "integer"}}},
                                      "aa": {"type": "array", "items": {"type": "string"}}}},
]


@pytest.mark.parametrize("schema", OBJECTS)
def test_shared_tries_give_the_plain_tries_language(schema, monkeypatch):
    shared, _ = schema_dfa(schema)
    monkeypatch.setattr(nodes, "structure", plain_structure)
    plain, _ = schema_dfa(schema)
    assert arrays(shared) == arrays(plain)


def test_shared_tries_count_each_plain_trie():
    items = [lits("1"), lits("2"), lits("3")]
    keys = [b'"ab": ', b'"ac": ', b'"b": ']
    boundaries = [[(b", " + keys[j], j) for j in range(i + 1, 3)] + [(b"}", None)] for i in range(3)]
    entry = [(keys[j], j) for j in range(3)] + [(b"}", None)]
    counted = []
    for build in (compose.structure, plain_structure):
        budget = Budget(CompileLimits(), lambda at: at)
        with limits.active(budget):
            got = build(b"{", items, boundaries, entry)
        counted.append((budget.used["states"], got))
    (shared_n, shared), (plain_n, plain) = counted
    # items: 3 x 2 states; the entry trie: the root, {, {", {"a, 4 of each key's tail, {} (17 nodes); after
    # item 0: the root, ",", ", ", ', "', ', "a' and 4 more, 4 of ', "b', "}" (14); after item 1: the root,
    # ",", ", ", ', "' and 4 of ', "b', "}" (9); after item 2: the root, "}" (2). Counted: the plain tries.
    assert plain_n == shared_n == 6 + 17 + 14 + 9 + 2
    assert plain.num_states == 6 + 17 + 14 + 9 + 2
    # shared: after item 1, ', "b' (its tail) and "}" are those after item 0; after item 2, "}" is
    assert shared.num_states == 6 + 17 + 14 + 4 + 1
    assert arrays(shared) == arrays(plain)
    for text, ok in [(b'{}', True), (b'{"ab": 1}', True), (b'{"ab": 1, "b": 3}', True), (b'{"ac": 2, "ab": 1}', False),
                     (b'{"b": 3, "ab": 1}', False), (b'{"ab": 1, "ac": 2, "b": 3}', True), (b'{"ab": 2}', False)]:
        assert shared.accepts(text) == ok, text


def test_shared_tries_raise_clash_as_plain_tries():
    item = D.from_regex("[0-9]+")  # continues with a digit: a choice that starts with one collides
    for build in (compose.structure, plain_structure):
        with pytest.raises(Clash):
            build(b"[", [item], [[(b"1", 0), (b"]", None)]], [(b"", 0)])


def test_a_long_key_is_not_limited_by_recursion():
    key = b'"' + b"k" * 5000 + b'": '
    shared = compose.structure(b"{", [lits("1")], [[(b"}", None)]], [(key, 0)])
    assert shared.accepts(b"{" + key + b"1}") and not shared.accepts(b"{" + key[:-3] + b'k": 1}')
    assert arrays(shared) == arrays(plain_structure(b"{", [lits("1")], [[(b"}", None)]], [(key, 0)]))


# ------------------------------------------------------------------------------------------------------
# exactly_one


ONE_OF = [
    ([lits("a", "b", "c"), lits("b", "c", "d"), lits("c", "e")], None),
    ([D.from_regex("a+"), D.from_regex("a{2,5}"), D.from_regex("b|aaa")], None),
    ([D.from_regex("[ab]*"), D.from_regex("a[ab]*"), D.from_regex("[ab]*b")], None),
    ([lits("x"), None, lits("y", "x")], [D.from_regex("x+"), lits("z"), lits("y", "x")]),
    ([lits("a"), lits("b")], [D.from_regex("[ab]"), D.from_regex("b+")]),
    ([lits("1", "2"), lits("2", "3"), lits("3", "1"), lits("1", "2", "3", "4")], None),
]


@pytest.mark.parametrize("parts, loose", ONE_OF)
def test_exactly_one_by_differences_is_minus_the_union(parts, loose):
    assert arrays(compose.exactly_one(parts, loose)) == arrays(plain_exactly_one(parts, loose))


def test_exactly_one_values():
    got = compose.exactly_one([lits("a", "b", "c"), lits("b", "c", "d"), lits("c", "e")])
    assert [t for t in "abcde" if got.accepts(t.encode())] == ["a", "d", "e"]


def test_exactly_one_of_overlapping_parts_is_empty():
    with pytest.raises(D.EmptyLanguage):
        compose.exactly_one([lits("a"), lits("a")])
    with pytest.raises(D.EmptyLanguage):
        plain_exactly_one([lits("a"), lits("a")])


def test_exactly_one_leaves_out_an_empty_loose_part():
    empty = D.ByteDFA(np.full((1, 256), -1, dtype=np.int32), np.zeros(1, dtype=bool), 0)
    parts, loose = [lits("a"), lits("b"), None], [lits("a"), D.from_regex("b|c"), empty]
    assert arrays(compose.exactly_one(parts, loose)) == arrays(plain_exactly_one(parts, loose))


# ------------------------------------------------------------------------------------------------------
# tagged_product and minimize


def tagged_languages(t):
    """Per tag, the minimal DFA of the texts that end with it."""
    return {int(tag): arrays(D.ByteDFA(t.dfa.transitions, t.tags == tag, t.dfa.start))
            for tag in sorted(set(t.tags.tolist()) - {-1})}


def test_tagged_product_by_levels_is_state_by_state():
    keys = OA.tagged_literals([b'"a"', b'"ab"', b'"b"'], [0, 1, 2])
    any_key = D.from_regex('"[a-c]*"')
    extra = OA.Tagged(any_key, np.where(any_key.accepting, 0, -1).astype(np.int32))
    named = D.from_regex('"a[a-c]*"')
    pattern = OA.Tagged(named, np.where(named.accepting, 0, -1).astype(np.int32))
    combine = lambda tags: -1 if tags[0] < 0 else 3 + (tags[1] >= 0)  # noqa: E731
    for parts, kw in [([keys, OA.Tagged(D.from_regex('"c+"'), np.where(D.from_regex('"c+"').accepting, 5, -1)
                                        .astype(np.int32))], {}),
                      ([extra, pattern], {"need_first": True, "combine": combine})]:
        new, old = OA.tagged_product(parts, **kw), plain_tagged_product(parts, **kw)
        assert new.dfa.num_states == old.dfa.num_states
        assert tagged_languages(new) == tagged_languages(old)
    assert tagged_languages(OA.tagged_product([extra, pattern], need_first=True, combine=combine)).keys() == {3, 4}


def test_minimize_returns_what_it_made():
    m = D.minimize(D.from_regex("(ab|cd)+"))
    again = D.minimize(m)
    assert again is not m and again.transitions is m.transitions and D.is_minimal(again)
    assert not D.is_minimal(product(m, m, "or"))
    assert arrays(product(m, m, "or")) == arrays(m)


# ------------------------------------------------------------------------------------------------------
# whole schemas


def jsb(ids):
    out = {}
    for path in sorted(JSB.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            case = json.loads(line)
            if case["id"] in ids:
                out[case["id"]] = case["schema"]
    return out


@pytest.mark.skipif(not JSB.is_dir(), reason="JSONSchemaBench not found at ../shared/data/jsonschemabench")
def test_jsonschemabench_schemas_compile_to_the_plain_joins_language(monkeypatch):
    ids = ["Github_medium/o11666", "Github_easy/o61536", "JsonSchemaStore/appveyor"]
    schemas = jsb(ids)
    assert sorted(schemas) == sorted(ids)
    fast = {i: schema_dfa(s)[0] for i, s in schemas.items()}
    monkeypatch.setattr(nodes, "structure", plain_structure)
    monkeypatch.setattr(nodes, "exactly_one", plain_exactly_one)
    monkeypatch.setattr(OA, "tagged_product", plain_tagged_product)
    for i, s in schemas.items():
        plain = schema_dfa(s)[0]
        assert fast[i].num_states == plain.num_states, i
        assert np.array_equal(fast[i].transitions, plain.transitions), i
        assert np.array_equal(fast[i].accepting, plain.accepting), i
