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
* attention is two batched products per layer over the padded (rows, heads, width, slots) layout, in
  float32, the query heads of a key/value head side by side (grouped-query attention without repeating the
  keys), under one additive mask built once per step: a row attends to its own valid slots and to its own
  earlier tokens of the step. Rows that feed one token and rows that feed more are padded apart, in runs of
  neighbouring rows (:func:`runs`; views of the buffers, no copy): a step where one row feeds a 16-token
  chunk of a new prompt beside 15 decoding rows pads 31 queries per head, not 256. torch 2.13's CPU flash
  attention (``scaled_dot_product_attention``) took 14.7 ms per layer for 16 rows of one bfloat16 query over
  330 slots (Qwen2.5-1.5B's 12 heads, 2 key/value heads); these products take 1.3 ms.
* rows that share the batch's catalog prefix (``base``) meet its keys and values in one product per key/value
  head for all rows of a run, then their own slots, under one softmax over both (:func:`_attend`; a run
  whose rows feed more than one token meets the base with its tokens alone, not their padding:
  :func:`_attend_packed`);
* where the model's attention offers it (``takes_packed``/``packed``: this project's bfloat16 decoder with
  its native library, :meth:`~..model.llama.Attention.packed`), the attention is one call a layer instead:
  each packed token's queries over the base and the slots it may read (listed once a step from the mask,
  :func:`_reads`), no padding, no scores moved between
  torch operators (16 rows feeding 200 tokens over a 472-token base, Qwen2.5-1.5B, two Zen 4 cores: a step
  997-1,106 ms against 1,230-1,376 in torch, alternating in one process); the torch attention above stays
  for float32 models and where the library is not built;
* the keys and values are float32 in the buffers when the model's are bfloat16 or float16
  (:meth:`~.batch.Batch._buffer_dtype`): they widen exactly, once, instead of at every step.

Source of the layer arithmetic: transformers' ``LlamaDecoderLayer`` / ``Qwen2DecoderLayer`` (pre-norm
residual blocks, rotary embedding on queries and keys); the modules themselves
(projections, norms, MLP, rotary embedding) are the model's own, so quantized layers work unchanged.
"""

from __future__ import annotations

import torch

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


def runs(counts: list[int]) -> list[tuple[int, int, int]]:
    """The attention's row runs ``(first, end, width)``: maximal ranges of neighbouring rows that all feed one
    token, or all feed more (``width``: the most any row of the run feeds), so that a decoding row is not padded
    to a prompt chunk's width. ``counts``: tokens each row feeds (>= 1). [1, 1, 16, 1] -> [(0, 2, 1), (2, 3,
    16), (3, 4, 1)]."""
    out: list[tuple[int, int, int]] = []
    for b, n in enumerate(counts):
        if out and (out[-1][2] > 1) == (n > 1):
            first, _, width = out[-1]
            out[-1] = (first, b + 1, max(width, n))
        else:
            out.append((b, b + 1, n))
    return out


def _attend(grouped: torch.Tensor, scores: torch.Tensor, own_values: torch.Tensor, base_keys: torch.Tensor,
            base_values: torch.Tensor, shared: torch.Tensor, scaling: float) -> torch.Tensor:
    """Attention of a run's queries over the shared base and their rows' own slots, as one softmax over both:
    (rows, kv_heads, q, head_dim) float32. ``grouped``: the queries (rows, kv_heads, q, head_dim); ``scores``:
    their scaled, masked scores over their own slots (rows, kv_heads, q, slots); ``own_values`` (rows,
    kv_heads, slots, head_dim); ``base_keys``/``base_values`` (kv_heads, base tokens, head_dim), the same for
    every row; ``shared`` (rows, 1, 1, 1), 0 for a row that attends to the base and -inf for one that does not.
    Every row's queries meet the base in one product per key/value head, (kv_heads, rows x q, head_dim) by
    (kv_heads, head_dim, base tokens): the base is read once, not once per row."""
    count, kv_heads, q, d = grouped.shape
    size = base_keys.shape[1]
    flat = grouped.transpose(0, 1).reshape(kv_heads, count * q, d)
    on_base = torch.matmul(flat, base_keys.transpose(-1, -2)) * scaling  # (kv_heads, rows x q, base tokens)
    on_base = on_base.view(kv_heads, count, q, size).transpose(0, 1) + shared
    weights = torch.softmax(torch.cat([on_base, scores], dim=-1), dim=-1)
    out = torch.matmul(weights[..., size:], own_values)
    from_base = weights[..., :size].transpose(0, 1).reshape(kv_heads, count * q, size)
    return out + torch.matmul(from_base, base_values).view(kv_heads, count, q, d).transpose(0, 1)


def _attend_packed(packed: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, scores: torch.Tensor,
                   own_values: torch.Tensor, base_keys: torch.Tensor, base_values: torch.Tensor, shared: torch.Tensor,
                   scaling: float) -> torch.Tensor:
    """:func:`_attend` for a run whose rows feed more than one token, with the base met by the run's tokens only:
    (tokens, kv_heads, group, head_dim) float32, token by token as ``packed`` holds them. ``packed``: the run's
    queries (tokens, kv_heads, group, head_dim) float32; ``rows``, ``cols`` (tokens,) long: each token's row
    within the run and its column in the step; ``scores``, ``own_values``, ``base_keys``, ``base_values``,
    ``shared``: as :func:`_attend` takes them (the own slots' scores in the padded layout, (rows, kv_heads, group
    x width, slots)). The padded layout pads every row to the run's widest, and the base, hundreds of tokens
    for every query, is the larger part of the work: in the serve bench's steps at 16 clients the run's queries
    were 2.1 times its tokens. The base's scores and values go through two products of the tokens' queries
    alone; only the rows' own slots, a few dozen, keep the padded layout (their keys and values differ by
    row). One softmax over both, as :func:`_attend`: the same values up to the products' float32 rounding."""
    count, kv_heads, group, d = packed.shape
    n, _, _, slots = scores.shape
    w = scores.shape[2] // group
    size = base_keys.shape[1]
    flat = packed.permute(1, 0, 2, 3).reshape(kv_heads, count * group, d)
    on_base = torch.matmul(flat, base_keys.transpose(-1, -2)).mul_(scaling).view(kv_heads, count, group, size)
    on_base = on_base + shared[rows].view(1, count, 1, 1)
    own = scores.view(n, kv_heads, group, w, slots)[rows, :, :, cols].transpose(0, 1)  # (kv_heads, tokens, group, slots)
    weights = torch.softmax(torch.cat([on_base, own], dim=-1), dim=-1)
    out = torch.matmul(weights[..., :size].reshape(kv_heads, count * group, size), base_values)
    spread = scores.new_zeros(n, kv_heads, group, w, slots)
    spread[rows, :, :, cols] = weights[..., size:].transpose(0, 1)
    own_out = torch.matmul(spread.view(n, kv_heads, group * w, slots), own_values).view(n, kv_heads, group, w, d)
    return out.view(kv_heads, count, group, d).transpose(0, 1) + own_out[rows, :, :, cols]


def row_pass(decoder, ids: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, positions: torch.Tensor,
             width: int, keys: list[torch.Tensor], values: list[torch.Tensor], used: int,
             allowed: torch.Tensor, last: torch.Tensor, base: tuple | None = None) -> torch.Tensor:
    """Feed the packed tokens ``ids`` through ``decoder`` and return the final hidden states of the packed
    tokens ``last`` (each row's last fed token; its draft's positions too, when it verifies one), shape
    (len(last), hidden), after the final norm.

    ``ids``, ``rows``, ``cols``, ``positions``: (tokens,) long tensors: each fed token, its row, its column in
    the step (0 .. ``width`` - 1) and its position in its row's sequence. ``keys[l]``/``values[l]``: layer
    ``l``'s buffers (at least row count, kv_heads, ``used + width``, head_dim), written in place at slots
    ``used + cols``. ``allowed``: (row count, width, ``used + width``) bool, which slots each query of the
    step attends to. ``last``: (n,) long, indices into the packed tokens, row by row. ``base``: None, or the
    keys and values that rows share before their own slots: (keys, values, shares), ``keys[l]``/``values[l]``
    layer ``l``'s (kv_heads, base tokens, head_dim) in the buffers' dtype, ``shares`` (row count,) bool, the
    rows that attend to them (:func:`_attend`). Raises whatever the model's modules raise (out of memory)."""
    hidden = decoder.embed_tokens(ids[None])  # (1, tokens, hidden)
    cos, sin = decoder.rotary_emb(hidden, positions[None])  # (1, tokens, head_dim)
    cos, sin = cos[0][:, None], sin[0][:, None]  # (tokens, 1, head_dim)
    first = decoder.layers[0].self_attn
    one_call = getattr(first, "takes_packed", None) is not None and first.takes_packed(hidden, keys[0])
    if one_call:
        reads = _reads(allowed, rows, cols, base)
    else:
        parts = _parts(allowed, rows, cols, base, ids.device, used)
    for i, (layer, k_buf, v_buf) in enumerate(zip(decoder.layers, keys, values)):
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
        if one_call:
            shared = (None, None) if base is None else (base[0][i], base[1][i])
            out = attn.packed(q.contiguous(), *shared, k_buf, v_buf, reads)
        else:
            out = _torch_attention(q, k_buf, v_buf, used, parts, base, i, attn.scaling)
        hidden = hidden + attn.o_proj(out[None])
        mlp = layer.mlp.packed if one_call else layer.mlp
        hidden = hidden + mlp(layer.post_attention_layernorm(hidden))
    return decoder.norm(hidden[0, last])


def _reads(allowed: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, base: tuple | None) -> tuple:
    """What each packed token's query reads, as the model's ``packed`` attention takes it
    (:meth:`~..model.llama.Attention.packed`), once for every layer: (on_base uint8 (tokens,), token_row int32
    (tokens,), offsets int32 (tokens + 1,), slots int32): whether it reads the base, its row, and the slots
    ``allowed`` lets it read, ``slots[offsets[t]:offsets[t + 1]]`` (its row's valid slots, its own earlier
    tokens of the step and itself, in slot order: each the start of the next token's of its row)."""
    reads = allowed[rows, cols].nonzero()  # (pairs, 2): token, slot
    offsets = torch.zeros(len(rows) + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(torch.bincount(reads[:, 0], minlength=len(rows)), 0)
    on_base = (base[2][rows] if base is not None else torch.zeros(len(rows), dtype=torch.bool)).to(torch.uint8)
    return (on_base.contiguous(), rows.to(torch.int32).contiguous(), offsets, reads[:, 1].to(torch.int32).contiguous())


def _parts(allowed: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, base: tuple | None, device,
           used: int) -> list[tuple]:
    """The torch attention's runs (:func:`runs`), each ``(first, end, w, t0, t1, its tokens' rows within the run,
    their columns, the run's additive mask, shared)``: its rows, its packed tokens ``[t0, t1)``, and ``shared``
    (rows of the run, 1, 1, 1): 0 for a row that attends to the base, -inf for one that does not (None when
    none does)."""
    count = allowed.shape[0]
    # (rows, 1, 1, width, slots): 0 where a query may attend, -inf elsewhere; float32, as the products
    bias = torch.zeros(allowed.shape, dtype=torch.float32, device=allowed.device)
    bias = bias.masked_fill_(~allowed, float("-inf"))[:, None, None]
    counts = torch.bincount(rows, minlength=count)
    ends = torch.cumsum(counts, 0).tolist()
    parts = []
    for first, end, w in runs(counts.tolist()):
        t0, t1 = (ends[first - 1] if first else 0), ends[end - 1]
        shared = None
        if base is not None and bool(base[2][first:end].any()):
            shared = torch.zeros(end - first, 1, 1, 1, dtype=torch.float32, device=device).masked_fill_(
                ~base[2][first:end, None, None, None], float("-inf"))
        parts.append((first, end, w, t0, t1, rows[t0:t1] - first, cols[t0:t1],
                      bias[first:end, :, :, :w, :used + w], shared))
    return parts


def _torch_attention(q: torch.Tensor, k_buf: torch.Tensor, v_buf: torch.Tensor, used: int, parts: list[tuple],
                     base: tuple | None, layer: int, scaling: float) -> torch.Tensor:
    """Layer ``layer``'s attention in torch operators, run by run (:func:`_parts`): ``q`` (tokens, heads, head_dim)
    after the rotary embedding, ``k_buf``/``v_buf`` its buffers with this step's keys and values written.
    Returns (tokens, heads x head_dim) in ``q``'s dtype."""
    heads, d = q.shape[1], q.shape[2]
    kv_heads = k_buf.shape[1]
    group = heads // kv_heads
    outs = []
    for first, end, w, t0, t1, run_rows, run_cols, run_bias, shared in parts:
        n, slots = end - first, used + w
        padded = q.new_zeros(n, w, heads, d)
        padded[run_rows, run_cols] = q[t0:t1]
        # (rows, kv_heads, group * w, head_dim): the query heads of one key/value head side by side
        grouped = padded.view(n, w, kv_heads, group, d).permute(0, 2, 3, 1, 4).reshape(
            n, kv_heads, group * w, d).float()
        scores = torch.matmul(grouped, k_buf[first:end, :, :slots].float().transpose(-1, -2)) * scaling
        scores = (scores.view(n, kv_heads, group, w, slots) + run_bias).view(n, kv_heads, -1, slots)
        own_values = v_buf[first:end, :, :slots].float()
        if shared is not None and w > 1:  # the base for the run's tokens only, not its padding
            packed = q[t0:t1].view(t1 - t0, kv_heads, group, d).float()
            out = _attend_packed(packed, run_rows, run_cols, scores, own_values, base[0][layer].float(),
                                 base[1][layer].float(), shared, scaling)
            outs.append(out.reshape(t1 - t0, heads * d))
            continue
        if shared is None:
            out = torch.matmul(torch.softmax(scores, dim=-1), own_values)
        else:
            out = _attend(grouped, scores, own_values, base[0][layer].float(), base[1][layer].float(), shared,
                          scaling)
        out = out.view(n, kv_heads, group, w, d).permute(0, 3, 1, 2, 4).reshape(n, w, heads * d)
        outs.append(out[run_rows, run_cols])
    return (outs[0] if len(outs) == 1 else torch.cat(outs)).to(q.dtype)
