"""Load a checkpoint's fast tokenizer in about half the time transformers' ``AutoTokenizer`` takes.

transformers 5's ``AutoTokenizer.from_pretrained`` parses ``tokenizer.json`` in Python several times (an
11 MB file for Qwen2.5: about 1.2 s of ``json`` on this 2-core CPU) and builds its byte-level BPE again from the
parsed vocabulary and merges; giving the tokenizer object instead makes it deep-copy it (a serialize and
deserialize round trip, 1.1 s). Reading the file with the tokenizers library (Rust) once, through
``PreTrainedTokenizerFast(tokenizer_file=...)``, with the special tokens and the chat template that
``tokenizer_config.json`` / ``chat_template.jinja`` hold, gives the same tokenizer in 0.8 s instead of 1.8 s
(Qwen2.5-Coder-1.5B, measured on this machine; ``tests/runtime/test_model.py`` checks that both give the same
ids, text, special tokens and chat template).

That shortcut is taken only for the plain configurations the checkpoints this cache converts are written with
(:data:`PLAIN_KEYS`); any other ``tokenizer_config.json`` (a hub or local checkpoint with its own tokenizer
class, added-token flags, normalization options) goes through ``AutoTokenizer`` as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: tokenizer_config.json keys whose meaning the shortcut keeps: the special tokens and the length limit are
#: passed on; the others only say how the file was written (the class ``AutoTokenizer`` would pick, whose
#: own ``__init__`` for Qwen2 / GPT-2-like / Llama-like fast tokenizers adds nothing to ``tokenizer.json``).
PASSED_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token", "model_max_length", "clean_up_tokenization_spaces")
PLAIN_KEYS = frozenset(PASSED_KEYS) | {"add_prefix_space", "backend", "is_local", "local_files_only",
                                        "tokenizer_class"}
#: tokenizer classes whose fast ``__init__`` only wraps ``tokenizer.json`` (checked for Qwen2 and SmolLM2)
PLAIN_CLASSES = ("Qwen2Tokenizer", "Qwen2TokenizerFast", "GPT2Tokenizer", "GPT2TokenizerFast",
                 "PreTrainedTokenizerFast", "TokenizersBackend")


def plain_config(path: Path) -> dict | None:
    """``path``'s tokenizer_config.json when the shortcut may read ``path`` (see the module docstring), else
    None: no tokenizer.json, no or unreadable config, a key outside :data:`PLAIN_KEYS`, another class, or
    ``add_prefix_space`` set."""
    if not (path / "tokenizer.json").is_file():
        return None
    try:
        config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or set(config) - PLAIN_KEYS:
        return None
    if config.get("tokenizer_class", "PreTrainedTokenizerFast") not in PLAIN_CLASSES:
        return None
    if config.get("add_prefix_space") not in (None, False):
        return None
    if not all(config.get(k) is None or isinstance(config[k], str) for k in PASSED_KEYS[:4]):
        return None  # an AddedToken dict: flags the shortcut would drop
    return config


def load_tokenizer(path: Path) -> Any:
    """The fast tokenizer of the checkpoint folder ``path`` (a transformers ``PreTrainedTokenizerFast``).

    Takes the shortcut of the module docstring when :func:`plain_config` allows it, else
    ``AutoTokenizer.from_pretrained(path)``. Raises what transformers or tokenizers raise for an unreadable
    file (the caller names the model)."""
    config = plain_config(path)
    if config is None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path)
    from transformers import PreTrainedTokenizerFast

    template = path / "chat_template.jinja"
    kwargs = {k: config[k] for k in PASSED_KEYS if config.get(k) is not None}
    if template.is_file():
        kwargs["chat_template"] = template.read_text(encoding="utf-8")
    return PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"), **kwargs)
