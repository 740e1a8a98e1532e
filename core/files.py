"""The user cache directory and atomic file writes shared by compiler/, runtime/ and the CLI."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """Return (and create) a folder under the callmaybe cache.

    The root is ``$CALLMAYBE_CACHE`` if set, else ``$XDG_CACHE_HOME/callmaybe``, else ``~/.cache/callmaybe``.
    """
    root = os.environ.get("CALLMAYBE_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "callmaybe")
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one.

    Writes a temporary file in the same folder, fsyncs it and renames it over ``path``.
    Raises OSError if the folder cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))
