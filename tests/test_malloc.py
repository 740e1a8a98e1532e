"""core/malloc.py: glibc's mmap threshold fixed at 4 MiB for a decoding process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from callmaybe.core.malloc import wants_fixed_threshold

# glibc marks a chunk it served with its own mmap by bit 0x2 (IS_MMAPPED) of the size word just before the
# pointer it returns (malloc/malloc.c, "chunk representations")
CODE = """
import ctypes, sys
from callmaybe.core.malloc import fix_mmap_threshold
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold() is True
libc.free(libc.malloc(16 << 20))  # glibc's dynamic threshold rises to 16 MiB, unless it is fixed
mapped = lambda block: ctypes.c_size_t.from_address(block - ctypes.sizeof(ctypes.c_size_t)).value & 2
print(mapped(libc.malloc(8 << 20)), mapped(libc.malloc(1 << 20)))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_fixed_threshold_keeps_serving_large_blocks_with_their_own_mmap():
    """After a 16 MiB block was freed: an 8 MiB block comes from the heap under glibc's dynamic threshold (which
    the 16 MiB block raised) and gets its own mmap (unmapped when freed) once the threshold is fixed at 4 MiB;
    a 1 MiB block, under 4 MiB, comes from the heap either way."""
    mapped = {mode: subprocess.run([sys.executable, "-c", CODE, mode], capture_output=True, text=True,
                                   check=True).stdout.strip() for mode in ("dynamic", "fixed")}
    assert mapped == {"dynamic": "0 0", "fixed": "2 0"}


def test_the_threshold_is_fixed_one_row_at_a_time_and_not_under_auto():
    """The rule run and eval apply (cli.py): fixed for one row under required or none; kept dynamic for
    batches and under auto, whose verdict passes were slower with it (core/malloc.py's docstring)."""
    assert [wants_fixed_threshold(rows, choice) for rows in (1, 16) for choice in ("required", "none", "auto")] \
        == [True, True, False, False, False, False]
