"""The native int8 kernel's faults, found by a helper trying to break it (each failed before its fix): the cache
key holds the arguments in $CC; a library that never loaded is built again; kernel() keeps torch's kernels on a
library without its symbols and on a kernels folder that cannot be made, and says so in one warning; an
unrotated layer takes zero rows and widths above 65,536 as torch does; a read-only cache with a verified
kernel uses it; a timed-out compiler's children are ended; a killed build's temporary is removed."""

import logging
import os
import time

import pytest
import torch
from torch import nn

from callmaybe.runtime.model import native
from callmaybe.runtime.model.quant import Int8Linear

from ..conftest import needs_cc


def _wrapper(folder, name, body):
    """A compiler wrapper that answers --version as cc does (so the key is cc's) and runs ``body`` with $out the
    library it is asked to write."""
    script = folder / name
    script.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then exec cc --version; fi\n"
                      "while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then out=\"$2\"; fi; shift; done\n" + body)
    script.chmod(0o755)
    return str(script)


@needs_cc
def test_the_key_holds_the_arguments_in_cc():
    """CC="cc -mno-avx512vnni" and CC=cc print the same --version: one key, so the library built with one is
    loaded for the other (measured: one run with -mno-avx512vnni, torch's kernels for every later plain run;
    one with -fsanitize=address, every later plain run aborts at its first int8 product)."""
    assert native._key(["cc", "-mno-avx512vnni"]) != native._key(["cc"])


@needs_cc
def test_a_library_built_with_other_arguments_is_not_loaded_later(fresh, monkeypatch):
    monkeypatch.setenv("CC", "cc -mno-avx2")  # (and so without AVX-512)
    assert native.kernel() is None  # built with neither kernel: torch's kernels, rightly
    monkeypatch.delenv("CC")
    monkeypatch.setattr(native, "_loaded", [])
    assert native.kernel() is not None


@needs_cc
def test_a_library_without_the_kernels_symbols_keeps_torch_kernels(fresh, monkeypatch, caplog):
    """A build that exits 0 with a library lacking cm_simd: kernel() raised AttributeError ("undefined symbol:
    cm_simd") out of every Int8Linear forward; "Never raises" is its promise."""
    (fresh / "other.c").write_text("int other(void) { return 0; }\n")
    monkeypatch.setenv("CC", _wrapper(fresh, "nosym-cc", f"exec cc -shared -fPIC -o \"$out\" {fresh}/other.c\n"))
    with caplog.at_level(logging.INFO, logger="callmaybe.runtime.model.native"):
        assert native.kernel() is None
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "int8 kernel unavailable" in caplog.text and "undefined symbol: cm_simd" in caplog.text
    assert [p.name for p in (fresh / "cache" / "kernels").iterdir()] == [".build.lock"]  # removed: built again next


@needs_cc
def test_a_library_that_never_loaded_is_built_again(fresh, monkeypatch):
    """A compiler that wrote garbage and exited 0 once: the garbage was recorded with its SHA-256 and, the key
    being the same, loaded (and refused) by every later run, with a working cc, until the cache is deleted."""
    monkeypatch.setenv("CC", _wrapper(fresh, "garbage-cc", "echo garbage > \"$out\"\n"))
    assert native.kernel() is None
    monkeypatch.delenv("CC")
    monkeypatch.setattr(native, "_loaded", [])
    assert native.kernel() is not None


def test_a_kernels_folder_that_cannot_be_made_keeps_torch_kernels(fresh, caplog):
    """<cache>/kernels a file: cache_dir raises CacheError, which kernel() did not catch (it is no OSError)."""
    (fresh / "cache").mkdir()
    (fresh / "cache" / "kernels").write_text("")
    with caplog.at_level(logging.INFO, logger="callmaybe.runtime.model.native"):
        assert native.kernel() is None
    assert "cannot create the cache folder" in caplog.text


@needs_cc
def test_a_built_kernel_is_used_where_the_lock_file_cannot_be_written(fresh):
    """A verified library in a cache that cannot be written (a read-only mount: open(.build.lock, "a") fails
    with EROFS, measured) was not used. A folder in place of the lock file stands in for that here."""
    path = native.build()
    lock = path.parent / ".build.lock"
    lock.unlink()
    lock.mkdir()
    assert native.kernel() is not None and native.kernel().path == path


@needs_cc
@pytest.mark.parametrize("shape", [(0, 64), (2, 0, 64)])
def test_an_unrotated_layer_takes_zero_rows_with_the_kernel(kernel, monkeypatch, shape):
    """gemv refuses m = 0; _int8_product passed it on: ValueError where torch._int_mm gives (0, out)."""
    q = Int8Linear.from_linear(nn.Linear(64, 5), rotated=False)
    x = torch.zeros(shape, dtype=torch.bfloat16)
    monkeypatch.setattr(native, "_loaded", [kernel])
    y = q(x)
    assert y.shape == (*shape[:-1], 5) and y.dtype == torch.bfloat16


@needs_cc
@pytest.mark.parametrize("rotated", [True, False])
def test_a_layer_wider_than_the_kernel_takes_keeps_torch(kernel, monkeypatch, rotated):
    """in_features 65,544 > CM_MAX_K: row_sums raised ValueError out of the forward; torch._int_mm takes it."""
    torch.manual_seed(0)
    q = Int8Linear.from_linear(nn.Linear(65544, 2), rotated=rotated)
    x = torch.randn(1, 65544).to(torch.bfloat16)
    monkeypatch.setattr(native, "_loaded", [None])
    expected = q(x)
    monkeypatch.setattr(native, "_loaded", [kernel])
    assert torch.equal(q(x), expected)


@needs_cc
def test_a_timed_out_build_leaves_no_compiler_process(fresh, monkeypatch):
    """The wrapper's child (as a real compiler's cc1 is) ran on after the timeout: only the wrapper was killed."""
    pidfile = fresh / "child.pid"
    monkeypatch.setenv("CC", _wrapper(fresh, "hang-cc", f"sleep 60 & echo $! > {pidfile}\nwait\n"))
    monkeypatch.setattr(native, "BUILD_TIMEOUT", 1.0)
    assert native.kernel() is None
    child = int(pidfile.read_text())
    time.sleep(0.2)
    try:
        alive = _alive(child)
    finally:
        if _alive(child):
            os.kill(child, 9)
    assert not alive


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@needs_cc
def test_a_build_removes_what_a_killed_build_left(fresh):
    """A build killed midway (SIGKILL while cc ran, measured) left .gemv-<random>.so.tmp for ever."""
    folder = fresh / "cache" / "kernels"
    folder.mkdir(parents=True)
    (folder / ".gemv-dead1234.so.tmp").write_bytes(b"half a library")
    path = native.build()
    assert sorted(p.name for p in folder.iterdir()) == [".build.lock", path.name, path.name + ".sha256"]


def test_unreadable_cpu_flags_keep_torch_kernels(fresh, monkeypatch, caplog):
    """Without the CPU's flags in the key, a -march=native library could be found by another CPU sharing the
    cache (SIGILL): no build, torch's kernels, one warning."""
    monkeypatch.setattr(native, "_cpu_flags", lambda: "")
    with caplog.at_level(logging.INFO, logger="callmaybe.runtime.model.native"):
        assert native.kernel() is None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [(
        "WARNING", "int8 kernel unavailable (the CPU's flags cannot be read from /proc/cpuinfo); torch's kernels "
        "used (slower; CALLMAYBE_KERNELS=torch chooses them without this line)")]
