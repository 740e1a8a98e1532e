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


TRIM = """
import ctypes, sys
from callmaybe.core.malloc import release_free_memory
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
libc.free(libc.malloc(16 << 20))  # the dynamic threshold rises to 16 MiB: the blocks below come from the heap
blocks = [libc.malloc(1 << 20) for _ in range(300)]
for b in blocks:
    ctypes.memset(b, 1, 1 << 20)
keep = libc.malloc(64 << 10)  # in use above them: the heap's top cannot shrink past it
ctypes.memset(keep, 1, 64 << 10)
for b in blocks:
    libc.free(b)
before = rss()
done = release_free_memory() if sys.argv[1] == "trim" else False
print(done, before - rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim: Linux only")
def test_release_free_memory_gives_the_heaps_free_pages_back():
    """300 MB freed inside the heap (below a block in use) stayed resident; malloc_trim(0) gives back at least
    250 MB of it."""
    out = {mode: subprocess.run([sys.executable, "-c", TRIM, mode], capture_output=True, text=True, check=True)
           .stdout.split() for mode in ("trim", "keep")}
    assert out["keep"] == ["False", "0"]
    assert out["trim"][0] == "True" and int(out["trim"][1]) >= 250


def test_every_compile_releases_free_memory_even_when_it_fails(monkeypatch):
    from callmaybe.compiler import compile as compile_mod
    from callmaybe.core.catalog import Function
    from callmaybe.core.errors import SchemaError
    from callmaybe.core.vocabulary import load_vocabulary

    calls = []
    monkeypatch.setattr(compile_mod, "release_free_memory", lambda: calls.append(1))
    vocab = load_vocabulary("Qwen/Qwen2.5-Coder-1.5B-Instruct")
    compile_mod.compile_index([Function("f", "", {"type": "object"})], vocab)
    with pytest.raises(SchemaError):
        compile_mod.compile_index([Function("f", "", {"type": "object", "properties": {"x": {"type": "nope"}}})],
                                  vocab)
    assert calls == [1, 1]
