from pathlib import Path

import numpy as np
import pytest

from callmaybe.core.catalog import catalog_fingerprint, load_catalog
from callmaybe.compiler.compile import compile_to_file
from callmaybe.core.errors import IndexFileError
from callmaybe.core.indexfile import read_index_for, read_header
from callmaybe.core.vocabulary import Vocabulary

VOCAB = Vocabulary(name="tiny", token_bytes=(b"{", b'"', b"a", b"}", b" ", b":", b",", None), eos_ids=(7,), vocab_size=9)


@pytest.fixture
def compiled(tmp_path, public_catalog_path):
    fns = load_catalog(public_catalog_path)
    path = tmp_path / "i.safetensors"
    index, report = compile_to_file(fns, VOCAB, path)
    return fns, path, index, report


def test_round_trip(compiled):
    fns, path, index, report = compiled
    loaded = read_index_for(path, VOCAB.fingerprint(), catalog_fingerprint(fns))
    assert loaded.header["regex"] == index.header["regex"]
    assert loaded.header["eos_ids"] == [7] and loaded.header["vocab_size"] == 9
    for name, arr in index.arrays.items():
        assert np.array_equal(loaded.arrays[name], arr), name
    assert read_header(path)["catalog_fingerprint"] == catalog_fingerprint(fns)
    assert report.size_bytes == path.stat().st_size


def test_refuses_other_tokenizer_and_catalog(compiled):
    fns, path, _, _ = compiled
    other = Vocabulary(name="o", token_bytes=VOCAB.token_bytes, eos_ids=(7,), vocab_size=10)
    with pytest.raises(IndexFileError) as err:
        read_index_for(path, other.fingerprint(), None)
    assert str(err.value) == (
        f"{path}: index was compiled for another tokenizer "
        f"(vocabulary {VOCAB.fingerprint()[:12]}, expected {other.fingerprint()[:12]})"
    )
    with pytest.raises(IndexFileError) as err:
        read_index_for(path, None, catalog_fingerprint(fns[:2]))
    assert "index was compiled for another catalog" in str(err.value)


def test_refuses_corrupt_file(compiled):
    _, path, _, _ = compiled
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileError) as err:
        read_index_for(path)
    assert str(err.value) == f"{path}: corrupt index file (array checksum mismatch)"
    path.write_bytes(b"not an index")
    with pytest.raises(IndexFileError) as err:
        read_index_for(path)
    assert str(err.value).startswith(f"{path}: corrupt index file (")
    with pytest.raises(IndexFileError) as err:
        read_index_for(path.parent / "missing.safetensors")
    assert str(err.value) == f"{path.parent / 'missing.safetensors'}: index file not found"


def assert_every_reader_refuses(path, message):
    """Reading the whole index and reading only its header both raise IndexFileError with ``message``."""
    for read in (read_index_for, read_header):
        with pytest.raises(IndexFileError) as err:
            read(path)
        assert str(err.value) == message


def test_refuses_a_foreign_safetensors_file(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({f"layer.{i}.weight": np.zeros((2, 2), dtype=np.float32) for i in range(5)}, str(path))
    expected = (f"{path}: not a callmaybe index (a safetensors file with tensors layer.0.weight, layer.1.weight, "
                "layer.2.weight and 2 more, and no callmaybe header)")
    assert_every_reader_refuses(path, expected)


def write_with_header(path, index, header):
    """Write ``index``'s arrays with ``header`` as is (no version or digest filled in), as an older or newer
    callmaybe would."""
    import msgpack
    from safetensors.numpy import save_file

    from callmaybe.core.indexfile import ARRAYS, DTYPES, _digest

    arrays = {n: np.ascontiguousarray(index.arrays[n], dtype=DTYPES[n]) for n in ARRAYS}
    header = {**header, "arrays_sha256": _digest(arrays)}
    arrays["header"] = np.frombuffer(msgpack.packb(header, use_bin_type=True), dtype=np.uint8)
    save_file(arrays, str(path))


def test_version_1_is_read_and_upgraded(compiled, tmp_path):
    fns, _, index, _ = compiled
    header = {k: v for k, v in index.header.items() if k != "vocab_size"}
    v1 = tmp_path / "v1.safetensors"
    write_with_header(v1, index, {**header, "format_version": 1, "width": 9})
    for header in (read_index_for(v1, VOCAB.fingerprint(), catalog_fingerprint(fns)).header, read_header(v1)):
        assert header["vocab_size"] == 9 and header["index_version"] == 1
        assert "width" not in header and "format_version" not in header


def test_a_version_this_code_does_not_know_is_refused_naming_both(compiled, tmp_path):
    _, _, index, _ = compiled
    v6 = tmp_path / "v6.safetensors"
    write_with_header(v6, index, {**index.header, "index_version": 6})
    message = (f"{v6}: index version 6 cannot be read by this callmaybe (it reads versions 1 and 2 and 3 and 4 "
               "and 5); recompile the index or upgrade callmaybe")
    assert_every_reader_refuses(v6, message)


def test_an_edited_header_or_arrays_with_a_recomputed_array_checksum_are_refused(compiled, tmp_path):
    """Issue 12 item 6: the header (eos_ids, the array checksum itself) is covered by ``header_sha256``."""
    _, path, _, _ = compiled
    index = read_index_for(path)  # as written: with its version and both checksums
    edited = tmp_path / "eos.safetensors"
    write_with_header(edited, index, {**index.header, "eos_ids": [0]})  # the array checksum is recomputed
    assert_every_reader_refuses(edited, f"{edited}: corrupt index file (header checksum mismatch)")
    transitions = index.arrays["transitions"].copy()
    transitions[0, 0] = 0 if transitions[0, 0] < 0 else -1
    other = type(index)(header=index.header, arrays={**index.arrays, "transitions": transitions})
    tampered = tmp_path / "transitions.safetensors"
    write_with_header(tampered, other, index.header)  # arrays_sha256 recomputed, header_sha256 left as it was
    assert_every_reader_refuses(tampered, f"{tampered}: corrupt index file (header checksum mismatch)")
    write_with_header(tmp_path / "same.safetensors", index, index.header)  # an untouched copy still reads
    assert read_index_for(tmp_path / "same.safetensors").header["eos_ids"] == index.header["eos_ids"]


def test_written_files_carry_the_current_version(compiled):
    from callmaybe.core.indexfile import INDEX_VERSION

    _, path, _, _ = compiled
    # an index without counters is written as version 3, which readers before version 4 read too
    assert INDEX_VERSION == 5 and read_header(path)["index_version"] == 3


def test_find_says_why_it_skips_an_index_of_an_unknown_version(compiled, tmp_path, monkeypatch, capsys):
    """A model folder whose publisher shipped a newer index: skipped with one line, not silently."""
    from callmaybe.core import indexes

    fns, _, index, _ = compiled
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model" / "callmaybe"
    folder.mkdir(parents=True)
    write_with_header(folder / "new.safetensors", index, {**index.header, "index_version": 6})
    assert indexes.find(VOCAB.fingerprint(), catalog_fingerprint(fns), {}, tmp_path / "model") is None
    assert capsys.readouterr().err == (
        f"skipping {folder / 'new.safetensors'}: index version 6 cannot be read by this callmaybe (it reads "
        "versions 1 and 2 and 3 and 4 and 5); recompile the index or upgrade callmaybe\n")


def test_find_skips_an_index_of_another_grammar_revision(compiled, tmp_path, monkeypatch, capsys):
    """An index compiled before the compiler's language changed (here: one with no ``grammar_revision``, as
    every index before revision 2) is not reused: the caller compiles the catalog again."""
    from callmaybe.core import indexes
    from callmaybe.core.indexfile import GRAMMAR_REVISION, IndexData, save_index

    fns, _, index, _ = compiled
    assert index.header["grammar_revision"] == GRAMMAR_REVISION == 5
    cache = tmp_path / "cache"
    monkeypatch.setenv("CALLMAYBE_CACHE", str(cache))
    old = indexes.cache_path(catalog_fingerprint(fns), VOCAB.fingerprint(), {})
    old.parent.mkdir(parents=True, exist_ok=True)
    save_index(old, IndexData({k: v for k, v in index.header.items() if k != "grammar_revision"}, index.arrays))
    assert indexes.find(VOCAB.fingerprint(), catalog_fingerprint(fns), {}) is None
    assert capsys.readouterr().err == (
        f"skipping {old}: compiled with grammar revision 1, this callmaybe compiles revision 5\n")
    # named by --index: used as it is, with one line
    assert indexes.load_matching(old, VOCAB.fingerprint(), catalog_fingerprint(fns), {}).header["regex"] == \
        index.header["regex"]
    assert capsys.readouterr().err == (
        f"{old}: compiled with grammar revision 1, this callmaybe compiles revision 5 (compile the catalog again "
        "for its grammar)\n")
    save_index(old, index)  # compiled again, at the same place
    assert indexes.find(VOCAB.fingerprint(), catalog_fingerprint(fns), {}).header == read_header(old)


@pytest.mark.parametrize("value", [None, "2", 2.0, 2.5, True, [2], {}])
def test_a_grammar_revision_that_is_no_integer_is_another_revision(compiled, tmp_path, monkeypatch, capsys, value):
    """Whatever the field holds, one line: ``find`` skips the file, ``inspect`` shows the value as it is."""
    from click.testing import CliRunner

    from callmaybe.cli import main
    from callmaybe.core import indexes
    from callmaybe.core.indexfile import IndexData, save_index

    fns, _, index, _ = compiled
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path / "cache"))
    odd = indexes.cache_path(catalog_fingerprint(fns), VOCAB.fingerprint(), {})
    odd.parent.mkdir(parents=True, exist_ok=True)
    save_index(odd, IndexData({**index.header, "grammar_revision": value}, index.arrays))
    assert indexes.find(VOCAB.fingerprint(), catalog_fingerprint(fns), {}) is None
    assert capsys.readouterr().err == (
        f"skipping {odd}: compiled with grammar revision {value!r}, this callmaybe compiles revision 5\n")
    r = CliRunner().invoke(main, ["inspect", str(odd)])
    assert r.exit_code == 0 and f"grammar revision {value!r}" in r.stdout.splitlines()[1]


def test_the_header_says_whether_its_regex_is_exact(tmp_path, monkeypatch):
    """``regex_exact``: false where the regex holds descriptions (``not``) or is too long to store."""
    from callmaybe.compiler import compile as compile_mod
    from callmaybe.compiler.compile import compile_index
    from callmaybe.core.catalog import parse_catalog

    plain = parse_catalog([{"name": "f", "parameters": {"a": {"type": "integer"}}}], "t")
    index, _ = compile_index(plain, VOCAB)
    assert index.header["regex_exact"] is True and index.header["regex"].startswith('\\{"name": ')
    negated = parse_catalog([{"name": "f", "parameters": {"a": {"type": "integer", "not": {"const": 3}}}}], "t")
    assert compile_index(negated, VOCAB)[0].header["regex_exact"] is False
    monkeypatch.setattr(compile_mod, "HEADER_REGEX", 20)
    index, _ = compile_index(plain, VOCAB)
    length = len(compile_mod.compile_grammar(plain).regex)
    assert index.header["regex"] == f"<the call's regex: {length:,} characters, not stored>"
    assert index.header["regex_exact"] is False


def test_the_shipped_indexes_are_what_this_compiler_writes():
    """``indexes/`` holds the default catalog compiled by this compiler (``make indexes``): the same regex and
    arrays as a fresh compile, and the current grammar revision (a stale shipped index would be skipped)."""
    from callmaybe.compiler.compile import CompileOptions, compile_index
    from callmaybe.core.indexfile import GRAMMAR_REVISION, read_index
    from callmaybe.core.vocabulary import load_vocabulary

    root = Path(__file__).resolve().parent.parent
    shipped = sorted((root / "indexes").glob("*.safetensors"))
    assert [p.name for p in shipped] == ["functions_definition.qwen-qwen3-0.6b.safetensors",
                                         "functions_definition.smollm2-135m-instruct.safetensors"]
    functions = load_catalog(root / "schemas" / "functions_definition.json")
    for path in shipped:
        index = read_index(path)
        assert index.header["grammar_revision"] == GRAMMAR_REVISION
        vocabulary = load_vocabulary(index.header["vocabulary_name"], None)
        fresh, _ = compile_index(functions, vocabulary, CompileOptions(**index.header["options"]))
        assert index.header["regex"] == fresh.header["regex"], path.name
        assert index.header["regex_exact"] is fresh.header["regex_exact"] is True, path.name
        for name, array in fresh.arrays.items():
            assert np.array_equal(index.arrays[name], array), (path.name, name)


def test_inspect_describes_a_shipped_index():
    from click.testing import CliRunner

    from callmaybe.cli import main

    shipped = Path(__file__).resolve().parent.parent / "indexes"
    r = CliRunner().invoke(main, ["inspect", str(shipped / "functions_definition.smollm2-135m-instruct.safetensors")])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1:] == [
        "index version: 3, compiler 0.1.0, grammar revision 5",
        "functions: 5 (fn_add_numbers, fn_greet, fn_reverse_string, fn_get_square_root, "
        "fn_substitute_string_with_regex)",
        "states: 453 (1 accepting), byte classes: 56",
        "allowed-token entries: 173,308; distinct rows: 125 (4 bitmasks, 121 id lists)",
        "fewest tokens to complete a call: 17",
        "vocabulary: smollm2-135m-instruct, vocab_size 49,152, EOS [0, 2]",
        "vocabulary fingerprint: d6957a95774279a68365b1ac4a438ba9a14bd4e0ed06a33a55ae95a0183dad95",
        "catalog fingerprint: bfeb55446a45eeb0dc181a2c1b60fe37e3b8d79f4506e83917a52fd0d093504d",
        'options: {"parameters_key": "parameters", "opening": "", "form": "call"}',
        "not enforced by the grammar: 0",
    ]
