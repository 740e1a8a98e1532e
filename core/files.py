"""File helpers shared by every layer: the cache folder, atomic writes, SHA-256 of a file, and the recorded
SHA-256 (a sidecar file per file, a manifest per folder) that every file the cache produces is checked against."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import blake3

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


#: what :func:`record_digest` appends to a file's name to name its sidecar
DIGEST_SUFFIX = ".sha256"
#: the manifest of a folder (:func:`record_manifest`), in the folder itself
MANIFEST_NAME = "SHA256SUMS"
_HEX64 = re.compile(r"[0-9a-f]{64}")


def digest_path(path: str | os.PathLike) -> Path:
    """The sidecar of ``path`` (``<path>.sha256``) where :func:`record_digest` keeps its SHA-256."""
    path = Path(path)
    return path.with_name(path.name + DIGEST_SUFFIX)


def record_digest(path: str | os.PathLike, data: bytes | None = None) -> str:
    """Record the SHA-256 of ``path``'s contents in its sidecar ``<path>.sha256`` and return it (64 hex digits).

    Call it right after ``path`` is written, by the process that wrote it. ``data``: the exact bytes just
    written to ``path`` (hashed instead of reading the file back; the caller vouches that they are what the
    file holds); None: the file is read. The sidecar is one line in ``sha256sum`` format
    (``<hex>  <file name>``, so ``sha256sum -c`` run in the folder checks it) and is written atomically
    (:func:`atomic_file`); it is replaced if it exists. Raises OSError if the file cannot be read or the
    sidecar written.
    """
    path = Path(path)
    digest = hashlib.sha256(data).hexdigest() if data is not None else sha256_file(path)
    atomic_write_text(digest_path(path), f"{digest}  {path.name}\n")
    return digest


def recorded_digest(path: str | os.PathLike) -> str | None:
    """The SHA-256 that :func:`record_digest` recorded for ``path``, or None when its sidecar is missing,
    unreadable or not in the expected form. Never raises."""
    try:
        line = digest_path(path).read_text("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    head = line[:64]
    return head if _HEX64.fullmatch(head) and line[64:66] == "  " else None


def digest_problem(path: str | os.PathLike, data: bytes | None = None) -> str | None:
    """None when ``path``'s contents have the SHA-256 recorded by :func:`record_digest`; else why not, as a
    phrase to follow the file's name in a message: ``"no recorded SHA-256"`` (sidecar missing or malformed),
    ``"cannot be read (<reason>)"``, or ``"its SHA-256 differs from the one recorded when it was written"``.

    ``data``: the file's contents, already read by the caller (hashed instead of reading the file again, so
    that what is checked is what is used); None: the file is read and hashed in full (SHA-256 runs at
    about 1 GB/s here: ~1 ms per MB).
    The check is of contents only: size and modification time play no part. Never raises.
    """
    expected = recorded_digest(path)
    if expected is None:
        return "no recorded SHA-256"
    try:
        actual = hashlib.sha256(data).hexdigest() if data is not None else sha256_file(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if actual != expected:
        return "its SHA-256 differs from the one recorded when it was written"
    return None


def digest_ok(path: str | os.PathLike, data: bytes | None = None) -> bool:
    """True when ``path`` exists and its contents (or ``data``, see :func:`digest_problem`) have the SHA-256
    recorded in its sidecar by :func:`record_digest`; False when the file or the sidecar is missing or
    unreadable, or the digests differ. Hashes the whole file each call. Never raises."""
    return digest_problem(path, data) is None


def read_checked(path: str | os.PathLike) -> tuple[bytes | None, str | None]:
    """Read ``path`` and check it against its recorded SHA-256 in one pass over the bytes.

    Returns ``(contents, None)`` when they match, else ``(None, problem)`` with ``problem`` as
    :func:`digest_problem` words it (``"cannot be read (...)"`` for a missing file). Never raises."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    problem = digest_problem(path, data)
    return (data, None) if problem is None else (None, problem)


#: the part digests of a folder's files (:func:`record_manifest`), beside its manifest: BLAKE3 of each part
PARTS_NAME = "BLAKE3PARTS"
#: the parts file callmaybe wrote before (SHA-256 of each part, twelfth session): ignored, left out of manifests
OLD_PARTS_NAMES = ("SHA256PARTS",)
#: the bytes of one part: a file of n bytes has max(1, ceil(n / PART_BYTES)) parts, the last one read to the end
PART_BYTES = 64 << 20
_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")  # a part's index: ASCII digits, no leading zero


def _open_regular(path: Path) -> int:
    """A read-only descriptor of ``path`` when it is a regular file, not through a symlink (``O_NOFOLLOW``); a
    FIFO or device is opened without blocking (``O_NONBLOCK``) and refused, so that a check never waits on a
    pipe. Raises OSError (a symlink, not a regular file, cannot be opened) or ValueError (a NUL in the path)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path}: not a regular file")
    return fd


def _file_digests(path: Path) -> tuple[str, list[str]]:
    """The SHA-256 of ``path``'s contents and the BLAKE3 of each of its parts (:data:`PART_BYTES`), in one
    pass. Raises OSError (also for a symlink or a file that is not regular: :func:`_open_regular`), or
    ValueError for a path with a NUL byte."""
    whole, parts = hashlib.sha256(), []
    with os.fdopen(_open_regular(path), "rb") as f:
        while True:
            part, left = blake3.blake3(), PART_BYTES
            while left and (chunk := f.read(min(CHUNK, left))):
                whole.update(chunk)
                part.update(chunk)
                left -= len(chunk)
            if left == PART_BYTES and parts:  # nothing after the last full part
                break
            parts.append(part.hexdigest())
            if left:
                break
    return whole.hexdigest(), parts


def _part_ok(path: Path, index: int, last: bool, digest: str) -> bool:
    """Whether part ``index`` of ``path`` (read to the end of the file when ``last``) has the BLAKE3
    ``digest``; False when it cannot be read, is not a regular file (:func:`_open_regular`), or is shorter than
    the part (a file cut short, also while it is read).

    Read with ``preadv`` into one reused 1 MiB buffer (0.48 s for the default model's 1.55 GB on one thread,
    0.27 s on two; a memory map was no faster and turns a file cut short during the check into SIGBUS);
    BLAKE3 (https://github.com/BLAKE3-team/BLAKE3) releases the GIL, so parts hash on several threads at once:
    3.3 times SHA-256's speed here."""
    try:
        fd = _open_regular(path)
    except (OSError, ValueError):  # ValueError: a path with a NUL byte
        return False
    try:
        size = os.fstat(fd).st_size
        offset = index * PART_BYTES
        left = size - offset if last else PART_BYTES
        if left < 0 or offset + left > size:
            return False
        part, buffer = blake3.blake3(), memoryview(bytearray(min(CHUNK, max(left, 1))))
        while left:
            n = os.preadv(fd, [buffer[:min(len(buffer), left)]], offset)
            if n == 0:  # cut short while read
                return False
            part.update(buffer[:n])
            offset += n
            left -= n
        if last and os.fstat(fd).st_size != offset:  # grew while read
            return False
        return part.hexdigest() == digest
    except OSError:
        return False
    finally:
        os.close(fd)


def _manifest_line(manifest: bytes) -> str:
    """The parts file's first line: the BLAKE3 of the manifest's bytes it was written beside."""
    return f"{blake3.blake3(manifest).hexdigest()}  manifest  {MANIFEST_NAME}"


def _read_parts(folder: Path, expected: dict[str, str], manifest: bytes) -> dict[str, list[str]] | None:
    """The part digests of ``folder``'s parts file, or None when it is missing, malformed, was written beside
    another manifest than ``manifest`` (its bytes: a manifest line changed since, by hand or by accident, is
    then checked whole) or does not cover exactly the files of ``expected`` with consecutive parts. Format: the
    line of :func:`_manifest_line`, then ``<hex>  <part>  <relative path>`` lines."""
    try:
        lines = (folder / PARTS_NAME).read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or lines[0] != _manifest_line(manifest):
        return None
    parts: dict[str, list[str]] = {}
    for line in lines[1:]:
        fields = line.split("  ", 2)
        if len(fields) != 3 or not _HEX64.fullmatch(fields[0]) or not _INDEX.fullmatch(fields[1]):
            return None
        digest, index, rel = fields
        if int(index) != len(parts.setdefault(rel, [])):
            return None
        parts[rel].append(digest)
    return parts if parts.keys() == expected.keys() else None


def _write_parts(folder: Path, parts: dict[str, list[str]], manifest: bytes) -> None:
    """Write ``folder``'s parts file (see :func:`_read_parts`) beside the manifest of bytes ``manifest``,
    atomically. Raises OSError."""
    atomic_write_text(folder / PARTS_NAME, _manifest_line(manifest) + "\n" + "".join(
        f"{d}  {i}  {rel}\n" for rel, ds in parts.items() for i, d in enumerate(ds)))


def _manifest_files(folder: Path) -> list[str]:
    """The files a manifest of ``folder`` covers: every regular file below it (recursively, symlinks not
    followed), as POSIX paths relative to it, sorted; leaving out the manifest itself, the lock file of
    :func:`temporary_dir` and the temporary files of :func:`atomic_file`."""
    names = []
    for p in folder.rglob("*"):
        if p.is_symlink() or not p.is_file():
            continue
        rel = p.relative_to(folder).as_posix()
        if rel in (MANIFEST_NAME, PARTS_NAME, TEMPORARY_DIR_LOCK) or rel in OLD_PARTS_NAMES:
            continue
        if p.name.startswith(".") and p.name.endswith(TEMPORARY_SUFFIX):
            continue
        names.append(rel)
    return sorted(names)


def record_manifest(folder: str | os.PathLike) -> dict[str, str]:
    """Record the SHA-256 of every file in ``folder`` in its manifest ``<folder>/SHA256SUMS`` and return them
    (relative POSIX path -> 64 hex digits).

    Call it once the folder is complete (e.g. inside :func:`temporary_dir`, before renaming the folder into
    place, so that the manifest arrives with it). Covers every regular file below ``folder``, recursively,
    except the manifest itself, the lock file of :func:`temporary_dir` (``.callmaybe-lock``) and temporary
    files of :func:`atomic_file`; symlinks are skipped. The manifest is in ``sha256sum`` format, one
    ``<hex>  <relative path>`` line per file, sorted by path (``sha256sum -c SHA256SUMS`` in the folder checks
    it), written atomically. Beside it, ``BLAKE3PARTS`` holds the BLAKE3 (https://github.com/BLAKE3-team/BLAKE3,
    256 bits) of each :data:`PART_BYTES` part of every file, so that :func:`check_manifest` can hash the parts on
    several cores (3.3 times SHA-256's speed here), and the BLAKE3 of the manifest's bytes: a manifest changed
    since is checked whole. Raises OSError if a file cannot be read (or is not a regular file: a symlink, a
    FIFO) or the manifest written.
    """
    folder = Path(folder)
    both = {rel: _file_digests(folder / rel) for rel in _manifest_files(folder)}
    digests = {rel: whole for rel, (whole, _) in both.items()}
    manifest = "".join(f"{d}  {rel}\n" for rel, d in digests.items()).encode("utf-8")
    _write_parts(folder, {rel: parts for rel, (_, parts) in both.items()}, manifest)
    atomic_write_bytes(folder / MANIFEST_NAME, manifest)
    return digests


def check_manifest(folder: str | os.PathLike, workers: int | None = None) -> list[str]:
    """The files of ``folder`` that do not match its manifest (:func:`record_manifest`); empty when all do.

    Every file is read and hashed in full: part by part (BLAKE3, about 3 GB/s a core here) on ``workers``
    threads (default: the CPUs this process may use) when ``BLAKE3PARTS`` covers the manifest's
    files; else each file whole with SHA-256 (1.2 GB/s), one after another, and a folder whose files all match
    then gets its ``BLAKE3PARTS`` (written in the same pass; a folder recorded before, or with an older
    ``SHA256PARTS``, which is ignored). Returned, as sorted relative POSIX paths: a listed file that is
    missing, unreadable, not a regular file (a symlink, a FIFO: never opened for reading, so never waited
    on) or has another SHA-256 (or another part's), and a file present but not listed (as
    :func:`record_manifest` would cover it). A file changed while it is checked is reported or passes as it was
    read, never a crash. A missing, unreadable or malformed manifest returns
    ``["SHA256SUMS"]``. Never raises.
    """
    folder = Path(folder)
    try:
        manifest = (folder / MANIFEST_NAME).read_bytes()
        lines = manifest.decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return [MANIFEST_NAME]
    expected: dict[str, str] = {}
    for line in lines:
        digest, sep, rel = line.partition("  ")
        if not sep or not _HEX64.fullmatch(digest) or not rel:
            return [MANIFEST_NAME]
        expected[rel] = digest
    parts = _read_parts(folder, expected, manifest)
    bad = _check_parts(folder, parts, workers) if parts is not None else _check_whole(folder, expected, manifest)
    try:
        present = _manifest_files(folder)
    except OSError:
        present = []
    bad.extend(rel for rel in present if rel not in expected)
    return sorted(set(bad))


def _check_parts(folder: Path, parts: dict[str, list[str]], workers: int | None) -> list[str]:
    """The files of ``parts`` (:func:`_read_parts`) with a part that differs, hashed on ``workers`` threads."""
    from concurrent.futures import ThreadPoolExecutor

    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    tasks = [(rel, i, i == len(ds) - 1, d) for rel, ds in parts.items() for i, d in enumerate(ds)]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        oks = list(pool.map(lambda t: _part_ok(folder / t[0], t[1], t[2], t[3]), tasks))
    return sorted({rel for (rel, *_), ok in zip(tasks, oks) if not ok})


def _check_whole(folder: Path, expected: dict[str, str], manifest: bytes) -> list[str]:
    """The files of ``expected`` whose SHA-256 differs (or that cannot be read), each hashed whole; when none,
    ``folder`` gets its parts file beside ``manifest`` (the manifest's bytes), from the same pass (a failure
    to write it is ignored)."""
    bad, parts = [], {}
    for rel, digest in expected.items():
        try:
            whole, parts[rel] = _file_digests(folder / rel)
        except (OSError, ValueError):  # ValueError: a path with a NUL byte
            bad.append(rel)
            continue
        if whole != digest:
            bad.append(rel)
    if not bad:
        with contextlib.suppress(OSError):
            _write_parts(folder, parts, manifest)
    return bad


def human_size(n: float) -> str:
    """``n`` bytes as B / KB / MB / GB (powers of 1000): ``1234567`` -> ``"1.2 MB"``."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
