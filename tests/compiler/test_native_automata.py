"""DFA minimization and products in C (compiler/automata/native.c through native.py) against the numpy path:
the same arrays to the element on random automata and on whole catalogs' automata; an empty language, a bad
target, a product past MAX_PAIRS, a compiler that fails and ``CALLMAYBE_DFA=numpy``."""

import logging

import numpy as np
import pytest

from callmaybe.compiler.automata import compose, native, object_automaton
from callmaybe.compiler.automata import dfa as dfa_mod
from callmaybe.compiler.automata.counters import MARKER_MASK
from callmaybe.compiler.automata.dfa import ByteDFA, EmptyLanguage
from callmaybe.compiler.grammar import compile_grammar
from callmaybe.core.catalog import load_catalog

from ..conftest import needs_cc, shared_path


@pytest.fixture
def lib():
    got = native.library()
    if got is None:
        pytest.skip("the C minimization could not be built here")
    return got


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """library() tried again from scratch, building in an empty cache with the default compiler."""
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CALLMAYBE_DFA", raising=False)
    monkeypatch.setattr(native, "_loaded", [])
    return tmp_path


def _random_dfa(rng, markers: bool = True) -> ByteDFA:
    """A random partial automaton: a few columns of random targets (some -1) spread over the 256 bytes, most
    bytes dead in half of them (every counter marker byte dead without ``markers``)."""
    n, k = int(rng.integers(1, 60)), int(rng.integers(1, 6))
    cols = rng.integers(-1, n, size=(n, k)).astype(np.int32)
    cols[rng.random((n, k)) < rng.random()] = -1
    byte_of = rng.integers(0, k, size=256)
    if rng.random() < 0.5 or not markers:
        byte_of[rng.random(256) < 0.8] = k
        if not markers:
            byte_of[MARKER_MASK] = k
        cols = np.concatenate([cols, np.full((n, 1), -1, np.int32)], axis=1)
    return ByteDFA(cols[:, byte_of], rng.random(n) < rng.random(), int(rng.integers(0, n)))


def _numpy(d: ByteDFA):
    try:
        out = dfa_mod._minimize_numpy(d)
    except EmptyLanguage:
        return None
    return out.transitions, out.accepting


@needs_cc
def test_c_gives_numpys_arrays_on_random_automata(lib):
    rng = np.random.default_rng(7)
    same = empty = 0
    for _ in range(1500):
        d = _random_dfa(rng)
        want, got = _numpy(d), native.minimize(d.transitions, d.accepting, d.start)
        if want is None:
            empty += len(got[1]) == 0
        else:
            same += np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1]) and got[1].dtype == bool
    assert (same, empty) == (1102, 398)  # all 1,500: 398 empty languages, the rest equal


@needs_cc
def test_redundant_states_merge_and_renumber_breadth_first(lib):
    """"ab" or "cb" through two copies of the middle and the end: three states, numbered from the start."""
    t = np.full((6, 256), -1, dtype=np.int32)
    t[5, ord("a")], t[5, ord("c")] = 1, 2  # the start is state 5
    t[1, ord("b")], t[2, ord("b")] = 3, 4
    t[0, ord("x")] = 3  # unreachable
    d = ByteDFA(t, np.array([False, False, False, True, True, False]), 5)
    out = dfa_mod.minimize(d)
    assert out.num_states == 3 and out.start == 0 and out.accepting.tolist() == [False, False, True]
    live = {(s, b): int(out.transitions[s, b]) for s, b in zip(*np.nonzero(out.transitions >= 0))}
    assert live == {(0, ord("a")): 1, (0, ord("c")): 1, (1, ord("b")): 2}


@needs_cc
def test_an_empty_language_raises_through_c(lib):
    t = np.full((2, 256), -1, dtype=np.int32)
    t[0, 0] = 1
    with pytest.raises(EmptyLanguage, match="accepts no value"):
        dfa_mod.minimize(ByteDFA(t, np.array([False, False]), 0))


@needs_cc
def test_a_target_out_of_range_is_refused(lib):
    t = np.full((2, 256), -1, dtype=np.int32)
    t[0, 7] = 2
    with pytest.raises(ValueError, match=r"a transition's target is outside 0\.\.1"):
        native.minimize(t, np.array([False, True]), 0)


def _numpy_classes(monkeypatch, transitions):
    with monkeypatch.context() as m:
        m.setattr(native, "byte_classes", lambda t: None)
        return dfa_mod.byte_classes(transitions)


@needs_cc
def test_c_byte_classes_are_numpys(lib, monkeypatch):
    rng = np.random.default_rng(11)
    sizes = set()
    for _ in range(300):
        d = _random_dfa(rng)
        want, got = _numpy_classes(monkeypatch, d.transitions), native.byte_classes(d.transitions)
        assert np.array_equal(want[0], got[0]) and got[0].dtype == np.uint8
        assert np.array_equal(want[1], got[1]) and got[1].dtype == np.int32
        sizes.add(got[1].shape[1])
    assert sizes == {1, 2, 3, 4, 5, 6}
    # every byte alike, and no state at all
    assert [a.tolist() for a in native.byte_classes(np.full((2, 256), -1, np.int32))] == [[0] * 256, [[-1], [-1]]]
    cls, ct = native.byte_classes(np.zeros((0, 256), np.int32))
    assert cls.tolist() == [0] * 256 and ct.shape == (0, 1)


@needs_cc
def test_c_byte_classes_of_keys_and_values_past_int32(lib, monkeypatch):
    keys = np.full((2, 256), -1, dtype=np.int64)
    keys[1, 3] = 2  # no state of two: a key (a transducer's target and effect), classed all the same
    keys[0, 9] = 5_000_000
    got, want = native.byte_classes(keys), _numpy_classes(monkeypatch, keys)
    assert got[0].tolist() == want[0].tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 0, 2] + [0] * 246
    assert got[1].tolist() == want[1].tolist() == [[-1, -1, 5_000_000], [-1, 2, -1]]
    keys[1, 200] = 1 << 40
    assert native.byte_classes(keys) is None  # past int32: numpy's way
    assert dfa_mod.byte_classes(keys)[0].tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 0, 2] + [0] * 190 + [3] + [0] * 55


@needs_cc
def test_c_products_are_numpys_in_every_mode(lib, monkeypatch):
    rng = np.random.default_rng(11)
    same, states = 0, 0
    for i in range(800):
        a, b = _random_dfa(rng, markers=False), _random_dfa(rng, markers=False)
        mode = ("or", "and", "minus", "xor")[i % 4]
        monkeypatch.setattr(native, "_loaded", [lib])
        c = compose.product(a, b, mode)
        monkeypatch.setattr(native, "_loaded", [None])
        p = compose.product(a, b, mode)
        same += np.array_equal(c.transitions, p.transitions) and np.array_equal(c.accepting, p.accepting)
        states += c.num_states
    assert (same, states) == (800, 68817)  # every product equal; 68,817 pairs in all


def _tagged(rng, d: ByteDFA) -> object_automaton.Tagged:
    tags = np.where(d.accepting, rng.integers(0, 4, size=d.num_states), -1).astype(np.int32)
    return object_automaton.Tagged(d, tags)


@needs_cc
def test_c_tagged_products_are_numpys(lib, monkeypatch):
    """2 to 4 random parts (counter markers included: tagged products read every byte alike), with and without
    need_first, tags combined: the same transitions and tags either way; the default tagging raises alike
    where two parts are tagged in one tuple."""
    rng = np.random.default_rng(12)
    same, states, overlaps = 0, 0, 0
    for i in range(400):
        parts = [_tagged(rng, _random_dfa(rng, markers=False)) for _ in range(int(rng.integers(2, 5)))]
        need_first, combine = bool(i % 2), (None if i % 3 else (lambda tags: max(tags) * 7 + min(tags)))
        got = []
        for choice in ([lib], [None]):
            monkeypatch.setattr(native, "_loaded", choice)
            try:
                t = object_automaton.tagged_product(parts, need_first=need_first, combine=combine)
                got.append((t.dfa.transitions, t.tags))
            except ValueError as exc:
                got.append(str(exc))
        if isinstance(got[0], str):
            overlaps += got[0] == got[1] == "tagged languages overlap"
            continue
        same += all(np.array_equal(x, y) for x, y in zip(got[0], got[1]))
        states += len(got[0][1])
    assert (same + overlaps, overlaps, states) == (400, 164, 26177)  # 236 products equal, 26,177 tuples


@needs_cc
def test_a_product_past_max_pairs_is_left_to_numpy(lib, monkeypatch):
    """Cycles of 300 and 301 states over one byte (coprime lengths): 90,300 pairs, past MAX_PAIRS."""
    def cycle(n):
        t = np.full((n, 256), -1, dtype=np.int32)
        t[:, ord("a")] = (np.arange(n) + 1) % n
        return ByteDFA(t, np.arange(n) == 0, 0)

    a, b = cycle(300), cycle(301)
    assert native.product((a.transitions, a.accepting, 0), (b.transitions, b.accepting, 0), "and") is None
    out = compose.product(a, b, "and")
    assert out.num_states == 90300 and int(out.accepting.sum()) == 1


@needs_cc
def test_catalog_automata_are_the_same_either_way(lib, monkeypatch, public_catalog_path):
    from callmaybe.compiler.automata.dfa import MINIMAL_CACHE
    from callmaybe.compiler.automata.nodes import LEAF_CACHE

    fn30 = shared_path("data", "bench", "catalog_fn30.openai.json")
    catalogs = [load_catalog(public_catalog_path), load_catalog(fn30)]
    out = {}
    for choice in ([lib], [None]):
        monkeypatch.setattr(native, "_loaded", choice)
        LEAF_CACHE.clear()
        MINIMAL_CACHE.clear()
        out[choice[0] is None] = [compile_grammar(fns).dfa for fns in catalogs]
    for c, p in zip(out[False], out[True]):
        assert c.num_states > 100 and np.array_equal(c.transitions, p.transitions)
        assert np.array_equal(c.accepting, p.accepting)


def test_numpy_chosen_by_the_environment_says_nothing(fresh, monkeypatch, caplog):
    monkeypatch.setenv("CALLMAYBE_DFA", "numpy")
    with caplog.at_level(logging.INFO, logger="callmaybe.compiler.automata.native"):
        assert native.library() is None
        d = _random_dfa(np.random.default_rng(3))
        assert native.minimize(d.transitions, d.accepting, d.start) is None
    assert caplog.records == []
    assert not (fresh / "cache" / "kernels").exists()


def test_a_failing_compiler_keeps_numpy_with_one_warning(fresh, monkeypatch, caplog):
    script = fresh / "failing-cc"
    script.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo failing-cc 1.0; exit 0; fi\n"
                      "echo 'native.c:1: error: no' >&2\nexit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv("CC", str(script))
    t = np.full((3, 256), -1, dtype=np.int32)
    t[0, ord("a")], t[1, ord("b")] = 1, 2
    d = ByteDFA(t, np.array([False, False, True]), 0)
    with caplog.at_level(logging.INFO, logger="callmaybe.compiler.automata.native"):
        out = dfa_mod.minimize(d)
        dfa_mod.minimize(ByteDFA(t.copy(), np.array([False, True, True]), 0))
    assert out.num_states == 3 and out.accepting.tolist() == [False, False, True]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [(
        "WARNING", f"the compiler's C routines unavailable ({script} exited with 1: native.c:1: error: no); "
        "numpy's used (slower compiles; CALLMAYBE_DFA=numpy chooses it without this line)")]


@needs_cc
def test_byte_classes_survive_a_hash_collision_in_c(monkeypatch, tmp_path):
    """Built with every hash multiplier 1, columns (0, 1) and (1, 0) of bytes "a" and "b" collide; the check
    over the rows must find it and class the bytes by whole columns (as dfa.byte_classes does in numpy)."""
    import ctypes
    import subprocess

    so = tmp_path / "collide.so"
    subprocess.run(["cc", *native.FLAGS, "-DCM_TEST_COLLISIONS", "-o", str(so), str(native.SOURCE)], check=True)
    lib = ctypes.CDLL(str(so))
    for name, (restype, argtypes) in native._SIGNATURES.items():
        getattr(lib, name).restype, getattr(lib, name).argtypes = restype, argtypes
    monkeypatch.setattr(native, "_loaded", [lib])
    t = np.full((2, 256), -1, dtype=np.int32)
    t[:, ord("a")] = [0, 1]
    t[:, ord("b")] = [1, 0]
    t[:, ord("c")] = [0, 1]
    d = ByteDFA(t, np.array([True, False]), 0)
    got = native.minimize(d.transitions, d.accepting, d.start)
    assert got[0].tolist() == t.tolist() and got[1].tolist() == [True, False]
    assert np.array_equal(got[0], dfa_mod._minimize_numpy(d).transitions)
    cls, ct = native.byte_classes(t)  # the byte classes alone: a, c alike, b apart
    assert cls[[ord("a"), ord("b"), ord("c")]].tolist() == [1, 2, 1] and ct.tolist() == [[-1, 0, 1], [-1, 1, 0]]


@needs_cc
def test_c_pairings_are_numpys(lib, monkeypatch):
    """walk._match in C and in numpy: the same columns, pairings and core tables, on random class tables whose
    states repeat a few row shapes (so that members pair), with effects (a transducer's kinds) on a third."""
    from callmaybe.compiler.index import walk

    rng = np.random.default_rng(13)
    same = paired = 0
    for i in range(300):
        n, c = int(rng.integers(4, 80)), int(rng.integers(1, 8))
        shapes = rng.integers(-1, n, size=(int(rng.integers(1, 4)), c))
        ctrans = shapes[rng.integers(0, len(shapes), size=n)].astype(np.int32)
        noise = rng.random((n, c)) < 0.2
        ctrans[noise] = rng.integers(0, n, size=int(noise.sum()))
        ctrans[ctrans < 0] = -1
        ceff = rng.integers(0, 2, size=(n, c)) if i % 3 == 0 else None
        members = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)).astype(np.int64)
        rep, pairs = int(members[0]), int(rng.integers(1, 70))
        monkeypatch.setattr(native, "_loaded", [None])
        want = walk._match(ctrans, rep, members, ceff, max_pairs=pairs)
        monkeypatch.setattr(native, "_loaded", [lib])
        got = walk._match(ctrans, rep, members, ceff, max_pairs=pairs)
        same += all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(want, got))
        paired += int(want[3].sum())
    assert (same, paired) == (300, 14945)  # all 300 the same; 14,945 core pairs in all


@needs_cc
def test_an_index_is_the_same_bytes_with_and_without_c(lib, monkeypatch):
    """The six everyday functions (formats, lengths, enums) compiled for Qwen's vocabulary with every C routine
    (minimization, products, pairings, the group walks) and with none: the same index file, byte for byte."""
    from callmaybe.compiler.automata.dfa import MINIMAL_CACHE
    from callmaybe.compiler.automata.nodes import LEAF_CACHE
    from callmaybe.compiler.compile import CompileOptions, compile_index
    from callmaybe.core.catalog import load_catalog
    from callmaybe.core.indexfile import to_bytes
    from callmaybe.core.vocabulary import load_vocabulary

    from ..conftest import REPO

    functions = load_catalog(REPO / "bench" / "catalogs" / "six_everyday.json")
    vocabulary = load_vocabulary("Qwen/Qwen2.5-Coder-1.5B-Instruct")
    out = []
    for choice in ([lib], [None]):
        monkeypatch.setattr(native, "_loaded", choice)
        LEAF_CACHE.clear()
        MINIMAL_CACHE.clear()
        index, report = compile_index(functions, vocabulary, CompileOptions())
        out.append((to_bytes(index), report.states, report.entries))
    assert out[0] == out[1] and out[0][1:] == (1167, 8475112)


@needs_cc
def test_c_sorts_triples_as_numpy_does(lib, monkeypatch):
    from callmaybe.compiler.index import walk

    rng = np.random.default_rng(17)
    key = np.unique(rng.integers(0, 300, 5000).astype(np.int64) << 32 | rng.integers(0, 2000, 5000))
    key = key[rng.permutation(len(key))]
    s, t = (key >> 32).astype(np.int32), (key & 0xFFFFFFFF).astype(np.int32)
    x = rng.integers(0, 300, len(key)).astype(np.int32)
    monkeypatch.setattr(native, "_loaded", [None])
    want = walk._sorted_triples([s[:2000], s[2000:]], [t[:2000], t[2000:]], [x[:2000], x[2000:]])
    monkeypatch.setattr(native, "_loaded", [lib])
    got = walk._sorted_triples([s[:2000], s[2000:]], [t[:2000], t[2000:]], [x[:2000], x[2000:]])
    assert len(got[0]) == len(key) == 4979
    assert all(np.array_equal(a, b) and a.dtype == b.dtype == np.int32 for a, b in zip(want, got))
    assert (np.diff(got[0].astype(np.int64) << 32 | got[1]) > 0).all()


@pytest.mark.parametrize("cc, says", [
    ('cc "-O2', "$CC 'cc \"-O2' cannot be split as a shell would (No closing quotation)"),
    ("spam", "exited with 3: "),
])
def test_a_compiler_that_cannot_be_split_or_writes_bytes_keeps_numpy(fresh, monkeypatch, caplog, cc, says):
    """A helper's break test: $CC with an unbalanced quote raised ValueError from shlex.split, and a compiler
    whose messages were not UTF-8 raised UnicodeDecodeError, both out of the compile (exit 1, a traceback)."""
    if cc == "spam":
        script = fresh / "spam-cc"
        script.write_bytes(b"#!/bin/sh\nif [ \"$1\" = --version ]; then echo spam-cc 1; exit 0; fi\n"
                           b"printf '\\377\\376 bad \\351\\n' >&2\nexit 3\n")
        script.chmod(0o755)
        cc = str(script)
    monkeypatch.setenv("CC", cc)
    t = np.full((2, 256), -1, dtype=np.int32)
    t[0, ord("a")] = 1
    with caplog.at_level(logging.WARNING, logger="callmaybe.compiler.automata.native"):
        out = dfa_mod.minimize(ByteDFA(t, np.array([False, True]), 0))
    assert out.num_states == 2 and native.library() is None
    assert len(caplog.records) == 1 and says in caplog.records[0].getMessage()


def test_a_compiler_named_with_a_byte_that_is_not_utf8_has_a_key(fresh):
    """$CC holding a byte that is not UTF-8 (os.environ gives it as a surrogate) raised UnicodeEncodeError in
    build_key."""
    from callmaybe.core.cbuild import build_key

    key = build_key(["true", "-include", "/tmp/caf\udce9.h"], b"source")
    assert len(key) == 20 and key != build_key(["true", "-include", "/tmp/cafe.h"], b"source")


@needs_cc
def test_a_library_lacking_an_entry_point_is_removed_and_numpy_kept(fresh, monkeypatch, caplog):
    """A file under the library's name that loads but lacks one of native.c's entry points: not used, and
    removed with its recorded SHA-256 so that the next run builds it again."""
    import subprocess

    from callmaybe.core.files import digest_path, record_digest

    (fresh / "other.c").write_text("int cm_minimize(void) { return 0; }\n")
    so = fresh / "automata-0.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(fresh / "other.c")], check=True)
    record_digest(so, so.read_bytes())
    monkeypatch.setattr(native, "build", lambda: so)
    with caplog.at_level(logging.WARNING, logger="callmaybe.compiler.automata.native"):
        assert native.library() is None
    assert "cm_product" in caplog.records[0].getMessage() and len(caplog.records) == 1
    assert not so.exists() and not digest_path(so).exists()
