import numpy as np
import pytest

from callmaybe.core.catalog import catalog_fingerprint, load_catalog
from callmaybe.compiler.compile import compile_to_file
from callmaybe.core.errors import IndexFileError
from callmaybe.core.indexfile import load_index, read_header
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
    loaded = load_index(path, VOCAB.fingerprint(), catalog_fingerprint(fns))
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
        load_index(path, other.fingerprint(), None)
    assert str(err.value) == (
        f"{path}: index was compiled for another tokenizer "
        f"(vocabulary {VOCAB.fingerprint()[:12]}, expected {other.fingerprint()[:12]})"
    )
    with pytest.raises(IndexFileError) as err:
        load_index(path, None, catalog_fingerprint(fns[:2]))
    assert "index was compiled for another catalog" in str(err.value)


def test_refuses_corrupt_file(compiled):
    _, path, _, _ = compiled
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileError) as err:
        load_index(path)
    assert str(err.value) == f"{path}: corrupt index file (array checksum mismatch)"
    path.write_bytes(b"not an index")
    with pytest.raises(IndexFileError) as err:
        load_index(path)
    assert str(err.value).startswith(f"{path}: corrupt index file (")
    with pytest.raises(IndexFileError) as err:
        load_index(path.parent / "missing.safetensors")
    assert str(err.value) == f"{path.parent / 'missing.safetensors'}: index file not found"


def test_refuses_a_foreign_safetensors_file(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({f"layer.{i}.weight": np.zeros((2, 2), dtype=np.float32) for i in range(5)}, str(path))
    expected = (f"{path}: not a callmaybe index (a safetensors file with tensors layer.0.weight, layer.1.weight, "
                "layer.2.weight and 2 more, and no callmaybe header)")
    for read in (load_index, read_header):
        with pytest.raises(IndexFileError) as err:
            read(path)
        assert str(err.value) == expected
