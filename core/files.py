"""File helpers shared by every layer: the cache folder, atomic writes, SHA-256 of a file."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import CacheError

CHUNK = 1 << 20  # bytes read per step when hashing or copying (1 MiB)


def cache_dir(*parts: str) -> Path:
    """Return (and create) a folder under the callmaybe cache.

    The root is ``$CALLMAYBE_CACHE`` if set, else ``$XDG_CACHE_HOME/callmaybe``, else ``~/.cache/callmaybe``.
    Raises CacheError (one line naming the folder) when it cannot be created.
    """
    root = os.environ.get("CALLMAYBE_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "callmaybe")
    path = Path(root, *parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheError(f"{path}: cannot create the cache folder ({exc.strerror or exc}); set CALLMAYBE_CACHE "
                         "to a writable folder") from None
    return path


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """Yield a binary file to write ``path``'s new contents into; readers see the old file or the whole new one.

    The data goes to a temporary file in the same folder (``.<name>.<random>.tmp``, mode as the umask allows,
    locked while it is written), which is fsynced and renamed over ``path`` when the block ends without an
    exception, and deleted otherwise; one left by a killed process is removed by :func:`remove_stale`.
    Raises OSError if the folder cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until closed: marks the file as in use (see remove_stale)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


TEMPORARY_SUFFIX = ".tmp"
TEMPORARY_DIR_LOCK = ".callmaybe-lock"
#: a temporary folder younger than this (seconds) and not yet locked may be one being created
STALE_AFTER = 60


@contextlib.contextmanager
def temporary_dir(parent: str | os.PathLike, prefix: str) -> Iterator[Path]:
    """Yield a new folder ``<parent>/<prefix><random>`` to build something in, locked (``flock`` on a lock file
    inside it) until the block ends, and deleted then unless it was renamed away. A folder a killed process
    left behind is no longer locked, so :func:`remove_stale` can tell it from one in use.
    Raises OSError if ``parent`` cannot be written."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    lock = open(folder / TEMPORARY_DIR_LOCK, "w")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield folder
    finally:
        lock.close()
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale(folder: str | os.PathLike, prefixes: tuple[str, ...] = ()) -> int:
    """Delete what killed processes left in ``folder``: temporary files of :func:`atomic_file` and temporary
    folders of :func:`temporary_dir` whose names start with one of ``prefixes``, skipping any that a live
    process holds (its lock cannot be taken). Returns the bytes freed; never raises for a file that vanishes
    or cannot be removed."""
    freed = 0
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_file() and entry.name.startswith(".") and entry.name.endswith(TEMPORARY_SUFFIX):
                with open(entry, "rb") as f:
                    if _locked(f.fileno()):
                        continue
                    size = entry.stat().st_size
                    entry.unlink()
                    freed += size
            elif entry.is_dir() and prefixes and entry.name.startswith(prefixes):
                lock = entry / TEMPORARY_DIR_LOCK
                if not lock.exists():
                    if time.time() - entry.stat().st_mtime < STALE_AFTER:
                        continue  # maybe being created: its lock comes right after the folder
                else:
                    with open(lock, "rb") as f:
                        if _locked(f.fileno()):
                            continue
                size = sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())
                shutil.rmtree(entry)
                freed += size
        except OSError:
            continue
    return freed


def _locked(fd: int) -> bool:
    """True when another open file holds an exclusive flock on ``fd``'s file (the lock is dropped at once)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_file`). Raises OSError."""
    with atomic_file(path) as out:
        out.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`atomic_file`). Raises OSError."""
    atomic_write_bytes(path, text.encode("utf-8"))


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 (64 hex digits) of a file's contents, read in 1 MiB chunks. Raises OSError."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def human_size(n: float) -> str:
    """``n`` bytes as B / KB / MB / GB (powers of 1000): ``1234567`` -> ``"1.2 MB"``."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
