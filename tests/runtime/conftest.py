"""Fixtures of the native library's tests (test_native.py, test_native_faults.py, test_native_decode.py,
test_native_step.py)."""

import pytest

from callmaybe.runtime.model import native


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """kernel() tried again from scratch, building in an empty cache with the default compiler."""
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CALLMAYBE_KERNELS", raising=False)
    monkeypatch.setattr(native, "_loaded", [])
    return tmp_path


@pytest.fixture(scope="module")
def kernel():
    """The native kernel as this process loaded it; the test is skipped where there is none."""
    k = native.kernel()
    if k is None:
        pytest.skip("the native kernel is unavailable here (no compiler or no AVX-512 VNNI)")
    return k


@pytest.fixture
def lib():
    """The library as this process loaded it (rotation(): present with or without AVX-512 VNNI); the test is
    skipped where there is none."""
    k = native.rotation()
    if k is None:
        pytest.skip("the native library is unavailable here (no compiler)")
    return k
