"""Weight-only int8: every linear layer's weights, and the token embeddings, stored as int8 with one scale per
output channel (per row), activations in bfloat16. Half the bytes of bfloat16 weights to read per decode step,
which is what bounds a CPU's speed. Tied embeddings stay tied: one int8 matrix serves the embedding lookup
(:class:`Int8Embedding`, which dequantizes only the rows it looks up) and the output layer (:class:`Int8Linear`).

Scheme: symmetric per-output-channel absmax, ``scale = max|w_row| / 127``, ``w_int8 = round(w / scale)``
(as in LLM.int8()'s vector-wise quantization without the outlier split, Dettmers et al. 2022, and gpt-fast's
int8 weight-only mode). A product over up to ``SMALL_ROWS`` rows (decode steps, forced chunks, a request's
prefill) runs in torch's int8 x bf16 CPU kernel (``aten._weight_int8pack_mm``), whose cost grows with the rows;
a longer one (the catalog prefix) dequantizes the layer to bfloat16 first.

Measured on Qwen2.5-Coder-1.5B, public set, 2-core AVX512-BF16 CPU (``run --profile``): decode step 104 ms
(bfloat16: 230, float32: 399), a ~21-token prefill 527 ms (bfloat16: 333), a ~7.5-token forced chunk 236 ms
(bfloat16: 232); with ``SMALL_ROWS`` at 2 (dequantizing for anything longer) chunks took 1,104 ms, at 8 the
prefills took 947 ms, hence 32. Peak memory 2.8 GB (bfloat16: 3.8 GB), the same 11 answers; with the
embeddings in int8 and tied (one 151,936 x 1,536 int8 matrix instead of a bfloat16 one and an int8 one), 2.29 GB.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

#: Products over at most this many rows use the int8 kernel; longer ones dequantize the layer first.
SMALL_ROWS = 32
#: A longer product dequantizes at most this many weights at a time (32 MB of bfloat16): an output layer of
#: 151,936 x 1,536 then never exists whole in bfloat16 (467 MB) beside its int8 matrix.
DEQUANT_ELEMENTS = 1 << 24


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize the float matrix ``w`` (rows, cols) row by row (see the module docstring): returns the int8
    matrix (rows, cols) and the bfloat16 scales (rows,). Rows are independent, so a matrix may be quantized in
    chunks of rows with the same result."""
    w = w.float()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127
    q = (w / scale[:, None]).round_().clamp_(-127, 127).to(torch.int8)
    return q, scale.to(torch.bfloat16)


class Int8Linear(nn.Module):
    """A linear layer with int8 weights: ``weight_int8`` int8 (out, in), ``scale`` bfloat16 (out,), ``bias``
    bfloat16 (out,) or None. Input (..., in) of any float dtype; output (..., out) in bfloat16."""

    def __init__(self, in_features: int, out_features: int, bias: bool, device: torch.device | str | None = None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight_int8", torch.empty(out_features, in_features, dtype=torch.int8, device=device))
        self.register_buffer("scale", torch.empty(out_features, dtype=torch.bfloat16, device=device))
        self.bias = (nn.Parameter(torch.empty(out_features, dtype=torch.bfloat16, device=device), requires_grad=False)
                     if bias else None)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "Int8Linear":
        """Quantize ``linear`` (see the module docstring); its float weights are not kept."""
        w = linear.weight.detach()
        out = cls(linear.in_features, linear.out_features, linear.bias is not None, device="meta")
        out.weight_int8, out.scale = quantize_rows(w)
        if linear.bias is not None:
            out.bias = nn.Parameter(linear.bias.detach().to(torch.bfloat16, copy=True), requires_grad=False)
        return out

    @classmethod
    def tied_to(cls, embedding: "Int8Embedding") -> "Int8Linear":
        """An output layer (hidden -> vocabulary, no bias) whose weights are ``embedding``'s own int8 matrix and
        scales: the same storage, not a copy."""
        out = cls(embedding.embedding_dim, embedding.num_embeddings, bias=False, device="meta")
        out.weight_int8, out.scale = embedding.weight_int8, embedding.scale
        return out

    def dequantized(self, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """The bfloat16 weights (out, in) this layer stands for, or their rows ``start`` to ``stop``."""
        return self.weight_int8[start:stop].to(torch.bfloat16) * self.scale[start:stop, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        if rows.shape[0] <= SMALL_ROWS and rows.device.type == "cpu":
            y = torch.ops.aten._weight_int8pack_mm(rows, self.weight_int8, self.scale)
            if self.bias is not None:
                y = y + self.bias
        else:
            step = max(1, DEQUANT_ELEMENTS // self.in_features)
            if step >= self.out_features:
                y = F.linear(rows, self.dequantized(), self.bias)
            else:  # in blocks of output features
                y = torch.empty(rows.shape[0], self.out_features, dtype=torch.bfloat16, device=rows.device)
                for a in range(0, self.out_features, step):
                    bias = None if self.bias is None else self.bias[a:a + step]
                    y[:, a:a + step] = F.linear(rows, self.dequantized(a, a + step), bias)
        return y.reshape(*x.shape[:-1], self.out_features)


class Int8Embedding(nn.Module):
    """A token embedding with int8 weights: ``weight_int8`` int8 (vocabulary, hidden), ``scale`` bfloat16
    (vocabulary,), one per row. A lookup of token ids (any shape) returns their rows dequantized to bfloat16
    (..., hidden), ``weight_int8[ids] * scale[ids]``; the rest of the matrix stays int8."""

    def __init__(self, num_embeddings: int, embedding_dim: int, device: torch.device | str | None = None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.register_buffer("weight_int8", torch.empty(num_embeddings, embedding_dim, dtype=torch.int8,
                                                        device=device))
        self.register_buffer("scale", torch.empty(num_embeddings, dtype=torch.bfloat16, device=device))

    @classmethod
    def from_embedding(cls, embedding: nn.Embedding) -> "Int8Embedding":
        """Quantize ``embedding`` row by row (as :class:`Int8Linear` does); its float weights are not kept."""
        out = cls(embedding.num_embeddings, embedding.embedding_dim, device="meta")
        out.weight_int8, out.scale = quantize_rows(embedding.weight.detach())
        return out

    def dequantized(self) -> torch.Tensor:
        """The bfloat16 weights (vocabulary, hidden) this embedding stands for (the whole matrix: for tests)."""
        return self.weight_int8.to(torch.bfloat16) * self.scale[:, None]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight_int8).to(torch.bfloat16) * F.embedding(ids, self.scale[:, None])


def replace_linears(module: nn.Module, make) -> int:
    """Replace every ``nn.Linear`` below ``module`` by ``make(linear)``, in place; returns how many."""
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, make(child))
            count += 1
        else:
            count += replace_linears(child, make)
    return count


def embedding_names(model: nn.Module) -> tuple[str, str | None, bool]:
    """The qualified names of ``model``'s input embedding and output layer (None if it has none, e.g.
    ``"model.embed_tokens"`` and ``"lm_head"``), and whether its config ties them (``tie_word_embeddings``)."""
    names = {id(module): name for name, module in model.named_modules()}
    out = model.get_output_embeddings()
    tied = bool(getattr(model.config, "tie_word_embeddings", False)) and out is not None
    return names[id(model.get_input_embeddings())], None if out is None else names[id(out)], tied


def tied_keys(model: nn.Module) -> dict[str, str]:
    """For a model with tied embeddings, the state-dict keys of its int8 output layer mapped to those of the
    int8 embedding whose tensors it shares (``{"lm_head.weight_int8": "model.embed_tokens.weight_int8",
    "lm_head.scale": "model.embed_tokens.scale"}``); empty when untied. A checkpoint stores the shared tensors
    once, under the embedding's keys."""
    embed, out, tied = embedding_names(model)
    return {f"{out}.{part}": f"{embed}.{part}" for part in ("weight_int8", "scale")} if tied else {}


def quantize(model: nn.Module) -> int:
    """Quantize the token embeddings and every linear layer of ``model`` in place; with tied embeddings the
    output layer shares the embedding's int8 matrix (:meth:`Int8Linear.tied_to`), else it gets its own.
    Returns how many layers were quantized, the embedding included (a tied output layer counts once more)."""
    embed, out, tied = embedding_names(model)
    if tied:  # else replace_linears would quantize the shared float matrix a second time
        model.set_submodule(out, nn.Identity())
    q_embed = Int8Embedding.from_embedding(model.get_submodule(embed))
    model.set_submodule(embed, q_embed)
    count = replace_linears(model, Int8Linear.from_linear) + 1
    if tied:
        model.set_submodule(out, Int8Linear.tied_to(q_embed))
        count += 1
    return count


def empty_like_quantized(model: nn.Module) -> int:
    """Give ``model`` (built on the meta device) the structure :func:`quantize` leaves, ready for
    ``load_state_dict(..., assign=True)`` of a state in which the keys of :func:`tied_keys` name the same
    tensors as the embedding's (which then makes them share storage); returns how many layers."""
    embed, out, tied = embedding_names(model)
    if tied:
        model.set_submodule(out, nn.Identity())
    module = model.get_submodule(embed)
    model.set_submodule(embed, Int8Embedding(module.num_embeddings, module.embedding_dim, device="meta"))
    count = replace_linears(model, lambda lin: Int8Linear(lin.in_features, lin.out_features, lin.bias is not None,
                                                          device="meta")) + 1
    if tied:
        model.set_submodule(out, Int8Linear.tied_to(model.get_submodule(embed)))
        count += 1
    return count
