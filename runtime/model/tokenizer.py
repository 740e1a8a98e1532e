"""Load a checkpoint's fast tokenizer without transformers, in a fraction of the time ``AutoTokenizer`` takes.

transformers 5's ``AutoTokenizer.from_pretrained`` parses ``tokenizer.json`` in Python several times (an
11 MB file for Qwen2.5: about 1.2 s of ``json`` on this 2-core CPU) and builds its byte-level BPE again from the
parsed vocabulary and merges, and importing transformers alone takes 1.8 s (it scans its 1,700 model modules'
sources for their ``__all__``). For the plain configurations the checkpoints this cache converts are written
with (:data:`PLAIN_KEYS`), :class:`ChatTokenizer` reads the file once with the tokenizers library (Rust, 0.5 s)
and renders the chat template with jinja2 as transformers does (``tests/runtime/test_model.py`` checks that
both give the same ids, text, special tokens and rendered chats, for SmolLM2's and Qwen2.5-Coder's templates).

Any other ``tokenizer_config.json`` (a hub or local checkpoint with its own tokenizer class, added-token flags,
normalization options) goes through ``AutoTokenizer`` as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: tokenizer_config.json keys whose meaning the shortcut keeps: the special tokens and the length limit are
#: passed on; the others only say how the file was written (the class ``AutoTokenizer`` would pick, whose
#: own ``__init__`` for Qwen2 / GPT-2-like / Llama-like fast tokenizers adds nothing to ``tokenizer.json``), or,
#: ``clean_up_tokenization_spaces``, are ignored by transformers 5 for these byte-level BPE tokenizers too.
PASSED_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token", "model_max_length")
PLAIN_KEYS = frozenset(PASSED_KEYS) | {"add_prefix_space", "backend", "is_local", "local_files_only",
                                        "tokenizer_class", "clean_up_tokenization_spaces"}
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
    """The fast tokenizer of the checkpoint folder ``path``.

    When :func:`plain_config` allows it: a :class:`ChatTokenizer` (``tokenizer.json`` read once by the tokenizers
    library, the chat template rendered with jinja2 as transformers renders it; transformers is not imported,
    which alone takes 1.8 s of a 2.5 s load on this 2-core CPU). Else ``AutoTokenizer.from_pretrained(path)``.
    Raises what tokenizers, jinja2 or transformers raise for an unreadable file (the caller names the model)."""
    config = plain_config(path)
    if config is None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path)
    template = path / "chat_template.jinja"
    return ChatTokenizer(path / "tokenizer.json", {k: config[k] for k in PASSED_KEYS if config.get(k) is not None},
                         template.read_text(encoding="utf-8") if template.is_file() else None)


#: the special tokens a chat template is given by name (transformers' ``special_tokens_map``)
SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")
#: transformers' ``apply_chat_template`` options :class:`ChatTokenizer` refuses (ValueError) rather than ignore
UNSUPPORTED_OPTIONS = ("continue_final_message", "chat_template", "documents", "truncation", "max_length",
                       "padding", "return_assistant_tokens_mask", "tokenizer_kwargs", "sanitize_control_tokens")


class ChatTokenizer:
    """A checkpoint's byte-level BPE tokenizer with its special tokens and chat template, without transformers.

    What the runtime asks of a tokenizer, answered as transformers' ``PreTrainedTokenizerFast`` answers it for the
    plain configurations :func:`plain_config` admits (``tests/runtime/test_model.py`` compares the two: ids, text,
    special tokens, rendered chats): :meth:`encode`, :meth:`decode`, :meth:`apply_chat_template`, the special
    tokens and their ids, ``backend_tokenizer`` (the tokenizers ``Tokenizer``), ``added_tokens_decoder`` (id ->
    tokenizers ``AddedToken``) and ``chat_template``.

    The chat template is rendered in a sandboxed jinja2 environment set up as transformers 5 sets up its own
    (``transformers/utils/chat_template_utils.py``): ``trim_blocks``, ``lstrip_blocks``, the loop-control
    extension, a ``tojson`` filter that does not escape HTML (``json.dumps``, ``ensure_ascii=False``),
    ``raise_exception``, ``strftime_now``, and the special tokens as variables. A template that needs more
    (transformers' ``{% generation %}`` tag) raises jinja2's TemplateSyntaxError when first rendered.
    ``path``: tokenizer.json; ``special``: token names (:data:`SPECIAL_NAMES`, ``model_max_length``) ->
    values; ``chat_template``: the template's text or None. Raises
    Exception (tokenizers') for a file it cannot read.
    """

    is_fast = True

    def __init__(self, path: Path, special: dict[str, Any], chat_template: str | None):
        from tokenizers import Tokenizer

        self.backend_tokenizer = Tokenizer.from_file(str(path))
        self.chat_template = chat_template
        self.special_tokens_map = {k: special[k] for k in SPECIAL_NAMES if special.get(k) is not None}
        self.model_max_length = special.get("model_max_length")
        for name in SPECIAL_NAMES:
            token = self.special_tokens_map.get(name)
            setattr(self, name, token)
            setattr(self, name + "_id", None if token is None else self.backend_tokenizer.token_to_id(token))
        self.added_tokens_decoder = dict(sorted(self.backend_tokenizer.get_added_tokens_decoder().items()))
        self._template = None

    def __len__(self) -> int:
        """The vocabulary's size, added tokens included."""
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_template": None}  # a compiled jinja2 template does not pickle

    @property
    def all_special_ids(self) -> list[int]:
        """The ids of the named special tokens, each once, in :data:`SPECIAL_NAMES`' order as transformers lists
        them (bos, eos, unk, pad)."""
        ids = [getattr(self, name + "_id") for name in SPECIAL_NAMES]
        return list(dict.fromkeys(i for i in ids if i is not None))

    def get_vocab(self) -> dict[str, int]:
        """Token string -> id, added tokens included."""
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids of ``text`` (added tokens in it are recognized; ``add_special_tokens``: the
        post-processor's, none for these configurations)."""
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, text: str, add_special_tokens: bool = True, return_offsets_mapping: bool = False) -> dict:
        """``{"input_ids": ..., "attention_mask": ...}`` of ``text``, as transformers returns it unbatched, with
        ``"offset_mapping"`` (each token's (start, end) in characters of ``text``) when asked."""
        encoding = self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens)
        out: dict[str, list] = {"input_ids": encoding.ids, "attention_mask": [1] * len(encoding.ids)}
        if return_offsets_mapping:
            out["offset_mapping"] = list(encoding.offsets)
        return out

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """The text of token ids (an int, a list of ints, or a 0-D or 1-D tensor); ``clean_up_tokenization_spaces``
        is not applied (see :data:`PASSED_KEYS`)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, int):
            ids = [ids]
        return self.backend_tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids):
        """The token string of an id, or of each id of a list."""
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(int(i)) for i in ids]

    def convert_tokens_to_ids(self, tokens):
        """The id of a token string (the unknown token's id, or None without one, when it is not in the
        vocabulary), or of each of a list."""
        if isinstance(tokens, str):
            found = self.backend_tokenizer.token_to_id(tokens)
            return self.unk_token_id if found is None else found
        return [self.convert_tokens_to_ids(t) for t in tokens]

    @property
    def all_special_tokens(self) -> list[str]:
        """The named special tokens, each once (:attr:`all_special_ids`' order)."""
        tokens = [getattr(self, name) for name in SPECIAL_NAMES]
        return list(dict.fromkeys(t for t in tokens if t is not None))

    def apply_chat_template(self, conversation: list[dict], tools: list[dict] | None = None,
                            add_generation_prompt: bool = False, tokenize: bool = True, return_dict: bool = True,
                            return_tensors: str | None = None, **kwargs: Any):
        """The chat ``conversation`` (a list of message dicts) rendered by the chat template, with ``tools``
        (OpenAI tool dicts) and ``kwargs`` as template variables.

        Returns the text when not ``tokenize``; else, as transformers 5 does, ``{"input_ids", "attention_mask"}``
        (``return_dict``) or the ids alone: lists of ints, or int64 tensors of shape (1, tokens) when
        ``return_tensors`` is ``"pt"``. Raises ValueError when the checkpoint has no chat template, the
        conversation is empty or ``return_tensors`` is another kind, and jinja2's TemplateError for a template
        that cannot render it (``raise_exception``)."""
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat template")
        if not conversation:
            raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
        refused = [k for k in UNSUPPORTED_OPTIONS if kwargs.pop(k, None) not in (None, False)]
        if isinstance(conversation[0], (list, tuple)):
            refused.append("a batch of conversations")
        if tools is not None and not all(isinstance(t, dict) for t in tools):
            refused.append("tools that are not JSON schemas (dicts)")
        if refused:
            raise ValueError(f"ChatTokenizer.apply_chat_template does not support {', '.join(refused)}; load the "
                             "tokenizer with transformers' AutoTokenizer for it")
        if self._template is None:
            self._template = compile_chat_template(self.chat_template)
        # as transformers does: a key set to None is left out (OpenAI's content=None, tool_calls=None), which
        # templates handle as missing
        conversation = [{k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m
                        for m in conversation]
        text = self._template.render(messages=conversation, tools=tools, documents=None,
                                     add_generation_prompt=add_generation_prompt,
                                     **{**self.special_tokens_map, **kwargs})
        if not tokenize:
            return text
        ids: Any = self.encode(text, add_special_tokens=False)
        mask: Any = [1] * len(ids)
        if return_tensors == "pt":
            import torch

            ids, mask = torch.tensor([ids], dtype=torch.long), torch.ones((1, len(ids)), dtype=torch.long)
        elif return_tensors is not None:
            raise ValueError(f"return_tensors={return_tensors!r}: only 'pt' or None")
        return {"input_ids": ids, "attention_mask": mask} if return_dict else ids


def compile_chat_template(source: str):
    """``source`` compiled in the sandboxed jinja2 environment :class:`ChatTokenizer` describes. Raises
    jinja2's TemplateSyntaxError."""
    import json
    from datetime import datetime

    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)
