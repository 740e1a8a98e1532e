"""glibc's allocator: a fixed mmap threshold, so that the memory of freed large arrays goes back to the system.

glibc serves an allocation of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB to start with) with its own
``mmap`` and unmaps it when it is freed; but each time such a block is freed, it raises the threshold to that
block's size (up to 32 MiB), so that later blocks of that size come from the heap and arenas, whose freed
space is kept for reuse (``mallopt(3)``: "dynamic mmap threshold"). A decoding process allocates and frees
activations, logits and key/value copies of a few to tens of MB each step; under the dynamic threshold the
anonymous memory it holds at its peak moved between 280 and 870 MB from run to run of the same ``callmaybe
run`` (the default model, the public set: peak RSS 1.86-2.57 GB; the weights' 1.58 GB are file pages). With
the threshold fixed (which also turns the dynamic adjustment off), 269-285 MB in every run, peak RSS
1.85-1.86 GB, the same answers, in the same time (64 requests: 63.6-76.2 s against 68.4-69.2 s).

Only for one row at a time (``run`` and ``eval`` with ``--max-batch 1``, their default): a batch of 16 rows
allocates tens of MB per step, and mapping them fresh each time (page faults, zeroed pages) took 47.6-50.9 s
against 25.5-31.0 s for the same 64 requests, for a peak of 2.29 against 2.36 GB. ``serve`` keeps glibc's
dynamic threshold.
"""

from __future__ import annotations

import ctypes
import sys

#: mallopt's parameter number for the mmap threshold (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
#: the threshold kept: glibc's own starting value, 128 KiB
MMAP_THRESHOLD = 128 * 1024


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``size`` bytes for this process (see the module docstring). Returns whether
    it was set: False off Linux, without glibc (musl has no ``mallopt``) or when ``mallopt`` refuses. Never
    raises."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, size) == 1
