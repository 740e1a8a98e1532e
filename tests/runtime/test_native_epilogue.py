"""The scaled epilogue (gemv.c cm_gemv_i8_scaled, cm_gemm_i8_scaled, cm_scale_sums) to the bit against torch: sums and scales of
every magnitude, and special scales (NaN, infinities, signed zeros, denormals, overflow); and the AMX kernel on
views at odd byte offsets (the sixteenth session's break test)."""


import pytest
import torch

from ..conftest import needs_cc


def _bits(t: torch.Tensor) -> list[int]:
    return [v & 0xffff for v in t.view(torch.int16).flatten().tolist()]


def _reference(x, w, row_scale, col_scale) -> torch.Tensor:
    """What quant.py computed in torch before the epilogue moved into the kernels."""
    return (x.int() @ w.int().t()).float().mul_(row_scale).mul_(col_scale).to(torch.bfloat16)


def _scaled_outputs(kernel, x, w, row_scale, col_scale) -> list[torch.Tensor]:
    """The scaled product by each kernel that takes it: gemv up to its rows, gemm where AMX takes the shape, and
    the epilogue alone (scale_sums) over the exact int32 sums, as after torch._int_mm."""
    (m, k), n = x.shape, w.shape[0]
    outs = [kernel.scale_sums((x.int() @ w.int().t()).contiguous(), row_scale, col_scale)]
    if m <= kernel.max_rows:
        outs.append(kernel.gemv(x, w, kernel.row_sums(w), row_scale, col_scale))
    if kernel.takes_gemm(m, k, n):
        outs.append(kernel.gemm(x, w, row_scale, col_scale))
    return outs


@needs_cc
@pytest.mark.parametrize("m", [1, 2, 4, 7, 14, 16, 21, 33])
def test_the_scaled_epilogue_is_torchs_to_the_bit(kernel, m):
    """Sums past 2^24 (rounded on conversion), scales of every magnitude, an inexact product (1/3), bfloat16
    ties to even: the same bits as torch's, from gemv (m <= 24; from 9 in groups of rows) and gemm (m >= 4, where AMX is granted)."""
    gen = torch.Generator().manual_seed(100 + m)
    k, n = 8960, 96
    x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
    w[0] = -128
    x[0] = -128  # the largest sum, 146,800,640 > 2^24
    row_scale = torch.rand(m, 1, generator=gen) * 10.0 ** torch.randint(-8, 3, (m, 1), generator=gen)
    col_scale = torch.rand(n, generator=gen) * 10.0 ** torch.randint(-8, 3, (n,), generator=gen)
    col_scale[1] = 1.0 / 3
    want = _reference(x, w, row_scale, col_scale)
    outs = _scaled_outputs(kernel, x, w, row_scale, col_scale)
    for got in outs:
        assert got.dtype == torch.bfloat16 and got.shape == (m, n)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16))


@needs_cc
@pytest.mark.parametrize("m", [1, 4, 17])
def test_a_nan_output_has_torchs_bits(kernel, m):
    """A NaN scale: torch's float32 -> bfloat16 conversion of a tensor writes every NaN as 0xffff (ATen's
    vectorized cvtfp32_bf16; 0x7fc0 is c10::BFloat16's scalar rounding, which a tensor conversion does not
    take), so the reference sums.float().mul_(row_scale).mul_(col_scale).to(torch.bfloat16) has 0xffff in row 0
    and its other rows finite; the kernels wrote 0x7fc0."""
    gen = torch.Generator().manual_seed(m)
    k, n = 128, 64
    x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
    row_scale = torch.rand(m, 1, generator=gen)
    row_scale[0] = float("nan")
    col_scale = torch.rand(n, generator=gen)
    want = _reference(x, w, row_scale, col_scale)
    assert set(_bits(want[0])) == {0xffff}
    outs = _scaled_outputs(kernel, x, w, row_scale, col_scale)
    for got in outs:
        assert _bits(got) == _bits(want)


@needs_cc
@pytest.mark.parametrize("m", [1, 4, 14, 16, 33])
def test_special_scales_give_torchs_bits(kernel, m):
    """Scales of 0, -0, +-inf, NaN, float32 denormals, values whose products round to bfloat16's largest finite
    or overflow, and zero sums: every output's bits equal torch's (infinities, signed zeros, denormals)."""
    specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-45, -1e-45, 1e-40,
                             1.1754942e-38, 3.4e38, -3.4e38, 1e-30, 1e30, 1.0, -1.0, 3.3895e38], dtype=torch.float32)
    gen = torch.Generator().manual_seed(300 + m)
    k, n = 128, 64
    x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
    x[m // 2] = 0
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
    row_scale = specials[torch.randint(0, len(specials), (m, 1), generator=gen)].contiguous()
    col_scale = specials[torch.randint(0, len(specials), (n,), generator=gen)].contiguous()
    want = _reference(x, w, row_scale, col_scale)
    for got in _scaled_outputs(kernel, x, w, row_scale, col_scale):
        assert _bits(got) == _bits(want)


@needs_cc
def test_the_epilogue_alone_takes_any_width_and_refuses_what_does_not_fit(kernel):
    """37 columns: two vectors of 16 and a tail of 5, the same bits; sums of another dtype or a short scale are
    refused."""
    gen = torch.Generator().manual_seed(37)
    x = torch.randint(-128, 128, (3, 640), dtype=torch.int8, generator=gen)
    w = torch.randint(-128, 128, (37, 640), dtype=torch.int8, generator=gen)
    row_scale, col_scale = torch.rand(3, 1, generator=gen), torch.rand(37, generator=gen) * 1e-3
    sums = (x.int() @ w.int().t()).contiguous()
    assert _bits(kernel.scale_sums(sums, row_scale, col_scale)) == _bits(_reference(x, w, row_scale, col_scale))
    with pytest.raises(ValueError, match=r"scale_sums: sums \(3, 37\) torch.int64: not an input this kernel takes"):
        kernel.scale_sums(sums.long(), row_scale, col_scale)
    with pytest.raises(ValueError, match="not an input this kernel takes"):
        kernel.scale_sums(sums, row_scale, col_scale[:36])


@needs_cc
@pytest.mark.parametrize("offset", [1, 3, 5, 63])
def test_gemm_reads_rows_at_any_byte_offset(kernel, offset):
    """x and w views starting ``offset`` bytes into their storage (contiguous, not 4- or 64-byte aligned)."""
    if not kernel.amx:
        pytest.skip("no AMX here")
    gen = torch.Generator().manual_seed(offset)
    m, k, n = 37, 640, 96
    x = torch.randint(-128, 128, (m * k + offset,), dtype=torch.int8, generator=gen)[offset:].view(m, k)
    w = torch.randint(-128, 128, (n * k + offset,), dtype=torch.int8, generator=gen)[offset:].view(n, k)
    assert x.storage_offset() == offset and w.storage_offset() == offset
    assert torch.equal(kernel.gemm(x, w), x.int() @ w.int().t())
