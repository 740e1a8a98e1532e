"""The AMX tile kernel of runtime/model/gemv.c (cm_gemm_i8, Kernel.gemm): its sums equal torch._int_mm's exactly
for row counts across and between its 16-row tiles, widths and heights at its 64 and 32 multiples, the extreme
int8 values and 1-3 threads; Int8Linear routes products to it from AMX_MIN_ROWS rows and gives the same outputs
as with torch's kernels; shapes it does not take are refused; CALLMAYBE_KERNELS=vnni and a build without AMX
keep the AVX-512 VNNI kernel alone."""

import logging

import pytest
import torch
from torch import nn

from callmaybe.runtime.model import native
from callmaybe.runtime.model.quant import Int8Linear

from ..conftest import needs_cc


@pytest.fixture(scope="module")
def amx(kernel):
    if not kernel.amx:
        pytest.skip("no AMX here (the CPU lacks it, or Linux did not grant it)")
    return kernel


@needs_cc
@pytest.mark.parametrize("m", [4, 5, 15, 16, 17, 31, 32, 33, 48, 64, 65, 100])
def test_sums_equal_torch_int_mm(amx, m):
    gen = torch.Generator().manual_seed(m)
    for k, n in [(64, 32), (128, 96), (1536, 256), (8960, 64), (192, 160)]:
        x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
        got = amx.gemm(x, w)
        assert got.dtype == torch.int32 and got.shape == (m, n)
        assert torch.equal(got, torch._int_mm(x, w.t())), (m, k, n)


@needs_cc
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_split_the_weights_and_the_tiles(amx, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(threads)
        x = torch.randint(-128, 128, (37, 640), dtype=torch.int8, generator=gen)
        w = torch.randint(-128, 128, (96, 640), dtype=torch.int8, generator=gen)  # 3 blocks of 32 weight rows
        assert torch.equal(amx.gemm(x, w), x.int() @ w.int().t())
    finally:
        torch.set_num_threads(before)


@needs_cc
def test_extreme_values_and_the_widest_sum(amx):
    """-128 x -128 over k = 8960 (the largest width of the default model): 146,800,640, exact."""
    k = 8960
    x = torch.full((4, k), -128, dtype=torch.int8)
    x[1] = 127
    x[3, 1::2] = 127
    w = torch.full((32, k), -128, dtype=torch.int8)
    w[1] = 127
    w[2, ::2] = 127
    got = amx.gemm(x, w)
    assert got[:, :3].tolist() == [[146800640, -145653760, 573440], [-145653760, 144515840, -568960],
                                   [146800640, -145653760, 573440], [573440, -568960, -145653760]]
    assert torch.equal(got[:, 3:], got[:, :1].expand(4, 29))
    assert torch.equal(got, (x.long() @ w.long().t()).int())


@needs_cc
def test_products_it_does_not_take_are_refused(amx):
    x = torch.zeros(16, 64, dtype=torch.int8)
    assert (amx.takes_gemm(16, 64, 32), amx.takes_gemm(3, 64, 32), amx.takes_gemm(16, 100, 32),
            amx.takes_gemm(16, 64, 48), amx.takes_gemm(16, 65600, 32)) == (True, False, False, False, False)
    with pytest.raises(ValueError, match=r"^gemm: x \(16, 64\) torch.int8, w \(48, 64\) torch.int8: not a product "
                                         "this kernel takes$"):
        amx.gemm(x, torch.zeros(48, 64, dtype=torch.int8))
    with pytest.raises(ValueError, match=r"^gemm: x \(3, 64\) torch.int8"):
        amx.gemm(x[:3], torch.zeros(32, 64, dtype=torch.int8))
    with pytest.raises(ValueError, match=r"^gemm: x \(16, 64\) torch.float32"):
        amx.gemm(torch.zeros(16, 64), torch.zeros(32, 64, dtype=torch.int8))
    with pytest.raises(ValueError, match="not a product this kernel takes"):
        amx.gemm(x, torch.zeros(32, 128, dtype=torch.int8)[:, :64])  # not contiguous
    with pytest.raises(ValueError, match="not a product this kernel takes"):  # a column scale short
        amx.gemm(x, torch.zeros(32, 64, dtype=torch.int8), torch.ones(16, 1), torch.ones(31))


@needs_cc
@pytest.mark.parametrize("rotated", [True, False])
def test_a_layer_routes_to_each_kernel_and_gives_the_same_outputs(amx, monkeypatch, rotated):
    torch.manual_seed(7)
    q = Int8Linear.from_linear(nn.Linear(512, 96, bias=True), rotated=rotated)
    calls = []
    monkeypatch.setattr(native.Kernel, "gemm", lambda self, x, *rest, f=native.Kernel.gemm: calls.append(
        ("gemm", x.shape[0])) or f(self, x, *rest))
    monkeypatch.setattr(native.Kernel, "gemv", lambda self, x, *rest, f=native.Kernel.gemv: calls.append(
        ("gemv", x.shape[0])) or f(self, x, *rest))
    same = {}
    for rows in (1, 3, 4, 14, 15, 40):
        x = torch.randn(rows, 512)
        monkeypatch.setattr(native, "_loaded", [amx])
        with_kernel = q(x)
        monkeypatch.setattr(native, "_loaded", [None])
        same[rows] = torch.equal(with_kernel, q(x))
    assert same == {1: True, 3: True, 4: True, 14: True, 15: True, 40: True}
    if rotated:
        assert calls == [("gemv", 1), ("gemv", 3), ("gemm", 4), ("gemm", 14), ("gemm", 15), ("gemm", 40)]
    else:  # the two-level product (quant.py): two int8 rows for each row of x
        assert calls == [("gemv", 2), ("gemm", 6), ("gemm", 8), ("gemm", 28), ("gemm", 30), ("gemm", 80)]


@needs_cc
def test_shapes_off_the_tiles_keep_the_vnni_kernel_or_torch(amx, monkeypatch):
    """n = 33 (not a multiple of 32): 8 rows go to gemv, 20 to torch._int_mm; both exact."""
    torch.manual_seed(8)
    q = Int8Linear.from_linear(nn.Linear(128, 33, bias=False), rotated=False)
    monkeypatch.setattr(native.Kernel, "gemm", lambda *a: pytest.fail("gemm called for n = 33"))
    for rows in (8, 20):
        x = torch.randn(rows, 128)
        monkeypatch.setattr(native, "_loaded", [amx])
        with_kernel = q(x)
        monkeypatch.setattr(native, "_loaded", [None])
        assert torch.equal(with_kernel, q(x))


def _kernel_logged(caplog) -> native.Kernel:
    """native.kernel() tried with its INFO lines captured; the test is skipped where there is no AVX-512 VNNI
    kernel (the CPU lacks it: the AVX2 kernel, or none)."""
    with caplog.at_level(logging.INFO, logger="callmaybe.runtime.model.native"):
        k = native.kernel()
    if k is None or k.kind != "vnni":
        pytest.skip("the AVX-512 VNNI kernel is unavailable here")
    return k


@needs_cc
def test_kernels_vnni_keeps_the_vnni_kernel_alone(fresh, monkeypatch, caplog):
    monkeypatch.setenv("CALLMAYBE_KERNELS", "vnni")
    k = _kernel_logged(caplog)
    assert k.amx is False and k.takes_gemm(16, 64, 32) is False
    assert "int8 kernel: AVX-512 VNNI only (CALLMAYBE_KERNELS=vnni)" in caplog.text


@needs_cc
def test_a_build_without_amx_keeps_the_vnni_kernel(fresh, monkeypatch, caplog):
    """A compiler told not to use AMX (``$CC`` with -mno-amx-tile): cm_gemm_i8 is the refusing stand-in."""
    monkeypatch.setenv("CC", "cc -mno-amx-tile -mno-amx-int8")
    k = _kernel_logged(caplog)
    assert k.amx is False
    assert "int8 kernel: AVX-512 VNNI only (no AMX, or Linux did not grant it)" in caplog.text
    x = torch.ones(16, 64, dtype=torch.int8)
    out = torch.empty(16, 32, dtype=torch.int32)
    assert k._gemm(x.data_ptr(), 16, 64, torch.ones(32, 64, dtype=torch.int8).data_ptr(), 32, out.data_ptr(), 1) == -1


@needs_cc
def test_an_unknown_kernels_choice_is_said_and_ignored(fresh, monkeypatch, caplog):
    monkeypatch.setenv("CALLMAYBE_KERNELS", "garbage")
    with caplog.at_level(logging.WARNING, logger="callmaybe.runtime.model.native"):
        native.kernel()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "CALLMAYBE_KERNELS='garbage' is not 'torch' or 'vnni': ignored, the default kernels used"]
