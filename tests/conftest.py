"""Shared fixtures: paths to the shared data (tests that need it skip with a reason where it is absent)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed seed (a red CI must mean a regression, not a new random draw);
# elsewhere every run draws new examples.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CALLMAYBE_SHARED", REPO.parent / "shared"))


#: the tests of the C libraries built at first use (the int8 kernel, the compiler's routines)
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")


def shared_path(*parts: str) -> Path:
    """A path under ../shared; skips the test when ../shared is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found: {path} (clone the project beside ../shared)")
    return path


@pytest.fixture
def public_catalog_path() -> Path:
    return REPO / "schemas" / "functions_definition.json"
