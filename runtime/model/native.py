"""The int8 product kernel of ``gemv.c``, built on this machine at first use and called through ctypes.

torch's int8 kernels (``torch._int_mm``, ``aten._weight_int8pack_mm``) read weights at about 15 GB/s here, where
the memory gives 22-30; a decode step reads every weight once for one row or a few, so it is bound by that rate.
``gemv.c`` streams the weights at the memory's rate for a few rows, and from 9 rows keeps the multipliers busy
with the rows of x in the vector's lanes, for any number of rows (see its header: 16 rows of every matrix of
Qwen2.5-1.5B in 64 ms against 88 before and torch's 150, 32 rows in 105-122 against torch's 176-200);
on a CPU with AVX2 and no AVX-512 VNNI (Zen 2 and 3, Intel before Ice Lake) its AVX2 kernel takes every product,
of any number of rows, where torch's ``_int_mm`` has no fast kernel at all (2-core Zen 3, all 196 matrices of
Qwen2.5-1.5B: 48 against 7,693 ms for one row, 1,623 against 31,453 for 64: ``bench/int8_kernels.py``);
where the CPU has AMX and Linux grants it, its tile kernel takes products of :data:`AMX_MIN_ROWS` rows or more
(:meth:`Kernel.gemm`): 53 ms against torch's 103 for 16 rows of every matrix of Qwen2.5-1.5B, 311 against 359 for
256 (gemv.c's header). ``CALLMAYBE_KERNELS=vnni`` keeps the AVX-512 VNNI kernel alone (for comparisons).

It is compiled once per machine, source and compiler (``cc -O3 -march=native -fopenmp -shared -fPIC``; ``$CC``
names another compiler) into ``<cache>/kernels/gemv-<key>.so``, with its SHA-256 recorded beside it and checked
before each load, as every file of the cache is. ``-fopenmp`` links ``libgomp.so.1``, which resolves to the copy
torch has already loaded, so the kernel's threads are torch's own pool. Where there is no compiler, the build
fails, the compiler offers neither AVX-512 VNNI nor AVX2, or ``CALLMAYBE_KERNELS=torch`` is set, :func:`kernel`
returns None and the callers keep torch's kernels: the same sums, to the bit. A build or load that fails says why
in one WARNING line (the first two cases); a CPU with neither and ``CALLMAYBE_KERNELS=torch`` in one INFO line,
as is the AVX2 kernel's use.
"""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import threading
from pathlib import Path

import torch

from ...core.cbuild import build_key, build_library, compiler_command, cpu_flags, open_library
from ...core.errors import CallmaybeError
from ...core.files import cache_dir

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("gemv.c")
#: compiler flags; -march=native: the kernel is built for the machine that runs it (the key holds its CPU flags)
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
#: seconds a build may take (it takes 1-3 s here); past it, torch's kernels, with a warning
BUILD_TIMEOUT = 30.0
#: the widest k the kernel takes (gemv.c's CM_MAX_K); wider products keep torch's kernels
MAX_K = 65536
#: products of this many rows or more go to the AMX kernel (where granted): at 1-3 rows the AVX-512 VNNI one
#: is faster (43-47 against 49 ms for all 196 matrices of Qwen2.5-1.5B), at 4 even (50 / 49), beyond slower
AMX_MIN_ROWS = 4
#: :meth:`Kernel.attend_rows` takes the base's transposed keys padded to a multiple of this many (gemv.c's
#: CM_ATT_KEYS)
ATTEND_KEYS = 32

_lock = threading.Lock()
_loaded: list = []  # [] not tried yet; [None] unavailable; [Kernel] loaded


def _bind(lib: ctypes.CDLL, name: str, *argtypes):
    """``lib``'s function ``name`` with its argument types; every entry point of gemv.c returns an int status.
    Raises AttributeError where the library lacks it."""
    fn = getattr(lib, name)
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn


class Kernel:
    """The loaded library: :meth:`gemv` and the most rows one call takes (:attr:`max_rows`); :meth:`gemm` where
    :attr:`amx` (the CPU has AMX, Linux granted it, and ``CALLMAYBE_KERNELS`` is not ``vnni``). :attr:`kind`:
    which product kernel it was built with, ``"vnni"`` (AVX-512 VNNI) or ``"avx2"`` (both any
    number of rows a call) or None (neither: :attr:`products` is False, torch's kernels multiply)."""

    def __init__(self, lib: ctypes.CDLL, path: Path, amx: bool = True, products: bool = True):
        self.path = path
        self.products = products  # False: built with neither AVX-512 VNNI nor AVX2, only rotate_quantize is used
        self.kind = {1: "vnni", 2: "avx2"}.get(int(lib.cm_simd())) if products else None
        ptr, int_, float_ = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        self._fn = _bind(lib, "cm_gemv_i8", ptr, int_, int_, ptr, ptr, int_, ptr, int_)
        self.max_rows = int(lib.cm_max_rows())
        self._sums = _bind(lib, "cm_row_sums", ptr, int_, int_, ptr, int_)
        self._gemm = _bind(lib, "cm_gemm_i8", ptr, int_, int_, ptr, int_, ptr, int_)
        self._gemv_scaled = _bind(lib, "cm_gemv_i8_scaled", ptr, int_, int_, ptr, ptr, int_, ptr, ptr, ptr, int_)
        self._gemm_scaled = _bind(lib, "cm_gemm_i8_scaled", ptr, int_, int_, ptr, int_, ptr, ptr, ptr, int_)
        self.amx = bool(amx and lib.cm_amx())
        self._scale_sums = _bind(lib, "cm_scale_sums", ptr, int_, int_, ptr, ptr, ptr, int_)
        self._rotq = _bind(lib, "cm_rotate_quantize", ptr, int_, int_, int_, int_, float_, ptr, ptr, int_)
        self._norm = _bind(lib, "cm_rms_norm_bf16", ptr, int_, int_, ptr, float_, ptr, int_)
        self._rope = _bind(lib, "cm_rope_bf16", ptr, int_, int_, ptr, ptr)
        self._attend = _bind(lib, "cm_attend_one", ptr, int_, ptr, ptr, int_, int_, int_, ctypes.c_long, float_, ptr,
                             int_)
        long_ = ctypes.c_long
        self._silu_mul = _bind(lib, "cm_silu_mul_bf16", ptr, ptr, long_, ptr, int_)
        self._attend_rows = _bind(lib, "cm_attend_rows", ptr, int_, int_, int_, int_, ptr, ptr, int_, int_, ptr, ptr,
                                  ptr, int_, int_, long_, long_, ptr, ptr, ptr, float_, ptr, int_)

    def scale_sums(self, sums: torch.Tensor, row_scale: torch.Tensor, col_scale: torch.Tensor) -> torch.Tensor:
        """The scaled epilogue over int32 ``sums`` (m, n) made elsewhere (``torch._int_mm``'s): bfloat16 (m, n), bit
        for bit ``sums.float().mul_(row_scale).mul_(col_scale).to(torch.bfloat16)`` (:func:`_scaled_check`'s
        scales), in one pass (gemv.c's ``cm_scale_sums``). Raises ValueError on inputs it does not take."""
        m, n = sums.shape
        if (sums.dtype != torch.int32 or not sums.is_contiguous() or sums.device.type != "cpu"
                or row_scale is None or not _scaled_check(row_scale, col_scale, m, n)):
            raise ValueError(f"scale_sums: sums {tuple(sums.shape)} {sums.dtype}: not an input this kernel takes")
        out = torch.empty(m, n, dtype=torch.bfloat16)
        if self._scale_sums(sums.data_ptr(), m, n, row_scale.data_ptr(), col_scale.data_ptr(), out.data_ptr(),
                            torch.get_num_threads()) != 0:
            raise ValueError(f"scale_sums: sums {tuple(sums.shape)}: refused by the kernel")
        return out

    def rotate_quantize(self, x: torch.Tensor, block: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of ``x`` (m, k), bfloat16 or float32, contiguous on the CPU, rotated by the fast
        Walsh-Hadamard transform in blocks of ``block`` (a power of two, 2-256, dividing k) times ``scale``
        (float32), and quantized per row: int8 (m, k) and the steps float32 (m, 1), bit for bit
        :func:`~.quant.walsh_hadamard` followed by :func:`~.quant.quantized_input`'s rounding (gemv.c's
        ``cm_rotate_quantize``) for finite values (a row holding NaN or infinity, or overflowing to it, has a
        NaN or infinite step and meaningless int8 values, which differ from torch's). Raises ValueError on an input it does not take (callers check first)."""
        m, k = x.shape
        if (x.dtype not in (torch.bfloat16, torch.float32) or not x.is_contiguous() or x.device.type != "cpu"
                or block < 2 or block > 256 or block & (block - 1) or k % block):
            raise ValueError(f"rotate_quantize: x {tuple(x.shape)} {x.dtype}, block {block}: not an input this "
                             "kernel takes")
        q = torch.empty(m, k, dtype=torch.int8)
        step = torch.empty(m, 1, dtype=torch.float32)
        if self._rotq(x.data_ptr(), int(x.dtype == torch.bfloat16), m, k, block, scale, q.data_ptr(),
                      step.data_ptr(), torch.get_num_threads()) != 0:
            raise ValueError(f"rotate_quantize: x {tuple(x.shape)}, block {block}: refused by the kernel")
        return q, step

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """The root-mean-square norm of the rows of ``x`` bfloat16 (..., d), contiguous on the CPU, times
        ``weight`` bfloat16 (d,): bfloat16 (..., d), :class:`~.llama.RMSNorm`'s operations but for the order of
        the mean's float32 additions (gemv.c's ``cm_rms_norm_bf16``). Uses torch's thread count from 64 rows.
        Raises ValueError on inputs it does not take."""
        d = x.shape[-1] if x.dim() else 0
        if (x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or weight.shape != (d,) or d == 0
                or not x.is_contiguous() or not weight.is_contiguous() or x.device.type != "cpu"
                or weight.device.type != "cpu"):
            raise ValueError(f"rms_norm: x {tuple(x.shape)} {x.dtype}, weight {tuple(weight.shape)} {weight.dtype}: "
                             "not an input this kernel takes")
        out = torch.empty_like(x)
        if self._norm(x.data_ptr(), x.numel() // d, d, weight.data_ptr(), eps, out.data_ptr(),
                      torch.get_num_threads()) != 0:
            raise ValueError(f"rms_norm: x {tuple(x.shape)}: refused by the kernel")
        return out

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """The rotary embedding of ``x`` bfloat16, contiguous on the CPU, in place, as vectors of d entries (its
        heads), by ``cos`` and ``sin`` bfloat16, d entries each, contiguous: bit for bit torch's ``(x * cos) +
        (rotate_half(x) * sin)`` in bfloat16 (gemv.c's ``cm_rope_bf16``); returns ``x``. Raises ValueError on
        inputs it does not take."""
        d = cos.numel()
        if (d == 0 or x.numel() % d or x.dtype != torch.bfloat16 or cos.dtype != torch.bfloat16
                or sin.dtype != torch.bfloat16 or not (x.is_contiguous() and cos.is_contiguous() and sin.is_contiguous())
                or sin.numel() != d or x.device.type != "cpu" or cos.device.type != "cpu"
                or sin.device.type != "cpu"
                or self._rope(x.data_ptr(), x.numel() // d, d, cos.data_ptr(), sin.data_ptr()) != 0):
            raise ValueError(f"rope: x {tuple(x.shape)} {x.dtype}, cos {tuple(cos.shape)} {cos.dtype}: not an input "
                             "this kernel takes")
        return x

    def attend_one(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scaling: float) -> torch.Tensor:
        """One query token's attention: ``q`` bfloat16 (heads x head_dim,) in any shape, contiguous; ``keys``
        and ``values`` bfloat16 (1, kv_heads, tokens, head_dim), each head's tokens contiguous, the same
        strides; ``heads`` a multiple of ``kv_heads`` (grouped-query attention). Returns bfloat16 (1, heads x
        head_dim): softmax(q K^T * scaling) V per head in float32 (gemv.c's ``cm_attend_one``; the values of
        :func:`~.llama._one_query` up to float32 rounding). Uses torch's thread count. Raises ValueError on
        inputs it does not take."""
        if keys.dim() != 4 or keys.shape[3] == 0:
            raise ValueError(f"attend_one: q {tuple(q.shape)} {q.dtype}, keys {tuple(keys.shape)} {keys.dtype}: "
                             "not an input this kernel takes")
        _, kv_heads, n, d = keys.shape
        heads = q.numel() // d
        if (q.dtype != torch.bfloat16 or keys.dtype != torch.bfloat16 or values.dtype != torch.bfloat16
                or keys.shape != values.shape or keys.stride() != values.stride() or keys.shape[0] != 1
                or not q.is_contiguous() or heads * d != q.numel() or heads % kv_heads or keys.stride(3) != 1
                or (n > 1 and keys.stride(2) != d) or (kv_heads > 1 and keys.stride(1) < n * d)
                or q.device.type != "cpu" or keys.device.type != "cpu" or values.device.type != "cpu"):
            raise ValueError(f"attend_one: q {tuple(q.shape)} {q.dtype}, keys {tuple(keys.shape)} {keys.dtype}: "
                             "not an input this kernel takes")
        out = torch.empty(1, heads * d, dtype=torch.bfloat16)
        stride = keys.stride(1) if kv_heads > 1 else n * d
        if self._attend(q.data_ptr(), heads, keys.data_ptr(), values.data_ptr(), kv_heads, n, d, stride, scaling,
                        out.data_ptr(), torch.get_num_threads()) != 0:
            raise ValueError(f"attend_one: q {tuple(q.shape)}, keys {tuple(keys.shape)}: refused by the kernel")
        return out

    def silu_mul(self, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor | None:
        """The gated MLP's ``F.silu(g) * u`` for ``g`` and ``u`` bfloat16 of one shape, contiguous on the CPU, in one
        pass (gemv.c's ``cm_silu_mul_bf16``): bfloat16, torch's two roundings with exp's last bit its own (not
        always the same bits). None where the library was built without AVX-512 (the caller keeps torch's).
        Uses torch's thread count. Raises ValueError on inputs it does not take."""
        if (g.dtype != torch.bfloat16 or u.dtype != torch.bfloat16 or g.shape != u.shape or not g.is_contiguous()
                or not u.is_contiguous() or g.device.type != "cpu" or u.device.type != "cpu"):
            raise ValueError(f"silu_mul: g {tuple(g.shape)} {g.dtype}, u {tuple(u.shape)} {u.dtype}: not an input "
                             "this kernel takes")
        out = torch.empty_like(g)
        if self._silu_mul(g.data_ptr(), u.data_ptr(), g.numel(), out.data_ptr(), torch.get_num_threads()) != 0:
            return None
        return out

    def attend_rows(self, q: torch.Tensor, base_k: torch.Tensor | None, base_v: torch.Tensor | None,
                    on_base: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, token_row: torch.Tensor,
                    offsets: torch.Tensor, slots: torch.Tensor, scaling: float) -> torch.Tensor:
        """A batched step's attention, packed tokens over a shared base and their rows' own slots (gemv.c's
        ``cm_attend_rows``): ``q`` bfloat16 (tokens, heads, head_dim), contiguous; ``base_k`` and ``base_v``
        float32 (kv_heads, B, head_dim), the keys and values every token with ``on_base`` reads first, or both
        None (no base; the keys go to the kernel transposed, padded to a multiple of :data:`ATTEND_KEYS`);
        ``on_base`` uint8 (tokens,), which tokens attend to the base; ``keys``/``values`` float32 buffers
        (rows, kv_heads, slots, head_dim), the same strides, each head's slots contiguous; ``token_row``
        int32 (tokens,), each token's buffer row; ``offsets`` int32 (tokens + 1,) and ``slots`` int32: token
        ``t`` attends to slots ``slots[offsets[t]:offsets[t + 1]]`` of its row after the base. Returns bfloat16
        (tokens, heads x head_dim): softmax(q K^T * scaling) V per head in float32, the values of
        :func:`~callmaybe.runtime.decoding.rowpass._attend` up to float32 rounding. Uses torch's thread count.
        Raises ValueError on inputs it does not take (a slot or row out of range, a token attending to
        nothing, a token's slots not the start of the next one's of its row: the kernel gathers a run of a row's
        tokens' keys once)."""
        tokens = q.shape[0] if q.dim() == 3 else -1
        bad = (q.dim() != 3 or keys.dim() != 4 or q.dtype != torch.bfloat16 or keys.dtype != torch.float32
               or values.dtype != torch.float32 or keys.shape != values.shape or keys.stride() != values.stride()
               or not q.is_contiguous() or keys.stride(3) != 1 or keys.stride(2) != keys.shape[3]
               or keys.shape[3] != q.shape[2] or keys.shape[1] < 1 or q.shape[1] % keys.shape[1]
               or any(t.dtype != torch.int32 or not t.is_contiguous() for t in (token_row, offsets, slots))
               or on_base.dtype != torch.uint8 or not on_base.is_contiguous() or on_base.shape != (tokens,)
               or token_row.shape != (tokens,) or offsets.shape != (tokens + 1,) or slots.dim() != 1
               or slots.shape[0] != int(offsets[-1])
               or (base_k is None) != (base_v is None)
               or any(t.device.type != "cpu" for t in (q, keys, values, token_row, offsets, slots, on_base)))
        kv_heads, d = (keys.shape[1], keys.shape[3]) if keys.dim() == 4 else (0, 0)
        size = padded = 0
        base_kt = None
        if not bad and base_k is not None:
            size = base_v.shape[1] if base_v.dim() == 3 else -1
            bad = (base_k.dtype != torch.float32 or base_v.dtype != torch.float32 or base_v.shape != (kv_heads, size, d)
                   or base_k.shape != base_v.shape or base_k.device.type != "cpu" or base_v.device.type != "cpu")
            if not bad:
                padded = size + (-size % ATTEND_KEYS)
                base_kt = torch.nn.functional.pad(base_k.transpose(1, 2), (0, padded - size)).contiguous()
                base_v = base_v.contiguous()
        if bad:
            raise ValueError(f"attend_rows: q {tuple(q.shape)} {q.dtype}, keys {tuple(keys.shape)} {keys.dtype}: "
                             "not an input this kernel takes")
        out = torch.empty(tokens, q.shape[1] * d, dtype=torch.bfloat16)
        if self._attend_rows(q.data_ptr(), tokens, q.shape[1], kv_heads, d,
                             base_kt.data_ptr() if base_kt is not None else None,
                             base_v.data_ptr() if base_v is not None else None, size, padded, on_base.data_ptr(),
                             keys.data_ptr(), values.data_ptr(), keys.shape[0], keys.shape[2], keys.stride(0),
                             keys.stride(1), token_row.data_ptr(), offsets.data_ptr(), slots.data_ptr(), scaling,
                             out.data_ptr(), torch.get_num_threads()) != 0:
            raise ValueError(f"attend_rows: q {tuple(q.shape)}, keys {tuple(keys.shape)}: refused by the kernel (a "
                             "row or slot out of range, a token attending to nothing, a token's slots not the start "
                             "of the next one's of its row, or no memory)")
        return out

    def bound_gemv(self, w: torch.Tensor, wsums: torch.Tensor, col_scale: torch.Tensor):
        """:meth:`gemv`'s scaled product bound to one weight matrix: ``product(x, row_scale)`` for ``x`` int8 (m,
        k) and ``row_scale`` float32 (m, 1), both contiguous on the CPU, 1 <= m <= :attr:`max_rows`, returns
        what ``gemv(x, w, wsums, row_scale, col_scale)`` returns, without checking them again (the caller
        does: :meth:`.quant.Int8Linear._int8_product`). ``w``, ``wsums`` and ``col_scale`` are checked here,
        once; the product keeps their storages alive and reads them as they are at each call (the caller binds
        again when they are replaced). Raises ValueError on what :meth:`gemv` refuses."""
        n, k = w.shape
        if (w.dtype != torch.int8 or wsums.dtype != torch.int32 or wsums.shape != (n,) or not w.is_contiguous()
                or not wsums.is_contiguous() or w.device.type != "cpu" or wsums.device.type != "cpu"
                or not 1 <= k <= MAX_K or n < 1 or not _scaled_check(torch.empty(1, 1), col_scale, 1, n)):
            raise ValueError(f"bound_gemv: w {tuple(w.shape)} {w.dtype}, wsums {tuple(wsums.shape)} {wsums.dtype}: "
                             "not a matrix this kernel takes")
        return _bind_gemv(self._gemv_scaled, w, wsums, col_scale)

    def takes_gemm(self, m: int, k: int, n: int) -> bool:
        """Whether :meth:`gemm` takes an (m, k) by (n, k) product: AMX granted, m >= :data:`AMX_MIN_ROWS`, k a
        multiple of 64 up to :data:`MAX_K`, n a multiple of 32."""
        return self.amx and m >= AMX_MIN_ROWS and 0 < k <= MAX_K and k % 64 == 0 and n % 32 == 0

    def gemm(self, x: torch.Tensor, w: torch.Tensor, row_scale: torch.Tensor | None = None,
             col_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` int8 (m, k) times ``w.t()`` for ``w`` int8 (n, k), both contiguous on the CPU, with AMX tiles
        (gemv.c's ``cm_gemm_i8``): int32 (m, n), equal to ``torch._int_mm(x, w.t())``; with ``row_scale``
        float32 (m, 1) and ``col_scale`` float32 (n,), the scaled epilogue instead (:func:`_scaled_check`).
        Uses torch's thread count. Raises ValueError on a product :meth:`takes_gemm` refuses, or dtypes and
        layouts it does not take (callers check first: this is a guard, not a path)."""
        if x.dim() != 2 or w.dim() != 2:
            raise ValueError(f"gemm: x {tuple(x.shape)} {x.dtype}, w {tuple(w.shape)} {w.dtype}: not a product "
                             "this kernel takes (two matrices)")
        m, k = x.shape
        n = w.shape[0]
        if (x.dtype != torch.int8 or w.dtype != torch.int8 or w.shape[1] != k or not x.is_contiguous()
                or not w.is_contiguous() or x.device.type != "cpu" or w.device.type != "cpu"
                or not self.takes_gemm(m, k, n) or not _scaled_check(row_scale, col_scale, m, n)):
            raise ValueError(f"gemm: x {tuple(x.shape)} {x.dtype}, w {tuple(w.shape)} {w.dtype}: not a product "
                             "this kernel takes")
        threads = torch.get_num_threads()
        if row_scale is None:
            out = torch.empty(m, n, dtype=torch.int32)
            status = self._gemm(x.data_ptr(), m, k, w.data_ptr(), n, out.data_ptr(), threads)
        else:
            out = torch.empty(m, n, dtype=torch.bfloat16)
            status = self._gemm_scaled(x.data_ptr(), m, k, w.data_ptr(), n, row_scale.data_ptr(),
                                       col_scale.data_ptr(), out.data_ptr(), threads)
        if status != 0:
            raise ValueError(f"gemm: x {tuple(x.shape)}, w {tuple(w.shape)}: refused by the kernel")
        return out

    def row_sums(self, w: torch.Tensor) -> torch.Tensor:
        """The sums of the rows of the int8 matrix ``w`` (n, k), contiguous on the CPU: int32 (n,), what
        :meth:`gemv` needs. Reads ``w`` once and makes no wider copy of it (``w.sum(1, dtype=torch.int32)``
        makes an int32 copy of the whole matrix first: 0.9 GB for Qwen2.5's tied output layer). Raises
        ValueError on a matrix it does not take."""
        n, k = w.shape
        if w.dtype != torch.int8 or not w.is_contiguous() or w.device.type != "cpu":
            raise ValueError(f"row_sums: w {tuple(w.shape)} {w.dtype}: not a matrix this kernel takes")
        out = torch.empty(n, dtype=torch.int32)
        if self._sums(w.data_ptr(), n, k, out.data_ptr(), torch.get_num_threads()) != 0:
            raise ValueError(f"row_sums: w {tuple(w.shape)}: out of the kernel's range")
        return out

    def gemv(self, x: torch.Tensor, w: torch.Tensor, wsums: torch.Tensor, row_scale: torch.Tensor | None = None,
             col_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` int8 (m, k), 1 <= m <= :attr:`max_rows`, times ``w.t()`` for ``w`` int8 (n, k), both contiguous
        on the CPU, with ``wsums`` int32 (n,) the sums of ``w``'s rows (:meth:`row_sums`): int32 (m, n), equal to
        ``torch._int_mm(x, w.t())``; with ``row_scale`` float32 (m, 1) and ``col_scale`` float32 (n,), the scaled
        epilogue instead (:func:`_scaled_check`). Uses torch's thread count. Raises ValueError on shapes, dtypes
        or layouts it does not take (callers check first: this is a guard, not a path)."""
        if x.dim() != 2 or w.dim() != 2:
            raise ValueError(f"gemv: x {tuple(x.shape)} {x.dtype}, w {tuple(w.shape)} {w.dtype}: not a product this "
                             "kernel takes (two matrices)")
        m, k = x.shape
        n = w.shape[0]
        if (x.dtype != torch.int8 or w.dtype != torch.int8 or wsums.dtype != torch.int32 or w.shape[1] != k
                or wsums.shape != (n,) or not (x.is_contiguous() and w.is_contiguous() and wsums.is_contiguous())
                or not x.device.type == w.device.type == wsums.device.type == "cpu"
                or not 1 <= m <= self.max_rows or not _scaled_check(row_scale, col_scale, m, n)):
            raise ValueError(f"gemv: x {tuple(x.shape)} {x.dtype}, w {tuple(w.shape)} {w.dtype}, "
                             f"wsums {tuple(wsums.shape)} {wsums.dtype}: not a product this kernel takes")
        threads = torch.get_num_threads()
        if row_scale is None:
            out = torch.empty(m, n, dtype=torch.int32)
            status = self._fn(x.data_ptr(), m, k, w.data_ptr(), wsums.data_ptr(), n, out.data_ptr(), threads)
        else:
            out = torch.empty(m, n, dtype=torch.bfloat16)
            status = self._gemv_scaled(x.data_ptr(), m, k, w.data_ptr(), wsums.data_ptr(), n, row_scale.data_ptr(),
                                       col_scale.data_ptr(), out.data_ptr(), threads)
        if status != 0:
            raise ValueError(f"gemv: x {tuple(x.shape)}, w {tuple(w.shape)}: out of the kernel's range")
        return out


def _bind_gemv(fn, w: torch.Tensor, wsums: torch.Tensor, col_scale: torch.Tensor):
    """:meth:`Kernel.bound_gemv`'s closure over the C function ``fn`` and the three tensors' addresses."""
    n, k = w.shape
    w_ptr, sums_ptr, scale_ptr = w.data_ptr(), wsums.data_ptr(), col_scale.data_ptr()
    empty, bf16, threads = torch.empty, torch.bfloat16, torch.get_num_threads
    # the memory the pointers name, kept alive while the product is (a tensor's storage swapped through .data
    # must not leave them pointing at freed memory)
    kept = (w.untyped_storage(), wsums.untyped_storage(), col_scale.untyped_storage())

    def product(x: torch.Tensor, row_scale: torch.Tensor) -> torch.Tensor:
        m = x.shape[0]
        out = empty(m, n, dtype=bf16)
        if fn(x.data_ptr(), m, k, w_ptr, sums_ptr, n, row_scale.data_ptr(), scale_ptr, out.data_ptr(), threads()):
            raise ValueError(f"gemv: x {tuple(x.shape)}, w {(n, k)}: out of the kernel's range")
        return out

    product.kept = kept
    return product


def _scaled_check(row_scale: torch.Tensor | None, col_scale: torch.Tensor | None, m: int, n: int) -> bool:
    """Whether the scales of the scaled epilogue fit an (m, n) product: both None (int32 sums), or ``row_scale``
    float32 (m, 1) or (m,) and ``col_scale`` float32 (n,), contiguous on the CPU. With them the product is
    bfloat16 (m, n), ``(sums.float() * row_scale) * col_scale`` rounded to bfloat16 to nearest even: bit for bit
    ``sums.float().mul_(row_scale).mul_(col_scale).to(torch.bfloat16)``, NaN included (gemv.c's
    ``cm_scaled``)."""
    if row_scale is None and col_scale is None:
        return True
    return (row_scale is not None and col_scale is not None
            and row_scale.dtype == torch.float32 and col_scale.dtype == torch.float32
            and tuple(row_scale.shape) in ((m, 1), (m,)) and tuple(col_scale.shape) == (n,)
            and row_scale.is_contiguous() and col_scale.is_contiguous()
            and row_scale.device.type == "cpu" and col_scale.device.type == "cpu")


_compiler = compiler_command
_cpu_flags = cpu_flags


def _key(cc: list[str]) -> str:
    """What the built library depends on: the source, the flags, the compiler's command line ($CC, arguments
    included) and version, the CPU's flags. Raises OSError where the CPU's flags cannot be read (a library
    built with ``-march=native`` must not be found later by another CPU sharing the cache)."""
    cpu = _cpu_flags()
    if not cpu:
        raise OSError("the CPU's flags cannot be read from /proc/cpuinfo")
    return build_key(cc, SOURCE.read_bytes(), " ".join(FLAGS).encode(), cpu.encode())


def build(folder: Path | None = None) -> Path:
    """The built library for this machine: found in ``folder`` (default ``<cache>/kernels``) with its SHA-256
    as recorded, or compiled there now (:func:`~callmaybe.core.cbuild.build_library`: a damaged file built
    again with one warning, a killed build leaving no partial library, builds taking turns on a lock file).
    Raises OSError or subprocess.SubprocessError (no compiler, a failed or timed-out build: the compiler's
    last lines in the message)."""
    cc = _compiler()
    folder = folder or cache_dir("kernels")
    return build_library(SOURCE, FLAGS, folder / f"gemv-{_key(cc)}.so", cc, BUILD_TIMEOUT, log)


def kernel() -> Kernel | None:
    """The kernel for int8 products, built and loaded at the first call (1-3 s to compile), or None where it is
    unavailable (see the module docstring; the reason is logged once). Never raises."""
    loaded = rotation()
    return loaded if loaded is not None and loaded.products else None


def rotation() -> Kernel | None:
    """The library for :meth:`Kernel.rotate_quantize` alone: :func:`kernel`'s, or, where it was built without
    AVX-512 VNNI (its products slower than torch's), the same library for its rotation (plain C, still 3-10x
    fewer operations than torch's); None where it could not be built or ``CALLMAYBE_KERNELS=torch``."""
    if _loaded:
        return _loaded[0]
    with _lock:
        if _loaded:
            return _loaded[0]
        loaded = None
        choice = os.environ.get("CALLMAYBE_KERNELS", "").strip().lower()
        if choice not in ("", "torch", "vnni"):
            log.warning("CALLMAYBE_KERNELS=%r is not 'torch' or 'vnni': ignored, the default kernels used",
                        os.environ["CALLMAYBE_KERNELS"])
            choice = ""
        if choice == "torch":
            log.info("int8 kernel: CALLMAYBE_KERNELS=torch, torch's kernels used")
        else:
            try:
                path = build()
                lib = open_library(path, ("cm_simd",))  # not a library, or not this one: built again next run
                simd = lib.cm_simd()
                if simd == 2:
                    log.info("int8 kernel: AVX2 (no AVX-512 VNNI here)")
                    loaded = Kernel(lib, path, amx=False)
                elif simd != 1:
                    log.info("int8 kernel: %s has neither AVX-512 VNNI nor AVX2; torch's kernels used for products",
                             path)
                    loaded = Kernel(lib, path, amx=False, products=False)
                else:
                    loaded = Kernel(lib, path, amx=choice != "vnni")
                    if not loaded.amx:
                        log.info("int8 kernel: AVX-512 VNNI only (%s)", "CALLMAYBE_KERNELS=vnni" if choice == "vnni"
                                 else "no AMX, or Linux did not grant it")
            except (OSError, subprocess.SubprocessError, ValueError, AttributeError, CallmaybeError) as exc:
                # AttributeError: a library without the kernel's symbols; CallmaybeError: no kernels folder
                log.warning("int8 kernel unavailable (%s); torch's kernels used (slower; CALLMAYBE_KERNELS=torch "
                            "chooses them without this line)", exc)
        _loaded.append(loaded)
        return loaded
