"""Issue 30, item 7: the on-disk index cache only grew (7 to 65 files in one afternoon of tests); it is bounded
in size and count, the least recently used removed first (:func:`callmaybe.core.indexes.prune_cache`), by any
process that writes to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from callmaybe.compiler.compile import CompileOptions, compile_index
from callmaybe.core import indexes
from callmaybe.core.catalog import catalog_fingerprint, parse_catalog
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.answering.session import Runtime

TOKENS = tuple(bytes([b]) for b in range(32, 127)) + (None,)
VOCAB = Vocabulary(name="tiny-cache", token_bytes=TOKENS, eos_ids=(len(TOKENS) - 1,), vocab_size=len(TOKENS))


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path))
    return tmp_path / "indexes"


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.safetensors"))


def put(folder: Path, name: str, size: int, used_at: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"x" * size)
    os.utime(path, (used_at, used_at))
    return path


def test_the_least_recently_used_go_first_by_count_and_by_size(cache):
    for i in range(5):
        put(cache, f"{i}.safetensors", 100, 1_000 + i)
    (cache / ".4.safetensors.abc.tmp").write_bytes(b"x" * 10_000)  # a write under way: not an index file
    assert [p.name for p in indexes.prune_cache(max_files=3)] == ["0.safetensors", "1.safetensors"]
    assert files(cache) == ["2.safetensors", "3.safetensors", "4.safetensors"]
    indexes.used(cache / "2.safetensors")  # now the most recently used
    assert [p.name for p in indexes.prune_cache(max_bytes=150)] == ["3.safetensors", "4.safetensors"]
    assert files(cache) == ["2.safetensors"]
    big = put(cache, "big.safetensors", 1_000, 999)
    assert indexes.prune_cache(keep=big, max_bytes=150) == [cache / "2.safetensors"]  # kept, alone past it
    assert files(cache) == ["big.safetensors"] and (cache / ".4.safetensors.abc.tmp").exists()


def test_the_bounds_are_said():
    assert (indexes.CACHE_MAX_FILES, indexes.CACHE_MAX_BYTES) == (100, 256 * 2**20)
    assert indexes.CACHE_BOUNDS == "at most 100 files and 256 MiB, the least recently used removed first"
    from click.testing import CliRunner

    from callmaybe.cli import main

    for command in ("run", "serve"):
        text = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "at most 100 files and 256 MiB, the least recently used removed first" in text


def test_a_compile_that_writes_the_cache_keeps_it_bounded_and_a_find_marks_a_use(cache, monkeypatch):
    monkeypatch.setattr(indexes, "CACHE_MAX_FILES", 2)
    runtime = Runtime.__new__(Runtime)  # the runtime's cache path without a model
    runtime.vocabulary, runtime.model_dir = VOCAB, None
    runtime.compile = lambda functions, vocabulary, options, quiet: compile_index(
        functions, vocabulary, CompileOptions(**options))[0]
    catalogs = [parse_catalog([{"name": f"f{i}", "parameters": {"x": {"type": "integer"}}}], "t") for i in range(4)]
    paths = [indexes.cache_path(catalog_fingerprint(c), VOCAB.fingerprint(), {}) for c in catalogs]
    for i, catalog in enumerate(catalogs[:2]):
        runtime._found_or_compiled(catalog, {}, True)
        os.utime(paths[i], (1_000 + i, 1_000 + i))
    assert files(cache) == sorted(p.name for p in paths[:2])
    runtime._found_or_compiled(catalogs[0], {}, True)  # found: its use is recorded, f1 is now the oldest
    runtime._found_or_compiled(catalogs[2], {}, True)  # compiled: one too many, the least recently used goes
    assert files(cache) == sorted(p.name for p in (paths[0], paths[2]))
