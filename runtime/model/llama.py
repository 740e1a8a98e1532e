"""A Llama-family decoder (Llama, Qwen2) in plain torch, for the quantized checkpoints this cache converts.

Building transformers' model class costs its imports: ``modeling_qwen2`` pulls in ``torch._dynamo``,
``torch.distributed.tensor`` and sympy through transformers' attention, masking and kernel-hub modules, about
2.5 s of a load on this 2-core CPU (3-5 s under load; ``python -X importtime``). The int8 and int4 checkpoints
need none of it: their layers are this project's own (:mod:`.quant`, :mod:`.int4`), and the decoder around them
is a few residual blocks. :class:`CausalLM` is that decoder, with the module names, state-dict keys and call
of transformers' ``Qwen2ForCausalLM`` / ``LlamaForCausalLM`` (``model(input_ids=..., cache=..., use_cache=True,
logits_to_keep=1)`` returns ``.logits`` and ``.cache``; ``get_decoder()`` gives the batch's row pass its
``embed_tokens``, ``layers``, ``norm`` and ``rotary_emb``), so the runtime (:mod:`..decoding.rowpass` included)
and the checkpoints work unchanged.

Source of the arithmetic: transformers 5.25's ``modeling_qwen2.py`` / ``modeling_llama.py`` (pre-norm residual
blocks, RMSNorm in float32, the default rotary embedding) and its ``sdpa_attention_forward`` (no mask and
``enable_gqa`` for one query token or a prompt without past; a boolean causal mask and repeated key/value heads
for several tokens after a past). The same operations in the same order give the same logits bit for bit
(``tests/runtime/test_llama.py`` compares them with transformers' on tiny random models). The quantized models
are built with ``exact_attention=False``: a bfloat16 one-token step runs its rotary embedding, attention and
norms as single calls into :mod:`.native`'s library (:meth:`Attention._one_token`, :meth:`RMSNorm.forward`),
or, where that library is unavailable, attends through :func:`_one_query` (two float32 products per key/value
head) instead of torch's CPU flash kernel: within float32 rounding of it, then bfloat16's.

Only the configurations those checkpoints have are built (:func:`supported`): model type ``llama`` or
``qwen2``, the default rotary embedding, SiLU, full attention in every layer. Anything else loads through
transformers as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from . import native

#: the model types :class:`CausalLM` builds
KNOWN = ("llama", "qwen2")


def attention_biases(config: dict) -> tuple[bool, bool]:
    """Whether the query/key/value projections and the output projection carry a bias: Qwen2's q, k and v do,
    its o does not; Llama's four follow ``attention_bias``."""
    if config.get("model_type") == "qwen2":
        return True, False
    bias = bool(config.get("attention_bias", False))
    return bias, bias


def rope_theta(config: dict) -> float | None:
    """The rotary base of a config.json dict (transformers 5's ``rope_parameters`` or the older top-level
    ``rope_theta``); None when its rotary embedding is not the default one."""
    params = config.get("rope_parameters") or {}
    if config.get("rope_scaling") or params.get("rope_type", "default") != "default":
        return None
    theta = params.get("rope_theta", config.get("rope_theta"))
    return float(theta) if theta is not None else None


def supported(config: dict) -> bool:
    """Whether :class:`CausalLM` builds the model of the config.json dict ``config`` (see the module
    docstring)."""
    if config.get("model_type") not in KNOWN or rope_theta(config) is None:
        return False
    if config.get("hidden_act", "silu") != "silu" or config.get("use_sliding_window") or config.get("mlp_bias"):
        return False
    return all(t == "full_attention" for t in config.get("layer_types") or ["full_attention"])


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32 (Zhang & Sennrich 2019), weight (hidden,) in the model's
    dtype."""

    def __init__(self, hidden: int, eps: float, dtype: torch.dtype, device=None, exact: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden, dtype=dtype, device=device))
        self.variance_epsilon = eps
        #: False: bfloat16 rows on the CPU go through :meth:`.native.Kernel.rms_norm` (one call instead of eight
        #: operators; not always the same bits: the mean's additions in another order)
        self.exact = exact

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (not self.exact and x.dtype == torch.bfloat16 and self.weight.dtype == torch.bfloat16
                and x.device.type == "cpu" and x.is_contiguous()):
            kernel = native.rotation()
            if kernel is not None:
                return kernel.rms_norm(x, self.weight, self.variance_epsilon)
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """The default rotary position embedding (Su et al. 2021, RoFormer): ``forward(x, positions)`` gives
    (cos, sin), each (batch, tokens, head_dim) in ``x``'s dtype, for long ``positions`` (batch, tokens)."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _one_query(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float) -> torch.Tensor:
    """Attention of one query token per sequence over all of its keys, in float32: (batch, heads, 1, head_dim).
    ``q`` (batch, heads, 1, head_dim); ``k``, ``v`` (batch, kv_heads, tokens, head_dim), each key/value head
    shared by ``heads // kv_heads`` neighbouring query heads (grouped-query attention, as transformers'
    ``repeat_kv`` pairs them). The query heads of a group go in one product with their keys, as the rows of
    :mod:`..decoding.rowpass` do: ``scaled_dot_product_attention`` took 0.49 ms per layer for one bfloat16 query
    over 300 keys (2-core Zen 4, its CPU flash kernel), 13 ms of a 67 ms decode step of Qwen2.5-1.5B."""
    b, heads, _, d = q.shape
    kv_heads = k.shape[1]
    grouped = q.reshape(b, kv_heads, heads // kv_heads, d).float()
    scores = torch.matmul(grouped, k.float().transpose(-1, -2)) * scaling  # (batch, kv_heads, group, tokens)
    out = torch.matmul(torch.softmax(scores, dim=-1), v.float())
    return out.reshape(b, heads, 1, d)


class Attention(nn.Module):
    """Grouped-query self-attention with the rotary embedding; ``head_dim`` and ``scaling`` (head_dim ** -0.5)
    are read by :mod:`..decoding.rowpass`."""

    def __init__(self, c: SimpleNamespace, dtype: torch.dtype, device=None):
        super().__init__()
        bias, out_bias = c.attention_biases
        self.head_dim = c.head_dim
        self.scaling = c.head_dim ** -0.5
        self.groups = c.num_attention_heads // c.num_key_value_heads
        self.kv_heads = c.num_key_value_heads
        self.exact = c.exact_attention
        kw = {"dtype": dtype, "device": device}
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=bias, **kw)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=bias, **kw)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=bias, **kw)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=out_bias, **kw)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layer: "CacheLayer | None",
                mask: torch.Tensor | None) -> torch.Tensor:
        if mask is None and not self.exact and x.shape[0] == 1 and x.shape[1] == 1 and x.dtype == torch.bfloat16:
            kernel = native.rotation() if x.device.type == "cpu" else None
            if kernel is not None:
                return self._one_token(x, cos, sin, layer, kernel)
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)  # (batch, heads, tokens, head_dim)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = (q * cos) + (_rotate_half(q) * sin)
        k = (k * cos) + (_rotate_half(k) * sin)
        if layer is not None:
            k, v = layer.update(k, v)
        if mask is None and q.shape[2] == 1 and not self.exact:
            out = _one_query(q, k, v, self.scaling).to(q.dtype)
            return self.o_proj(out.transpose(1, 2).reshape(*x.shape[:-1], -1))
        extra = {}
        if self.groups > 1 and mask is None:
            extra["enable_gqa"] = True
        elif self.groups > 1:  # transformers' repeat_kv: each key/value head once per query head of its group
            b, h, n, d = k.shape
            k = k[:, :, None].expand(b, h, self.groups, n, d).reshape(b, h * self.groups, n, d)
            v = v[:, :, None].expand(b, h, self.groups, n, d).reshape(b, h * self.groups, n, d)
        causal = mask is None and q.shape[2] > 1
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scaling, is_causal=causal, **extra)
        out = out.transpose(1, 2).reshape(*x.shape[:-1], -1).contiguous()
        return self.o_proj(out)

    def takes_packed(self, x: torch.Tensor, keys: torch.Tensor) -> bool:
        """Whether :meth:`packed` takes a batch step of :mod:`..decoding.rowpass` whose activations are ``x`` and
        whose key/value buffers are like ``keys``: bfloat16 activations and float32 buffers on the CPU, not
        ``exact_attention``, the native library built."""
        return (not self.exact and x.dtype == torch.bfloat16 and x.device.type == "cpu"
                and keys.dtype == torch.float32 and keys.device.type == "cpu" and native.rotation() is not None)

    def packed(self, q: torch.Tensor, base_keys: torch.Tensor | None, base_values: torch.Tensor | None,
               keys: torch.Tensor, values: torch.Tensor, reads: tuple) -> torch.Tensor:
        """The attention of a batch step's packed tokens (:func:`~..decoding.rowpass.row_pass`, where
        :meth:`takes_packed`) in one native call (:meth:`.native.Kernel.attend_rows`): ``q`` bfloat16 (tokens,
        heads, head_dim) after the rotary embedding; ``base_keys``/``base_values`` float32 (kv_heads, base
        tokens, head_dim), the keys and values rows share before their own slots, or None; ``keys``/``values``
        the float32 buffers (rows, kv_heads, slots, head_dim); ``reads`` (on_base, token_row, offsets, slots),
        what each token reads (:func:`~..decoding.rowpass._reads`). Returns bfloat16 (tokens, heads x
        head_dim), the float32 attention's values up to float32 rounding. Raises ValueError on inputs the
        kernel does not take."""
        on_base, token_row, offsets, slots = reads
        return native.rotation().attend_rows(q, base_keys, base_values, on_base, keys, values, token_row, offsets,
                                             slots, self.scaling)

    def _one_token(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layer: "CacheLayer | None",
                   kernel: native.Kernel) -> torch.Tensor:
        """:meth:`forward` of one bfloat16 token (batch 1, no mask) through :mod:`.native`'s kernels: the rotary
        embedding and the attention in two calls (:meth:`~.native.Kernel.rope`, bit for bit the operators below;
        :meth:`~.native.Kernel.attend_one`, :func:`_one_query`'s values up to float32 rounding) instead of about
        30 torch operators (6-7 ms of a 56 ms step of Qwen2.5-1.5B, mostly their dispatch). The keys and values
        go to ``layer`` as :meth:`forward` gives them."""
        d = self.head_dim
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
            raise ValueError(f"one-token attention: projections {q.dtype}, {k.dtype}, {v.dtype}; bfloat16 expected")
        c, s = cos.reshape(d), sin.reshape(d)
        q = kernel.rope(q.contiguous(), c, s)
        k = kernel.rope(k.contiguous(), c, s).view(1, 1, self.kv_heads, d).transpose(1, 2)
        v = v.reshape(1, 1, self.kv_heads, d).transpose(1, 2)
        if layer is not None:
            k, v = layer.update(k, v)
        out = kernel.attend_one(q, k, v, self.scaling)
        return self.o_proj(out.view(1, 1, -1))


class MLP(nn.Module):
    """The gated SiLU feed-forward block: down(silu(gate(x)) * up(x))."""

    def __init__(self, c: SimpleNamespace, dtype: torch.dtype, device=None):
        super().__init__()
        kw = {"bias": False, "dtype": dtype, "device": device}
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, **kw)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, **kw)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def packed(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` for a batch step's packed tokens (:func:`~..decoding.rowpass.row_pass`): bfloat16 on the
        CPU, ``silu(gate) * up`` in one native pass (:meth:`.native.Kernel.silu_mul`; a step of 16 rows feeding
        200 tokens, Qwen2.5-1.5B, two Zen 4 cores: 1,020 against 1,053 ms in four alternating rounds), its
        values torch's up to exp's last bit; elsewhere (another dtype, no library, no AVX-512) torch's operators,
        as :meth:`forward`. The one-row decode keeps :meth:`forward`: its outputs stay torch's bits."""
        gate, up = self.gate_proj(x), self.up_proj(x)
        kernel = native.rotation() if gate.device.type == "cpu" else None
        both = None
        if (kernel is not None and gate.dtype == torch.bfloat16 and up.dtype == torch.bfloat16
                and gate.is_contiguous() and up.is_contiguous()):
            both = kernel.silu_mul(gate, up)  # None without AVX-512
        return self.down_proj(F.silu(gate) * up if both is None else both)


class DecoderLayer(nn.Module):
    """One pre-norm residual block: attention, then the MLP."""

    def __init__(self, c: SimpleNamespace, dtype: torch.dtype, device=None):
        super().__init__()
        self.self_attn = Attention(c, dtype, device)
        self.mlp = MLP(c, dtype, device)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device, c.exact_attention)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device, c.exact_attention)

    def forward(self, x, cos, sin, layer, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, layer, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    """The token embedding, the decoder layers and the final norm (transformers' ``model.model``)."""

    def __init__(self, c: SimpleNamespace, dtype: torch.dtype, device=None):
        super().__init__()
        self.config = c
        # given its weight, nn.Embedding skips its random init: normal_ on the meta device goes through torch's
        # reference ops, whose first call imports torch._dynamo (seconds of a load)
        weight = torch.empty((c.vocab_size, c.hidden_size), dtype=dtype, device=device)
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, _weight=weight)
        self.layers = nn.ModuleList(DecoderLayer(c, dtype, device) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device, c.exact_attention)
        self.rotary_emb = RotaryEmbedding(c.head_dim, c.rope_theta)


class CacheLayer:
    """One layer's keys and values, each (batch, kv_heads, tokens, head_dim): views of the first ``tokens`` slots
    of two buffers with room for more, so that a decode step writes its token's keys and values in place
    instead of copying the whole cache (``torch.cat``, as transformers' ``DynamicCache`` grows: 58 copies of
    the cache a step of Qwen2.5-1.5B, about 1 ms at 250 tokens).

    A tensor once given out never changes: copies of a layer (``copy.copy``, as :mod:`..decoding.prefix` makes
    them) share the buffers and one count of the slots written, and only a layer whose tokens reach that count
    writes after them in place; any other (a copy behind it, a layer cropped, keys set from outside) copies its
    tokens into new buffers first, as the concatenation did. A new buffer has a quarter more room than it
    needs, at least :data:`ROOM` slots."""

    __slots__ = ("keys", "values", "_buffers")

    #: the fewest free slots a new buffer has
    ROOM = 64

    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        #: (key buffer, value buffer, [slots written]), shared by this layer's copies; None before the first update
        self._buffers: tuple[torch.Tensor, torch.Tensor, list[int]] | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values, buffers = self.keys, self.values, self._buffers
        n = 0 if keys is None else keys.shape[-2]
        end = n + k.shape[-2]
        if (buffers is None or keys is None or buffers[2][0] != n or end > buffers[0].shape[-2]
                or keys.data_ptr() != buffers[0].data_ptr() or values.data_ptr() != buffers[1].data_ptr()
                or buffers[0].shape[:2] != k.shape[:2] or buffers[0].shape[3] != k.shape[3]
                or buffers[0].dtype != k.dtype or buffers[0].device != k.device):
            room = end + max(self.ROOM, end // 4)
            shape = (*k.shape[:2], room, k.shape[3])
            buffers = (k.new_empty(shape), v.new_empty(shape), [n])
            if n:
                buffers[0][:, :, :n] = keys
                buffers[1][:, :, :n] = values
            self._buffers = buffers
        buffers[0][:, :, n:end] = k
        buffers[1][:, :, n:end] = v
        buffers[2][0] = end
        self.keys, self.values = buffers[0][:, :, :end], buffers[1][:, :, :end]
        return self.keys, self.values


class Cache:
    """The keys and values of every layer (``layers``: :class:`CacheLayer`), with the part of transformers'
    ``DynamicCache`` the runtime uses: :meth:`get_seq_length` and :meth:`crop`."""

    def __init__(self, layers: int):
        self.layers = [CacheLayer() for _ in range(layers)]

    def get_seq_length(self) -> int:
        """The number of tokens cached."""
        keys = self.layers[0].keys
        return 0 if keys is None else keys.shape[-2]

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` tokens; a negative count removes that many from the end (transformers'
        meaning)."""
        if max_length < 0:
            max_length = self.get_seq_length() + max_length
        if self.get_seq_length() <= max_length:
            return
        for layer in self.layers:
            layer.keys = layer.keys[..., :max_length, :]
            layer.values = layer.values[..., :max_length, :]


@dataclass
class Output:
    """``logits``: (batch, positions kept, vocab_size) in the model's dtype; ``cache``: the :class:`Cache` after
    the pass (None without ``use_cache``)."""

    logits: torch.Tensor
    cache: Cache | None


class CausalLM(nn.Module):
    """The decoder and its output layer (``lm_head``), built on ``device`` (the meta device to receive a
    checkpoint's tensors with ``load_state_dict(..., assign=True)``). ``config``: a config.json dict that
    :func:`supported` accepts; raises KeyError for one that lacks a size. ``exact_attention``: every pass
    attends through torch's ``scaled_dot_product_attention``, as transformers' classes do, so that the logits are
    theirs bit for bit; False: a step of one query token (a decode step) through :func:`_one_query` instead, in
    float32 (what the quantized models :mod:`.load` builds use: no transformers class is their reference)."""

    def __init__(self, config: dict, dtype: torch.dtype = torch.bfloat16, device=None, exact_attention: bool = True):
        super().__init__()
        c = SimpleNamespace(**config)
        c.head_dim = config.get("head_dim") or c.hidden_size // c.num_attention_heads
        c.num_key_value_heads = config.get("num_key_value_heads") or c.num_attention_heads
        c.rms_norm_eps = config.get("rms_norm_eps", 1e-6)
        c.rope_theta = rope_theta(config)
        c.tie_word_embeddings = config.get("tie_word_embeddings", False)
        c.max_position_embeddings = config.get("max_position_embeddings")
        c.use_sliding_window = False
        c.attention_biases = attention_biases(config)
        c.exact_attention = exact_attention
        self.config = c
        self.takes_logits_ids = True  # forward's logits_ids (..decoding.forward passes it to models that say so)
        self.model = Decoder(c, dtype, device)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False, dtype=dtype, device=device)

    @property
    def device(self) -> torch.device:
        return self.model.norm.weight.device

    def get_decoder(self) -> Decoder:
        """The embedding, layers and final norm that :func:`..decoding.rowpass.row_pass` runs for a batch."""
        return self.model

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def forward(self, input_ids: torch.Tensor, cache: Cache | None = None, use_cache: bool = False,
                logits_to_keep: int | torch.Tensor = 0, logits_ids: torch.Tensor | None = None, **_) -> Output:
        """Run the long ``input_ids`` (batch, tokens) after ``cache``'s tokens; the logits of the last
        ``logits_to_keep`` positions (0: all; a 1-D long tensor: those positions). ``use_cache``: the new keys
        and values are added to ``cache`` (a new :class:`Cache` when None) and it is returned. ``logits_ids``
        (int64 (k,), sorted, or None): the only logits the caller reads (the tokens its grammar allows at every
        kept position); an output layer that can (``takes_ids``, :meth:`.quant.Int8Linear.masked`) computes
        those alone and writes -inf in the others, else all are computed."""
        if use_cache and cache is None:
            cache = Cache(len(self.model.layers))
        past = cache.get_seq_length() if cache is not None else 0
        tokens = input_ids.shape[1]
        positions = (torch.arange(tokens, device=input_ids.device) + past)[None]
        mask = None  # one query token, or a prompt with no past: no mask (transformers skips it too)
        if tokens > 1 and past > 0:
            mask = (torch.arange(tokens, device=input_ids.device)[:, None] + past
                    >= torch.arange(past + tokens, device=input_ids.device)[None])[None, None]
        x = self.model.embed_tokens(input_ids)
        cos, sin = self.model.rotary_emb(x, positions)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, cache.layers[i] if use_cache else None, mask)
        x = self.model.norm(x)
        if isinstance(logits_to_keep, torch.Tensor):  # indices of positions, as transformers takes them
            keep = logits_to_keep
        else:
            keep = slice(-logits_to_keep, None) if logits_to_keep else slice(None)
        x = x[:, keep]
        head = self.lm_head
        if logits_ids is not None and getattr(head, "takes_ids", None) and head.takes_ids(x.shape[0] * x.shape[1]):
            logits = head.masked(x.reshape(-1, x.shape[-1]), logits_ids).reshape(*x.shape[:-1], -1)
        else:
            logits = head(x)
        return Output(logits, cache if use_cache else None)
