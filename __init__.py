"""callmaybe: function calling with small language models whose output is valid by construction.

Layers: ``core/`` (what both sides share: errors, catalogs, call formats, the vocabulary's token bytes, the
index file format, file helpers, model pins; no torch, no regex engine), ``compiler/`` (catalog -> regex ->
byte DFA -> token index, no torch), ``runtime/`` (index + model -> calls, no regex engine), and ``cli.py``,
the one module that joins them. The index file is the only contract between the compiler and the runtime.

The public API: three nouns (a :class:`Vocabulary`, a compiled index loaded as a :class:`TokenIndex`, a
:class:`Matcher` per call being decoded) and four functions. The usage loop, for any model's logits::

    import callmaybe

    functions = callmaybe.load_catalog("schemas/functions_definition.json")
    vocabulary = callmaybe.load_vocabulary("Qwen/Qwen3-0.6B")       # token id -> exact bytes, offline
    callmaybe.compile_catalog(functions, vocabulary, "catalog.safetensors")
    index = callmaybe.load_index("catalog.safetensors", vocabulary)
    matcher = callmaybe.Matcher(index, max_tokens=64)
    while not matcher.is_finished():
        logits = next_token_logits()                                # float (vocab_size,), from your model
        matcher.advance(int(matcher.apply(logits).argmax()))
    call = matcher.data.decode()                                     # parses, and matches its schema

Names are imported on first use, so ``import callmaybe`` loads neither torch nor the compiler.
"""

from __future__ import annotations

import importlib
from typing import Any

from .core import __version__

_EXPORTS = {
    "Function": "callmaybe.core.catalog",
    "load_catalog": "callmaybe.core.catalog",
    "Vocabulary": "callmaybe.core.vocabulary",
    "load_vocabulary": "callmaybe.core.vocabulary",
    "compile_catalog": "callmaybe.compiler.build",
    "TokenIndex": "callmaybe.runtime.decoding.masks",
    "load_index": "callmaybe.runtime.decoding.index",
    "Matcher": "callmaybe.runtime.decoding.matcher",
    "CallmaybeError": "callmaybe.core.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'callmaybe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
