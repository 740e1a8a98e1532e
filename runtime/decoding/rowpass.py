"""One forward pass for rows that feed different numbers of tokens, each after its own keys and values.

A step of :class:`~.batch.Batch` feeds row ``b`` its own ``counts[b]`` tokens (one chosen token, the forced
text after it, or a new row's prompt). transformers' forward would take them padded to the longest,
(rows, width), and concatenate every layer's whole cache with the new keys at each step; on one CPU core,
at 16 rows, that copy and a padded attention were three quarters of a step. :func:`row_pass` runs the
decoder layers itself, for Llama-like models (Llama, SmolLM2, Qwen2):

* the linear layers (attention projections, MLP), the norms and the rotary embedding see only the fed
  tokens, packed into one (1, tokens, hidden) input: a step whose rows feed 1, 1, 1 and 30 tokens costs the
  linear work of 33 tokens, not 120;
* each layer's keys and values are written in place into preallocated buffers (rows, kv_heads, capacity,
  head_dim) at slots ``[used, used + width)``: no copy of the cache;
* attention is torch's scaled dot-product attention per layer over the padded (rows, heads, width, slots)
  layout (grouped-query attention without repeating the keys: ``enable_gqa``, the kernel transformers' own
  forward uses for one row), under one boolean mask built once per step: a row attends to its own valid
  slots and to its own earlier tokens of the step.

Source of the layer arithmetic: transformers' ``LlamaDecoderLayer`` / ``Qwen2DecoderLayer`` (pre-norm
residual blocks, rotary embedding on queries and keys); the modules themselves
(projections, norms, MLP, rotary embedding) are the model's own, so quantized layers work unchanged.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

#: The model types whose decoder layers :func:`row_pass` runs (their attention has no per-head norms and no
#: sliding window as configured by the models this project ships).
KNOWN = ("llama", "qwen2")


def supported(decoder) -> bool:
    """Whether :func:`row_pass` can run ``decoder`` (a transformers ``LlamaModel``/``Qwen2Model``)."""
    config = getattr(decoder, "config", None)
    if getattr(config, "model_type", None) not in KNOWN or getattr(config, "use_sliding_window", False):
        return False
    return all(hasattr(decoder, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb"))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def row_pass(decoder, ids: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, positions: torch.Tensor,
             width: int, keys: list[torch.Tensor], values: list[torch.Tensor], used: int,
             allowed: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """Feed the packed tokens ``ids`` through ``decoder`` and return the final hidden state of each row's
    last fed token, shape (row count, hidden), after the final norm.

    ``ids``, ``rows``, ``cols``, ``positions``: (tokens,) long tensors: each fed token, its row, its column in
    the step (0 .. ``width`` - 1) and its position in its row's sequence. ``keys[l]``/``values[l]``: layer
    ``l``'s buffers (at least row count, kv_heads, ``used + width``, head_dim), written in place at slots
    ``used + cols``. ``allowed``: (row count, width, ``used + width``) bool, which slots each query of the
    step attends to. ``last``: (row count,) the index into the packed tokens of each row's last one. Raises
    whatever the model's modules raise (out of memory)."""
    count = allowed.shape[0]
    hidden = decoder.embed_tokens(ids[None])  # (1, tokens, hidden)
    cos, sin = decoder.rotary_emb(hidden, positions[None])  # (1, tokens, head_dim)
    cos, sin = cos[0][:, None], sin[0][:, None]  # (tokens, 1, head_dim)
    slots = used + width
    mask = allowed[:, None]  # (rows, 1, width, slots)
    for layer, k_buf, v_buf in zip(decoder.layers, keys, values):
        attn = layer.self_attn
        d = attn.head_dim
        x = layer.input_layernorm(hidden)
        q = attn.q_proj(x)[0].view(len(ids), -1, d)  # (tokens, heads, head_dim)
        k = attn.k_proj(x)[0].view(len(ids), -1, d)
        v = attn.v_proj(x)[0].view(len(ids), -1, d)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        k_buf[rows, :, used + cols] = k.to(k_buf.dtype)
        v_buf[rows, :, used + cols] = v.to(v_buf.dtype)
        padded = q.new_zeros(count, width, q.shape[1], d)
        padded[rows, cols] = q
        out = F.scaled_dot_product_attention(  # (rows, heads, width, head_dim)
            padded.transpose(1, 2), k_buf[:count, :, :slots].to(q.dtype), v_buf[:count, :, :slots].to(q.dtype),
            attn_mask=mask, scale=attn.scaling, enable_gqa=True)
        out = out.transpose(1, 2).reshape(count, width, -1)
        hidden = hidden + attn.o_proj(out[rows, cols][None])
        hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return decoder.norm(hidden[0, last])
