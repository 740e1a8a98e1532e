"""core/malloc.py: glibc's mmap threshold fixed for a process decoding one row at a time."""

from __future__ import annotations

import subprocess
import sys

import pytest

CODE = """
import ctypes, sys
from callmaybe.core.malloc import fix_mmap_threshold
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def heap_top():
    libc.sbrk.restype = ctypes.c_void_p
    return libc.sbrk(0)
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold() is True
# free one 8 MiB block: glibc's dynamic threshold rises to 8 MiB unless it is fixed
libc.free(libc.malloc(8 << 20))
before = heap_top()
block = libc.malloc(4 << 20)  # 4 MiB: from the heap under the raised threshold, its own mmap under the fixed one
print(int(heap_top() - before >= 4 << 20))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_fixed_threshold_keeps_large_blocks_out_of_the_heap():
    """A 4 MiB block after an 8 MiB one was freed: the heap grows for it under glibc's dynamic threshold, not
    once the threshold is fixed at 128 KiB (the block is mapped, and unmapped when freed)."""
    grown = {mode: subprocess.run([sys.executable, "-c", CODE, mode], capture_output=True, text=True,
                                  check=True).stdout.strip() for mode in ("dynamic", "fixed")}
    assert grown == {"dynamic": "1", "fixed": "0"}
