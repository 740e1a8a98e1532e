"""Long counts with counters (compiler/automata/counters.py): automata, index (version 5), masks and decoding.

The oracle for the index is the same catalog compiled without counters (copies of the counted part, exact
up to 256): on random walks over a tiny vocabulary the two give the same allowed tokens at every step.
"""

import json
import random
from types import SimpleNamespace

import jsonschema
import numpy as np
import pytest
import torch

from callmaybe.compiler.automata import long_counts
from callmaybe.compiler.compile import compile_index
from callmaybe.compiler.grammar import schema_dfa
from callmaybe.core.catalog import parse_catalog
from callmaybe.core.errors import IndexFileError
from callmaybe.core.indexfile import read_header, read_index, save_index
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.decoding.decoder import generate
from callmaybe.runtime.decoding.index import open_index

from ..runtime.tiny import TinyTokenizer

S = lambda **kw: dict(type="string", **kw)  # noqa: E731
TOKENS = sorted({bytes([b]) for b in range(32, 127)} | {
    b"aa", b"aaaa", b'a"', b'a"}', b'"}', b'", "', b"1, ", b", ", b"11", b"1]", b'"]', b"\xc3\xa9", b"\xc3",
    b"\xa9", b"\\n", b"a" * 16, b'"a', b'": "', b'{"', b"[1", b'["', b'"}}', b"]}}"})
VOCAB = Vocabulary(name="lock", token_bytes=tuple(TOKENS) + (None,), eos_ids=(len(TOKENS),),
                   vocab_size=len(TOKENS) + 1)
ID = {t: i for i, t in enumerate(TOKENS)}


def without_counters(build):
    return long_counts.under(long_counts.Policy(counters=False), build)


def verdicts(schema, texts):
    dfa = schema_dfa(schema)[0]
    return dfa, [dfa.accepts(t.encode()) for t in texts]


def test_a_long_string_is_one_loop_and_exact_at_its_bound():
    dfa, got = verdicts(S(maxLength=300), [json.dumps("a" * 300), json.dumps("a" * 301), '"' + "é" * 300 + '"',
                                           '"' + "é" * 301 + '"', '"' + "\\n" * 300 + '"', '"' + "\\n" * 301 + '"'])
    assert dfa.counters == (300,) and dfa.num_states < 40
    assert got == [True, False, True, False, True, False]


def test_min_and_max_length_copy_the_minimum_and_count_the_rest():
    dfa, got = verdicts(S(minLength=3, maxLength=80), [json.dumps("a" * n) for n in (2, 3, 80, 81)])
    assert dfa.counters == (77,)
    assert got == [False, True, True, False]


def test_lengths_past_the_old_cap_are_enforced_now():
    """maxLength 1000 was left to the check after generation (above 256)."""
    dfa, notes = schema_dfa(S(maxLength=1000))
    assert dfa.counters == (1000,) and not notes
    assert [dfa.accepts(json.dumps("x" * n).encode()) for n in (1000, 1001)] == [True, False]


def test_a_format_and_a_long_length_meet():
    dfa, got = verdicts(S(format="email", maxLength=255), [json.dumps("a" * 250 + "@b.co"),
                                                            json.dumps("a" * 251 + "@b.co"), '"a@b"'])
    assert dfa.counters == (255,)
    assert got == [True, False, False]


def test_jsonschemabench_o9925_shape_is_enforced_whole():
    """Github_easy/o9925: maxItems 100 of objects with two strings of up to 255 characters, and maxItems 1000
    of 24-digit ids. Copies ran out of memory (21.7 GB); with counters it is four loops."""
    key = S(pattern="^[0-9a-zA-Z_-]{1,255}$")
    schema = {"type": "object", "additionalProperties": False, "properties": {
        "attribute": key,
        "deviceTags": {"type": "array", "maxItems": 100, "items": {
            "type": "object", "additionalProperties": False,
            "properties": {"key": key, "value": S(minLength=1, maxLength=255)}}},
        "deviceIds": {"type": "array", "items": S(pattern="^[A-Fa-f\\d]{24}$"), "maxItems": 1000}}}
    dfa, notes = schema_dfa(schema)
    assert [n for n in notes if n.kind == "not enforced"] == []
    assert sorted(dfa.counters) == [100, 254, 254, 1000] and dfa.num_states < 400
    tag = {"key": "k" * 255, "value": "v" * 255}
    cases = [{"deviceTags": [tag] * 100}, {"deviceTags": [tag] * 101}, {"attribute": "a" * 256},
             {"deviceTags": [{"key": "k" * 256}]}, {"deviceIds": ["0" * 24] * 1000}, {"deviceIds": ["0" * 24] * 1001},
             {"deviceTags": [{"value": ""}]}]
    validator = jsonschema.Draft202012Validator(schema)
    got = [dfa.accepts(json.dumps(c).encode()) for c in cases]
    assert got == [validator.is_valid(c) for c in cases] == [True, False, False, False, True, False, False]


def test_jsonschemabench_o55361_shape_counts_both_branches_of_a_one_of_alike():
    """Github_medium/o55361: long lengths in properties shared by the two branches of a oneOf (516,000
    states with copies, then left to the check); the branches place the same counters in the same places."""
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"email": S(format="email", maxLength=255), "description": S(maxLength=160),
                             "type": {"enum": ["PRIMARY", "SECONDARY"]}, "masters": {"type": "array"}},
              "oneOf": [{"required": ["email"], "properties": {"type": {"const": "PRIMARY"}}},
                        {"required": ["masters"], "properties": {"type": {"const": "SECONDARY"}}}]}
    dfa, notes = schema_dfa(schema)
    assert [n for n in notes if n.kind == "not enforced"] == []
    assert sorted(dfa.counters) == [160, 255]
    cases = [{"email": "a" * 200 + "@b.co", "description": "d" * 160, "type": "PRIMARY"},
             {"email": "a@b.co", "description": "d" * 161, "type": "PRIMARY"},
             {"email": "a" * 251 + "@b.co", "type": "PRIMARY"},
             {"description": "d" * 160, "type": "SECONDARY", "masters": []},
             {"email": "a@b.co", "type": "PRIMARY", "masters": []},
             {"type": "SECONDARY"}]
    got = [dfa.accepts(json.dumps(c).encode()) for c in cases]
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert got == [validator.is_valid(c) for c in cases] == [True, False, False, True, True, False]


@pytest.mark.parametrize("schema", [
    {"anyOf": [S(maxLength=70), S(pattern="^a+$")]},  # one text, two ways to count: ambiguous
    {"not": S(maxLength=70)},  # a difference decided by the negated side's count
])
def test_a_composition_counters_cannot_carry_is_compiled_with_copies(schema):
    dfa, got = verdicts(schema, [json.dumps("a" * n) for n in (70, 71)] + [json.dumps("b" * n) for n in (70, 71)])
    assert dfa.counters == ()
    validator = jsonschema.Draft202012Validator(schema)
    assert got == [validator.is_valid("a" * 70), validator.is_valid("a" * 71), validator.is_valid("b" * 70),
                   validator.is_valid("b" * 71)]


LOCKSTEP = [
    {"s": S(maxLength=70)},
    {"s": S(pattern="^[a-c]{2,90}$")},
    {"n": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 80}},
    {"a": S(maxLength=70), "b": S(maxLength=66, minLength=1)},
    {"u": {"type": "array", "maxItems": 70, "items": {
        "type": "object", "additionalProperties": False,
        "properties": {"k": S(pattern="^[a-c_-]{1,80}$"), "v": S(minLength=1, maxLength=70)}}}},
    {"w": {"type": "array", "prefixItems": [{"type": "integer"}, S(maxLength=2)], "items": {"type": "boolean"},
           "minItems": 1, "maxItems": 75}},
    {"e": S(format="email", maxLength=70), "d": {"type": ["string", "null"], "maxLength": 100}},
]


@pytest.mark.parametrize("params", LOCKSTEP, ids=lambda p: ",".join(p))
def test_counted_index_allows_what_the_copies_allow_at_every_step(params):
    fns = parse_catalog([{"name": "f", "description": "", "parameters": params}], "t")
    counted = open_index(compile_index(fns, VOCAB)[0], VOCAB.token_bytes)
    copies = open_index(without_counters(lambda: compile_index(fns, VOCAB))[0], VOCAB.token_bytes)
    assert type(counted).__name__ == "CountedTokenIndex" and type(copies).__name__ == "TokenIndex"
    rng = random.Random(0)
    for _ in range(12):
        a, b = counted.start, copies.start
        for _ in range(300):
            allowed = counted.mask(a).token_ids().tolist()
            assert allowed == copies.mask(b).token_ids().tolist()
            assert counted.is_accepting(a) == copies.is_accepting(b)
            assert counted.min_tokens(a) >= copies.min_tokens(b)
            left = rng.randint(1, 12)
            tight = counted.budget_mask(a, left).token_ids().tolist()
            assert set(tight) <= set(allowed) and (tight or counted.min_tokens(a) > left or counted.is_accepting(a))
            choices = [t for t in allowed if t < len(TOKENS)]
            if not choices:
                break
            # mostly the longest token that stays inside a value: runs to the bounds
            t = rng.choice(choices) if rng.random() < 0.3 else max(
                choices, key=lambda t: (len(TOKENS[t]) if TOKENS[t][:1] not in b'"]}' else 0) + rng.random())
            a, b = counted.next_state(a, t), copies.next_state(b, t)


def test_at_the_bound_only_the_closing_tokens_are_allowed():
    fns = parse_catalog([{"name": "f", "description": "", "parameters": {"s": S(maxLength=70)}}], "t")
    index = open_index(compile_index(fns, VOCAB)[0], VOCAB.token_bytes)
    s = index.state_after(index.start, b'{"name": "f", "parameters": {"s": "' + b"a" * 66)
    allowed = {TOKENS[t] for t in index.mask(s).token_ids().tolist()}
    assert b"aaaa" in allowed and b"a" * 16 not in allowed  # 66 + 16 would pass 70
    s = index.next_state(s, ID[b"aaaa"])
    assert index.decode(s)[1] == (70,)
    assert sorted(TOKENS[t] for t in index.mask(s).token_ids().tolist()) == [b'"', b'"}', b'"}}']
    assert index.next_state(s, ID[b"a"]) == -1


class WantsMore:
    """A scripted model that writes the alphabet over and over (no loop for the decoder's rule to close)
    and prefers that to closing the value: the grammar alone ends the string."""

    def __init__(self):
        self.calls = 0

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        logits = torch.zeros(1, input_ids.shape[1], VOCAB.vocab_size)
        logits[0, -1, ID[bytes([ord("a") + self.calls % 26])]] = 100.0
        logits[0, -1, ID[b'"}}']] = 50.0
        self.calls += 1
        return SimpleNamespace(logits=logits, cache=cache)


def test_a_model_that_wants_a_longer_value_still_gets_a_valid_call():
    fns = parse_catalog([{"name": "f", "description": "", "parameters": {"s": S(maxLength=70)}}], "t")
    index = open_index(compile_index(fns, VOCAB)[0], VOCAB.token_bytes)
    gen = generate(WantsMore(), TinyTokenizer(list(TOKENS) + [None]), index, [ID[b"1"]], max_tokens=200)
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    assert json.loads(gen.text) == {"name": "f", "parameters": {"s": (alphabet * 3)[:70]}}


def test_index_with_counters_is_version_5_and_a_plain_one_stays_3(tmp_path):
    fns = parse_catalog([{"name": "f", "description": "", "parameters": {"s": S(maxLength=70)}}], "t")
    counted, _ = compile_index(fns, VOCAB)
    plain, _ = compile_index(parse_catalog([{"name": "f", "description": "", "parameters": {"s": S()}}], "t"),
                             VOCAB)
    save_index(tmp_path / "c.safetensors", counted)
    save_index(tmp_path / "p.safetensors", plain)
    assert read_header(tmp_path / "c.safetensors")["index_version"] == 5
    assert read_header(tmp_path / "p.safetensors")["index_version"] == 3
    back = read_index(tmp_path / "c.safetensors")
    assert back.header["counters"] == [70]
    assert np.array_equal(back.arrays["guard_token"], counted.arrays["guard_token"])
    # a counter index without its counter arrays is refused, naming them
    from safetensors.numpy import load, save

    tensors = load((tmp_path / "c.safetensors").read_bytes())
    del tensors["guard_need"]
    (tmp_path / "bad.safetensors").write_bytes(save(tensors))
    with pytest.raises(IndexFileError, match="missing arrays: guard_need"):
        read_index(tmp_path / "bad.safetensors")


# found by a breaker: each example stands for a kind of composition counters must not get wrong


def test_a_counted_member_of_an_object_read_in_any_order_is_not_wiped():
    """A ``not`` (or an ``if``) over an object is compiled as members in any order, whose end markers are
    the same non-UTF-8 bytes as the counters': it is compiled with copies (it subtracted nothing before)."""
    schema = {"type": "object", "properties": {"a": S(), "b": S(maxLength=100)},
              "not": {"properties": {"a": S(maxLength=100)}}}
    values = [{"a": "x"}, {"a": "x", "b": "y"}, {"a": "x" * 101}, {"b": "y"}]
    _, got = verdicts(schema, [json.dumps(v) for v in values])
    validator = jsonschema.Draft202012Validator(schema)
    assert got == [validator.is_valid(v) for v in values] == [False, False, True, False]


def test_one_counter_in_two_places_of_one_text_is_not_intersected():
    """``if``/``else``: the condition counts ``a`` and the branch ``b`` with the same counter (the same
    construct): the intersection would have to advance it at both places; compiled with copies."""
    schema = {"type": "object", "properties": {"a": S(), "b": S(maxLength=100)},
              "if": {"properties": {"a": S(maxLength=100)}}, "else": {"required": ["b"]}}
    values = [{"a": "x"}, {"b": "y"}, {"a": "x", "b": "y"}, {}, {"a": "x" * 101}, {"a": "x" * 101, "b": "y"}]
    _, got = verdicts(schema, [json.dumps(v) for v in values])
    validator = jsonschema.Draft202012Validator(schema)
    assert got == [validator.is_valid(v) for v in values] == [True, True, True, True, False, True]


def test_an_array_in_a_prefix_item_gets_its_own_counter():
    inner = {"type": "array", "prefixItems": [{"type": "boolean"}], "items": {"type": "integer"}, "maxItems": 100}
    schema = {"type": "array", "prefixItems": [inner], "items": {"type": "integer"}, "maxItems": 100}
    values = [[[True] + [1] * 60] + [1] * 60, [[True] + [1] * 99] + [1] * 99, [[True] + [1] * 100],
              [[True]] + [1] * 100]
    dfa, got = verdicts(schema, [json.dumps(v) for v in values])
    assert len(dfa.counters) == 2
    assert got == [True, True, False, False]


def test_a_token_no_count_can_take_is_out_of_every_mask():
    """A 200-byte token in a maxLength-100 string: the automaton reads it, the rows leave it out; the budget
    mask and the next state must too (they started from the automaton)."""
    tokens = sorted({bytes([b]) for b in range(32, 127)} | {b"a" * 200, b'"}'})
    vocab = Vocabulary(name="x", token_bytes=tuple(tokens) + (None,), eos_ids=(len(tokens),),
                       vocab_size=len(tokens) + 1)
    fns = parse_catalog([{"name": "f", "description": "", "parameters": {"s": S(maxLength=100)}}], "t")
    index = open_index(compile_index(fns, vocab)[0], vocab.token_bytes)
    big = tokens.index(b"a" * 200)
    for text in (b'{"name": "f", "parameters": {"s": "', b'{"name": "f", "parameters": {"s": "t'):
        s = index.state_after(index.start, text)
        assert big not in index.mask(s).token_ids().tolist()
        assert all(big not in index.budget_mask(s, left).token_ids().tolist() for left in (2, 3, 5, 50))
        assert index.next_state(s, big) == -1


def _as_version_4(index, path):
    """Write ``index`` (with counters) as version 4 wrote it: one guard list per state, no ``state_guard``."""
    from safetensors.numpy import save

    import msgpack
    from callmaybe.core import indexfile as F

    a = index.arrays
    off, sg = a["guard_offset"], a["state_guard"]
    lists = [np.arange(off[g], off[g + 1]) for g in sg.tolist()]
    at = np.concatenate(lists) if lists else np.zeros(0, np.int64)
    arrays = {n: np.ascontiguousarray(a[n], dtype=F.DTYPES[n]) for n in F.ARRAYS + F.COUNTER_ARRAYS if n != "state_guard"}
    arrays["guard_offset"] = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    for n in ("guard_token", "guard_effect", "guard_need"):
        arrays[n] = np.ascontiguousarray(a[n][at], dtype=F.DTYPES[n])
    names = tuple(n for n in F.ARRAYS + F.COUNTER_ARRAYS if n != "state_guard")
    header = dict(index.header, index_version=4)
    header["arrays_sha256"] = F._digest(arrays, names)
    header["header_sha256"] = F._header_digest(header)
    arrays["header"] = np.frombuffer(msgpack.packb(header, use_bin_type=True), dtype=np.uint8)
    path.write_bytes(save(arrays, metadata={"format": "callmaybe-index"}))


def test_a_version_4_index_with_a_guard_list_per_state_is_still_read_and_decodes_alike(tmp_path):
    """Version 5 stores identical guard lists once (``state_guard``); a version-4 file (one list per state)
    is read as ``state_guard`` = 0 .. S - 1 and gives the same masks and next states at every step."""
    fns = parse_catalog([{"name": "f", "description": "", "parameters": {"s": S(maxLength=70), "t": S(maxLength=90)}}],
                        "t")
    index, _ = compile_index(fns, VOCAB)
    assert len(index.arrays["guard_offset"]) - 1 < index.num_states  # lists are shared
    _as_version_4(index, tmp_path / "v4.safetensors")
    old = read_index(tmp_path / "v4.safetensors")
    assert old.header["index_version"] == 4
    assert old.arrays["state_guard"].tolist() == list(range(index.num_states))
    new_ix, old_ix = open_index(index, VOCAB.token_bytes), open_index(old, VOCAB.token_bytes)
    text = b'{"name": "f", "parameters": {"s": "' + b"ab" * 35 + b'", "t": "' + b"x" * 90
    a = b = new_ix.start
    for byte in text:
        assert new_ix.allowed(a).tolist() == old_ix.allowed(b).tolist()
        a, b = new_ix.next_state(a, ID[bytes([byte])]), old_ix.next_state(b, ID[bytes([byte])])
        assert a >= 0 and b >= 0
    assert new_ix.allowed(a).tolist() == old_ix.allowed(b).tolist() == sorted([ID[b'"'], ID[b'"}'], ID[b'"}}']])


def _per_state(arrays, num_states):
    """Per state: (allowed tokens, {token: (effect, need)} of its guard list restricted to them), and the
    fewest tokens to completion, from counted index arrays."""
    from callmaybe.core.indexfile import IndexData

    data = IndexData(header={"vocab_size": VOCAB.vocab_size, "eos_ids": list(VOCAB.eos_ids), "start": 0,
                             "counters": arrays["counter_hi"].tolist()}, arrays=arrays)
    k = len(arrays["counter_hi"])
    effects = [tuple(zip(arrays["effect_add"][e].tolist(), arrays["effect_reset"][e].tolist(),
                         arrays["effect_after"][e].tolist())) for e in range(len(arrays["effect_add"]))]
    need = arrays["need"].reshape(-1, k)
    out = []
    for s in range(num_states):
        allowed = data.allowed_tokens(s).tolist()
        lo, hi = arrays["guard_offset"][arrays["state_guard"][s]], arrays["guard_offset"][arrays["state_guard"][s] + 1]
        guards = {int(t): (effects[int(e)], tuple(need[int(n)].tolist())) for t, e, n in
                  zip(arrays["guard_token"][lo:hi], arrays["guard_effect"][lo:hi], arrays["guard_need"][lo:hi])
                  if int(t) in set(allowed)}
        out.append((allowed, guards))
    return out, arrays["min_tokens"].tolist()


def test_a_counted_index_made_from_shared_walks_is_the_one_made_from_every_state_apart():
    """Issue 31: rows and guard lists of a transducer's group members are made from their group's shared walk
    (per (effect, end) class, one bit per member), guard lists shared where they agree on a row; every state's
    allowed tokens, the effect and need of each of them, and the fewest tokens to completion are what walking
    every state apart gives. An email under maxLength (the domain label's positions group), two free strings
    and a counted one (their contents group across fields)."""
    from callmaybe.compiler.index.counted_index import counted_arrays, effect_classes
    from callmaybe.compiler.grammar import compile_grammar
    from callmaybe.compiler.index.trie import build_trie
    from callmaybe.compiler.index.walk import walk

    tokens = list(TOKENS) + [b"ab.cd", b"x-y", b"abc@", b".com", b'om"', b'm", "']
    vocab = Vocabulary(name="lock2", token_bytes=tuple(tokens) + (None,), eos_ids=(len(tokens),),
                       vocab_size=len(tokens) + 1)
    fns = parse_catalog([{"name": "f", "description": "", "parameters": {
        "to": S(format="email", maxLength=90), "a": S(), "b": S(maxLength=80), "c": S()}}], "t")
    tr = compile_grammar(fns).transducer()
    assert tr is not None
    _, ctrans, ceff = effect_classes(tr)
    trie = build_trie(list(vocab.token_bytes))
    shared = walk(tr.transitions, trie, class_transitions=ctrans, class_effects=ceff)
    apart = walk(tr.transitions, trie, share=False)
    assert sum(len(g.members) for g in shared.groups) > 100 and not apart.groups
    a = counted_arrays(tr, shared, vocab.token_bytes, vocab.vocab_size)
    b = counted_arrays(tr, apart, vocab.token_bytes, vocab.vocab_size)
    assert len(a["guard_offset"]) < len(b["guard_offset"])  # lists shared
    for name in ("transitions", "trans_effect", "byte_class", "accepting", "counter_live", "min_tokens"):
        assert np.array_equal(a[name], b[name]), name
    assert _per_state(a, tr.num_states) == _per_state(b, tr.num_states)


CLASH = {"anyOf": [{"type": "string", "format": "hostname", "minLength": 1, "maxLength": 66}, {"type": "null"},
                   {"type": ["string", "null"], "maxLength": 1}]}  # found by test_properties' catalog test


@pytest.mark.parametrize("form", ["catalog", "value"])
def test_unresolvable_markers_are_compiled_again_without_counters(form):
    """Markers that cannot be resolved (a byte after two different paths of counter markers) raise CounterClash
    inside the attempt, which builds the grammar again without counters: the grammar accepts exactly the
    language (it used to raise in ``accepts``)."""
    from callmaybe.compiler.grammar import compile_grammar, value_grammar

    if form == "value":
        grammar, wrap = value_grammar(CLASH), lambda v: v
    else:
        fns = parse_catalog([{"name": "f", "parameters": {"p": CLASH, "é q\"": {"type": "integer"}}}], "test")
        grammar = compile_grammar(fns)
        wrap = lambda v: {"name": "f", "parameters": {"p": v, "é q\"": 1}}  # noqa: E731
    assert grammar.transducer() is None and grammar.dfa.counters == ()
    host = "a" * 60 + ".bc"  # 63 bytes: the longest hostname the grammar writes (formats.HOSTNAME_MAX)
    verdicts = {v if isinstance(v, str) else json.dumps(v): grammar.dfa.accepts(
        json.dumps(wrap(v), ensure_ascii=False, separators=(", ", ": ")).encode()) for v in
        ["E", "", "_", "__", "ab", host, host + "d", None, "a..b"]}
    assert verdicts == {"E": True, "": True, "_": True, "__": False, "ab": True, host: True, host + "d": False,
                        "null": True, "a..b": False}
