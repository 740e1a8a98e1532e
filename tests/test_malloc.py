"""core/malloc.py: glibc's mmap threshold fixed for a process decoding one row at a time."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
libc.free(libc.malloc(8 << 20))  # glibc's dynamic threshold rises to 8 MiB, unless it is fixed
block = libc.malloc(4 << 20)
print(ctypes.c_size_t.from_address(block - ctypes.sizeof(ctypes.c_size_t)).value & 2)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_fixed_threshold_keeps_serving_large_blocks_with_their_own_mmap():
    """A 4 MiB block after an 8 MiB one was freed: from the heap under glibc's dynamic threshold (which the
    8 MiB block raised), its own mmap (unmapped when freed) once the threshold is fixed at 128 KiB."""
    mapped = {mode: subprocess.run([sys.executable, "-c", CODE, mode], capture_output=True, text=True,
                                   check=True).stdout.strip() for mode in ("dynamic", "fixed")}
    assert mapped == {"dynamic": "0", "fixed": "2"}
