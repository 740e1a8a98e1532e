"""int4 weights (--dtype int4): torch's packed layout, Q4_K's groups taken as they are, the int4 layer's product,
and a tiny GGUF with Q4_K tensors converted and compared with transformers' own GGUF loader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from callmaybe.core.errors import ModelError
from callmaybe.runtime.model import int4
from callmaybe.runtime.model.convert import INT4_SCHEME_VERSION, QUANTIZATION_FILE, convert_gguf_int8
from callmaybe.runtime.model.int4 import Int4Linear
from callmaybe.runtime.model.load import _load_int8, choose_dtype, map_safetensors
from callmaybe.runtime.model.quant import Int8Embedding, Int8Linear

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType

VOCAB, HIDDEN, FFN, HEADS, KV_HEADS = 64, 256, 512, 4, 2


def q4k_bytes(rng, rows: int, cols: int) -> np.ndarray:
    """Random Q4_K rows (rows, cols / 256 * 144) with d and dmin of a real layer's size (arbitrary bytes give
    float16 infinities)."""
    raw = rng.integers(0, 256, (rows, cols // 256 * 144), dtype=np.uint8)
    blocks = raw.reshape(-1, 144)
    d = rng.uniform(0.0005, 0.002, blocks.shape[0]).astype(np.float16)
    dmin = rng.uniform(0.0005, 0.002, blocks.shape[0]).astype(np.float16)
    blocks[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    blocks[:, 2:4] = dmin.view(np.uint8).reshape(-1, 2)
    return raw


def test_pack_writes_the_kernels_own_layout_and_unpack_inverts_it():
    g = torch.Generator().manual_seed(1)
    q = torch.randint(0, 16, (192, 96), generator=g, dtype=torch.int32)
    packed = int4.pack(q)
    assert packed.dtype == torch.uint8 and packed.shape == (192, 48)
    # torch packs blocks of 64 rows for its AVX-512 kernel (the layout pack writes), of 32 for its AVX2 one
    # (a Zen 3: the layers repack with pack_with_kernel)
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    assert torch.equal(packed, torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)) is avx512
    assert torch.equal(int4.unpack(packed), q.to(torch.uint8))
    assert int4.layout_matches() is avx512
    # byte j of input k of block b (32 K bytes each): row 64 b + j low, row 64 b + 32 + j high
    assert packed.reshape(-1)[32 * 96 + 5 * 32 + 7].item() == q[64 + 7, 5].item() | q[64 + 32 + 7, 5].item() << 4


def test_q4k_groups_give_exactly_llama_cpps_dequantized_weights():
    raw = q4k_bytes(np.random.default_rng(0), 64, 512)
    q, scale, zero = int4.q4k_groups(raw, 512)
    assert q.shape == (64, 512) and q.dtype == torch.uint8 and int(q.max()) <= 15
    assert scale.shape == zero.shape == (64, 16)
    mine = ((q.float() - 8).reshape(64, 16, 32) * scale[..., None] + zero[..., None]).reshape(64, 512)
    want = gguf.quants.dequantize(raw, Q.Q4_K)
    assert np.array_equal(mine.numpy(), want.astype(np.float32))


@pytest.mark.parametrize("rows", [1, 5, 40])
def test_an_int4_layer_computes_its_dequantized_product(rows):
    torch.manual_seed(0)
    lin = nn.Linear(96, 128, bias=True)
    layer = Int4Linear.from_linear(lin)
    w = layer.dequantized()
    step = layer.scale_zero[..., 0].float().t().repeat_interleave(32, 1)  # (out, in): each weight's group step
    assert ((w - lin.weight.detach()).abs() <= step / 2 + 1e-6 + w.abs() / 128).all()
    x = torch.randn(rows, 96)
    want = F.linear(x.to(torch.bfloat16).float(), w, layer.bias.float())
    got = layer(x)
    assert got.dtype == torch.bfloat16 and got.shape == (rows, 128)
    assert torch.allclose(got.float(), want, atol=0.05, rtol=0.02)
    assert layer(torch.zeros(0, 96)).shape == (0, 128)


def test_widths_the_kernel_cannot_take_are_refused_and_stay_int8():
    from callmaybe.runtime.model.quant import quantize

    with pytest.raises(ValueError, match="an int4 layer needs inputs a multiple of 32 and outputs of 64, got 48 -> 64"):
        Int4Linear(48, 64, bias=False)
    model = nn.Module()
    model.a, model.b = nn.Linear(64, 128), nn.Linear(64, 96)
    model.get_input_embeddings = lambda: model.e
    model.e = nn.Embedding(10, 64)
    model.get_output_embeddings = lambda: None
    model.config = type("C", (), {"tie_word_embeddings": False})()
    assert quantize(model, int4=True) == 3
    assert isinstance(model.a, Int4Linear) and isinstance(model.b, Int8Linear) and isinstance(model.e, Int8Embedding)


def test_int4_is_for_the_cpu():
    assert choose_dtype("int4", torch.device("cpu")) == torch.uint4
    with pytest.raises(ModelError, match="--dtype int4 is for the CPU"):
        choose_dtype("int4", torch.device("cuda"))


def write_gguf(path: Path, seed: int = 0) -> Path:
    """A tiny llama GGUF whose q, gate and up projections are Q4_K (random blocks), o Q4_0 (4 bits too:
    requantized to int4 by the converter), v and down Q8_0 and k F32 (more bits: int8), embeddings Q8_0 and
    tied (no output.weight)."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
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
    tokens = ["<s>", "</s>"] + [chr(ord("a") + i) for i in range(26)] + ["ab"]
    tokens += [f"t{i}" for i in range(VOCAB - len(tokens))]
    w.add_token_list(tokens)
    w.add_token_types([3, 3] + [1] * (VOCAB - 2))
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_merges(["a b"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    kv = KV_HEADS * HIDDEN // HEADS

    def floats(shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    w.add_tensor("token_embd.weight", gguf.quants.quantize(floats((VOCAB, HIDDEN)), Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", q4k_bytes(rng, HIDDEN, HIDDEN), raw_dtype=Q.Q4_K)
    w.add_tensor("blk.0.attn_k.weight", floats((kv, HIDDEN)))
    w.add_tensor("blk.0.attn_v.weight", gguf.quants.quantize(floats((kv, HIDDEN)), Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("blk.0.attn_output.weight", gguf.quants.quantize(floats((HIDDEN, HIDDEN)), Q.Q4_0),
                 raw_dtype=Q.Q4_0)
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    w.add_tensor("blk.0.ffn_gate.weight", q4k_bytes(rng, FFN, HIDDEN), raw_dtype=Q.Q4_K)
    w.add_tensor("blk.0.ffn_up.weight", q4k_bytes(rng, FFN, HIDDEN), raw_dtype=Q.Q4_K)
    w.add_tensor("blk.0.ffn_down.weight", gguf.quants.quantize(floats((HIDDEN, FFN)), Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def mapped_from(address: int) -> str | None:
    """The file mapped at ``address`` in this process (/proc/self/maps), or None for anonymous memory."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if lo <= address < hi:
            return parts[5] if len(parts) > 5 and parts[5].startswith("/") else None
    return None


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs Linux's /proc/self/maps")
def test_a_gguf_converts_to_int4_layers_that_equal_transformers_loader_and_load_memory_mapped(tmp_path):
    """Q4_K layers keep llama.cpp's values (up to bfloat16 scales and zeros), another 4-bit type is requantized
    within half a group step, types of more bits become int8 layers; the checkpoint's tensors are views of the file (memory-mapped), and the converted model
    computes what the float model given its weights computes (up to bfloat16 activations)."""
    from transformers import AutoModelForCausalLM

    path = write_gguf(tmp_path / "tiny.gguf")
    folder = tmp_path / "converted"
    folder.mkdir()
    conversion = convert_gguf_int8(path, folder, scheme="int4")
    info = json.loads((folder / QUANTIZATION_FILE).read_text())
    assert info["name"] == "int4" and info["version"] == INT4_SCHEME_VERSION and info["tied_embeddings"]
    assert conversion.layers == 7 + 1 and conversion.tied
    stored = map_safetensors(folder / "model.safetensors")
    assert stored["model.layers.0.self_attn.q_proj.weight_int4"].shape == (HIDDEN, HIDDEN // 2)
    assert stored["model.layers.0.mlp.up_proj.scale_zero"].shape == (HIDDEN // 32, FFN, 2)
    assert stored["model.layers.0.mlp.down_proj.weight_int8"].shape == (HIDDEN, FFN)
    model = _load_int8(folder, "int4")
    ref = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="tiny.gguf", dtype=torch.float32).eval()
    layer = model.model.layers[0]
    assert all(isinstance(m, Int4Linear) for m in (layer.self_attn.q_proj, layer.self_attn.o_proj,
                                                   layer.mlp.gate_proj, layer.mlp.up_proj))
    assert all(isinstance(m, Int8Linear) for m in (layer.self_attn.k_proj, layer.self_attn.v_proj,
                                                   layer.mlp.down_proj))
    assert isinstance(model.lm_head, Int8Linear)
    assert model.lm_head.weight_int8.data_ptr() == model.get_input_embeddings().weight_int8.data_ptr()
    assert mapped_from(layer.self_attn.q_proj.weight_int4.data_ptr()) == str(folder / "model.safetensors")
    assert mapped_from(model.lm_head.scale.data_ptr()) == str(folder / "model.safetensors")
    ref_layer = ref.model.layers[0]
    for name in ("self_attn.q_proj", "mlp.gate_proj", "mlp.up_proj"):  # Q4_K: llama.cpp's values
        got, want = layer.get_submodule(name).dequantized(), ref_layer.get_submodule(name).weight.detach()
        assert (got - want).abs().max() <= want.abs().max() / 64, name
    for name in ("self_attn.o_proj",):  # Q4_0: requantized
        mine = layer.get_submodule(name)
        step = mine.scale_zero[..., 0].float().t().repeat_interleave(32, 1)
        want = ref_layer.get_submodule(name).weight.detach()
        assert ((mine.dequantized() - want).abs() <= step * 0.51 + want.abs() / 64 + 1e-6).all(), name
    for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                 "mlp.up_proj", "mlp.down_proj"):  # the float model given the int4 weights: the same function
        ref_layer.get_submodule(name).weight.data = layer.get_submodule(name).dequantized().float()
    ref.model.embed_tokens.weight.data = model.get_input_embeddings().dequantized().float()
    ids = torch.tensor([[0, 5, 9, 33, 2, 17]])
    with torch.no_grad():
        a = model(input_ids=ids).logits.float().log_softmax(-1)
        b = ref(input_ids=ids).logits.float().log_softmax(-1)
    kl = (b.exp() * (b - a)).sum(-1).mean().item()  # bfloat16 activations against float32 ones
    assert kl < 1e-3, kl


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs Linux's /proc/self/maps")
def test_mapped_tensors_are_views_of_the_file_and_a_misaligned_one_is_copied(tmp_path):
    from callmaybe.runtime.model.convert import TensorSpec, write_safetensors

    a = torch.arange(64, dtype=torch.int8).reshape(4, 16)  # 64 bytes: b starts aligned
    b = torch.arange(24, dtype=torch.float32).to(torch.bfloat16)  # 48 bytes: c starts 48 past a boundary
    c = torch.arange(64, dtype=torch.uint8)
    path = tmp_path / "t.safetensors"
    write_safetensors(path, [TensorSpec("a", a.dtype, (4, 16)), TensorSpec("b", b.dtype, (24,)),
                             TensorSpec("c", c.dtype, (64,))], [("a", a), ("b", b), ("c", c)])
    got = map_safetensors(path)
    assert all(torch.equal(got[k], v) for k, v in {"a": a, "b": b, "c": c}.items())
    assert mapped_from(got["a"].data_ptr()) == str(path) and mapped_from(got["b"].data_ptr()) == str(path)
    assert mapped_from(got["c"].data_ptr()) is None  # copied out: not on a 64-byte boundary
    got["a"][0, 0] = 100  # a private mapping: the file is unchanged
    assert torch.equal(map_safetensors(path)["a"], a)


def test_a_file_whose_data_start_unaligned_is_read_instead(tmp_path):
    """Checkpoints written before the header was padded to 64 bytes (8 only): not mapped (every tensor would be
    copied beside its mapped pages), read as before."""
    import struct

    from callmaybe.runtime.model.load import read_safetensors

    header = json.dumps({"x": {"dtype": "I8", "shape": [3], "data_offsets": [0, 3]}}).encode()
    header += b" " * (-len(header) % 8)
    path = tmp_path / "old.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes([1, 2, 3]))
    assert (8 + len(header)) % 64 and map_safetensors(path) is None
    assert read_safetensors(path)["x"].tolist() == [1, 2, 3]
