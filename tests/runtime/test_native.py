"""The native int8 kernel (runtime/model/gemv.c): its sums equal torch._int_mm's exactly, for every row count it
takes, widths with and without a tail of k % 64, the extreme int8 values; the layers give the same outputs with
and without it; it is built once per key with its SHA-256 recorded, rebuilt when the file no longer matches,
and where it cannot be built (no compiler, a failing build, CALLMAYBE_KERNELS=torch) torch's kernels are kept."""

import logging

import pytest
import torch
from torch import nn

from callmaybe.runtime.model import native, quant
from callmaybe.runtime.model.quant import Int8Linear

from ..conftest import needs_cc


@needs_cc
@pytest.mark.parametrize("m", list(range(1, 25)) + [31, 32, 33, 48, 100])
def test_sums_equal_torch_int_mm(kernel, m):
    """Every row count of each path (one stream per weight row, groups of rows, x in the lanes from 9 rows, in
    chunks of 32 and a last of 16 or fewer), widths with a tail of k % 64 and of k % 4, weight rows fewer than a
    block and not a whole number of blocks."""
    gen = torch.Generator().manual_seed(m)
    for k, n in [(64, 7), (100, 13), (1536, 256), (8, 1), (200, 9), (640, 33), (7, 18), (130, 35), (3, 40)]:
        x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
        got = kernel.gemv(x, w, kernel.row_sums(w))
        assert got.dtype == torch.int32 and got.shape == (m, n)
        assert torch.equal(got, x.int() @ w.int().t()), (m, k, n)
        if k % 8 == 0:
            assert torch.equal(got, torch._int_mm(x, w.t()))


@needs_cc
def test_extreme_values_and_the_widest_sum(kernel):
    """-128 x -128 over k = 8960 (the largest width of the default model): 146,800,640, exact."""
    k = 8960
    x = torch.full((2, k), -128, dtype=torch.int8)
    x[1] = 127
    w = torch.full((3, k), -128, dtype=torch.int8)
    w[1] = 127
    w[2, ::2] = 127
    got = kernel.gemv(x, w, kernel.row_sums(w))
    assert got.tolist() == [[146800640, -145653760, 573440], [-145653760, 144515840, -568960]]


@needs_cc
def test_rows_and_dtypes_it_does_not_take_are_refused(kernel):
    w = torch.zeros(4, 64, dtype=torch.int8)
    assert kernel.kind in ("vnni", "avx2")
    most = 1 << 20  # both kernels take any number of rows
    with pytest.raises(ValueError, match=rf"gemv: x \({most + 1}, 64\) torch.int8, w \(4, 64\) torch.int8"):
        kernel.gemv(torch.zeros(kernel.max_rows + 1, 64, dtype=torch.int8), w, kernel.row_sums(w))
    with pytest.raises(ValueError, match="not a product this kernel takes"):
        kernel.gemv(torch.zeros(1, 64), w, kernel.row_sums(w))
    assert kernel.max_rows == most


@needs_cc
@pytest.mark.parametrize("rotated", [True, False])
def test_a_layer_gives_the_same_outputs_with_and_without_the_kernel(kernel, monkeypatch, rotated):
    torch.manual_seed(5)
    q = Int8Linear.from_linear(nn.Linear(512, 96, bias=True), rotated=rotated)
    outs = {}
    for rows in (1, 3, 8, 14, 15):
        x = torch.randn(rows, 512)
        monkeypatch.setattr(native, "_loaded", [kernel])
        with_kernel = q(x)
        monkeypatch.setattr(native, "_loaded", [None])
        outs[rows] = torch.equal(with_kernel, q(x))
    assert outs == {1: True, 3: True, 8: True, 14: True, 15: True}


@needs_cc
def test_built_once_recorded_and_rebuilt_when_changed(fresh, caplog):
    path = native.build()
    assert path.parent == fresh / "cache" / "kernels" and path.name.startswith("gemv-") and path.suffix == ".so"
    sidecar = path.with_name(path.name + ".sha256")
    assert sidecar.read_text().endswith(f"  {path.name}\n")
    stamp = path.stat().st_mtime_ns
    assert native.build() == path and path.stat().st_mtime_ns == stamp  # found, not built again
    path.write_bytes(b"not a library")  # a damaged file: its SHA-256 no longer matches
    with caplog.at_level(logging.WARNING, logger="callmaybe.runtime.model.native"):
        assert native.build() == path and path.read_bytes()[:4] == b"\x7fELF"
    assert caplog.messages == [f"{path}: its SHA-256 differs from the one recorded when it was written; "
                               "building it again"]
    assert sorted(p.name for p in path.parent.iterdir()) == [".build.lock", path.name, sidecar.name]  # no temporary


def test_no_compiler_keeps_torch_kernels(fresh, monkeypatch, caplog):
    monkeypatch.setenv("CC", str(fresh / "no-such-cc"))
    with caplog.at_level(logging.INFO, logger="callmaybe.runtime.model.native"):
        assert native.kernel() is None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [(
        "WARNING", f"int8 kernel unavailable ([Errno 2] No such file or directory: '{fresh / 'no-such-cc'}'); "
        "torch's kernels used (slower; CALLMAYBE_KERNELS=torch chooses them without this line)")]
    assert native.kernel() is None  # tried once


@needs_cc
def test_a_failing_build_keeps_torch_kernels_and_leaves_no_file(fresh, monkeypatch, caplog):
    script = fresh / "cc"
    script.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake 1.0; exit 0; fi\n"
                      "echo 'gemv.c:1: error: broken' >&2\nexit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv("CC", str(script))
    with caplog.at_level(logging.INFO, logger="callmaybe.runtime.model.native"):
        assert native.kernel() is None
    assert f"{script} exited with 1: gemv.c:1: error: broken" in caplog.text
    assert [p.name for p in (fresh / "cache" / "kernels").iterdir()] == [".build.lock"]  # no library, no temporary


def test_callmaybe_kernels_torch_turns_it_off(fresh, monkeypatch, caplog):
    monkeypatch.setenv("CALLMAYBE_KERNELS", "torch")
    with caplog.at_level(logging.INFO, logger="callmaybe.runtime.model.native"):
        assert native.kernel() is None
    assert "CALLMAYBE_KERNELS=torch" in caplog.text
    assert not (fresh / "cache" / "kernels").exists()


@needs_cc
def test_row_sums_are_exact_and_refuse_what_they_do_not_take(kernel):
    gen = torch.Generator().manual_seed(9)
    w = torch.randint(-128, 128, (37, 300), dtype=torch.int8, generator=gen)
    assert torch.equal(kernel.row_sums(w), w.sum(dim=1, dtype=torch.int32))
    assert kernel.row_sums(torch.full((2, 8960), -128, dtype=torch.int8)).tolist() == [-1146880, -1146880]
    with pytest.raises(ValueError, match=r"^row_sums: w \(300, 37\) torch.int8: not a matrix this kernel takes$"):
        kernel.row_sums(w.t())


@needs_cc
def test_scales_that_do_not_fit_are_refused(kernel):
    x, w = torch.ones(2, 64, dtype=torch.int8), torch.ones(4, 64, dtype=torch.int8)
    sums = kernel.row_sums(w)
    for row_scale, col_scale in [(torch.ones(2, 1), None), (torch.ones(3, 1), torch.ones(4)),
                                 (torch.ones(2, 1), torch.ones(4, dtype=torch.float64)),
                                 (torch.ones(2, 1), torch.ones(8)[::2])]:
        with pytest.raises(ValueError, match=r"^gemv: x \(2, 64\) torch.int8, w \(4, 64\) torch.int8, wsums \(4,\) "
                                             r"torch.int32: not a product this kernel takes$"):
            kernel.gemv(x, w, sums, row_scale, col_scale)


def _torch_rotate_quantize(x, block):
    """What rotate_quantize must give, in torch: quant.walsh_hadamard, then the per-row step and rounding."""
    rows = quant.walsh_hadamard(x, block)
    step = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(127)
    return rows.div(step).round_().to(torch.int8), step


@needs_cc
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rotate_quantize_gives_the_bits_of_torchs_transform_and_rounding(kernel, dtype):
    """cm_rotate_quantize against quant.walsh_hadamard followed by the per-row quantization in torch, every
    block from 2 to 256 (the inexact scales of 2, 8, 32, 128 included), outlier channels, a zero row (step 1e-12 /
    127): equal bits; values half-way round to even."""
    gen = torch.Generator().manual_seed(5)
    for block in (2, 4, 8, 16, 32, 64, 128, 256):
        x = torch.randn(6, 1536, generator=gen) * torch.rand(6, 1536, generator=gen) ** 6 * 50
        x[1] = 0
        x[2, 7] = 3000.0
        x = x.to(dtype)
        q, step = kernel.rotate_quantize(x, block, quant.hadamard_scale(block))
        want_q, want_step = _torch_rotate_quantize(x, block)
        assert q.dtype == torch.int8 and step.dtype == torch.float32 and step.shape == (6, 1)
        assert torch.equal(q, want_q) and torch.equal(step.view(torch.int32), want_step.view(torch.int32)), block
    # rotated by the 4-block: exactly [127, 2.5, -0.5, 1.5], step 1: ties go to even
    x = torch.tensor([[65.25, 61.25, 64.25, 63.25]])
    q, step = kernel.rotate_quantize(x, 4, quant.hadamard_scale(4))
    assert q.tolist() == [[127, 2, 0, 2]] and step.tolist() == [[1.0]]


@needs_cc
def test_rotate_quantize_refuses_what_it_does_not_take(kernel):
    for x, block in [(torch.zeros(2, 64, dtype=torch.float16), 64), (torch.zeros(2, 96), 64),
                     (torch.zeros(2, 512), 512), (torch.zeros(2, 96), 3), (torch.zeros(4, 64)[:, ::2], 32)]:
        with pytest.raises(ValueError, match="rotate_quantize: .* not an input this kernel takes"):
            kernel.rotate_quantize(x, block, 1.0)


@needs_cc
def test_a_library_without_vnni_still_rotates_and_quantizes_to_the_same_bits(fresh, monkeypatch):
    """Built with neither AVX-512 VNNI nor AVX2: no products (torch's), but the plain C transform for the
    inputs, the same bits as torch's transform; a rotated layer gives the same outputs with it and without any
    library."""
    monkeypatch.setenv("CC", "cc -mno-avx2")  # (and so without AVX-512)
    assert native.kernel() is None
    plain = native.rotation()
    assert plain is not None and plain.products is False
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(3, 1536, generator=gen) * 20
    for block in (4, 256):
        q, step = plain.rotate_quantize(x, block, quant.hadamard_scale(block))
        want_q, want_step = _torch_rotate_quantize(x, block)
        assert torch.equal(q, want_q) and torch.equal(step, want_step)
    layer = Int8Linear.from_linear(nn.Linear(512, 64), rotated=True)
    y = torch.randn(2, 512, generator=gen)
    with_plain = layer(y)
    monkeypatch.setattr(native, "_loaded", [None])
    assert torch.equal(with_plain, layer(y))
