"""The AVX2 int8 kernel of runtime/model/gemv.c (product16: x widened to int16, vpmaddwd), which takes every product
on a CPU with AVX2 and no AVX-512 VNNI (Zen 2 and 3, Intel before Ice Lake), built here with ``$CC`` told not to
use AVX-512 so that it is tested on every machine with AVX2: its sums equal the exact int32 products for row
counts on and across its paths (one stream for 1-2 rows, three weight rows for 3, groups of at most 6 rows,
chunks of 24 rows), widths with and without a tail of k % 16 and k % 32, the extreme int8 values and 1-3
threads; its scaled epilogue is torch's to the bit; a rotated layer gives the same outputs as with torch's
kernels."""

import pytest
import torch
from torch import nn

from callmaybe.runtime.model import native
from callmaybe.runtime.model.quant import Int8Linear

from ..conftest import needs_cc

pytestmark = [needs_cc, pytest.mark.skipif("avx2" not in native.cpu_flags().split(), reason="the CPU has no AVX2")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The library built without AVX-512 (its AVX2 kernel), once, in an empty cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CC", "cc -mno-avx512f")
        mp.setenv("CALLMAYBE_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.delenv("CALLMAYBE_KERNELS", raising=False)
        mp.setattr(native, "_loaded", [])
        k = native.kernel()
    assert k is not None and k.kind == "avx2" and k.amx is False
    return k


@pytest.fixture
def avx2(built, monkeypatch):
    """:func:`built`, as the kernel the layers use in this test."""
    monkeypatch.setattr(native, "_loaded", [built])
    return built


def test_the_avx2_kernel_takes_any_number_of_rows(avx2):
    assert avx2.max_rows == 1 << 20
    assert avx2.takes_gemm(16, 64, 32) is False
    w = torch.zeros(4, 64, dtype=torch.int8)
    with pytest.raises(ValueError, match=r"^gemv: x \(1048577, 64\) torch.int8, w \(4, 64\) torch.int8, wsums \(4,\) "
                                         r"torch.int32: not a product this kernel takes$"):
        avx2.gemv(torch.zeros(avx2.max_rows + 1, 64, dtype=torch.int8), w, avx2.row_sums(w))


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 7, 12, 13, 23, 24, 25, 48, 49, 61])
def test_sums_are_exact(avx2, m):
    gen = torch.Generator().manual_seed(m)
    for k, n in [(16, 5), (32, 7), (48, 3), (100, 13), (1536, 31), (8, 1), (1, 4), (8960, 11), (47, 8)]:
        x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
        got = avx2.gemv(x, w, avx2.row_sums(w))
        assert got.dtype == torch.int32 and got.shape == (m, n)
        assert torch.equal(got, x.int() @ w.int().t()), (m, k, n)


def test_extreme_values_and_the_widest_sum(avx2):
    """-128 x -128 over k = 8960 (vpmaddubsw's pairs would saturate here; vpmaddwd's do not): exact."""
    k = 8960
    x = torch.full((3, k), -128, dtype=torch.int8)
    x[1] = 127
    x[2, 1::2] = 127
    w = torch.full((3, k), -128, dtype=torch.int8)
    w[1] = 127
    w[2, ::2] = 127
    got = avx2.gemv(x, w, avx2.row_sums(w))
    assert got.tolist() == [[146800640, -145653760, 573440], [-145653760, 144515840, -568960],
                            [573440, -568960, -145653760]]  # row 2: 4,480 x (16,384 - 16,256), ...


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_split_the_weights(avx2, threads):
    gen = torch.Generator().manual_seed(threads)
    x = torch.randint(-128, 128, (30, 640), dtype=torch.int8, generator=gen)
    w = torch.randint(-128, 128, (37, 640), dtype=torch.int8, generator=gen)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = avx2.gemv(x, w, avx2.row_sums(w))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(got, x.int() @ w.int().t())


@pytest.mark.parametrize("m", [1, 3, 8, 30])
def test_the_scaled_epilogue_is_torchs_to_the_bit(avx2, m):
    gen = torch.Generator().manual_seed(50 + m)
    k, n = 1536, 40
    x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
    row_scale = torch.rand(m, 1, generator=gen) * 1e-3
    col_scale = torch.rand(n, generator=gen) * 3
    got = avx2.gemv(x, w, avx2.row_sums(w), row_scale, col_scale)
    want = (x.int() @ w.int().t()).float().mul_(row_scale).mul_(col_scale).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16 and torch.equal(got.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("rotated", [True, False])
def test_a_layer_gives_the_same_outputs_as_with_torchs_kernels(avx2, monkeypatch, rotated):
    torch.manual_seed(7)
    q = Int8Linear.from_linear(nn.Linear(512, 96, bias=True), rotated=rotated)
    xs = [torch.randn(m, 512) for m in (1, 2, 5, 40)]
    with_kernel = [q(x) for x in xs]
    monkeypatch.setattr(native, "_loaded", [None])
    q._bound = None
    assert all(torch.equal(a, q(x)) for a, x in zip(with_kernel, xs))


def test_inputs_it_does_not_take_are_refused_not_misread(avx2):
    """A helper's break test: a meta (not CPU) x or w crashed the process (SIGSEGV), a 3-D w was read as its
    first n x k bytes, a 1-D w raised IndexError, a (1, m) row scale was taken for (m, 1)."""
    w = torch.randint(-128, 128, (5, 32), dtype=torch.int8)
    x = torch.ones(3, 32, dtype=torch.int8)
    sums = avx2.row_sums(w)
    for bad_x, bad_w, bad_sums in [(torch.empty(3, 32, dtype=torch.int8, device="meta"), w, sums),
                                   (x, w.to("meta"), sums), (x, w, sums.to("meta"))]:
        with pytest.raises(ValueError, match="not a product this kernel takes$"):
            avx2.gemv(bad_x, bad_w, bad_sums)
    with pytest.raises(ValueError, match=r"^gemv: x \(3, 32\) torch.int8, w \(5, 32, 2\) torch.int8: not a product "
                                         r"this kernel takes \(two matrices\)$"):
        avx2.gemv(x, torch.zeros(5, 32, 2, dtype=torch.int8), sums)
    with pytest.raises(ValueError, match=r"^gemv: x \(3, 32\) torch.int8, w \(160,\) torch.int8: not a product "
                                         r"this kernel takes \(two matrices\)$"):
        avx2.gemv(x, w.view(-1), sums)
    with pytest.raises(ValueError, match="not a product this kernel takes$"):
        avx2.gemv(x, w, sums, torch.ones(1, 3), torch.ones(5))
    assert avx2.gemv(x, w, sums, torch.ones(3), torch.ones(5)).shape == (3, 5)  # (m,) is taken


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rotate_quantize_in_avx2_gives_the_bits_of_torchs(built, dtype):
    """The AVX2 transform of 256-entry blocks and its rounding: the bits of quant.walsh_hadamard and torch's
    per-row quantization (outlier channels, a zero row, the model's widths); a NaN in a row makes its step
    NaN."""
    from .test_native import _torch_rotate_quantize
    from callmaybe.runtime.model import quant

    gen = torch.Generator().manual_seed(11)
    for k in (256, 1536, 8960, 512 + 256):
        x = torch.randn(5, k, generator=gen) * torch.rand(5, k, generator=gen) ** 6 * 50
        x[1] = 0
        x[2, 7] = 3000.0
        x = x.to(dtype)
        q, step = built.rotate_quantize(x, 256, quant.hadamard_scale(256))
        want_q, want_step = _torch_rotate_quantize(x, 256)
        assert torch.equal(q, want_q) and torch.equal(step.view(torch.int32), want_step.view(torch.int32)), k
    x = torch.ones(1, 512)
    x[0, 3] = float("nan")
    _, step = built.rotate_quantize(x, 256, quant.hadamard_scale(256))
    assert step.isnan().all()
