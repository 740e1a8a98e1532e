"""Load a causal language model and its tokenizer for the runtime (CPU, float32).

A model is named by a registry name (``callmaybe.core.registry.MODELS``), a local transformers checkpoint
directory, or a model hub id. Registry models ship as GGUF files; on first use they are dequantized once
into a float32 safetensors checkpoint under ``cache_dir("models", name, "hf")``, which later loads in seconds.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.errors import ModelError
from ..core.files import cache_dir
from ..core.messages import say
from ..core.registry import MODELS, gguf_path
from ..core.sources import HUB, PATH, REGISTRY, HubUnavailable, classify, fetch_from_hub


@dataclass
class LoadedModel:
    """A model ready for decoding.

    ``model`` is a ``torch.nn.Module`` in eval mode with float32 weights; ``tokenizer`` is a transformers fast
    tokenizer; ``vocab_size`` is the number of logits per position (``model.config.vocab_size``), which may
    exceed ``len(tokenizer)`` (Qwen pads its output layer).
    """

    name: str
    path: Path
    model: Any
    tokenizer: Any
    vocab_size: int


def resolve_model_dir(spec: str) -> Path:
    """Return a local directory holding a transformers checkpoint (config.json, weights, tokenizer) for ``spec``.

    ``spec`` is classified by :func:`callmaybe.core.sources.classify` as: a registry name (case-insensitive;
    converted from GGUF to float32 safetensors on first use, which takes about 1-2 minutes and 2.5 GB of disk
    for the 0.5B model, then cached); a local directory, which must contain config.json; a model hub id (the
    repository's snapshot, by :func:`callmaybe.core.sources.fetch_from_hub`: local hub cache first, then the
    network unless offline).
    Raises ModelError when none of these works, or when fetching or converting a registry model fails.
    """
    source = classify(spec)
    if source.kind == REGISTRY:
        return _converted_dir(source.name)
    if source.kind == PATH and source.path.is_dir():
        if not (source.path / "config.json").is_file():
            raise ModelError(f"model directory '{spec}' has no config.json (not a transformers checkpoint)")
        return source.path
    if source.kind == HUB:
        try:
            return fetch_from_hub(source.name)
        except HubUnavailable:
            pass
    names = ", ".join(MODELS)
    raise ModelError(
        f"model '{spec}' not found: not a registry name ({names}), not a local directory, "
        "and the model hub is unreachable"
    )


def load_model(spec: str, threads: int | None = None) -> LoadedModel:
    """Load the model and tokenizer named by ``spec`` (see :func:`resolve_model_dir`) on the CPU in float32.

    ``threads`` sets ``torch.set_num_threads`` (a count of CPU threads) when given; None leaves torch's default.
    Takes a few seconds from a cached checkpoint. Raises ModelError when the model cannot be found or loaded.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads is not None:
        if threads < 1:
            raise ModelError(f"threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)
    path = resolve_model_dir(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    except Exception as exc:
        raise ModelError(f"cannot load model '{spec}' from {path}: {_one_line(exc)}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"model '{spec}' has no fast (tokenizers) tokenizer")
    model.eval()
    return LoadedModel(spec, path, model, tokenizer, int(model.config.vocab_size))


def _converted_dir(name: str) -> Path:
    """Return the float32 safetensors checkpoint of registry model ``name``, converting the GGUF once."""
    parent = cache_dir("models", name)
    final = parent / "hf"
    if (final / "config.json").is_file():
        return final
    gguf = gguf_path(name)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    say(f"converting {name} GGUF to safetensors (first run, ~1-2 min)...")
    start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=".hf-", dir=parent))
    try:
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
            model.hf_quantizer = None  # else save_pretrained refuses: "quantized with gguf, not serializable"
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        except Exception as exc:
            raise ModelError(f"cannot convert {name} from GGUF: {_one_line(exc)}") from exc
        try:
            os.rename(tmp, final)  # atomic; fails if another process got there first
        except OSError:
            if not (final / "config.json").is_file():
                shutil.rmtree(final, ignore_errors=True)  # an empty or broken leftover: replace it
                os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"converted {name} in {time.monotonic() - start:.0f} s")
    return final


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
