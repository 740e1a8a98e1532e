"""Convert a GGUF model file into callmaybe's int8 checkpoint (:mod:`.quant`), streaming, tensor by tensor.

The float model is never held whole: each GGUF tensor is read from the file with plain reads (not through a
memory map, whose pages would count in the process's memory), dequantized by ``gguf.quants.dequantize`` in
chunks of rows of at most :data:`CHUNK_BYTES` of float32, rotated along the inputs (a linear layer's, not the
embeddings': :func:`.quant.rotate`), quantized per row (:func:`.quant.quantize_rows`) and
written straight into ``model.safetensors`` (:func:`write_safetensors`), whose header is known before any data
since the GGUF header gives every tensor's shape. Config and tokenizer come from the GGUF metadata through
transformers (``AutoConfig`` / ``AutoTokenizer`` with ``gguf_file``), which read no tensor.

Checkpoint layout (scheme :data:`SCHEME_VERSION`): the linear layers and the token embeddings as
``<module>.weight_int8`` (int8, rows x cols) and ``<module>.scale`` (bfloat16, rows); norms and biases as
bfloat16 under their transformers names. With tied embeddings the output layer is not stored: it shares the
embedding's int8 matrix at load (:func:`.quant.tied_keys`). Embeddings are tied when the GGUF has no
``output.weight`` (as transformers decides), and also when its ``output.weight`` and ``token_embd.weight`` are
one matrix quantized twice (:func:`same_matrix`): llama.cpp writes both for a tied model such as Qwen2.5-1.5B
(``tie_word_embeddings`` in its transformers config), the output layer in more bits (Q6_K beside Q4_K in a
Q4_K_M file); the copy with more bits per weight is kept for both, which saves 233 MB for Qwen2.5-1.5B.

Tensor names follow llama.cpp's (``gguf.constants.TENSOR_NAMES``, the mapping of ``gguf.get_tensor_name_map``
that transformers' GGUF loader inverts in ``modeling_gguf_pytorch_utils.get_gguf_hf_weights_map``); the
``llama`` architecture's Q and K rows are un-permuted as transformers' ``LlamaTensorProcessor`` does (llama.cpp's
``convert_hf_to_gguf.py`` permutes them for its rotary layout). Architectures: :data:`ARCHITECTURES`.

Measured for Qwen2.5-Coder-1.5B (Q4_K_M, 1.12 GB) on this project's 2-core CPU: 48 s (one core: gguf's numpy
dequantization), 1.06 GB peak RSS of the whole process (torch and transformers included; the whole-model path
through transformers took 5.7 GB), 1.56 GB on disk (the earlier untied layout: 1.9 GB). A first ``run --dtype
int8`` that converts, then answers the public set in the same process, peaked at 2.31 GB; a warm one at 2.29 GB
(untied, with a second int8 copy of the embeddings: 2.53 GB), with the same 11 answers as bfloat16.
"""

from __future__ import annotations

import gc
import json
import re
import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...core.errors import ModelError
from .int4 import GROUP, fits, pack, q4k_groups, quantize_groups, scale_zero
from .quant import empty_like_quantized, quantize_rows, rotate, rotation_block, tied_keys

#: Bumped whenever the checkpoint's layout changes; part of the cache folder's name (:data:`INT8_FOLDER`) and
#: written in :data:`QUANTIZATION_FILE`, so an older checkpoint is never read as this one.
#: 1: untied bfloat16 embeddings, int8 output layer (before streaming); 2: int8 embeddings, tied when the GGUF is;
#: 3: linear layers' weights rotated by block Hadamard matrices (int8 activations at run time).
SCHEME_VERSION = 3
SCHEME = ("int8 per output row (absmax / 127), bfloat16 scales; linear layers rotated along their inputs by "
          "block Hadamard matrices (callmaybe.runtime.model.quant.rotation_block)")
INT8_FOLDER = f"hf-int8-v{SCHEME_VERSION}"
#: The int4 scheme (``--dtype int4``, :mod:`.int4`): its version and cache folder, as for int8.
#: 1: linear layers of 4-bit GGUF types int4 in groups of 32 (Q4_K sub-blocks as they are, other 4-bit types
#: requantized), packed in torch 2.13's CPU layout; the other linear layers rotated int8 and the embeddings (and a
#: tied output layer) int8 per row, as in scheme 3 of int8.
INT4_SCHEME_VERSION = 1
INT4_SCHEME = ("linear layers of 4-bit GGUF types int4, groups of 32 inputs (scale, zero; Q4_K sub-blocks kept, "
               "others requantized min/max), packed for torch's _weight_int4pack_mm_for_cpu; other layers as int8")
INT4_FOLDER = f"hf-int4-v{INT4_SCHEME_VERSION}"
#: name -> (version, description, cache folder) of each quantized scheme a checkpoint may hold
SCHEMES = {"int8": (SCHEME_VERSION, SCHEME, INT8_FOLDER), "int4": (INT4_SCHEME_VERSION, INT4_SCHEME, INT4_FOLDER)}
QUANTIZATION_FILE = "callmaybe-quantization.json"
#: Bytes of float32 dequantized at a time (a chunk of rows of one tensor): bounds the conversion's working memory.
CHUNK_BYTES = 32 << 20

#: GGUF ``general.architecture`` values this converter knows the tensor names of.
ARCHITECTURES = ("llama", "qwen2")
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
          "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
#: GGUF tensors (without ``.weight``) whose weights become int8: the linear layers and the token embeddings.
_INT8 = {"token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}
#: Relative distance (:func:`same_matrix`) below which ``output`` and ``token_embd`` are one matrix quantized
#: twice. Measured: 0.075 (Q4_K vs Q6_K, Qwen2.5-Coder-1.5B), 0.044 (Q5_0 vs Q8_0, 0.5B); two unrelated matrices
#: of equal norms are about sqrt(2) = 1.41 apart (1.29 and 1.24 for those matrices with their rows reversed).
SAME_MATRIX = 0.5
#: Rows of ``output`` and ``token_embd`` compared by :func:`same_matrix` (evenly spaced).
SAME_MATRIX_ROWS = 256
#: GGUF tensors transformers has no parameter for (llama 3's rotary frequencies, recomputed from the config).
_IGNORED = {"rope_freqs.weight"}

_DTYPE_NAMES = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.int8: "I8",
                torch.uint8: "U8", torch.int32: "I32", torch.int64: "I64", torch.bool: "BOOL"}


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a safetensors file to write: its key, dtype and shape (in elements)."""

    key: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * torch.empty(0, dtype=self.dtype).element_size()


@dataclass(frozen=True)
class Conversion:
    """What :func:`convert_gguf_int8` wrote: ``seconds`` of wall time, ``weight_bytes`` of model.safetensors,
    ``layers`` quantized to int8 (the embedding included, once), and whether the embeddings are ``tied``."""

    seconds: float
    weight_bytes: int
    layers: int
    tied: bool


def hf_name(gguf_name: str) -> tuple[str, str] | None:
    """The transformers module and parameter of a GGUF tensor name, or None for a name this converter does not
    know: ``"blk.3.attn_q.weight"`` -> ``("model.layers.3.self_attn.q_proj", "weight")``, ``"output.weight"`` ->
    ``("lm_head", "weight")``."""
    base, _, suffix = gguf_name.rpartition(".")
    if suffix not in ("weight", "bias"):
        return None
    if base in _TOP:
        return _TOP[base], suffix
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)", base)
    if m and m[2] in _BLOCK:
        return f"model.layers.{m[1]}.{_BLOCK[m[2]]}", suffix
    return None


def llama_rows(rows: int, heads: int) -> np.ndarray:
    """The row order that undoes llama.cpp's Q/K permutation of a (rows, ...) tensor of ``heads`` heads: row
    ``i`` of the transformers tensor is row ``order[i]`` of the GGUF one (transformers' ``LlamaTensorProcessor.
    _reverse_permute_weights``: ``w.reshape(heads, rows // heads // 2, 2, ...).swapaxes(1, 2)``)."""
    return np.arange(rows).reshape(heads, rows // heads // 2, 2).swapaxes(1, 2).reshape(-1)


def write_safetensors(path: Path, specs: Sequence[TensorSpec], chunks: Iterable[tuple[str, torch.Tensor]],
                      metadata: dict[str, str] | None = None) -> int:
    """Write a safetensors file (https://github.com/huggingface/safetensors: an 8-byte little-endian header
    length, a JSON header of key -> dtype, shape, byte offsets, padded with spaces so that the data starts on
    a multiple of 64 bytes (:data:`.model.MAP_ALIGNMENT`: a memory-mapped tensor is then aligned whenever the
    tensors before it have sizes that are multiples of 64 bytes), then the data)
    holding ``specs`` in their order, from ``chunks``: (key, tensor) pairs, in the order of ``specs``, each
    tensor a run of the next bytes of that key's data (a tensor may come in several chunks of rows). Only one
    chunk is held at a time. Returns the file's size in bytes.

    Raises ValueError when a chunk names another key than the one being written, has another dtype, overflows
    its tensor, or when the chunks end before every tensor is complete.
    """
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for spec in specs:
        if spec.dtype not in _DTYPE_NAMES:
            raise ValueError(f"{path}: tensor {spec.key} has dtype {spec.dtype}, which safetensors cannot hold")
        header[spec.key] = {"dtype": _DTYPE_NAMES[spec.dtype], "shape": list(spec.shape),
                            "data_offsets": [offset, offset + spec.nbytes]}
        offset += spec.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % 64)
    index, left = 0, specs[0].nbytes if specs else 0
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for key, tensor in chunks:
            while index < len(specs) and left == 0:  # tensors of no bytes need no chunk
                index += 1
                left = specs[index].nbytes if index < len(specs) else 0
            if index == len(specs) or key != specs[index].key:
                expected = specs[index].key if index < len(specs) else "nothing more"
                raise ValueError(f"{path}: got a chunk of {key}, expected {expected}")
            if tensor.dtype != specs[index].dtype:
                raise ValueError(f"{path}: chunk of {key} is {tensor.dtype}, not {specs[index].dtype}")
            data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
            if data.nbytes > left:
                raise ValueError(f"{path}: chunks of {key} overflow its {specs[index].nbytes} bytes")
            f.write(memoryview(data))
            left -= data.nbytes
        while index < len(specs) and left == 0:
            index += 1
            left = specs[index].nbytes if index < len(specs) else 0
        if index < len(specs):
            raise ValueError(f"{path}: data of {specs[index].key} ended {left} bytes short")
    return 8 + len(raw) + offset


def convert_gguf_int8(gguf: Path, folder: Path, chunk_bytes: int = CHUNK_BYTES, scheme: str = "int8") -> Conversion:
    """Write the int8 checkpoint of GGUF file ``gguf`` into the existing folder ``folder``: ``config.json``,
    ``generation_config.json``, the tokenizer, ``model.safetensors`` (layout in the module docstring) and
    :data:`QUANTIZATION_FILE`. ``scheme`` ``"int4"`` (:data:`SCHEMES`) writes the int4 checkpoint instead: the
    linear layers stored in 4 bits that :func:`.int4.fits` (:func:`takes_int4`) as ``<module>.weight_int4`` (uint8, rows x cols / 2, packed) and
    ``<module>.scale_zero`` (bfloat16, cols / 32 x rows x 2), each tensor whole (the largest of Qwen2.5-1.5B,
    8,960 x 1,536, is 55 MB of float32 where it must be requantized); the other linear layers and the
    embeddings as for int8.

    Memory: the metadata is parsed three times, one after the other (by ``gguf.GGUFReader`` for the tensors'
    places, by transformers for the config, then for the tokenizer), each parse freed before the next: for
    Qwen2.5's 151,646 tokens and merges, 0.5-0.7 GB each at its peak. The weights then need about four times
    ``chunk_bytes`` (float32 rows dequantized at a time) and one tensor's int8 chunk and scales. Measured for
    Qwen2.5-Coder-1.5B (Q4_K_M, 1.12 GB): see ``_converted_dir`` in :mod:`.load`.

    Raises ModelError naming the file (and the tensor, where one is at fault) for a GGUF of an architecture
    outside :data:`ARCHITECTURES`, a big-endian file, a tensor name it does not know or of a type ``gguf``
    cannot dequantize, or a tensor missing or of the wrong shape for the model its config describes.
    """
    start = time.monotonic()
    arch, tensors = read_gguf(gguf)
    config = _config(gguf)
    tie = _retie(gguf, tensors)
    if tie is not None:
        config.tie_word_embeddings = True
    heads = (config.num_attention_heads, getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
    model = _empty_model(config, int4_modules(tensors) if scheme == "int4" else set())
    shared = tied_keys(model)
    expected = {k: (v.dtype, tuple(v.shape)) for k, v in model.state_dict().items() if k not in shared}
    layers = sum(1 for m in model.modules() if hasattr(m, "weight_int8") or hasattr(m, "weight_int4"))
    layers -= len(shared) // 2
    del model

    plan, specs = plan_tensors(gguf, tensors, arch, heads, tie, scheme)
    got = {s.key: (s.dtype, s.shape) for s in specs}
    for key, want in expected.items():
        if key not in got:
            raise ModelError(f"{gguf}: no tensor for {key} of the {arch} model its metadata describes")
        if got[key] != want:
            raise ModelError(f"{gguf}: tensor for {key} is {got[key][0]} {list(got[key][1])}, "
                             f"expected {want[0]} {list(want[1])}")
    extra = sorted(set(got) - set(expected))
    if extra:
        raise ModelError(f"{gguf}: tensor for {extra[0]} has no place in the {arch} model its metadata describes")

    from transformers import AutoTokenizer, GenerationConfig

    config.save_pretrained(folder)
    GenerationConfig.from_model_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(folder)
    gc.collect()  # the tokenizer's parse of the metadata, before the weights' chunks come
    size = write_safetensors(folder / "model.safetensors", specs, tensor_chunks(gguf, plan, chunk_bytes),
                             metadata={"format": "pt"})
    tied = bool(shared)
    version, description, _ = SCHEMES[scheme]
    (folder / QUANTIZATION_FILE).write_text(json.dumps({"name": scheme, "scheme": description, "version": version,
                                                        "layers": layers, "tied_embeddings": tied,
                                                        "embeddings_from": tie, "source": gguf.name}) + "\n")
    return Conversion(time.monotonic() - start, size, layers, tied)


@dataclass(frozen=True)
class GgufTensor:
    """One tensor of a GGUF file as its header describes it: ``name``, ``qtype`` (a
    ``gguf.GGMLQuantizationType``), ``shape`` in transformers' order (rows first, in elements), ``offset`` of
    its data from the file's start (bytes), and its stored data as ``rows`` rows (1 for a 1-D tensor) of
    ``row_items`` items of numpy dtype ``item`` (bytes, for a quantized type)."""

    name: str
    qtype: Any
    shape: tuple[int, ...]
    offset: int
    rows: int
    row_items: int
    item: np.dtype


def read_gguf(gguf: Path) -> tuple[str, list[GgufTensor]]:
    """The architecture (``general.architecture``) and tensors of GGUF file ``gguf``, in file order. The
    ``gguf.GGUFReader`` that parses the header (and all the metadata, 0.5 GB for Qwen2.5's vocabulary) is
    freed on return. Raises ModelError for an architecture outside :data:`ARCHITECTURES` or a big-endian file."""
    from gguf import GGUFReader

    reader = GGUFReader(gguf)
    field = reader.fields.get("general.architecture")
    arch = bytes(field.parts[field.data[0]]).decode("utf-8") if field is not None and field.data else None
    if arch not in ARCHITECTURES:
        raise ModelError(f"{gguf}: architecture {arch!r} is not supported by the int8 converter "
                         f"(supported: {', '.join(ARCHITECTURES)})")
    if reader.byte_order != "I":
        raise ModelError(f"{gguf}: a GGUF file of the other byte order (big-endian) is not supported")
    tensors = [GgufTensor(t.name, t.tensor_type, tuple(int(n) for n in reversed(t.shape.tolist())),
                          int(t.data_offset), int(t.data.shape[0]) if t.data.ndim > 1 else 1,
                          int(t.data.shape[-1]), t.data.dtype)
               for t in sorted(reader.tensors, key=lambda t: t.data_offset)]
    del reader, field
    gc.collect()
    return arch, tensors


def plan_tensors(gguf: Path, tensors: Sequence[GgufTensor], arch: str, heads: tuple[int, int],
                 tie: str | None = None, scheme: str = "int8") -> tuple[list, list[TensorSpec]]:
    """What to write for each of the ``tensors`` of GGUF file ``gguf`` (architecture ``arch``, ``heads`` =
    (attention heads, key-value heads)): a plan of (tensor, transformers key, int8 block, row order or None),
    for :func:`tensor_chunks`, where the int8 block is 0 for a tensor kept in bfloat16, else the rotation block
    of one that becomes int8 (:func:`.quant.rotation_block` of its inputs for a linear layer, 1 for the
    embeddings, which are not rotated), and the checkpoint's tensors in the same order, for
    :func:`write_safetensors`. ``tie``: ``"output.weight"`` or ``"token_embd.weight"``, the one of the two that
    becomes the shared embedding (the other is left out), or None to keep both as they are. With ``scheme``
    ``"int4"`` a linear layer that :func:`.int4.fits` gets the block -1 (int4) instead.
    Raises ModelError for a tensor name without a transformers counterpart or of more than 2 dimensions."""
    plan: list[tuple[GgufTensor, str, int, np.ndarray | None]] = []
    specs: list[TensorSpec] = []
    pair = {"output.weight", "token_embd.weight"}
    for t in tensors:
        if t.name in _IGNORED or (tie is not None and t.name in pair and t.name != tie):
            continue
        names = hf_name("token_embd.weight" if tie is not None and t.name == tie else t.name)
        if names is None:
            raise ModelError(f"{gguf}: tensor {t.name} has no counterpart in a transformers {arch} model")
        if len(t.shape) > 2:
            raise ModelError(f"{gguf}: tensor {t.name} has {len(t.shape)} dimensions (expected 1 or 2)")
        order = None
        if arch == "llama" and re.search(r"\.attn_[qk]\.", t.name):
            order = llama_rows(t.shape[0], heads[0] if ".attn_q." in t.name else heads[1])
        int8 = names[1] == "weight" and t.name.rsplit(".", 2)[-2] in _INT8
        block = 0 if not int8 else 1 if names[0] == _TOP["token_embd"] else rotation_block(t.shape[-1])
        if block > 0 and names[0] != _TOP["token_embd"] and scheme == "int4" and takes_int4(t):
            block = -1
        plan.append((t, f"{names[0]}.{names[1]}", block, order))
        if block == -1:
            specs += [TensorSpec(f"{names[0]}.weight_int4", torch.uint8, (t.shape[0], t.shape[1] // 2)),
                      TensorSpec(f"{names[0]}.scale_zero", torch.bfloat16, (t.shape[1] // GROUP, t.shape[0], 2))]
        elif int8:
            specs += [TensorSpec(f"{names[0]}.weight_int8", torch.int8, t.shape),
                      TensorSpec(f"{names[0]}.scale", torch.bfloat16, t.shape[:1])]
        else:
            specs.append(TensorSpec(f"{names[0]}.{names[1]}", torch.bfloat16, t.shape))
    return plan, specs


#: GGUF types of 4 bits per weight or fewer, whose tensors the int4 scheme keeps in 4 bits.
FOUR_BIT_TYPES = ("Q4_0", "Q4_1", "Q4_K", "IQ4_NL", "IQ4_XS", "Q3_K", "Q2_K")


def takes_int4(t: GgufTensor) -> bool:
    """Whether the int4 scheme makes GGUF tensor ``t`` an int4 layer: a 2-D tensor of 4 bits per weight or fewer
    (:data:`FOUR_BIT_TYPES`) whose widths :func:`.int4.fits`. A tensor of more bits (Q6_K, Q8_0, F16 ...)
    becomes a rotated int8 layer instead: requantizing Qwen2.5-1.5B's Q6_K layers to int4 made the mean KL
    divergence from bfloat16 6x larger (0.0092 against 0.0015 with them in int8; docs/model.md)."""
    return len(t.shape) == 2 and t.qtype.name in FOUR_BIT_TYPES and fits(t.shape[-1], t.shape[0])


def int4_modules(tensors: Sequence[GgufTensor]) -> set[str]:
    """The transformers modules (``model.layers.0.mlp.up_proj``) that the int4 scheme makes int4 layers."""
    out = set()
    for t in tensors:
        names = hf_name(t.name)
        if names and names[1] == "weight" and t.name.rsplit(".", 2)[-2] in _INT8 - {"token_embd"} and takes_int4(t):
            out.add(names[0])
    return out


def same_matrix(gguf: Path, a: GgufTensor, b: GgufTensor, rows: int = SAME_MATRIX_ROWS) -> float:
    """The relative distance ``|A - B| / |B|`` (Frobenius norms) between 2-D tensors ``a`` and ``b`` (of one
    shape) of GGUF file ``gguf``, dequantized, over ``rows`` rows evenly spaced: a few hundredths when both
    quantize one matrix, about 1.4 for unrelated matrices. Raises ModelError as :func:`tensor_chunks` does."""
    picked = np.unique(np.linspace(0, a.rows - 1, rows).astype(np.int64))
    values = []
    with open(gguf, "rb", buffering=0) as f:
        for t in (a, b):
            raw = np.concatenate([_read_rows(f, t, int(i), int(i) + 1) for i in picked])
            values.append(_dequantize(gguf, t, raw))
    return float(np.linalg.norm(values[0] - values[1]) / max(float(np.linalg.norm(values[1])), 1e-30))


def tensor_chunks(gguf: Path, plan, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[str, torch.Tensor]]:
    """The data of the checkpoint's tensors in the order of ``plan`` (:func:`plan_tensors`), read from the GGUF
    file ``gguf`` with plain reads, as (key, tensor) chunks for :func:`write_safetensors`: an int8 weight
    (rotated by its plan's block) in chunks of rows of at most ``chunk_bytes`` of float32 (at least one row),
    then its scales; any other tensor whole, in bfloat16. Raises ModelError naming the tensor when its type
    cannot be dequantized or the file is truncated."""
    with open(gguf, "rb", buffering=0) as f:
        for t, key, block, order in plan:
            # a reordered 2-D tensor (llama's Q and K, small) is read whole, its rows then taken in order
            whole = _read_rows(f, t, 0, t.rows) if order is not None and len(t.shape) > 1 else None

            def floats(a: int, b: int) -> torch.Tensor:
                raw = whole[order[a:b]] if whole is not None else _read_rows(f, t, a, b)
                return torch.from_numpy(_dequantize(gguf, t, raw))

            if not block:  # norms and biases (small): whole, in bfloat16
                values = floats(0, t.rows)
                if len(t.shape) == 1:
                    values = values.reshape(-1)
                    if order is not None:  # a llama Q or K bias: its elements are the rows to reorder
                        values = values[torch.from_numpy(order)]
                yield key, values.to(torch.bfloat16)
                continue
            module = key.rpartition(".")[0]
            if block == -1:  # int4, whole: Q4_K's groups as they are, any other type requantized
                from gguf import GGMLQuantizationType

                if t.qtype == GGMLQuantizationType.Q4_K:
                    raw = whole if whole is not None else _read_rows(f, t, 0, t.rows)
                    q, scale, zero = q4k_groups(raw if order is None else raw[order], t.shape[-1])
                else:
                    q, scale, zero = quantize_groups(floats(0, t.rows))
                yield f"{module}.weight_int4", pack(q)
                yield f"{module}.scale_zero", scale_zero(scale, zero)
                continue
            scales = torch.empty(t.rows, dtype=torch.bfloat16)
            step = max(1, chunk_bytes // (4 * t.shape[-1]))
            for a in range(0, t.rows, step):
                b = min(a + step, t.rows)
                q, scales[a:b] = quantize_rows(rotate(floats(a, b), block))
                yield f"{module}.weight_int8", q
            yield f"{module}.scale", scales


def _retie(gguf: Path, tensors: Sequence[GgufTensor]) -> str | None:
    """``"output.weight"`` or ``"token_embd.weight"``, whichever has more bits per weight, when the GGUF has both
    and they are one matrix (:func:`same_matrix` below :data:`SAME_MATRIX`); else None."""
    from gguf import GGML_QUANT_SIZES

    by_name = {t.name: t for t in tensors}
    out, embed = by_name.get("output.weight"), by_name.get("token_embd.weight")
    if out is None or embed is None or out.shape != embed.shape or len(out.shape) != 2:
        return None
    if same_matrix(gguf, embed, out) >= SAME_MATRIX:
        return None

    def bits(t: GgufTensor) -> float:
        block, size = GGML_QUANT_SIZES[t.qtype]
        return 8 * size / block

    return "token_embd.weight" if bits(embed) > bits(out) else "output.weight"


def _dequantize(gguf: Path, t: GgufTensor, raw: np.ndarray) -> np.ndarray:
    """``gguf.quants.dequantize`` of rows ``raw`` of tensor ``t``, as float32 (rows, elements per row); raises
    ModelError naming the file and the tensor when its type is not supported."""
    from gguf.quants import dequantize

    try:
        values = dequantize(raw, t.qtype)
    except (NotImplementedError, ValueError, KeyError) as exc:
        raise ModelError(f"{gguf}: tensor {t.name} of type {t.qtype.name} cannot be dequantized ({exc})") from None
    return np.ascontiguousarray(values, dtype=np.float32).reshape(raw.shape[0], t.shape[-1])


def _config(gguf: Path):
    """The transformers config of ``gguf``, built from its metadata alone (no tensor is read), with bfloat16 as
    the dtype of its float weights."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config.dtype = torch.bfloat16
    gc.collect()
    return config


def _empty_model(config, int4: set[str] = frozenset()):
    """The model of ``config`` on the meta device (no memory for weights), with the quantized layers of
    :func:`.quant.empty_like_quantized` (the modules named in ``int4`` int4 layers): its state dict names every
    tensor the checkpoint must hold."""
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    empty_like_quantized(model, int4=int4)
    return model


def _read_rows(f, t: GgufTensor, a: int, b: int) -> np.ndarray:
    """Rows ``a`` to ``b`` (excluded) of tensor ``t``'s stored data, as (rows, ``t.row_items``) of its stored
    numpy dtype (bytes for a quantized type), read from the open GGUF file ``f``."""
    buf = np.empty((b - a, t.row_items), dtype=t.item)
    f.seek(t.offset + a * t.row_items * buf.itemsize)
    if f.readinto(memoryview(buf).cast("B")) != buf.nbytes:
        raise ModelError(f"{f.name}: tensor {t.name} is truncated")
    return buf


def convert_in_subprocess(gguf: Path, folder: Path, scheme: str = "int8") -> None:
    """Run :func:`convert_gguf_int8` in a child Python process, so that the memory the conversion touched
    (freed, but kept by the allocator) is returned to the system before the model loads: converting then
    answering in one process peaked at 4.1 GB for Qwen2.5-Coder-1.5B, against 1.0 GB for the child and 2.3 GB
    for the answering process apart. Raises ModelError with the child's one-line error."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", __name__, str(gguf), str(folder), scheme], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors="replace")
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        raise ModelError(lines[-1].removeprefix("error: ") if lines else f"{gguf}: conversion failed "
                         f"(exit status {proc.returncode})")


if __name__ == "__main__":  # python -m callmaybe.runtime.model.convert GGUF FOLDER [SCHEME] (see convert_in_subprocess)
    import sys

    try:
        convert_gguf_int8(Path(sys.argv[1]), Path(sys.argv[2]), scheme=sys.argv[3] if len(sys.argv) > 3 else "int8")
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
