"""glibc's allocator: a fixed mmap threshold of 4 MiB, so that the memory of a prompt's large activations goes
back to the system when they are freed.

glibc serves an allocation of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB to start with) with its own
``mmap`` and unmaps it when it is freed; but each time such a block is freed, it raises the threshold to that
block's size (up to 32 MiB), so that later blocks of that size come from the heap, whose freed space is kept
(``mallopt(3)``: "dynamic mmap threshold"). Whether a freed block raised it before a long prompt is computed
depends on the order in which threads freed their blocks, and so changes from run to run: when it has, the
prompt's per-layer activations (17-26 MB each for the default model's 487-token catalog prompt) come from the
heap, small allocations settle in the holes they leave, and each layer's next block extends the heap. Traced in
one ``callmaybe run`` of the public set (``mallinfo2``): the heap grew by 25 MB per layer to 551 MB while 155-185
MB of it was in use. Peak anonymous memory moved between 280 and 930 MB from run to run (peak RSS 1.86-2.57
GB; the weights' 1.58 GB are file pages).

A fixed threshold also turns the dynamic adjustment off. At 128 KiB (the twelfth session) every block of a
decoding step past it was mapped fresh: one row at a time 2.74 against 2.19 s per BFCL request, 16 rows 1.7x
slower. At :data:`MMAP_THRESHOLD` (4 MiB) the steps' blocks (a row's activations are tens of KB, its logits
0.6 MB) stay in the heap and only a prompt's large blocks are mapped: figures in docs/model.md, "Fourteenth
session". ``run`` and ``eval`` fix it for one row at a time (``--max-batch 1``, their default) under
``--tool-choice required`` or ``none``. Under ``auto`` each request also computes the verdict's and the
confirmation's prompts whole (hundreds of tokens, no cache), and mapping their blocks fresh made the public set
2.79-3.03 s per request against 2.10-2.30 with the dynamic threshold, so ``auto`` keeps it (at 16 MiB: no
clear loss, no clear gain). With 16 rows the peak is live data either way (2.31-2.38 GB) and the time moved as
much between runs as between settings, so batches and ``serve`` keep glibc's dynamic threshold too.
"""

from __future__ import annotations

import ctypes
import sys

#: mallopt's parameter number for the mmap threshold (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
#: the threshold kept (bytes): blocks this large or larger get their own mmap (module docstring)
MMAP_THRESHOLD = 4 << 20


def wants_fixed_threshold(max_batch: int, tool_choice: str) -> bool:
    """Whether a process decoding at most ``max_batch`` rows at a time under ``tool_choice`` ("required",
    "auto" or "none") should call :func:`fix_mmap_threshold`: one row at a time, not under ``auto`` (module
    docstring, with the figures that set the rule)."""
    return max_batch == 1 and tool_choice != "auto"


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``size`` bytes for this process (see the module docstring). Returns whether
    it was set: False off Linux, without glibc (musl has no ``mallopt``) or when ``mallopt`` refuses. Never
    raises."""
    mallopt = _glibc("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and mallopt(M_MMAP_THRESHOLD, size) == 1


def release_free_memory() -> bool:
    """Give the free pages of glibc's heap back to the system (``malloc_trim(0)``), so that a process that
    compiled a large index does not keep the memory of its intermediate arrays: after compiling
    winget-pkgs-locale, 723 MB resident against 163 MB trimmed (its peak 960 MB either way). Returns whether
    it ran: False off Linux or without glibc. Never raises."""
    malloc_trim = _glibc("malloc_trim", [ctypes.c_size_t])
    if malloc_trim is None:
        return False
    malloc_trim(0)
    return True


def _glibc(name: str, argtypes: list):
    """glibc's function ``name`` (returning int) with ``argtypes``, or None off Linux or where this process's C
    library lacks it (musl has neither ``mallopt`` nor ``malloc_trim``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None)[name]
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn
