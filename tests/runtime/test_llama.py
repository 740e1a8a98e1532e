"""runtime/model/llama.py: the Llama / Qwen2 decoder without transformers' modeling code gives transformers'
logits bit for bit, with and without a cache, and builds only the configurations it knows."""

from __future__ import annotations

import pytest
import torch

from callmaybe.runtime.model.llama import Cache, CausalLM, _one_query, supported

TINY = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False, "hidden_act": "silu"}
CONFIGS = {
    "qwen2": {**TINY, "model_type": "qwen2", "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
              "use_sliding_window": False},
    "llama": {**TINY, "model_type": "llama", "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
              "num_key_value_heads": 4},
}


def _pair(kind: str, dtype: torch.dtype):
    """transformers' model of the tiny config, random weights, and a CausalLM given the same state dict."""
    import transformers

    torch.manual_seed(0)
    config_class = transformers.Qwen2Config if kind == "qwen2" else transformers.LlamaConfig
    model_class = transformers.Qwen2ForCausalLM if kind == "qwen2" else transformers.LlamaForCausalLM
    theirs = model_class(config_class(**{k: v for k, v in CONFIGS[kind].items() if k != "model_type"}))
    inv_freq = theirs.model.rotary_emb.inv_freq.clone()
    theirs = theirs.to(dtype)
    theirs.model.rotary_emb.inv_freq = inv_freq  # .to() cast it; a checkpoint loaded in bfloat16 keeps it float32
    ours = CausalLM(CONFIGS[kind], dtype, device="meta")
    ours.load_state_dict(theirs.state_dict(), assign=True, strict=True)
    return ours.eval(), theirs.eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_the_decoder_gives_transformers_logits_bit_for_bit(kind, dtype):
    ours, theirs = _pair(kind, dtype)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 300, (1, 19), generator=g)
    with torch.inference_mode():
        a, b = ours(input_ids=prompt, use_cache=True), theirs(input_ids=prompt, use_cache=True)
        assert a.logits.shape == (1, 19, 300) and a.logits.dtype == dtype
        assert torch.equal(a.logits, b.logits)
        for width in (1, 1, 4, 1, 7):  # a decode step, a forced chunk after the past
            step = torch.randint(0, 300, (1, width), generator=g)
            a = ours(input_ids=step, cache=a.cache, use_cache=True, logits_to_keep=1)
            b = theirs(input_ids=step, cache=b.cache, use_cache=True, logits_to_keep=1)
            assert a.logits.shape == (1, 1, 300) and torch.equal(a.logits, b.logits)
        assert a.cache.get_seq_length() == b.cache.get_seq_length() == 33
        a.cache.crop(-5)
        b.cache.crop(-5)
        assert a.cache.get_seq_length() == 28
        step = torch.randint(0, 300, (1, 3), generator=g)
        a = ours(input_ids=step, cache=a.cache, use_cache=True, logits_to_keep=2)
        b = theirs(input_ids=step, cache=b.cache, use_cache=True, logits_to_keep=2)
        assert a.logits.shape == (1, 2, 300) and torch.equal(a.logits, b.logits)
        assert all(torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values)
                   for x, y in zip(a.cache.layers, b.cache.layers))
        assert ours(input_ids=prompt).cache is None
        assert torch.equal(ours(input_ids=prompt).logits, theirs(input_ids=prompt, use_cache=False).logits)


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_a_one_token_step_without_exact_attention_is_sdpa_within_float32_rounding(kind, monkeypatch):
    """exact_attention=False changes the one-query steps only (two layers each): a prompt stays transformers'
    bits, and every logit of the steps after it stays within float32 rounding of them."""
    from callmaybe.runtime.model import llama

    calls = []
    monkeypatch.setattr(llama, "_one_query", lambda *a: calls.append(a[0].shape) or _one_query(*a))
    exact, theirs = _pair(kind, torch.float32)
    fast = CausalLM(CONFIGS[kind], torch.float32, device="meta", exact_attention=False)
    fast.load_state_dict(theirs.state_dict(), assign=True, strict=True)
    g = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, 300, (1, 23), generator=g)
    with torch.inference_mode():
        a, b = fast.eval()(input_ids=prompt, use_cache=True), exact(input_ids=prompt, use_cache=True)
        assert torch.equal(a.logits, b.logits)
        for width in (1, 1, 5, 1):
            step = torch.randint(0, 300, (1, width), generator=g)
            a = fast(input_ids=step, cache=a.cache, use_cache=True, logits_to_keep=1)
            b = exact(input_ids=step, cache=b.cache, use_cache=True, logits_to_keep=1)
            assert torch.allclose(a.logits, b.logits, rtol=0, atol=1e-5)
    assert calls == [(1, 4, 1, 16)] * 6  # three one-token steps, two layers; none for the prompt or the chunk


def test_one_query_attention_pairs_query_heads_with_their_key_value_heads():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 6, 1, 8, generator=g)  # 6 query heads over 2 key/value heads: heads 0-2 use kv head 0
    k, v = torch.randn(2, 2, 9, 8, generator=g), torch.randn(2, 2, 9, 8, generator=g)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True)
    assert _one_query(q, k, v, 0.3).shape == (2, 6, 1, 8)
    assert torch.allclose(_one_query(q, k, v, 0.3), theirs, rtol=0, atol=1e-6)
    swapped = _one_query(q, k.flip(1), v.flip(1), 0.3)  # another pairing gives another answer
    assert not torch.allclose(swapped, theirs, rtol=0, atol=1e-3)
    assert _one_query(q.bfloat16(), k.bfloat16(), v.bfloat16(), 0.3).dtype == torch.float32


def test_the_cache_crops_as_transformers_does():
    cache = Cache(2)
    assert cache.get_seq_length() == 0
    for layer in cache.layers:
        layer.update(torch.arange(10.0).view(1, 1, 10, 1), torch.zeros(1, 1, 10, 1))
    cache.crop(-3)
    assert cache.get_seq_length() == 7 and cache.layers[1].keys.flatten().tolist() == [0, 1, 2, 3, 4, 5, 6]
    cache.crop(9)  # longer than the cache: nothing to drop
    assert cache.get_seq_length() == 7
    cache.crop(2)
    assert cache.layers[0].keys.flatten().tolist() == [0, 1]


def test_only_the_configurations_the_decoder_knows_are_built():
    assert supported(CONFIGS["qwen2"]) and supported(CONFIGS["llama"])
    assert supported({**CONFIGS["qwen2"], "rope_parameters": None, "rope_theta": 10000.0})  # older config.json
    assert supported({**CONFIGS["qwen2"], "layer_types": ["full_attention"] * 2})
    for change in ({"model_type": "gemma"}, {"use_sliding_window": True}, {"hidden_act": "gelu"},
                   {"mlp_bias": True}, {"rope_parameters": {"rope_theta": 1e4, "rope_type": "llama3"}},
                   {"rope_scaling": {"type": "linear", "factor": 2.0}}, {"rope_parameters": None},
                   {"layer_types": ["full_attention", "sliding_attention"]}):
        assert not supported({**CONFIGS["qwen2"], **change}), change
