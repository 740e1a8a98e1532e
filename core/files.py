"""File helpers shared by every layer: the cache folder, atomic writes, SHA-256 of a file."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
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

    The data goes to a temporary file in the same folder (mode as the umask allows), which is fsynced and
    renamed over ``path`` when the block ends without an exception, and deleted otherwise.
    Raises OSError if the folder cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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
