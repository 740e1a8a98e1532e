"""Fixtures of the native int8 kernel's tests (test_native.py, test_native_faults.py)."""

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
