"""The decode step's native calls (runtime/model/gemv.c): the rotary embedding gives torch's bits, the one-query
attention and the norm torch's values within a bfloat16 rounding, the bound product the general path's bits;
the plain decoder's one-token step through them stays within rounding of the step in torch operators; the cache
writes its new keys and values in place without changing a tensor it gave out; a library built without
AVX-512 (its plain C loops) gives the same results."""

import copy

import pytest
import torch
from torch import nn

from callmaybe.runtime.model import llama, native
from callmaybe.runtime.model.llama import CacheLayer, CausalLM, RMSNorm, RotaryEmbedding, _one_query, _rotate_half
from callmaybe.runtime.model.quant import Int8Linear

from ..conftest import needs_cc


def _torch_rope(x, cos, sin):
    return (x * cos) + (_rotate_half(x) * sin)


def _check_rope(lib):
    gen = torch.Generator().manual_seed(1)
    for heads, d, theta in [(12, 128, 1e6), (2, 128, 1e6), (4, 16, 1e4), (3, 2, 10.0)]:
        rotary = RotaryEmbedding(d, theta)
        x = (torch.randn(1, 1, heads * d, generator=gen) * 30).bfloat16()
        for position in (0, 5, 1000, 31999):
            cos, sin = rotary(x, torch.tensor([[position]]))
            want = _torch_rope(x.view(1, 1, heads, d), cos[:, :, None], sin[:, :, None]).reshape(x.shape)
            got = lib.rope(x.clone(), cos.reshape(d), sin.reshape(d))
            assert got.dtype == torch.bfloat16 and torch.equal(got, want), (heads, d, position)


def _bf16_neighbours(got: torch.Tensor, want: torch.Tensor, slack: float = 0.0) -> bool:
    """Each bfloat16 value of ``got`` is the float32 ``want`` rounded down or up to bfloat16 (within one ulp),
    give or take ``slack`` (absolute)."""
    w = want.float()
    lo = w.bfloat16().float()
    ulp = (torch.frexp(w)[1].float() - 8).exp2()  # bfloat16: 8 significant bits
    return bool(((got.float() - w).abs() <= ulp + (lo - w).abs() + slack).all())


def _check_attention(lib):
    gen = torch.Generator().manual_seed(2)
    for heads, kv_heads, n, d in [(12, 2, 250, 128), (12, 2, 1, 128), (4, 4, 37, 16), (6, 1, 3000, 64),
                                  (8, 2, 19, 24)]:
        q = torch.randn(1, heads, 1, d, generator=gen).bfloat16()
        k = (torch.randn(1, kv_heads, n, d, generator=gen) * 3).bfloat16()
        v = torch.randn(1, kv_heads, n, d, generator=gen).bfloat16()
        want = _one_query(q, k, v, d ** -0.5).reshape(1, heads * d)
        got = lib.attend_one(q, k, v, d ** -0.5)
        assert got.shape == (1, heads * d) and got.dtype == torch.bfloat16
        assert _bf16_neighbours(got, want), (heads, kv_heads, n, d)
        if kv_heads > 1:  # another pairing of query and key/value heads gives another answer
            assert not torch.allclose(lib.attend_one(q, k.flip(1), v.flip(1), d ** -0.5).float(), want, atol=1e-2)
    # keys as the cache holds them: the first n slots of wider buffers, and one token as a transposed view
    buf_k = torch.randn(1, 2, 80, 32, generator=gen).bfloat16()
    buf_v = torch.randn(1, 2, 80, 32, generator=gen).bfloat16()
    q = torch.randn(1, 8, 1, 32, generator=gen).bfloat16()
    k, v = buf_k[:, :, :50], buf_v[:, :, :50]
    assert _bf16_neighbours(lib.attend_one(q, k, v, 0.2), _one_query(q, k, v, 0.2).reshape(1, -1))
    k1 = torch.randn(1, 1, 2, 32, generator=gen).bfloat16().transpose(1, 2)
    v1 = torch.randn(1, 1, 2, 32, generator=gen).bfloat16().transpose(1, 2)
    assert _bf16_neighbours(lib.attend_one(q, k1, v1, 0.2), _one_query(q, k1, v1, 0.2).reshape(1, -1))


def _check_nan_keys(lib):
    """A NaN key makes its group's outputs NaN wherever it lies, and an infinite one the outputs torch makes
    NaN, as in torch (a helper's break test: in a full block of 16 keys the vectorized exp's clamps turned a NaN
    into 0, so the head ignored it)."""
    gen = torch.Generator().manual_seed(11)
    q = torch.randn(1, 12, 1, 128, generator=gen).bfloat16()
    k = torch.randn(1, 2, 40, 128, generator=gen).bfloat16()
    v = torch.randn(1, 2, 40, 128, generator=gen).bfloat16()
    for position in (0, 31, 32, 39):
        for bad in (float("nan"), float("inf")):
            kk = k.clone()
            kk[0, 0, position, 3] = bad
            got = lib.attend_one(q, kk, v, 128 ** -0.5).view(12, 128)
            assert not bool(got[6:].isnan().any()), (position, bad)  # the other key/value head's queries
            if bad != bad:  # NaN: every query of its group
                assert bool(got[:6].isnan().all()), position
            want = _one_query(q, kk, v, 128 ** -0.5).reshape(12, 128)
            assert torch.equal(got.isnan(), want.isnan()), (position, bad)


def _check_norm(lib):
    gen = torch.Generator().manual_seed(3)
    for rows, d in [(1, 1536), (3, 64), (70, 1536), (2, 40)]:
        norm = RMSNorm(d, 1e-6, torch.bfloat16)
        norm.weight.data = (torch.randn(d, generator=gen) * 2).bfloat16()
        x = (torch.randn(rows, d, generator=gen) * torch.rand(rows, 1, generator=gen) * 40).bfloat16()
        want = norm(x)  # exact: torch's operators
        got = lib.rms_norm(x, norm.weight, 1e-6)
        assert got.shape == x.shape and got.dtype == torch.bfloat16
        # the same but for the mean's order of additions: a rounding of x r one bfloat16 step apart, and w times
        # it rounded again: within two steps (2^-7 of a value each, at most)
        assert torch.allclose(got.float(), want.float(), rtol=2 ** -6, atol=0), (rows, d)
        assert (got == want).float().mean() > 0.97, (rows, d)


@needs_cc
def test_the_rotary_embedding_gives_torchs_bits(lib):
    _check_rope(lib)


@needs_cc
def test_one_query_attention_is_the_float32_attention_rounded_to_bfloat16(lib):
    _check_attention(lib)
    _check_nan_keys(lib)


@needs_cc
def test_the_norm_is_torchs_within_a_bfloat16_rounding(lib):
    _check_norm(lib)


@needs_cc
def test_inputs_the_calls_do_not_take_are_refused(lib):
    q = torch.zeros(1, 12, 1, 128, dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 5, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^attend_one: q \(1, 12, 1, 128\) torch.float32, keys \(1, 2, 5, 128\) "
                                         r"torch.bfloat16: not an input this kernel takes$"):
        lib.attend_one(q.float(), k, k, 0.1)
    with pytest.raises(ValueError, match="attend_one: .* not an input"):  # 12 query heads over 5 key/value heads
        lib.attend_one(torch.zeros(1, 12, 1, 128, dtype=torch.bfloat16), torch.zeros(1, 5, 5, 128,
                       dtype=torch.bfloat16), torch.zeros(1, 5, 5, 128, dtype=torch.bfloat16), 0.1)
    with pytest.raises(ValueError, match="attend_one: .* not an input"):  # tokens not head_dim apart
        lib.attend_one(q, k.transpose(2, 3).contiguous().transpose(2, 3), k, 0.1)
    cos = torch.zeros(128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^rope: x \(1, 100\) torch.bfloat16, cos \(128,\) torch.bfloat16: not an "
                                         r"input this kernel takes$"):
        lib.rope(torch.zeros(1, 100, dtype=torch.bfloat16), cos, cos)
    with pytest.raises(ValueError, match="attend_one: .* not an input"):  # head_dim 0
        lib.attend_one(q, torch.zeros(1, 2, 5, 0, dtype=torch.bfloat16), torch.zeros(1, 2, 5, 0,
                       dtype=torch.bfloat16), 0.1)
    with pytest.raises(ValueError, match=r"^rms_norm: x \(\) torch.bfloat16"):  # no dimension
        lib.rms_norm(torch.tensor(1.0, dtype=torch.bfloat16), torch.zeros(1, dtype=torch.bfloat16), 1e-6)
    with pytest.raises(ValueError, match=r"^rms_norm: x \(2, 64\) torch.float32, weight \(64,\) torch.bfloat16"):
        lib.rms_norm(torch.zeros(2, 64), torch.zeros(64, dtype=torch.bfloat16), 1e-6)


@needs_cc
def test_a_library_without_avx512_gives_the_same_results(fresh, monkeypatch):
    """Built without AVX-512 (its plain C loops): the rope's bits, the attention and the norm within a rounding."""
    monkeypatch.setenv("CC", "cc -mno-avx512f")
    plain = native.rotation()
    assert plain is not None and plain.kind == ("avx2" if "avx2" in native.cpu_flags().split() else None)
    _check_rope(plain)
    _check_attention(plain)
    _check_nan_keys(plain)
    _check_norm(plain)


def _general(layer: Int8Linear, x: torch.Tensor) -> torch.Tensor:
    """The layer's output through the general path (nothing bound), leaving the layer's binding as it was."""
    kept, layer._bound = layer._bound, None
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Int8Linear, "_bound_product", lambda self, kernel: None)
            return layer(x)
    finally:
        layer._bound = kept


@needs_cc
def test_the_bound_product_gives_the_general_paths_bits_and_follows_the_weights():
    kernel = native.kernel()
    if kernel is None:
        pytest.skip("the native kernel is unavailable here (no compiler or no AVX-512 VNNI)")
    torch.manual_seed(4)
    layer = Int8Linear.from_linear(nn.Linear(512, 96, bias=True), rotated=True)
    x = torch.randn(1, 512)
    first = layer(x)
    assert layer._bound is not None and layer._bound[0] is layer.weight_int8  # bound at the first product
    for rows in (1, 2, 3, 7, kernel.max_rows):
        xs = torch.randn(rows, 512)
        assert torch.equal(layer(xs), _general(layer, xs)), rows
    layer.weight_int8.mul_(-1)  # changed in place: bound again, the new weights used
    flipped = layer(x)
    assert torch.equal(flipped, _general(layer, x)) and not torch.equal(flipped, first)
    layer.weight_int8 = layer.weight_int8.flip(0).contiguous()  # replaced
    assert torch.equal(layer(x), _general(layer, x)) and layer._bound[0] is layer.weight_int8
    layer.scale = layer.scale * 2  # a new scale: bound again
    assert torch.equal(layer(x), _general(layer, x)) and layer._bound[2] is layer.scale


def test_a_layer_with_a_bound_product_pickles_and_layers_made_in_inference_mode_work():
    """A helper's break test: torch.save of a layer that had made a product failed (the bound product is a
    closure), and a layer made under inference_mode failed at its first product (inference tensors have no
    version counter: the tree before failed too)."""
    import io

    torch.manual_seed(8)
    layer = Int8Linear.from_linear(nn.Linear(256, 384), rotated=True)
    x = torch.randn(1, 256)
    first = layer(x)
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    again = torch.load(buf, weights_only=False)
    assert again._bound is None and torch.equal(again(x), first)
    with torch.inference_mode():
        made = Int8Linear.from_linear(nn.Linear(256, 384), rotated=True)
        assert made.weight_int8.is_inference()
        out = made(x)
        assert torch.equal(made(x), out) and torch.equal(out, _general(made, x))


def test_the_cache_writes_in_place_and_never_changes_a_tensor_it_gave_out():
    layer = CacheLayer()
    k = torch.arange(8.0).view(1, 1, 8, 1)
    keys, _ = layer.update(k, -k)
    room = layer._buffers[0].shape[2]
    assert room == 8 + CacheLayer.ROOM and keys.tolist() == k.tolist()
    given = layer.keys
    storage = layer._buffers[0].data_ptr()
    layer.update(torch.tensor([[[[8.0]]]]), torch.tensor([[[[-8.0]]]]))  # in place: the same buffer
    assert layer._buffers[0].data_ptr() == storage and layer.keys.flatten().tolist() == list(range(9))
    assert given.flatten().tolist() == list(range(8))
    twin = copy.copy(layer)  # as prefix.py's _first makes them: the buffers shared
    twin.keys, twin.values = twin.keys[:, :, :5], twin.values[:, :, :5]
    twin.update(torch.tensor([[[[50.0]]]]), torch.tensor([[[[-50.0]]]]))  # behind the written slots: a copy
    assert twin._buffers[0].data_ptr() != storage and twin.keys.flatten().tolist() == [0, 1, 2, 3, 4, 50]
    assert layer.keys.flatten().tolist() == list(range(9))
    layer.update(torch.tensor([[[[9.0]]]]), torch.tensor([[[[-9.0]]]]))  # the front one still writes in place
    assert layer._buffers[0].data_ptr() == storage and layer.values.flatten().tolist() == [-i for i in range(10)]
    same = copy.copy(layer)  # two layers at the front: the first to write takes the slot, the other copies
    same.update(torch.tensor([[[[70.0]]]]), torch.tensor([[[[0.0]]]]))
    layer.update(torch.tensor([[[[10.0]]]]), torch.tensor([[[[-10.0]]]]))
    assert same.keys.flatten().tolist() == [*range(10), 70] and layer.keys.flatten().tolist() == list(range(11))
    assert same._buffers[0].data_ptr() == storage and layer._buffers[0].data_ptr() != storage
    layer.keys = torch.zeros(1, 1, 2, 1)  # set from outside: copied, not written over
    layer.values = torch.zeros(1, 1, 2, 1)
    layer.update(torch.ones(1, 1, 1, 1), torch.ones(1, 1, 1, 1))
    assert layer.keys.flatten().tolist() == [0, 0, 1]
    big = CacheLayer()
    big.update(torch.zeros(1, 2, 300, 4), torch.zeros(1, 2, 300, 4))
    assert big._buffers[0].shape == (1, 2, 375, 4)  # a quarter more room
    for _ in range(75):
        big.update(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
    assert big._buffers[0].shape[2] == 375 and big.keys.shape == (1, 2, 375, 4)
    big.update(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
    assert big._buffers[0].shape[2] == 376 + 94 and big.keys[0, 1, :, 0].sum() == 76


TINY = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False, "hidden_act": "silu", "model_type": "qwen2",
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}}


@needs_cc
def test_a_one_token_step_through_the_native_calls_is_the_torch_step_within_rounding(lib, monkeypatch):
    """A bfloat16 decoder built for the quantized models (exact_attention=False): its one-token steps go through
    the native rope, attention and norm; the logits stay within bfloat16 rounding of the same steps in torch's
    operators (the library hidden), and the argmax is the same."""
    torch.manual_seed(6)
    model = CausalLM(TINY, torch.bfloat16, exact_attention=False)
    for p in model.parameters():
        p.data = (torch.randn_like(p, dtype=torch.float32) * 0.2).bfloat16()
    calls = []
    monkeypatch.setattr(llama.Attention, "_one_token",
                        lambda self, *a: calls.append(1) or llama_one_token(self, *a))
    g = torch.Generator().manual_seed(7)
    prompt = torch.randint(0, 300, (1, 17), generator=g)
    steps = torch.randint(0, 300, (6, 1), generator=g)
    outs = {}
    for native_on in (True, False):
        if not native_on:
            monkeypatch.setattr(native, "_loaded", [None])
        with torch.inference_mode():
            out = model(input_ids=prompt, use_cache=True)
            logits = []
            for token in steps:
                out = model(input_ids=token[None], cache=out.cache, use_cache=True)
                logits.append(out.logits[0, -1].float())
        outs[native_on] = torch.stack(logits)
    assert len(calls) == 6 * 2  # six steps, two layers: all through the native calls, none for the prompt
    assert torch.allclose(outs[True], outs[False], rtol=0.02, atol=0.02)
    assert torch.equal(outs[True].argmax(-1), outs[False].argmax(-1))


llama_one_token = llama.Attention._one_token
