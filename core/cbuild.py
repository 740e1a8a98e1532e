"""C libraries built on this machine at first use: the compiler's command, the key a built library is found
by, and the build itself (a temporary name, its SHA-256 recorded, renamed into place under a lock).

Two libraries are built this way: the runtime's int8 kernels (``runtime/model/gemv.c``, for this CPU) and the
compiler's automaton routines (``compiler/automata/native.c``, plain C). Each is compiled once per source,
flags and compiler into ``<cache>/kernels/<stem>-<key>.so`` and checked against its recorded SHA-256 before
each load, as every file of the cache is. ``$CC`` names another compiler (``cc`` by default).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import logging
import os
import shlex
import signal
import subprocess
import tempfile
from pathlib import Path

from .files import digest_path, digest_problem, record_digest, remove_stale


def compiler_command() -> list[str]:
    """The C compiler's command line: ``$CC`` split as a shell would, or ``["cc"]``. Raises OSError naming
    ``$CC`` where it cannot be split (an unbalanced quote)."""
    value = os.environ.get("CC") or "cc"
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise OSError(f"$CC {value!r} cannot be split as a shell would ({exc})") from None


def cpu_flags() -> str:
    """The CPU's flags line of ``/proc/cpuinfo`` ("" where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def build_key(cc: list[str], *parts: bytes) -> str:
    """A 20-hex-digit key of what a built library depends on: ``parts`` (the source, the flags, and for a
    ``-march=native`` build the CPU's flags), the compiler's command line and its ``--version`` output. Raises
    OSError or subprocess.SubprocessError where the compiler cannot be run."""
    version = subprocess.run([*cc, "--version"], capture_output=True, timeout=30, check=True).stdout
    digest = hashlib.sha256()
    # surrogateescape: a byte of $CC that is not UTF-8 comes back as the byte it was
    for part in (*parts, shlex.join(cc).encode("utf-8", "surrogateescape"), version):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:20]


def build_library(source: Path, flags: tuple[str, ...], path: Path, cc: list[str], timeout: float,
                  log: logging.Logger) -> Path:
    """``path`` (a shared library compiled from ``source`` with ``flags``): found with its SHA-256 as recorded,
    or compiled now. A file whose SHA-256 differs is built again, with one warning on ``log`` saying so. The
    build writes a temporary name in the same folder (``.<stem>-<random>.so.tmp``), records its SHA-256 and
    renames it into place, so that a killed build never leaves a partial library under the final name; builds
    in one folder take turns on a lock file (``.build.lock``), so a process that waited finds the library
    built. ``timeout``: seconds the compiler may take. Raises OSError or subprocess.SubprocessError (no
    compiler, a failed or timed-out build: the compiler's last lines in the message)."""
    if path.exists() and digest_problem(path) is None:
        return path  # found: no lock taken (a read-only cache may hold a verified library)
    folder = path.parent
    with open(folder / ".build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        remove_stale(folder)  # the temporaries of builds killed midway (none is live: the lock is ours)
        if path.exists():
            problem = digest_problem(path)
            if problem is None:
                return path
            log.warning("%s: %s; building it again", path, problem)
        stem = path.name.split("-", 1)[0]
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}-", suffix=".so.tmp", dir=folder)
        os.close(fd)
        try:
            # its own process group, so that a timeout (or Ctrl-C) ends the compiler's children too (cc1, as)
            # the compiler's messages may hold bytes that are not UTF-8: replaced, never an error
            done = subprocess.Popen([*cc, *flags, "-o", tmp, str(source)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
            try:
                _, stderr = done.communicate(timeout=timeout)
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(done.pid, signal.SIGKILL)
                done.communicate()
                raise
            if done.returncode != 0:
                tail = " ".join(stderr.strip().splitlines()[-3:])
                raise subprocess.SubprocessError(f"{' '.join(cc)} exited with {done.returncode}: {tail}")
            record_digest(path, Path(tmp).read_bytes())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return path


def open_library(path: Path, symbols: tuple[str, ...]) -> ctypes.CDLL:
    """The library at ``path``, loaded, with each of ``symbols`` present. A file that does not load or lacks
    a symbol (not a library, or not this one) is removed with its recorded SHA-256, so that the next run
    builds it again. Raises OSError or AttributeError (the error of the load or of the missing symbol)."""
    try:
        lib = ctypes.CDLL(str(path))
        for name in symbols:
            getattr(lib, name)
    except (OSError, AttributeError):
        for stale in (path, digest_path(path)):
            with contextlib.suppress(OSError):
                stale.unlink()
        raise
    return lib
