"""Where index files live and what they are called: shipped with the package, beside a model, in the cache.

An index is found by what it was compiled for (vocabulary fingerprint, catalog fingerprint, compile
options), never by its file name; names only keep folders readable. Places searched, in order:

1. ``indexes/`` inside the installed package (the indexes callmaybe ships for its default models);
2. ``<model folder>/callmaybe/*.safetensors``: a model publisher ships indexes alongside the weights;
3. ``cache_dir("indexes")``: indexes compiled on this machine.

The cache is bounded (:func:`prune_cache`): at most :data:`CACHE_MAX_FILES` index files and
:data:`CACHE_MAX_BYTES` bytes, the least recently used removed first (a use is a compile that wrote the file or
a :func:`find` that returned it, recorded as the file's modification time: :func:`used`). Any process may prune it: a file removed
while another process reads it stays readable to that process (POSIX unlink).

Imports neither torch nor interegular; compiling a missing index is the caller's job (see ``cli.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from .errors import IndexFileError, IndexVersionError
from .files import cache_dir
from .indexfile import GRAMMAR_REVISION, IndexData, read_header, read_index_for, revision
from .messages import say

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "indexes"
MODEL_SUBDIR = "callmaybe"


def slug(text: str) -> str:
    """A file-name-safe form of a model or tokenizer name: ``Qwen/Qwen3-0.6B`` -> ``qwen-qwen3-0.6b``."""
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "index"


def index_file_name(catalog_name: str, tokenizer: str, call_format: str = "plain") -> str:
    """The file name ``compile`` gives an index: ``<catalog>.<tokenizer>[.<call format>].safetensors``."""
    suffix = "" if call_format == "plain" else f".{slug(call_format)}"
    return f"{slug(catalog_name)}.{slug(tokenizer)}{suffix}.safetensors"


def cache_path(catalog_fingerprint: str, vocabulary_fingerprint: str, options: dict[str, Any]) -> Path:
    """Where an index compiled on demand is cached: named by both fingerprints and a hash of the options."""
    tag = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:8]
    return cache_dir("indexes") / f"{catalog_fingerprint[:16]}-{vocabulary_fingerprint[:16]}-{tag}.safetensors"


#: The most index files the cache keeps (:func:`prune_cache`).
CACHE_MAX_FILES = 100
#: The most bytes of index files the cache keeps: 256 MiB (the public catalog's index is 0.2 MB for Qwen3's
#: vocabulary; a large catalog's a few MB).
CACHE_MAX_BYTES = 256 * 2**20
#: The bounds in words, for ``--help`` and messages.
CACHE_BOUNDS = f"at most {CACHE_MAX_FILES} files and {CACHE_MAX_BYTES // 2**20} MiB, the least recently used removed first"


def used(path: Path) -> None:
    """Record a use of the cached index ``path``, for :func:`prune_cache`'s order: its modification time is set
    to now (not its access time, which every read of a header sets under ``relatime``, matching or not; the
    file's content is checked by its own SHA-256, never by its times). A file that cannot be touched is left as
    it is."""
    try:
        now = time.time()
        os.utime(path, (now, now))
    except OSError:
        pass


def prune_cache(keep: Path | None = None, max_files: int | None = None, max_bytes: int | None = None) -> list[Path]:
    """Remove the least recently used index files of ``cache_dir("indexes")`` (by :func:`used`'s time, oldest first)
    until at most ``max_files`` of them and ``max_bytes`` bytes remain (None: :data:`CACHE_MAX_FILES`,
    :data:`CACHE_MAX_BYTES`); ``keep`` (the file just written) is
    never removed, even alone past ``max_bytes``. Temporaries of writes under way (``.*.tmp``) are not index
    files. Returns the paths removed; a file another process removed first, or that cannot be removed, is
    skipped."""
    max_files = CACHE_MAX_FILES if max_files is None else max_files
    max_bytes = CACHE_MAX_BYTES if max_bytes is None else max_bytes
    folder = cache_dir("indexes")
    files = []
    for path in folder.glob("*.safetensors"):
        try:
            st = path.stat()
        except OSError:
            continue
        if path.is_file():
            files.append((st.st_mtime, st.st_size, path))
    files.sort(key=lambda f: f[0])
    count, size = len(files), sum(f[1] for f in files)
    removed = []
    for _, nbytes, path in files:
        if count <= max_files and size <= max_bytes:
            break
        if keep is not None and path.resolve() == Path(keep).resolve():
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        count, size = count - 1, size - nbytes
        removed.append(path)
    return removed


def search_dirs(model_dir: Path | None = None) -> list[Path]:
    """The folders searched for an index, in order (see the module docstring)."""
    dirs = [SHIPPED_DIR]
    if model_dir is not None:
        dirs.append(Path(model_dir) / MODEL_SUBDIR)
    dirs.append(cache_dir("indexes"))
    return dirs


def candidates(model_dir: Path | None = None) -> list[Path]:
    """Every ``*.safetensors`` file in :func:`search_dirs`, sorted by name within each folder."""
    out: list[Path] = []
    for d in search_dirs(model_dir):
        if d.is_dir():
            out.extend(sorted(p for p in d.rglob("*.safetensors") if p.is_file()))
    return out


def options_match(header: dict[str, Any], options: dict[str, Any]) -> bool:
    """True when the index ``header`` was compiled with ``options`` (a missing option counts as ``""``). The
    index ``form`` must match too, where either side leaves it out (``"call"``): a value index is never taken
    for a call index of a one-function catalog with the same fingerprint, nor the other way round."""
    have = header.get("options", {})
    if have.get("form", "call") != options.get("form", "call"):
        return False
    return all(have.get(k, "") == v for k, v in options.items())


def load_matching(path: Path, vocabulary_fingerprint: str, catalog_fingerprint: str,
                  options: dict[str, Any]) -> IndexData:
    """Read the index at ``path`` and check that it was compiled for this vocabulary, catalog and options.

    Raises IndexFileError (one line naming the file) for a missing or corrupt file, a fingerprint mismatch or
    other compile options. An index of another grammar revision is used as it is, with one line saying so
    (the file was named: :func:`find` skips such files instead).
    """
    index = read_index_for(path, vocabulary_fingerprint, catalog_fingerprint)
    if not options_match(index.header, options):
        raise IndexFileError(f"{path}: index was compiled with options {index.header.get('options')}, "
                             f"this run needs {options}")
    if revision(index.header) != GRAMMAR_REVISION:
        say(f"{path}: compiled with grammar revision {revision(index.header)}, this callmaybe compiles revision "
            f"{GRAMMAR_REVISION} (compile the catalog again for its grammar)")
    return index


def find(vocabulary_fingerprint: str, catalog_fingerprint: str, options: dict[str, Any],
         model_dir: Path | None = None) -> IndexData | None:
    """The first index in :func:`candidates` compiled for this vocabulary, catalog and options, or None.

    Only headers are read until one matches. A file of an index version this callmaybe cannot read, a
    matching file of another grammar revision (:data:`~.indexfile.GRAMMAR_REVISION`: compiled by a compiler
    whose language differs, so the caller compiles it again), or a matching file that turns out corrupt, is
    skipped with a message; other files (model weights, say) silently.
    """
    for path in candidates(model_dir):
        try:
            header = read_header(path)
        except IndexVersionError as exc:
            say(f"skipping {exc}")
            continue
        except IndexFileError:
            continue
        if (header.get("vocabulary_fingerprint") == vocabulary_fingerprint
                and header.get("catalog_fingerprint") == catalog_fingerprint and options_match(header, options)):
            if revision(header) != GRAMMAR_REVISION:
                say(f"skipping {path}: compiled with grammar revision {revision(header)}, this callmaybe compiles "
                    f"revision {GRAMMAR_REVISION}")
                continue
            try:
                found = load_matching(path, vocabulary_fingerprint, catalog_fingerprint, options)
            except IndexFileError as exc:
                say(f"skipping {exc}")
                continue
            if path.parent == cache_dir("indexes"):
                used(path)
            return found
    return None
