"""Load a causal language model and its tokenizer for the runtime, on the CPU or a GPU, in float32 or bfloat16.

A model is named by a registry name (``callmaybe.core.registry.MODELS``), a local transformers checkpoint
directory, or a model hub id. Registry models ship as GGUF files; on first use they are dequantized once per
dtype into a safetensors checkpoint under ``cache_dir("models", name)`` (``hf`` for float32, ``hf-bfloat16``,
``hf-int8-v3`` for int8, ``hf-int4-v1`` for int4, streamed by :mod:`.convert`), which later loads in
seconds, memory-mapped. ``--dtype auto`` picks int8 on the CPU (:mod:`.quant`), bfloat16 on a GPU that computes
it natively.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...core.errors import ModelError
from ...core.files import cache_dir, check_manifest, record_manifest, remove_stale, temporary_dir
from ...core.messages import say
from ...core.registry import MODELS, gguf_path
from ...core.sources import HUB, PATH, REGISTRY, HubUnavailable, classify, fetch_from_hub
from . import native
from .convert import QUANTIZATION_FILE


@dataclass
class LoadedModel:
    """A model ready for decoding.

    ``model`` is a ``torch.nn.Module`` in eval mode with weights of ``dtype`` on ``device``; ``tokenizer`` is a
    transformers fast tokenizer; ``vocab_size`` is the number of logits per position
    (``model.config.vocab_size``), which may exceed ``len(tokenizer)`` (Qwen pads its output layer).
    """

    name: str
    path: Path
    model: Any
    tokenizer: Any
    vocab_size: int
    dtype: torch.dtype = torch.float32
    device: torch.device = torch.device("cpu")


#: ``int8`` is int8 weights, with rotated int8 activations in the linear layers (:mod:`.quant`), kept as
#: ``torch.int8`` here; ``int4`` is 4-bit weights in groups of 32 with bfloat16 activations (:mod:`.int4`), kept
#: as ``torch.uint4``.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int8": torch.int8, "int4": torch.uint4}
#: the dtypes of quantized checkpoints, by scheme name (:data:`.convert.SCHEMES`)
QUANTIZED = {torch.int8: "int8", torch.uint4: "int4"}


def bf16_is_fast(device: torch.device) -> bool:
    """True when ``device`` multiplies bfloat16 matrices natively: a CUDA GPU that supports bf16, or a CPU with
    AVX512-BF16 or AMX (checked at run time; elsewhere bf16 is emulated and slower than float32)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    cpu = getattr(torch, "cpu", None)
    checks = [getattr(cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(check is not None and check() for check in checks)


def choose_device(requested: str = "auto") -> torch.device:
    """``cuda`` when asked or, for ``auto``, when a GPU is available; else the CPU.

    Raises ModelError when ``cuda`` is asked and there is none, or for an unknown name.
    """
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ModelError("--device cuda: no CUDA GPU is available to torch here")
    if requested not in ("cpu", "cuda"):
        raise ModelError(f"unknown device {requested!r} (expected auto, cpu or cuda)")
    return torch.device(requested)


def choose_dtype(requested: str, device: torch.device) -> torch.dtype:
    """The weights' dtype: for ``auto``, ``int8`` on the CPU (:mod:`.quant`; ``torch.int8`` stands
    for it), and on a GPU ``bfloat16`` where :func:`bf16_is_fast`, else ``float32``; an explicit ``float32``,
    ``bfloat16`` or ``int8`` (CPU only) as asked. Raises ModelError for an unknown name, or int8 on a GPU.

    int8 on the CPU because it is what keeps the default model under 2.5 GB (1.5B parameters are 3.1 GB in
    bfloat16 alone) and it is as fast as bfloat16 or faster (issue 11's benchmark, docs/commands.md).

    Measured on this project's 2-core CPU (AVX512-BF16), Qwen2.5-Coder-1.5B, 250-token context: a decode step
    383 ms in float32 and 182 ms in bfloat16; an 8-token chunk 660 and 210 ms; a 250-token prefill 4.4-4.8 s and
    2.4-2.6 s.
    """
    if requested == "auto":
        if device.type == "cpu":
            return torch.int8
        return torch.bfloat16 if bf16_is_fast(device) else torch.float32
    if requested not in DTYPES:
        raise ModelError(f"unknown dtype {requested!r} (expected auto, {', '.join(DTYPES)})")
    if requested in ("int8", "int4") and device.type != "cpu":
        raise ModelError(f"--dtype {requested} is for the CPU (its kernels are torch's {requested} CPU products)")
    return DTYPES[requested]


def resolve_model_dir(spec: str, dtype: torch.dtype = torch.float32) -> Path:
    """Return a local directory holding a transformers checkpoint (config.json, weights, tokenizer) for ``spec``.

    ``spec`` is classified by :func:`callmaybe.core.sources.classify` as: a registry name (case-insensitive;
    converted from GGUF to safetensors of ``dtype`` on first use, about a minute, then cached per dtype); a
    local directory, which must contain config.json; a model hub id (the repository's snapshot, by
    :func:`callmaybe.core.sources.fetch_from_hub`: local hub cache first, then the network unless offline).
    Raises ModelError when none of these works, or when fetching or converting a registry model fails.
    """
    source = classify(spec)
    if source.kind == REGISTRY:
        return _converted_dir(source.name, dtype)
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


def load_model(spec: str, threads: int | None = None, dtype: str = "auto", device: str = "auto",
               retry: bool = True) -> LoadedModel:
    """Load the model and tokenizer named by ``spec`` (see :func:`resolve_model_dir`) with weights of ``dtype``
    (:func:`choose_dtype`) on ``device`` (:func:`choose_device`).

    ``threads`` sets ``torch.set_num_threads`` (a count of CPU threads) when given; None leaves torch's default.
    Takes a few seconds from a cached checkpoint. A registry model's converted checkpoint is hashed in full
    against the manifest recorded at conversion (``SHA256SUMS``, :func:`callmaybe.core.files.check_manifest`)
    on a second thread while it loads; one that differs (or has no manifest) is converted again, once
    (``retry``), also when the damage made the load itself fail (a cut ``tokenizer.json``). For int8 and int4
    on the CPU, the int8 kernel (:func:`.native.kernel`) is found or built on another thread meanwhile. Raises
    ModelError when the model cannot be found or loaded.
    """
    if threads is not None:
        if threads < 1:
            raise ModelError(f"threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)
    where = choose_device(device)
    weights = choose_dtype(dtype, where)
    path = resolve_model_dir(spec, weights)
    ours = classify(spec).kind == REGISTRY  # a checkpoint this cache converted: checked against its manifest
    with ThreadPoolExecutor(2) as pool:
        check = pool.submit(check_manifest, path) if ours else None  # hashes while the model loads
        if weights in QUANTIZED and where.type == "cpu":  # the int8 kernel found or built (1-3 s) meanwhile, and
            pool.submit(native.kernel)  # a failure said before the first request, not inside its progress bar
        try:
            loaded = _load(spec, path, weights, where)
        except ModelError:
            if check is None or not check.result():
                raise  # the checkpoint is as converted: the error is not a damaged file's
        bad = check.result() if check is not None else []
    if bad:
        if not retry:
            raise ModelError(f"{path}: {', '.join(bad)} still differ from the manifest after converting again")
        say(f"{path}: {', '.join(bad)} differ from the SHA-256s recorded when it was converted; converting again")
        shutil.rmtree(path, ignore_errors=True)
        return load_model(spec, threads, dtype, device, retry=False)
    return loaded


def _load(spec: str, path: Path, weights: torch.dtype, where: torch.device) -> LoadedModel:
    """Load the checkpoint in ``path`` with weights of ``weights`` on ``where``. Raises ModelError."""
    from .tokenizer import load_tokenizer

    try:
        tokenizer = load_tokenizer(path)
        if weights in QUANTIZED and (path / QUANTIZATION_FILE).is_file():
            model = _load_int8(path, QUANTIZED[weights])
        elif weights in QUANTIZED:  # a local or hub checkpoint: quantized in memory at each load
            from transformers import AutoModelForCausalLM

            from .quant import quantize

            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
            quantize(model, int4=weights == torch.uint4)
        else:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(path, dtype=weights)
        model = model.to(where)
    except Exception as exc:
        raise ModelError(f"cannot load model '{spec}' from {path}: {_one_line(exc)}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"model '{spec}' has no fast (tokenizers) tokenizer")
    model.eval()
    return LoadedModel(spec, path, model, tokenizer, int(model.config.vocab_size), weights, where)


def _converted_dir(name: str, dtype: torch.dtype = torch.float32) -> Path:
    """Return the safetensors checkpoint of registry model ``name`` with weights of ``dtype``, converting the
    GGUF once per dtype into ``hf`` (float32), ``hf-bfloat16`` or, for int8, :data:`.convert.INT8_FOLDER`
    (``hf-int8-v3``: the scheme's version is in the name, so a checkpoint of another layout is never read; once
    the new one is in place, int8 checkpoints of earlier versions are deleted).

    float32 and bfloat16 load the whole model through transformers' GGUF loader, which dequantizes every tensor
    at once; int8 streams tensor by tensor (:func:`.convert.convert_gguf_int8`). Measured for
    Qwen2.5-Coder-1.5B (a 1.12 GB GGUF) on this project's 2-core CPU: float32, about 80 s, 9.1 GB of memory at
    the peak, 6.7 GB on disk; bfloat16, 54 s, 5.7 GB at the peak, 3.4 GB on disk; int8, 48 s, 1.06 GB at the
    peak (the whole process, torch included), 1.56 GB on disk.
    """
    from .convert import INT8_FOLDER, SCHEMES

    parent = cache_dir("models", name)
    remove_stale(parent, (".hf-",))  # what a conversion killed midway left
    scheme = QUANTIZED.get(dtype)
    label = scheme or str(dtype).removeprefix("torch.")
    int8 = dtype == torch.int8
    final = parent / ("hf" if dtype == torch.float32 else SCHEMES[scheme][2] if scheme else f"hf-{label}")
    if (final / "config.json").is_file():
        return final
    gguf = gguf_path(name)

    say(f"converting {name} GGUF to {label} safetensors (once for this dtype, ~1 min)...")
    start = time.monotonic()
    with temporary_dir(parent, ".hf-") as tmp:
        try:
            if scheme:
                from .convert import convert_in_subprocess

                convert_in_subprocess(gguf, tmp, scheme)
            else:
                _convert_float(gguf, dtype, tmp)
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot convert {name} from GGUF: {_one_line(exc)}") from exc
        record_manifest(tmp)  # the SHA-256 of every file, checked at each load
        try:
            os.rename(tmp, final)  # atomic; fails if another process got there first
        except OSError:
            if not (final / "config.json").is_file():
                shutil.rmtree(final, ignore_errors=True)  # an empty or broken leftover: replace it
                os.rename(tmp, final)
    if int8:  # checkpoints of earlier int8 schemes, which this callmaybe never reads again
        for old in parent.glob("hf-int8*"):
            if old.name != INT8_FOLDER:
                shutil.rmtree(old, ignore_errors=True)
    say(f"converted {name} in {time.monotonic() - start:.0f} s")
    return final


def _convert_float(gguf: Path, dtype: torch.dtype, folder: Path) -> None:
    """Write the float checkpoint (weights of ``dtype``) of GGUF file ``gguf`` and its tokenizer into ``folder``,
    through transformers' GGUF loader (the whole model in memory at once)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
    model.hf_quantizer = None  # else save_pretrained refuses: "quantized with gguf, not serializable"
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _load_int8(path: Path, scheme: str = "int8"):
    """Build the model of ``path``'s config with empty weights, give it the quantized layers of ``scheme``
    (``int8`` or ``int4``, :data:`.convert.SCHEMES`), and give them the saved tensors memory-mapped
    (:func:`map_safetensors`: no copy; pages are read from the file, or the page cache, as the first forward
    pass touches them). With tied embeddings the output layer gets the embedding's tensors themselves
    (:func:`.quant.tied_keys`): one int8 matrix in memory for both. Raises ModelError for a checkpoint of
    another scheme or scheme version."""
    import json

    from . import llama
    from .convert import SCHEMES
    from .quant import empty_like_quantized, tied_keys

    info = json.loads((path / QUANTIZATION_FILE).read_text())
    name, version = info.get("name", "int8"), info.get("version", 1)
    if name != scheme or version != SCHEMES[scheme][0]:
        raise ModelError(f"{path}: {name} checkpoint of scheme version {version}, this callmaybe reads {scheme} "
                         f"version {SCHEMES[scheme][0]} here; delete the folder to convert the model again")
    config = json.loads((path / "config.json").read_text())
    if llama.supported(config):  # the decoder without transformers' modeling imports (:mod:`.llama`)
        model = llama.CausalLM(config, torch.bfloat16, device="meta", exact_attention=False)
    else:
        from accelerate import init_empty_weights
        from transformers import AutoConfig, AutoModelForCausalLM

        with init_empty_weights(include_buffers=False):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=torch.bfloat16)
    state = map_safetensors(path / "model.safetensors")
    if state is None:  # a checkpoint written before the data was aligned: read into memory as before
        state = read_safetensors(path / "model.safetensors")
    empty_like_quantized(model, int4={k.removesuffix(".weight_int4") for k in state if k.endswith(".weight_int4")})
    for key, source in tied_keys(model).items():
        if source in state:  # else load_state_dict names the missing key
            state[key] = state[source]
    model.load_state_dict(state, assign=True, strict=True)
    return model


#: Bytes to which a memory-mapped tensor's data must be aligned (:func:`map_safetensors`): a cache line, AVX-512's
#: vector width.
MAP_ALIGNMENT = 64
_SAFETENSORS_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "I8": torch.int8,
                       "U8": torch.uint8, "I32": torch.int32, "I64": torch.int64, "BOOL": torch.bool}


def map_safetensors(path: Path) -> dict[str, torch.Tensor] | None:
    """The tensors of a safetensors file (format: :func:`read_safetensors`) as views of one private memory map
    of it (``mmap.ACCESS_COPY``: a write to a tensor copies its page, the file never changes): nothing is read
    until a tensor is used, and the pages the model reads are the page cache's, shared with other processes
    that map the file and never a second copy. A tensor whose data does not start on a multiple of
    :data:`MAP_ALIGNMENT` bytes is copied out instead: torch 2.13's ``_weight_int8pack_mm`` (no longer called
    since the int8 kernel of ``gemv.c``; other kernels may do as it did) crashed (SIGSEGV) on an int8 matrix
    mapped 56 bytes past a 64-byte boundary (:func:`.convert.write_safetensors` pads the header
    so that tensors whose sizes are multiples of 64 bytes all start aligned). Returns None for a file whose
    data does not start aligned (written before that padding): every tensor would be copied, the mapped pages
    held beside the copies. Raises ValueError for a dtype it does not know, a tensor outside
    the file, or a tensor whose offset is not a multiple of its element size."""
    import json
    import mmap
    import struct

    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        if (8 + size) % MAP_ALIGNMENT:
            return None
        header = json.loads(f.read(size))
        length = f.seek(0, 2)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if length else None
    header.pop("__metadata__", None)
    out: dict[str, torch.Tensor] = {}
    for name, info in header.items():
        if info["dtype"] not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}")
        dtype = _SAFETENSORS_DTYPES[info["dtype"]]
        start, end = info["data_offsets"]
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if 8 + size + end > length or (8 + size + start) % itemsize:
            raise ValueError(f"{path}: tensor {name} lies outside the file or is misaligned")
        if end == start:
            out[name] = torch.empty(info["shape"], dtype=dtype)
            continue
        flat = torch.frombuffer(mapped, dtype=torch.uint8, count=end - start, offset=8 + size + start)
        if flat.data_ptr() % MAP_ALIGNMENT:
            flat = flat.clone()
        out[name] = flat.view(dtype).reshape(info["shape"])
    return out


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file (https://github.com/huggingface/safetensors: an 8-byte little-endian
    header length, a JSON header of name -> dtype, shape, byte offsets, then the data), read with plain reads
    into each tensor's own memory. ``safetensors.torch.load_file`` maps the file and copies out of the mapping,
    which holds the file's pages in memory beside the copies until it returns: twice the weights at the peak.
    Raises ValueError for a dtype it does not know."""
    import json
    import struct

    dtypes = _SAFETENSORS_DTYPES
    out: dict[str, torch.Tensor] = {}
    with open(path, "rb", buffering=0) as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        header.pop("__metadata__", None)
        for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
            if info["dtype"] not in dtypes:
                raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}")
            start, end = info["data_offsets"]
            t = torch.empty(info["shape"], dtype=dtypes[info["dtype"]])
            f.seek(8 + size + start)
            view = memoryview(t.view(-1).view(torch.uint8).numpy()) if t.numel() else memoryview(bytearray())
            if f.readinto(view) != end - start:
                raise ValueError(f"{path}: tensor {name} is truncated")
            out[name] = t
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
