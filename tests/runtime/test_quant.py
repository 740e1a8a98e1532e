"""Int8: the scheme's exact values, the rotation, the rotated int8 x int8 product, both weight-only paths, tied embeddings sharing one int8 matrix, and a
registry model converted and loaded."""

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from callmaybe.runtime.model import quant
from callmaybe.runtime.model.convert import INT8_FOLDER
from callmaybe.runtime.model.quant import (SPLIT_ROWS, Int8Embedding, Int8Linear, hadamard, quantize, quantize_rows, rotate,
                                     rotation_block)


def test_per_channel_absmax_values():
    lin = nn.Linear(4, 2, bias=True)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, -2.54, 0.5, 0.0], [0.127, 0.0, -0.05, 0.001]]))
        lin.bias.copy_(torch.tensor([0.25, -1.0]))
    q = Int8Linear.from_linear(lin, rotated=False)
    assert q.block == 1 and q.weight_int8.tolist() == [[50, -127, 25, 0], [127, 0, -50, 1]]
    assert q.scale.dtype == torch.bfloat16 and q.bias.tolist() == [0.25, -1.0]
    assert torch.allclose(q.scale.float(), torch.tensor([0.02, 0.001]), rtol=1e-2)  # bfloat16: 3 digits


def test_rotation_blocks_and_the_hadamard_matrix():
    assert [rotation_block(n) for n in (1536, 8960, 576, 192, 64, 12, 3)] == [256, 256, 64, 64, 64, 4, 1]
    h = hadamard(4)
    assert (h * 2).tolist() == [[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]]
    assert torch.allclose(hadamard(256) @ hadamard(256), torch.eye(256), atol=1e-5)
    x = torch.randn(3, 2, 12)
    assert torch.allclose(rotate(rotate(x, 4), 4), x, atol=1e-6)
    assert torch.allclose(rotate(x, 4)[..., 4:8], x[..., 4:8] @ h, atol=1e-6)  # block-diagonal: block by block
    assert torch.equal(rotate(x, 1), x)
    for block in (2, 4, 128, 256):  # the fast transform: the dense product's values up to float32 rounding
        y = torch.randn(3, 512) * 10
        assert torch.allclose(quant.walsh_hadamard(y, block), rotate(y, block), atol=1e-4)
    assert quant.walsh_hadamard(torch.tensor([[1.0, 2.0, 3.0, 4.0]]), 4).tolist() == [[5.0, -1.0, -2.0, 0.0]]


def test_a_rotated_layer_stores_the_rotated_weights_and_computes_the_product():
    """The weights are stored as quantize_rows(W H); the input is rotated and quantized per row, and the int8
    product equals x @ W.T + bias within the two quantizations' error."""
    torch.manual_seed(0)
    lin = nn.Linear(96, 40, bias=True)  # 96 = 3 x 32: blocks of 32
    q = Int8Linear.from_linear(lin)
    assert q.block == 32
    want_q, want_scale = quantize_rows(rotate(lin.weight.detach(), 32))
    assert torch.equal(q.weight_int8, want_q) and torch.equal(q.scale, want_scale)
    assert (q.dequantized().float() - lin.weight.detach()).abs().max() < 0.01
    x = torch.randn(5, 7, 96)
    x[..., 3] *= 40  # an outlier channel, which the rotation spreads over its block
    want = x @ lin.weight.detach().T + lin.bias.detach()
    got = q(x)
    assert got.shape == (5, 7, 40) and got.dtype == torch.bfloat16
    assert ((got.float() - want).norm() / want.norm()).item() < 0.02


@pytest.mark.parametrize("rows", [1, 4, 8, 9, SPLIT_ROWS, SPLIT_ROWS + 1, 3 * SPLIT_ROWS])
def test_every_path_computes_the_dequantized_product(rows):
    """Without rotation, up to SPLIT_ROWS rows go through the split int8 x int8 product (in the native kernel
    up to 7 rows, where there is one; torch._int_mm beyond), more through the dequantized weights: each equals x
    @ dequantized.T + bias within bfloat16 rounding."""
    torch.manual_seed(0)
    lin = nn.Linear(64, 48, bias=True)
    q = Int8Linear.from_linear(lin, rotated=False)
    x = torch.randn(2, rows, 64)
    want = x.to(torch.bfloat16).float() @ q.dequantized().float().T + q.bias.float()
    got = q(x)
    assert got.shape == (2, rows, 48) and got.dtype == torch.bfloat16
    assert torch.allclose(got.float(), want, atol=0.05, rtol=0.02)
    assert (q.dequantized().float() - lin.weight.detach()).abs().max() <= q.scale.float().max() / 2 + 1e-3


def test_the_split_product_equals_the_int8_bfloat16_kernel_to_the_last_rounding():
    """The split product (two int8 rows per input row through torch._int_mm) gives the int8 x bfloat16
    kernel's outputs within one bfloat16 rounding of the row's largest, mostly bit-equal, and the same argmax in
    every row, on rows with a few large channels (as a transformer's are)."""
    torch.manual_seed(3)
    q = Int8Linear.from_linear(nn.Linear(256, 512, bias=False), rotated=False)
    x = torch.randn(SPLIT_ROWS, 256)
    x[:, [7, 100]] *= 40  # outlier channels
    rows = x.to(torch.bfloat16)
    want = torch.ops.aten._weight_int8pack_mm(rows, q.weight_int8, q.scale)
    got = q._split_product(rows)
    assert got.dtype == torch.bfloat16 and got.shape == (SPLIT_ROWS, 512)
    # within a bfloat16 rounding (8 significant bits) of the row's largest output; 94.5% of them bit-equal
    assert ((got.float() - want.float()).abs().amax(1) <= want.float().abs().amax(1) * 2 ** -7).all()
    assert (got == want).float().mean().item() > 0.9
    assert torch.equal(got.float().argmax(1), want.float().argmax(1))
    assert torch.equal(q(rows), got)  # SPLIT_ROWS rows take that path


def test_a_layer_of_one_input_takes_the_dequantized_product():
    """torch._int_mm misreads a transposed int8 matrix of one column: a layer whose inputs are not a multiple
    of 8 never takes the split product."""
    torch.manual_seed(4)
    q = Int8Linear.from_linear(nn.Linear(1, 4, bias=False), rotated=False)
    x = torch.randn(10, 1)
    assert torch.equal(q(x), F.linear(x.to(torch.bfloat16), q.dequantized()))


def test_a_long_product_dequantizes_in_blocks_of_output_features(monkeypatch):
    """Past SPLIT_ROWS rows a layer larger than DEQUANT_ELEMENTS weights is dequantized a block of output
    features at a time, with the same result as the whole matrix at once."""
    torch.manual_seed(1)
    q = Int8Linear.from_linear(nn.Linear(16, 40, bias=True), rotated=False)
    x = torch.randn(SPLIT_ROWS + 5, 16)
    whole = q(x)
    monkeypatch.setattr(quant, "DEQUANT_ELEMENTS", 16 * 7)  # blocks of 7 output features, the last one of 5
    assert torch.equal(q(x), whole)
    assert torch.equal(whole, F.linear(x.to(torch.bfloat16), q.dequantized(), q.bias))
    q.bias = None
    assert torch.equal(q(x), F.linear(x.to(torch.bfloat16), q.dequantized()))


def tiny_llama(tied: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=tied)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(torch.bfloat16)


@pytest.mark.parametrize("tied", [True, False])
def test_quantize_makes_the_embeddings_int8_and_keeps_tied_ones_tied(tied):
    model = tiny_llama(tied)
    embed = model.get_input_embeddings().weight.detach().clone()
    # q, k, v, o, gate, up, down per layer, the embeddings and the output layer
    assert quantize(model) == 2 * 7 + 2
    q_embed = model.get_input_embeddings()
    assert isinstance(q_embed, Int8Embedding) and isinstance(model.lm_head, Int8Linear)
    assert model.config.tie_word_embeddings == tied
    assert (model.lm_head.weight_int8.data_ptr() == q_embed.weight_int8.data_ptr()) == tied
    assert (model.lm_head.scale.data_ptr() == q_embed.scale.data_ptr()) == tied
    assert (q_embed.dequantized().float() - embed.float()).abs().max() <= q_embed.scale.float().max()
    assert not [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    out = model(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert out.shape == (1, 3, 40) and torch.isfinite(out).all()
    keys = quant.tied_keys(model)
    assert keys == ({"lm_head.weight_int8": "model.embed_tokens.weight_int8",
                     "lm_head.scale": "model.embed_tokens.scale"} if tied else {})


def test_a_registry_model_in_int8_is_converted_once_and_loaded_without_float_weights(monkeypatch):
    from callmaybe.core.registry import FIXTURE_MODEL
    from callmaybe.runtime.model import load as model_module
    from callmaybe.runtime.model.load import QUANTIZATION_FILE, load_model

    from callmaybe.runtime.model.llama import CausalLM

    lm = load_model(FIXTURE_MODEL, dtype="int8", device="cpu")
    assert lm.dtype == torch.int8 and lm.path.name == INT8_FOLDER and (lm.path / QUANTIZATION_FILE).is_file()
    assert type(lm.model) is CausalLM  # built without transformers' modeling code (runtime/model/llama.py)
    linears = [m for m in lm.model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    quantized = [m for m in lm.model.modules() if isinstance(m, Int8Linear)]
    assert linears == [] and len(quantized) == 30 * 7 + 1
    embed = lm.model.get_input_embeddings()  # SmolLM2 ties its embeddings: one int8 matrix for both
    assert isinstance(embed, Int8Embedding) and lm.model.lm_head.weight_int8.data_ptr() == embed.weight_int8.data_ptr()
    assert not any(p.is_meta for p in lm.model.parameters()) and not any(b.is_meta for b in lm.model.buffers())
    monkeypatch.setattr(model_module, "gguf_path", lambda name: pytest.fail("converted again"))
    assert model_module.resolve_model_dir(FIXTURE_MODEL, torch.int8) == lm.path


def test_a_local_checkpoint_in_int8_is_quantized_at_load(tmp_path):
    """A model folder that is not a registry model has no int8 checkpoint: its weights are quantized in memory."""
    from callmaybe.core.registry import FIXTURE_MODEL
    from callmaybe.runtime.model.load import load_model, resolve_model_dir

    folder = tmp_path / "local-model"
    folder.mkdir()
    for f in resolve_model_dir(FIXTURE_MODEL, torch.float32).iterdir():
        (folder / f.name).symlink_to(f)
    lm = load_model(str(folder), dtype="int8", device="cpu")
    assert lm.dtype == torch.int8 and isinstance(lm.model.lm_head, Int8Linear)
    assert not [m for m in lm.model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]


def test_layers_reading_one_input_share_its_quantization_until_it_changes():
    """q, k and v (gate and up) read one tensor: its rotation and quantization are computed once and given again
    for the same unchanged tensor; a tensor changed in place is quantized anew."""
    torch.manual_seed(2)
    x = torch.randn(3, 64)
    q1, step1 = quant.quantized_input(x, 64)
    q2, step2 = quant.quantized_input(x, 64)
    assert q2 is q1 and step2 is step1
    assert torch.equal(q1, (quant.walsh_hadamard(x, 64) / step1).round().to(torch.int8))
    assert torch.allclose(step1[:, 0], rotate(x, 64).abs().amax(1) / 127)
    assert quant.quantized_input(x.clone(), 64)[0] is not q1  # another tensor
    assert quant.quantized_input(x, 32)[0] is not q1  # another block
    x.mul_(2)
    q3, step3 = quant.quantized_input(x, 64)
    assert q3 is not q1 and torch.allclose(step3, 2 * step1)


@pytest.mark.parametrize("with_kernel", [True, False])
def test_the_input_quantization_rounds_half_to_even_with_and_without_the_kernel(monkeypatch, with_kernel):
    """[65.25, 61.25, 64.25, 63.25] rotated by the 4-block is exactly [127, 2.5, -0.5, 1.5] (step 1)."""
    if not with_kernel:
        monkeypatch.setattr(quant.native, "_loaded", [None])
    elif quant.native.kernel() is None:
        pytest.skip("the native kernel is unavailable here")
    q, step = quant.quantized_input(torch.tensor([[65.25, 61.25, 64.25, 63.25]]), 4)
    assert q.tolist() == [[127, 2, 0, 2]] and step.tolist() == [[1.0]]


def test_an_odd_width_an_empty_input_and_scales_changed_in_place():
    """A width torch's int8 x bfloat16 kernel does not take (not a multiple of 16: it crashes) goes through the
    dequantized weights; zero rows give zero rows; scales loaded in place (load_state_dict without assign) are
    the ones used."""
    torch.manual_seed(3)
    odd = Int8Linear.from_linear(nn.Linear(3, 5))
    assert odd.block == 1
    x = torch.randn(2, 3)
    assert torch.allclose(odd(x).float(), x.bfloat16().float() @ odd.dequantized().float().T + odd.bias.float(),
                          atol=0.05)
    layer = Int8Linear.from_linear(nn.Linear(64, 16))
    assert layer(torch.randn(0, 64)).shape == (0, 16) and layer(torch.randn(2, 0, 64)).shape == (2, 0, 16)
    big = nn.Linear(64, 16)
    with torch.no_grad():
        big.weight.mul_(10)
    x = torch.randn(2, 64)
    layer(x)  # makes its float32 scales
    layer.load_state_dict(Int8Linear.from_linear(big).state_dict())
    want = x @ big.weight.detach().T + big.bias.detach()
    assert ((layer(x).float() - want).norm() / want.norm()).item() < 0.02
