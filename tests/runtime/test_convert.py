"""Streamed GGUF -> int8 conversion: the tensor names, llama's Q/K order, the safetensors writer, and tiny
synthetic GGUF files (written with gguf.GGUFWriter) converted and checked against transformers' own GGUF loader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from callmaybe.core.errors import ModelError
from callmaybe.runtime.model.convert import (
    QUANTIZATION_FILE,
    SCHEME_VERSION,
    TensorSpec,
    convert_gguf_int8,
    hf_name,
    llama_rows,
    write_safetensors,
)
from callmaybe.runtime.model.load import _load_int8, read_safetensors
from callmaybe.runtime.model.quant import Int8Embedding, Int8Linear, quantize

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType

VOCAB, HIDDEN, FFN, HEADS, KV_HEADS = 64, 32, 64, 4, 2


def write_gguf(path: Path, arch: str = "llama", *, output: str | None = None, layers: int = 1, skip=(),
               extra: dict[str, tuple[tuple[int, ...], object]] | None = None, seed: int = 0) -> Path:
    """A tiny GGUF model file: ``arch`` (llama or qwen2, whose attention has biases), a byte-level BPE
    vocabulary of VOCAB tokens, F32 and Q8_0 tensors. ``output``: None (tied embeddings: no output.weight),
    "other" (an unrelated output matrix) or "same" (token_embd's matrix again, in F32 while token_embd is Q8_0).
    ``skip``: tensor names left out; ``extra``: more tensors, name -> (shape, type)."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(layers)
    w.add_context_length(128)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(VOCAB)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    tokens = ["<s>", "</s>"] + [chr(ord("a") + i) for i in range(26)] + ["ab", "abc"]
    tokens += [f"t{i}" for i in range(VOCAB - len(tokens))]
    w.add_token_list(tokens)
    w.add_token_types([3, 3] + [1] * (VOCAB - 2))
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_merges(["a b", "ab c"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)

    def add(name: str, shape: tuple[int, ...], qtype=Q.F32, values: np.ndarray | None = None) -> np.ndarray:
        a = values if values is not None else (rng.standard_normal(shape) * 0.5).astype(np.float32)
        if name in skip:
            return a
        if qtype == Q.F32:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        return a

    head = HIDDEN // HEADS
    embed = add("token_embd.weight", (VOCAB, HIDDEN), Q.Q8_0)
    for i in range(layers):
        add(f"blk.{i}.attn_norm.weight", (HIDDEN,))
        add(f"blk.{i}.attn_q.weight", (HIDDEN, HIDDEN), Q.Q8_0)
        add(f"blk.{i}.attn_k.weight", (KV_HEADS * head, HIDDEN))
        add(f"blk.{i}.attn_v.weight", (KV_HEADS * head, HIDDEN))
        if arch == "qwen2":
            add(f"blk.{i}.attn_q.bias", (HIDDEN,))
            add(f"blk.{i}.attn_k.bias", (KV_HEADS * head,))
            add(f"blk.{i}.attn_v.bias", (KV_HEADS * head,))
        add(f"blk.{i}.attn_output.weight", (HIDDEN, HIDDEN))
        add(f"blk.{i}.ffn_norm.weight", (HIDDEN,))
        add(f"blk.{i}.ffn_gate.weight", (FFN, HIDDEN), Q.Q8_0)
        add(f"blk.{i}.ffn_up.weight", (FFN, HIDDEN))
        add(f"blk.{i}.ffn_down.weight", (HIDDEN, FFN))
    add("output_norm.weight", (HIDDEN,))
    if output == "other":
        add("output.weight", (VOCAB, HIDDEN), Q.Q8_0)
    elif output == "same":
        add("output.weight", (VOCAB, HIDDEN), Q.F32, values=embed)
    for name, (shape, qtype) in (extra or {}).items():
        if qtype in (Q.F32, Q.Q8_0):
            add(name, shape, qtype)
        else:  # a type gguf cannot quantize: arbitrary bytes of the right size
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            raw = rng.integers(0, 256, (*shape[:-1], shape[-1] // block * size), dtype=np.uint8)
            w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def reference(path: Path):
    """The model transformers' GGUF loader builds from ``path`` (float32), quantized in memory, its other
    parameters (norms) then in bfloat16 (not its buffers: the rotary frequencies stay float32, as in a model
    built in bfloat16): what the streamed conversion must equal."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    quantize(model)
    for param in model.parameters():
        param.data = param.data.to(torch.bfloat16)
    return model.eval()


def convert(path: Path, tmp_path: Path, **kwargs) -> Path:
    folder = tmp_path / "converted"
    folder.mkdir()
    convert_gguf_int8(path, folder, **kwargs)
    return folder


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tensor_names_are_the_inverse_of_llama_cpp_names(arch):
    """hf_name inverts gguf's own transformers -> GGUF table (the one transformers' loader inverts too)."""
    names = gguf.get_tensor_name_map(next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch), 2)
    ours = ["token_embd", "output", "output_norm"] + [f"blk.1.{n}" for n in (
        "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "attn_norm", "ffn_norm")]
    for base in ours:
        module, suffix = hf_name(base + ".weight")
        assert suffix == "weight" and names.get_name(module) == base, base
    assert hf_name("blk.0.attn_q.bias") == ("model.layers.0.self_attn.q_proj", "bias")
    assert hf_name("blk.0.ssm_conv1d.weight") is None and hf_name("token_embd") is None


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_llama_rows_undo_the_permutation_as_transformers_does(heads):
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    w = np.arange(16 * 3).reshape(16, 3)
    want = LlamaTensorProcessor()._reverse_permute_weights(w, heads)
    assert np.array_equal(w[llama_rows(16, heads)], want)


def test_streamed_safetensors_round_trip(tmp_path):
    """Chunks of rows written one after the other read back (by our reader and by the safetensors library) as
    the whole tensors; a tensor of no bytes needs no chunk."""
    from safetensors import safe_open

    a = torch.arange(-60, 60, dtype=torch.int8).reshape(12, 10)
    b = torch.linspace(-2, 2, 12).to(torch.bfloat16)
    c = torch.randn(3, 5)
    specs = [TensorSpec("a", torch.int8, (12, 10)), TensorSpec("empty", torch.float32, (0, 4)),
             TensorSpec("b", torch.bfloat16, (12,)), TensorSpec("c", torch.float32, (3, 5))]
    chunks = [("a", a[:5]), ("a", a[5:11]), ("a", a[11:]), ("b", b), ("c", c)]
    path = tmp_path / "x.safetensors"
    size = write_safetensors(path, specs, iter(chunks), metadata={"format": "pt"})
    assert size == path.stat().st_size and int.from_bytes(path.read_bytes()[:8], "little") % 8 == 0
    got = read_safetensors(path)
    assert torch.equal(got["a"], a) and torch.equal(got["b"], b) and torch.equal(got["c"], c)
    assert got["empty"].shape == (0, 4)
    with safe_open(str(path), "pt") as f:
        assert f.metadata() == {"format": "pt"} and torch.equal(f.get_tensor("a"), a)
        assert torch.equal(f.get_tensor("b"), b)


@pytest.mark.parametrize("chunks, message", [
    ([("b", torch.zeros(2))], "expected a"),
    ([("a", torch.zeros(2, dtype=torch.float64))], "not torch.float32"),
    ([("a", torch.zeros(3))], "overflow"),
    ([("a", torch.zeros(1))], "short"),
    ([("a", torch.zeros(2)), ("a", torch.zeros(1))], "expected nothing more"),
])
def test_streamed_safetensors_refuses_chunks_that_do_not_fit(tmp_path, chunks, message):
    with pytest.raises(ValueError, match=message):
        write_safetensors(tmp_path / "x.safetensors", [TensorSpec("a", torch.float32, (2,))], chunks)


def test_int8_embedding_looks_up_the_dequantized_rows():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(50, 24)
    q = Int8Embedding.from_embedding(emb)
    ids = torch.tensor([[3, 0, 49], [7, 7, 12]])
    got = q(ids)
    assert got.shape == (2, 3, 24) and got.dtype == torch.bfloat16
    assert torch.equal(got, q.dequantized()[ids])
    w = emb.weight.detach()  # within half a step, and the bfloat16 rounding of scale and product (2^-8 each)
    assert ((q.dequantized().float() - w).abs() <= q.scale.float()[:, None] / 2 + w.abs() / 128).all()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_tied_gguf_converts_to_what_transformers_loads_with_one_shared_int8_matrix(tmp_path, arch):
    """Names, llama's Q/K order and the values (dequantized in chunks of 7 rows here) equal transformers' GGUF
    loader quantized in memory; the output layer shares the embedding's storage in both."""
    path = write_gguf(tmp_path / "tiny.gguf", arch, layers=2)
    folder = convert(path, tmp_path, chunk_bytes=7 * HIDDEN * 4)
    info = json.loads((folder / QUANTIZATION_FILE).read_text())
    assert info["version"] == SCHEME_VERSION and info["tied_embeddings"] and info["layers"] == 2 * 7 + 1
    stored = read_safetensors(folder / "model.safetensors")
    assert "lm_head.weight_int8" not in stored and stored["model.embed_tokens.weight_int8"].dtype == torch.int8
    model, ref = _load_int8(folder), reference(path)
    want = ref.state_dict()
    got = model.state_dict()
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), key
    for m in (model, ref):
        assert isinstance(m.get_input_embeddings(), Int8Embedding) and isinstance(m.lm_head, Int8Linear)
        assert m.lm_head.weight_int8.data_ptr() == m.get_input_embeddings().weight_int8.data_ptr()
        assert m.lm_head.scale.data_ptr() == m.get_input_embeddings().scale.data_ptr()
    ids = torch.tensor([[0, 5, 9, 33, 2]])
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, ref(input_ids=ids).logits)
    for name in ("tokenizer.json", "config.json", "generation_config.json"):
        assert (folder / name).is_file()


def test_an_untied_gguf_keeps_its_own_output_layer(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf", "qwen2", output="other")
    folder = convert(path, tmp_path)
    assert not json.loads((folder / QUANTIZATION_FILE).read_text())["tied_embeddings"]
    model, ref = _load_int8(folder), reference(path)
    assert not model.config.tie_word_embeddings
    assert model.lm_head.weight_int8.data_ptr() != model.get_input_embeddings().weight_int8.data_ptr()
    for key, value in ref.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key


def test_an_output_layer_that_repeats_the_embeddings_is_tied_again_keeping_the_finer_copy(tmp_path):
    """llama.cpp writes output.weight for a tied model too, in more bits: the converter ties them again and
    keeps the copy with more bits per weight (here the F32 output over the Q8_0 token_embd)."""
    path = write_gguf(tmp_path / "tiny.gguf", "llama", output="same")
    folder = convert(path, tmp_path)
    info = json.loads((folder / QUANTIZATION_FILE).read_text())
    assert info["tied_embeddings"] and info["embeddings_from"] == "output.weight"
    model = _load_int8(folder)
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight_int8.data_ptr() == model.get_input_embeddings().weight_int8.data_ptr()
    r = gguf.GGUFReader(path)
    out = next(t for t in r.tensors if t.name == "output.weight")
    want = torch.from_numpy(np.array(out.data, dtype=np.float32)).to(torch.bfloat16).float()
    got = model.get_input_embeddings().dequantized().float()
    assert (got - want).abs().max() <= model.get_input_embeddings().scale.float().max()


def test_unsupported_architecture_is_a_model_error_naming_the_file(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf", "gemma")
    with pytest.raises(ModelError, match=r"tiny\.gguf: architecture 'gemma' is not supported"):
        convert(path, tmp_path)


@pytest.mark.parametrize("extra, skip, message", [
    ({"blk.0.ssm_a.weight": ((4, 32), Q.F32)}, (), r"tensor blk\.0\.ssm_a\.weight has no counterpart"),
    ({}, ("blk.0.ffn_norm.weight",), r"no tensor for model\.layers\.0\.post_attention_layernorm\.weight"),
    ({"blk.1.attn_norm.weight": ((HIDDEN,), Q.F32)}, (), r"model\.layers\.1\.input_layernorm\.weight has no place"),
])
def test_tensors_that_do_not_fit_the_model_are_model_errors(tmp_path, extra, skip, message):
    path = write_gguf(tmp_path / "tiny.gguf", "llama", extra=extra, skip=skip)
    with pytest.raises(ModelError, match=r"tiny\.gguf: .*" + message):
        convert(path, tmp_path)


def test_a_tensor_type_gguf_cannot_dequantize_is_a_model_error_naming_the_tensor(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf", "llama", skip=("blk.0.ffn_up.weight",),
                      extra={"blk.0.ffn_up.weight": ((FFN, HIDDEN), Q.Q8_1)})
    with pytest.raises(ModelError, match=r"tiny\.gguf: tensor blk\.0\.ffn_up\.weight of type Q8_1 cannot be"):
        convert(path, tmp_path)
