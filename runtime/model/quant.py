"""Int8 weights with one scale per output channel (per row), and the token embeddings likewise; half the bytes
of bfloat16 weights to read per decode step, which is what bounds a CPU's speed. Tied embeddings stay tied: one
int8 matrix serves the embedding lookup (:class:`Int8Embedding`, which dequantizes only the rows it looks up)
and the output layer (:class:`Int8Linear`).

Weights: symmetric per-output-channel absmax, ``scale = max|w_row| / 127``, ``w_int8 = round(w / scale)``
(LLM.int8()'s vector-wise quantization without the outlier split, Dettmers et al. 2022; gpt-fast's int8 mode).

Linear layers (all but an output layer tied to the embeddings) are rotated first: the weights are stored as
``W H`` and each input row ``x`` becomes ``x H``, where ``H`` is block-diagonal of normalized Hadamard blocks of
:func:`rotation_block` inputs (256 for Qwen2.5's 1,536 and 8,960), so ``(x H)(W H)^T = x W^T``. A rotation
spreads the few huge input channels of a transformer's activations over the whole block, so that the rotated
input row quantizes to int8 per row (absmax / 127) with little loss, and the product runs in an int8 x int8
kernel: :mod:`.native`'s up to its rows (a decode step's one row or few, at the memory's rate), else torch's
(``torch._int_mm``, oneDNN); both give the same int32 sums. The idea is QuaRot's (Ashkboos et al. 2024, "QuaRot:
Outlier-Free 4-Bit Inference in Rotated LLMs"), with block rotations computed on the fly instead of folded
into the neighbouring layers: the inputs' by the fast Walsh-Hadamard transform fused with their quantization
(:func:`walsh_hadamard`, gemv.c's ``cm_rotate_quantize``), the weights' by the dense product at conversion
(the two differ by float32 rounding). A library built without AVX-512 VNNI still runs the transform, in plain C
(:func:`.native.rotation`); without any (no compiler, ``CALLMAYBE_KERNELS=torch``) it runs in torch, the same
bits but more operators: on one core 0.12 against the dense product's 0.03 ms for one row of 1,536.
Layers whose input width has no power-of-two factor above 1, and a tied output layer, keep bfloat16
activations: up to ``SPLIT_ROWS`` rows, the int8 x int8 kernel with each row split into two int8 rows (the
products of torch's int8 x bfloat16 kernel to bfloat16's last rounding), the dequantized layer beyond (and for
an input width that is not a multiple of 8).

Measured on Qwen2.5-Coder-1.5B, 2-core AVX512-VNNI CPU, logits over 24 BFCL prompts against bfloat16 weights
(mean KL divergence per position): weight-only int8 0.0016, int8 activations without the rotation 0.0061,
rotated int8 weights and activations 0.0011. One half-layer's products (M rows): weight-only 1.4 ms (M = 1),
9.2 (21), 97 (256, dequantized: 43); rotated int8 x int8, quantization included, about 3x faster from M = 21
(3.4 ms at 21, 24 at 256).
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache

import torch
from torch import nn
from torch.nn import functional as F

from . import native

#: Products of an unrotated layer over at most this many rows use the two-level int8 product
#: (:meth:`Int8Linear._split_product`); longer ones dequantize the layer first. Qwen2.5's tied output layer
#: (151,936 x 1,536), 2 threads, 2-core Sapphire Rapids, in ms at 1 / 4 / 8 / 16 / 32 / 64 rows: torch's int8 x
#: bfloat16 kernel (``aten._weight_int8pack_mm``, no AMX) 25 / 30 / 58 / 118 / 229 / 476, two-level through
#: ``torch._int_mm`` 29 / 30 / 31 / 35 / 58 / 126, dequantized 95-140; the two-level product through
#: :mod:`.native`'s kernel (up to 7 rows: 14 int8 rows) reads the layer at the memory's rate, about 10 ms at one row.
#: With its AMX tiles (sixteenth session, same machine): two-level 16 / 29 / 59 / 101 / 143 / 236 ms at 16 / 32 /
#: 64 / 96 / 128 / 192 rows against dequantized 92 / 87 / 94 / 103 / 147 / 166: even from about 96 rows, so the
#: limit stays.
SPLIT_ROWS = 64
#: A longer product dequantizes at most this many weights at a time (32 MB of bfloat16): an output layer of
#: 151,936 x 1,536 then never exists whole in bfloat16 (467 MB) beside its int8 matrix.
DEQUANT_ELEMENTS = 1 << 24


#: The widest Hadamard block of the input rotation, in inputs.
MAX_ROTATION_BLOCK = 256


def rotation_block(in_features: int) -> int:
    """The Hadamard block of a linear layer with ``in_features`` inputs: the largest power of two that divides
    it, at most :data:`MAX_ROTATION_BLOCK`; 1 means the layer is not rotated."""
    return min(in_features & -in_features, MAX_ROTATION_BLOCK)


@lru_cache(maxsize=None)
def hadamard(n: int) -> torch.Tensor:
    """The normalized Sylvester Hadamard matrix of order ``n`` (a power of two), float32 (n, n): symmetric and
    orthogonal, so it is its own inverse."""
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


def rotate(x: torch.Tensor, block: int) -> torch.Tensor:
    """``x`` (..., k) times the block-diagonal matrix of Hadamard blocks of order ``block`` (k a multiple of
    it), in float32; ``block`` 1 returns ``x`` as float32. Applying it twice gives ``x`` back."""
    x = x.float()
    if block <= 1:
        return x
    return (x.reshape(*x.shape[:-1], x.shape[-1] // block, block) @ hadamard(block)).reshape(x.shape)


def walsh_hadamard(x: torch.Tensor, block: int) -> torch.Tensor:
    """:func:`rotate` by the fast Walsh-Hadamard transform: ``x`` (..., k) float32 in blocks of ``block`` (a
    power of two dividing k), log2(block) stages of butterflies ``(a + b, a - b)`` between entries block/2, ...,
    2, 1 apart, then one product by :func:`hadamard_scale`: (..., k) float32, the same values as :func:`rotate`
    up to float32 rounding (8 additions per entry of a 256 block instead of 256 multiply-adds), and the same
    bits as gemv.c's ``cm_rotate_quantize`` (the same operations in the same order). Source: the Sylvester
    construction H_2n = [[H_n, H_n], [H_n, -H_n]] applied one factor at a time (Fino and Algazi, 1976)."""
    shape = x.shape
    y = x.float().reshape(-1, block)
    h = block // 2
    while h >= 1:
        y = y.view(-1, block // (2 * h), 2, h)
        a, b = y[:, :, 0], y[:, :, 1]
        y = torch.stack((a + b, a - b), dim=2).view(-1, block)
        h //= 2
    return y.mul_(hadamard_scale(block)).view(shape)


@lru_cache(maxsize=None)
def hadamard_scale(block: int) -> float:
    """The normalization of a Hadamard block of order ``block``, 1 / sqrt(block), as the float32 value both the
    torch and the C transform multiply by."""
    return float(torch.tensor(1.0 / math.sqrt(block), dtype=torch.float32))


_last_input = threading.local()


def quantized_input(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of ``x`` (..., k) rotated (:func:`rotate`) and quantized to int8 per row: (rows, k) int8 and
    their steps (rows, 1) float32 (``absmax / 127``), so that ``x H`` is about ``q * step``. Layers that read one
    input (a transformer's q, k and v projections; gate and up) share the work: the last result is kept, per
    thread, and given again for the same tensor and block (unchanged, where torch counts versions: not for an
    inference tensor, which transformers' layers do not change in place between two products)."""
    version = version_of(x)
    last = getattr(_last_input, "entry", None)
    if last is not None and last[0] is x and last[1] == version and last[2] == block:
        return last[3], last[4]
    rows = x.reshape(-1, x.shape[-1])
    kernel = native.rotation() if rows.device.type == "cpu" and block > 1 else None
    if kernel is not None and rows.dtype in (torch.bfloat16, torch.float32) and block <= 256:
        q, step = kernel.rotate_quantize(rows.contiguous(), block, hadamard_scale(block))
    else:
        rows = walsh_hadamard(rows, block) if block > 1 else rows.float().clone()  # new: divided in place below
        step = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(127)
        q = rows.div_(step).round_().to(torch.int8)
    _last_input.entry = (x, version, block, q, step)
    return q, step


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize the float matrix ``w`` (rows, cols) row by row (see the module docstring): returns the int8
    matrix (rows, cols) and the bfloat16 scales (rows,). Rows are independent, so a matrix may be quantized in
    chunks of rows with the same result."""
    w = w.float()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127
    q = (w / scale[:, None]).round_().clamp_(-127, 127).to(torch.int8)
    return q, scale.to(torch.bfloat16)


def _derived(entry: tuple[torch.Tensor, int, torch.Tensor] | None, source: torch.Tensor,
             make) -> tuple[torch.Tensor, int, torch.Tensor]:
    """``entry`` (``source``, its version, ``make(source)``) when it still stands for ``source``, else a new one:
    made again when the tensor is replaced or changed in place through torch, which counts versions
    (``load_state_dict``, ``copy_``). A change torch does not count (through ``.data`` or a NumPy view) is not
    seen: replace the tensor instead."""
    if entry is None or entry[0] is not source or entry[1] != version_of(source):
        entry = (source, version_of(source), make(source))
    return entry


def version_of(t: torch.Tensor) -> int | None:
    """``t``'s version counter (bumped by each change in place through torch), or None for an inference tensor
    (made under ``torch.inference_mode``), which has none: a change to it in place is not seen, as one through
    ``.data`` is not."""
    return None if t.is_inference() else t._version


class Int8Linear(nn.Module):
    """A linear layer with int8 weights: ``weight_int8`` int8 (out, in), ``scale`` bfloat16 (out,), ``bias``
    bfloat16 (out,) or None. Input (..., in) of any float dtype; output (..., out) in bfloat16.

    ``block`` > 1: the weights are stored rotated (``W H``, see the module docstring) and the input is rotated
    and quantized to int8 per row before the product; ``block`` 1 (``rotated=False``, or an input width without
    an even factor): bfloat16 activations."""

    def __init__(self, in_features: int, out_features: int, bias: bool, device: torch.device | str | None = None,
                 rotated: bool = True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.block = rotation_block(in_features) if rotated else 1
        #: (``scale``, its version, its float32 copy), made at the first rotated product and again when ``scale``
        #: is replaced or changed in place
        self._scale: tuple[torch.Tensor, int, torch.Tensor] | None = None
        #: (``weight_int8``, its version, its rows' sums): see :meth:`_row_sums`
        self._sums: tuple[torch.Tensor, int, torch.Tensor] | None = None
        #: the scaled VNNI product bound to this layer's tensors (:meth:`_bound_product`), or None
        self._bound: tuple | None = None
        self.register_buffer("weight_int8", torch.empty(out_features, in_features, dtype=torch.int8, device=device))
        self.register_buffer("scale", torch.empty(out_features, dtype=torch.bfloat16, device=device))
        self.bias = (nn.Parameter(torch.empty(out_features, dtype=torch.bfloat16, device=device), requires_grad=False)
                     if bias else None)

    @classmethod
    def from_linear(cls, linear: nn.Linear, rotated: bool = True) -> "Int8Linear":
        """Quantize ``linear`` (see the module docstring), rotated unless ``rotated`` is False; its float weights
        are not kept."""
        out = cls(linear.in_features, linear.out_features, linear.bias is not None, device="meta", rotated=rotated)
        out.weight_int8, out.scale = quantize_rows(rotate(linear.weight.detach(), out.block))
        if linear.bias is not None:
            out.bias = nn.Parameter(linear.bias.detach().to(torch.bfloat16, copy=True), requires_grad=False)
        return out

    @classmethod
    def tied_to(cls, embedding: "Int8Embedding") -> "Int8Linear":
        """An output layer (hidden -> vocabulary, no bias) whose weights are ``embedding``'s own int8 matrix and
        scales: the same storage, not a copy."""
        out = cls(embedding.embedding_dim, embedding.num_embeddings, bias=False, device="meta", rotated=False)
        out.weight_int8, out.scale = embedding.weight_int8, embedding.scale
        return out

    def dequantized(self, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """The bfloat16 weights (out, in) this layer stands for (rotated back), or their rows ``start`` to
        ``stop``."""
        w = self.weight_int8[start:stop].to(torch.bfloat16) * self.scale[start:stop, None]
        return w if self.block <= 1 else rotate(w, self.block).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.block > 1:
            return self._rotated(x)
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        if rows.shape[0] <= SPLIT_ROWS and rows.device.type == "cpu" and self.in_features % 8 == 0:
            y = self._split_product(rows)  # (% 8: _int_mm misreads K = 1, and wants K a multiple of 8)
        else:
            y = self._dequantized_product(rows)
        return y.reshape(*x.shape[:-1], self.out_features)

    def _split_product(self, rows: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """``rows`` bfloat16 (M, in) times the int8 weights (their rows ``ids`` only, int64 (k,), when given:
        (M, k)), scaled, + bias: (M, out) bfloat16, through the int8 x
        int8 kernel (``torch._int_mm``) with bfloat16's precision kept: each row is split into two int8 rows,
        ``x = s1 q1 + s2 q2 + e`` (``q1`` the row quantized by its absmax, ``q2`` what is left, quantized
        likewise; ``|e| <= s2 / 2``, about ``|x|max / 32,000``, below a bfloat16 rounding), both multiplied in one
        product of 2M rows (int32 sums: 1,536 products of at most 127 x 127 stay far from 2^31) and added in
        float32. Its outputs equal the int8 x bfloat16 kernel's up to the last bfloat16 rounding (on 3,507
        positions of Qwen2.5-Coder-1.5B's output layer: every argmax the same, 96% of the logits bit-equal,
        mean KL divergence 3e-6). A residual split in the sense of multi-limb (e.g. Ozaki-scheme) products."""
        x = rows.float()
        m = x.shape[0]
        step1 = x.abs().amax(dim=1, keepdim=True).clamp_(min=1e-30).div_(127)
        q1 = (x / step1).round_()
        rest = x.sub_(q1 * step1)  # x is a new float32 tensor: changed in place
        step2 = rest.abs().amax(dim=1, keepdim=True).clamp_(min=1e-30).div_(127)
        q2 = rest.div_(step2).round_()
        q = torch.cat([q1, q2]).to(torch.int8)
        scale, bias = self._float_scale(), self.bias
        if ids is None:
            sums = self._int8_product(q)
        else:
            sums = self._gathered_sums(q, ids)
            scale, bias = scale[ids], None if bias is None else bias[ids]
        y = sums[:m].float().mul_(step1).add_(sums[m:].float().mul_(step2)).mul_(scale)
        if bias is not None:
            y = y.add_(bias)
        return y.to(torch.bfloat16)

    def takes_ids(self, rows: int) -> bool:
        """True when :meth:`at` multiplies ``rows`` input rows: where :meth:`forward` would take the two-level
        product (:meth:`_split_product`: an unrotated layer, at most :data:`SPLIT_ROWS` rows, an input width
        that is a multiple of 8, on the CPU)."""
        return (self.block <= 1 and 1 <= rows <= SPLIT_ROWS and self.in_features % 8 == 0
                and self.weight_int8.device.type == "cpu")

    def at(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``x`` (M, in) of any float dtype times the weights' rows ``ids`` (int64 (k,), each below ``out``),
        scaled, + bias: (M, k) bfloat16, bit for bit ``self(x)[:, ids]`` (each output of the two-level product
        depends only on its input row and its weight row: the int32 sums are exact and the scaling is
        elementwise), at the cost of reading k weight rows instead of ``out``. For an output layer whose
        caller reads only the logits a grammar allows (a few dozen of 151,936 where the next token is a
        digit, a name or a key). Raises ValueError where :meth:`takes_ids` is False."""
        rows = x.reshape(-1, self.in_features)
        if x.dim() != 2 or not self.takes_ids(rows.shape[0]) or x.device.type != "cpu":
            raise ValueError(f"Int8Linear.at: input {tuple(x.shape)} on {x.device}: not a product it takes "
                             f"(an unrotated layer, 1-{SPLIT_ROWS} rows of {self.in_features}, on the CPU)")
        return self._split_product(rows.to(torch.bfloat16), ids)

    def masked(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``x`` (M, in): (M, out) bfloat16 holding ``self(x)``'s values in the columns ``ids`` (int64 (k,),
        sorted; those at or past ``out`` name no output and are left out) and -inf in every other: the logits a
        grammar's mask would leave of the whole product, where the mask allows only ``ids`` (:meth:`at`; raises
        ValueError where :meth:`takes_ids` is False)."""
        if len(ids) and int(ids[-1]) >= self.out_features:
            ids = ids[ids < self.out_features]
        part = self.at(x, ids) if len(ids) else None
        out = torch.full((x.shape[0], self.out_features), float("-inf"), dtype=torch.bfloat16)
        if part is not None:
            out[:, ids] = part
        return out

    def _gathered_sums(self, q: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``q`` int8 (M, in) times the weights' rows ``ids``: the int32 sums (M, k), exactly (the gathered
        rows through :mod:`.native`'s kernel where it takes them, else ``torch._int_mm``)."""
        w = self.weight_int8.index_select(0, ids)
        kernel = native.kernel()
        if kernel is not None and 1 <= q.shape[0] <= kernel.max_rows and q.shape[1] <= native.MAX_K:
            return kernel.gemv(q.contiguous(), w, self._row_sums(kernel).index_select(0, ids))
        return torch._int_mm(q, w.t())

    def _int8_product(self, q: torch.Tensor, step: torch.Tensor | None = None) -> torch.Tensor:
        """``q`` int8 (M, in) times the int8 weights: the int32 sums (M, out), exactly; with ``step`` float32
        (M, 1), the sums scaled by ``step`` and the layer's scales in bfloat16 (M, out), bit for bit
        ``sums.float().mul_(step).mul_(scale).to(torch.bfloat16)``. :mod:`.native`'s kernels where they take it
        (AMX tiles from :data:`.native.AMX_MIN_ROWS` rows, else AVX-512 VNNI up to the kernel's rows, or AVX2 for
        any rows where the CPU has no AVX-512 VNNI; the scaling done as they write their outputs); beyond, or
        where they are unavailable, ``torch._int_mm``."""
        bound = self._bound
        if (bound is not None and step is not None and bound[0] is self.weight_int8 and bound[2] is self.scale
                and bound[1] == version_of(self.weight_int8) and bound[3] == version_of(self.scale)
                and bound[6] == self.weight_int8.data_ptr() and 1 <= q.shape[0] <= bound[4] and q.dtype == torch.int8 and q.shape[1] == self.in_features
                and step.dtype == torch.float32 and q.device.type == "cpu" and step.device.type == "cpu"
                and q.is_contiguous() and step.is_contiguous() and step.numel() == q.shape[0]):
            return bound[5](q, step)
        kernel = native.kernel() if q.device.type == "cpu" else None
        scale = None if step is None else self._float_scale()
        if kernel is not None and self.weight_int8.is_contiguous() and (step is None or step.is_contiguous()):
            if kernel.takes_gemm(q.shape[0], q.shape[1], self.weight_int8.shape[0]):
                return kernel.gemm(q.contiguous(), self.weight_int8, step, scale)
            if 1 <= q.shape[0] <= kernel.max_rows and q.shape[1] <= native.MAX_K:
                if step is not None:
                    self._bound = self._bound_product(kernel)
                return kernel.gemv(q.contiguous(), self.weight_int8, self._row_sums(kernel), step, scale)
        sums = torch._int_mm(q, self.weight_int8.t())
        if step is None:
            return sums
        if kernel is not None and step.is_contiguous():
            return kernel.scale_sums(sums, step, scale)  # one pass, not four
        return sums.float().mul_(step).mul_(scale).to(torch.bfloat16)

    def __getstate__(self) -> dict:
        """The module's state for pickling (``torch.save``, ``copy.deepcopy``) without the bound product (a
        closure over the kernel's C function): it is bound again at the first product after loading."""
        return {**self.__dict__, "_bound": None}

    def _bound_product(self, kernel: native.Kernel) -> tuple:
        """(``weight_int8``, its version, ``scale``, its version, the most rows, ``product(q, step)``, the
        weights' address): the
        scaled product of :meth:`.native.Kernel.gemv` bound to this layer's weights, sums and scales as they
        are now, for the rows the VNNI kernel takes (below :data:`.native.AMX_MIN_ROWS` where AMX takes the
        rest). :meth:`_int8_product` calls it while the four tensors stay what they were (the same objects, the
        same versions) and ``q``, ``step`` are what :meth:`.native.Kernel.gemv` would check them to be: a decode
        step makes 196 such products, and the checks and lookups of the general path cost about 15 us each (3
        ms a step of Qwen2.5-1.5B on a 2-core Zen 4) against about 8 us for the call itself. The weights' address
        is checked too: storage swapped through ``.data`` binds again (its row sums are still not made again:
        see :func:`_derived`), and the product keeps the storages it reads alive, so a stale binding never
        reads freed memory."""
        product = kernel.bound_gemv(self.weight_int8, self._row_sums(kernel), self._float_scale())
        rows = native.AMX_MIN_ROWS - 1 if kernel.amx else kernel.max_rows
        return (self.weight_int8, version_of(self.weight_int8), self.scale, version_of(self.scale), rows, product,
                self.weight_int8.data_ptr())

    def _row_sums(self, kernel: native.Kernel) -> torch.Tensor:
        """The sums of ``weight_int8``'s rows, int32 (out,) (:meth:`.native.Kernel.row_sums`), made at the first
        use and again when ``weight_int8`` is replaced or changed in place through torch (see :func:`_derived`)."""
        self._sums = _derived(self._sums, self.weight_int8, kernel.row_sums)
        return self._sums[2]

    def _float_scale(self) -> torch.Tensor:
        """``scale`` as float32 (out,), made again when ``scale`` is replaced or changed in place (a
        ``load_state_dict`` copy; see :func:`_derived`)."""
        self._scale = _derived(self._scale, self.scale, torch.Tensor.float)
        return self._scale[2]

    def _dequantized_product(self, rows: torch.Tensor) -> torch.Tensor:
        """``rows`` bfloat16 (M, in) times the dequantized weights, + bias: (M, out) bfloat16. Dequantized
        :data:`DEQUANT_ELEMENTS` weights at a time into one reused buffer (one pass over the int8 weights,
        ``weight_int8 * scale`` rounded to bfloat16 as :meth:`dequantized`), each block's product written in
        place; the same values as ``F.linear(rows, self.dequantized(), self.bias)``."""
        out = torch.empty(rows.shape[0], self.out_features, dtype=torch.bfloat16, device=rows.device)
        step = min(self.out_features, max(1, DEQUANT_ELEMENTS // self.in_features))
        block = torch.empty(step, self.in_features, dtype=torch.bfloat16, device=rows.device)
        for a in range(0, self.out_features, step):
            b = min(self.out_features, a + step)
            w = torch.mul(self.weight_int8[a:b], self.scale[a:b, None], out=block[:b - a])
            if self.bias is None:
                out[:, a:b] = torch.mm(rows, w.t())
            else:
                out[:, a:b] = torch.addmm(self.bias[a:b], rows, w.t())
        return out

    def _rotated(self, x: torch.Tensor) -> torch.Tensor:
        """int8 x int8: ``x`` rotated and quantized per row (:func:`quantized_input`), multiplied in int32 and
        scaled back."""
        if x.numel() == 0:
            return torch.zeros(*x.shape[:-1], self.out_features, dtype=torch.bfloat16, device=x.device)
        q, step = quantized_input(x, self.block)
        y = self._int8_product(q, step)
        if self.bias is not None:
            y = y + self.bias
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


def _linear_maker(model: nn.Module, int4, empty: bool):
    """What replaces an ``nn.Linear`` of ``model``: an :class:`Int8Linear`, or an :class:`.int4.Int4Linear` where
    ``int4`` is True and its widths :func:`.int4.fits`, or ``int4`` is a set of module names that holds its
    name; quantized from the layer, or ``empty`` on the meta device."""
    from .int4 import Int4Linear, fits

    names = {id(m): name for name, m in model.named_modules()}

    def make(lin: nn.Linear) -> nn.Module:
        wanted = int4 is True and fits(lin.in_features, lin.out_features)
        if wanted or (not isinstance(int4, bool) and names.get(id(lin)) in int4):
            if empty:
                return Int4Linear(lin.in_features, lin.out_features, lin.bias is not None, device="meta")
            return Int4Linear.from_linear(lin)
        if empty:
            return Int8Linear(lin.in_features, lin.out_features, lin.bias is not None, device="meta")
        return Int8Linear.from_linear(lin)

    return make


def quantize(model: nn.Module, int4: bool = False) -> int:
    """Quantize the token embeddings and every linear layer of ``model`` in place; with tied embeddings the
    output layer shares the embedding's int8 matrix (:meth:`Int8Linear.tied_to`), else it gets its own.
    ``int4``: the linear layers become :class:`.int4.Int4Linear` where their widths fit (the embeddings stay
    int8). Returns how many layers were quantized, the embedding included (a tied output layer counts once
    more)."""
    embed, out, tied = embedding_names(model)
    if tied:  # else replace_linears would quantize the shared float matrix a second time
        model.set_submodule(out, nn.Identity())
    q_embed = Int8Embedding.from_embedding(model.get_submodule(embed))
    model.set_submodule(embed, q_embed)
    count = replace_linears(model, _linear_maker(model, int4, empty=False)) + 1
    if tied:
        model.set_submodule(out, Int8Linear.tied_to(q_embed))
        count += 1
    return count


def empty_like_quantized(model: nn.Module, int4: bool | set[str] = False) -> int:
    """Give ``model`` (built on the meta device) the structure :func:`quantize` (with ``int4``) leaves, or with
    ``int4`` a set of module names, those modules int4 and the other linear layers int8, ready for
    ``load_state_dict(..., assign=True)`` of a state in which the keys of :func:`tied_keys` name the same
    tensors as the embedding's (which then makes them share storage); returns how many layers."""
    embed, out, tied = embedding_names(model)
    if tied:
        model.set_submodule(out, nn.Identity())
    module = model.get_submodule(embed)
    model.set_submodule(embed, Int8Embedding(module.num_embeddings, module.embedding_dim, device="meta"))
    count = replace_linears(model, _linear_maker(model, int4, empty=True)) + 1
    if tied:
        model.set_submodule(out, Int8Linear.tied_to(model.get_submodule(embed)))
        count += 1
    return count
