"""Adversarial checks of the sixteenth session's kernels (gemv.c's scaled epilogue, cm_gemm_i8) and batch
changes: inputs where the claims were tested to the bit."""

import shutil

import pytest
import torch

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")


def _bits(t: torch.Tensor) -> list[int]:
    return [v & 0xffff for v in t.view(torch.int16).flatten().tolist()]


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
    want = (x.int() @ w.int().t()).float().mul_(row_scale).mul_(col_scale).to(torch.bfloat16)
    assert set(_bits(want[0])) == {0xffff}
    outs = []
    if m <= kernel.max_rows:
        outs.append(kernel.gemv(x, w, kernel.row_sums(w), row_scale, col_scale))
    if kernel.takes_gemm(m, k, n):
        outs.append(kernel.gemm(x, w, row_scale, col_scale))
    assert outs
    for got in outs:
        assert _bits(got) == _bits(want)
