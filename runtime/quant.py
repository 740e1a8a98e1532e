"""Weight-only int8: every linear layer's weights stored as int8 with one scale per output channel, activations
in bfloat16. Half the bytes of bfloat16 weights to read per decode step, which is what bounds a CPU's speed.

Scheme: symmetric per-output-channel absmax, ``scale = max|w_row| / 127``, ``w_int8 = round(w / scale)``
(as in LLM.int8()'s vector-wise quantization without the outlier split, Dettmers et al. 2022, and gpt-fast's
int8 weight-only mode). A product over up to ``SMALL_ROWS`` rows (decode steps, forced chunks, a request's
prefill) runs in torch's int8 x bf16 CPU kernel (``aten._weight_int8pack_mm``), whose cost grows with the rows;
a longer one (the catalog prefix) dequantizes the layer to bfloat16 first.

Measured on Qwen2.5-Coder-1.5B, public set, 2-core AVX512-BF16 CPU (``run --profile``): decode step 104 ms
(bfloat16: 230, float32: 399), a ~21-token prefill 527 ms (bfloat16: 333), a ~7.5-token forced chunk 236 ms
(bfloat16: 232); with ``SMALL_ROWS`` at 2 (dequantizing for anything longer) chunks took 1,104 ms, at 8 the
prefills took 947 ms, hence 32. Peak memory 2.8 GB (bfloat16: 3.8 GB), the same 11 answers.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

#: Products over at most this many rows use the int8 kernel; longer ones dequantize the layer first.
SMALL_ROWS = 32


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
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127
        out = cls(linear.in_features, linear.out_features, linear.bias is not None, device=w.device)
        out.weight_int8.copy_(torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8))
        out.scale.copy_(scale.to(torch.bfloat16))
        if linear.bias is not None:
            out.bias.data.copy_(linear.bias.detach().to(torch.bfloat16))
        return out

    def dequantized(self) -> torch.Tensor:
        """The bfloat16 weights (out, in) this layer stands for."""
        return self.weight_int8.to(torch.bfloat16) * self.scale[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        if rows.shape[0] <= SMALL_ROWS and rows.device.type == "cpu":
            y = torch.ops.aten._weight_int8pack_mm(rows, self.weight_int8, self.scale)
            if self.bias is not None:
                y = y + self.bias
        else:
            y = F.linear(rows, self.dequantized(), self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)


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


def quantize(model: nn.Module) -> int:
    """Quantize every linear layer of ``model`` in place (the output layer too, untied from the embeddings,
    which stay bfloat16); returns how many layers."""
    if getattr(model.config, "tie_word_embeddings", False):
        model.config.tie_word_embeddings = False
        out = model.get_output_embeddings()
        if out is not None:
            out.weight = nn.Parameter(out.weight.detach().clone(), requires_grad=False)
    return replace_linears(model, Int8Linear.from_linear)


def empty_like_quantized(model: nn.Module) -> int:
    """Give ``model`` (built on the meta device) the structure :func:`quantize` leaves, ready for
    ``load_state_dict(..., assign=True)``; returns how many layers."""
    return replace_linears(model, lambda lin: Int8Linear(lin.in_features, lin.out_features, lin.bias is not None,
                                                         device="meta"))
