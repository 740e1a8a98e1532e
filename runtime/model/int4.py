"""4-bit weights (``--dtype int4``): groups of 32 weights along the inputs, each with a scale and a zero, in the
layout of torch's int4 CPU kernel (``aten._weight_int4pack_mm_for_cpu``), with bfloat16 activations.

A weight is ``w = (q - 8) * scale + zero`` with ``q`` in 0..15, one (scale, zero) per row and group of
:data:`GROUP` inputs (torch's tinygemm convention: ``zero`` is the value of ``q = 8``). llama.cpp's Q4_K stores
super-blocks of 256 weights as 8 sub-blocks of 32, each ``w = d * sc * q - dmin * m`` with 6-bit ``sc`` and ``m``
and float16 ``d`` and ``dmin`` (ggml-quants.c, ``dequantize_row_q4_K``): the same ``q``, with ``scale = d * sc``
and ``zero = 8 * d * sc - dmin * m`` (:func:`q4k_groups`), so a Q4_K tensor of a GGUF file becomes an int4 layer
without requantizing (only ``scale`` and ``zero`` are rounded to bfloat16, which the kernel takes). A tensor of
another type (Q6_K, Q8_0, F32 ...) is dequantized and quantized again per group, asymmetric min/max
(:func:`quantize_groups`).

Packed weights: torch 2.13's ``_convert_weight_to_int4pack_for_cpu`` takes ``q`` as int32 (N, K) and returns
uint8 (N, K / 2) in blocks of :data:`BLOCK_N` rows: byte ``j`` of input ``k`` of block ``b`` holds row
``64 b + j`` in its low nibble and row ``64 b + 32 + j`` in its high one (found by probing the kernel; its AVX512
kernel reads 64 output channels at a time). :func:`pack` writes that layout directly, so a converted checkpoint
is used as it lies on disk (memory-mapped); :func:`layout_matches` checks it against the kernel once per
process, and :func:`pack_with_kernel` is the fallback where they differ.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

#: Inputs per (scale, zero) group: Q4_K's sub-block, one of the group sizes torch's kernel takes.
GROUP = 32
#: Output rows per block of the packed layout.
BLOCK_N = 64
#: Bytes of one Q4_K super-block of 256 weights: float16 d, float16 dmin, 12 bytes of 6-bit scales and mins,
#: 128 bytes of 4-bit values (ggml-common.h, ``block_q4_K``).
Q4K_BYTES = 144
Q4K_WEIGHTS = 256


def fits(in_features: int, out_features: int) -> bool:
    """Whether a linear layer of these widths can be int4: inputs a multiple of :data:`GROUP`, outputs of
    :data:`BLOCK_N`."""
    return in_features % GROUP == 0 and out_features % BLOCK_N == 0 and in_features > 0 and out_features > 0


def pack(q: torch.Tensor) -> torch.Tensor:
    """The 4-bit values ``q`` (N, K) (any integer dtype, 0..15; N a multiple of :data:`BLOCK_N`, K even) packed
    as uint8 (N, K / 2) in the kernel's layout (module docstring)."""
    n, k = q.shape
    q = q.to(torch.uint8).reshape(n // BLOCK_N, 2, BLOCK_N // 2, k)  # [block, half, j, input]
    packed = q[:, 0] | (q[:, 1] << 4)  # [block, j, input]
    return packed.transpose(1, 2).contiguous().reshape(n, k // 2)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`pack`: uint8 (N, K / 2) -> uint8 (N, K) values 0..15."""
    n, half = packed.shape
    k = half * 2
    blocks = packed.reshape(n // BLOCK_N, k, BLOCK_N // 2).transpose(1, 2)  # [block, j, input]
    return torch.stack([blocks & 15, blocks >> 4], 1).reshape(n, k)


def pack_with_kernel(q: torch.Tensor) -> torch.Tensor:
    """``q`` (N, K) packed by torch's own ``_convert_weight_to_int4pack_for_cpu`` (int32 input, 4 bytes per
    weight while it runs): the fallback where :func:`layout_matches` is False."""
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32).contiguous(), 1)


@lru_cache(maxsize=None)
def layout_matches() -> bool:
    """Whether :func:`pack` writes what this torch's kernel expects (a 128 x 64 probe packed both ways)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randint(0, 16, (2 * BLOCK_N, 64), generator=g, dtype=torch.int32)
    return torch.equal(pack(q), pack_with_kernel(q))


def scale_zero(scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """The kernel's ``qScaleAndZeros``: bfloat16 (K / GROUP, N, 2) from ``scale`` and ``zero`` (N, K / GROUP)."""
    return torch.stack([scale, zero], -1).transpose(0, 1).contiguous().to(torch.bfloat16)


def quantize_groups(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Quantize the float matrix ``w`` (N, K) per row and group of :data:`GROUP` inputs, asymmetric:
    ``scale = (max - min) / 15``, ``q = round((w - min) / scale)``, ``zero = min + 8 * scale``. Returns ``q``
    uint8 (N, K) and ``scale``, ``zero`` float32 (N, K / GROUP). A group of equal values gets a scale of 1e-12
    and is stored exactly up to bfloat16."""
    n, k = w.shape
    g = w.float().reshape(n, k // GROUP, GROUP)
    lo, hi = g.amin(-1), g.amax(-1)
    scale = ((hi - lo) / 15).clamp_(min=1e-12)
    q = ((g - lo[..., None]) / scale[..., None]).round_().clamp_(0, 15).to(torch.uint8).reshape(n, k)
    return q, scale, lo + 8 * scale


def q4k_groups(raw: np.ndarray, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows of a GGUF Q4_K tensor, ``raw`` uint8 (N, K / 256 * 144), as ``q`` uint8 (N, K) and ``scale``,
    ``zero`` float32 (N, K / 32), with ``(q - 8) * scale + zero`` equal to llama.cpp's dequantized weights
    (module docstring). Layout of a block: ggml-common.h ``block_q4_K``; the 6-bit scales and mins are unpacked
    as gguf-py's ``Q4_K.get_scale_min`` does; sub-block ``2 c`` is the low nibbles of bytes ``32 c .. 32 c +
    31`` of the values, sub-block ``2 c + 1`` their high nibbles."""
    from gguf.quants import Q4_K

    n = raw.shape[0]
    blocks = raw.reshape(n * (k // Q4K_WEIGHTS), Q4K_BYTES)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # (blocks, 1)
    dmin = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    sc, m = Q4_K.get_scale_min(blocks[:, 4:16].copy())  # (blocks, 8) each
    qs = blocks[:, 16:].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = (qs & 15).reshape(n, k)
    scale = (d * sc.astype(np.float32)).reshape(n, k // GROUP)
    zero = 8 * scale - (dmin * m.astype(np.float32)).reshape(n, k // GROUP)
    return torch.from_numpy(np.ascontiguousarray(q)), torch.from_numpy(scale), torch.from_numpy(zero)


class Int4Linear(nn.Module):
    """A linear layer with 4-bit weights: ``weight_int4`` uint8 (out, in / 2) packed (:func:`pack`),
    ``scale_zero`` bfloat16 (in / 32, out, 2), ``bias`` bfloat16 (out,) or None. Input (..., in) of any float
    dtype, computed in bfloat16; output (..., out) bfloat16. Products go through torch's int4 CPU kernel at any
    number of rows (measured on this project's CPU: faster than dequantizing up to a 256-row prefill)."""

    def __init__(self, in_features: int, out_features: int, bias: bool, device: torch.device | str | None = None):
        super().__init__()
        if not fits(in_features, out_features):
            raise ValueError(f"an int4 layer needs inputs a multiple of {GROUP} and outputs of {BLOCK_N}, "
                             f"got {in_features} -> {out_features}")
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight_int4", torch.empty(out_features, in_features // 2, dtype=torch.uint8,
                                                        device=device))
        self.register_buffer("scale_zero", torch.empty(in_features // GROUP, out_features, 2, dtype=torch.bfloat16,
                                                       device=device))
        self.bias = (nn.Parameter(torch.empty(out_features, dtype=torch.bfloat16, device=device), requires_grad=False)
                     if bias else None)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "Int4Linear":
        """Quantize ``linear`` per group (:func:`quantize_groups`); its float weights are not kept."""
        out = cls(linear.in_features, linear.out_features, linear.bias is not None, device="meta")
        q, scale, zero = quantize_groups(linear.weight.detach())
        out.weight_int4, out.scale_zero = pack(q), scale_zero(scale, zero)
        if linear.bias is not None:
            out.bias = nn.Parameter(linear.bias.detach().to(torch.bfloat16, copy=True), requires_grad=False)
        return out

    def dequantized(self) -> torch.Tensor:
        """The float32 weights (out, in) this layer stands for."""
        q = unpack(self.weight_int4).float().reshape(self.out_features, -1, GROUP)
        sz = self.scale_zero.float().transpose(0, 1)  # (out, groups, 2)
        return ((q - 8) * sz[..., :1] + sz[..., 1:]).reshape(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        if rows.shape[0] == 0:
            y = torch.zeros(0, self.out_features, dtype=torch.bfloat16, device=x.device)
        elif rows.device.type == "cpu":
            weight = self.weight_int4 if layout_matches() else self._kernel_packed()
            y = torch.ops.aten._weight_int4pack_mm_for_cpu(rows.contiguous(), weight, GROUP, self.scale_zero)
        else:
            y = F.linear(rows, self.dequantized().to(torch.bfloat16))
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def _kernel_packed(self) -> torch.Tensor:
        """The weights repacked by the kernel's own op, once (where :func:`pack`'s layout is not this torch's)."""
        if getattr(self, "_repacked", None) is None:
            self._repacked = pack_with_kernel(unpack(self.weight_int4))
        return self._repacked
