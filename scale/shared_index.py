"""A new tool list compiled once per cluster, not once per replica: the compile function the runtime is handed,
wrapped so that indexes go through a folder every replica sees (the cluster's shared storage).

For a catalog that no replica has in memory or finds on its own disk (:meth:`Runtime.index_for`), the
wrapped compile takes an exclusive ``flock`` on ``<folder>/<index name>.lock`` (the name
:func:`callmaybe.core.indexes.cache_path` gives: both fingerprints and the options), then reads the index
there if another replica wrote it meanwhile (fingerprints checked), else compiles it and writes it by atomic
rename (:func:`callmaybe.core.indexfile.save_index`: a reader sees no file or the whole file). So two replicas
that get the same new tool list at once compile it once: the second waits on the lock, then reads. Where the
storage has no working ``flock`` (some object-store mounts), the lock is skipped: two replicas may then both
compile, and the renames still leave one whole file.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..core.catalog import Function, catalog_fingerprint
from ..core.errors import IndexFileError
from ..core.indexes import cache_path, options_match
from ..core.indexfile import IndexData, read_index_for, save_index
from ..core.messages import say
from ..core.vocabulary import Vocabulary
from ..runtime.answering.session import Compile


class SharedCompile:
    """``compile`` (a :data:`~callmaybe.runtime.answering.session.Compile`) behind the folder ``folder`` (module
    docstring); picklable, so Ray can hand it to every replica. ``counts``: ``{"compiled": catalogs this
    process compiled itself, "shared": catalogs it read from the folder instead}`` (``serve --ray`` shows them
    in each replica's ``/health``)."""

    def __init__(self, compile: Compile, folder: str | os.PathLike):
        self.compile, self.folder = compile, Path(folder)
        self.counts = {"compiled": 0, "shared": 0}

    def __call__(self, functions: list[Function], vocabulary: Vocabulary, options: dict[str, str],
                 quiet: bool) -> IndexData:
        """The index of ``functions`` for ``vocabulary`` and ``options``: read from the folder, or compiled
        once (under the lock) and written there. Raises what ``compile`` raises (SchemaError ...)."""
        vfp, cfp = vocabulary.fingerprint(), catalog_fingerprint(functions)
        path = self.folder / cache_path(cfp, vfp, options).name
        with _locked(path.with_name(path.name + ".lock")):
            found = _read(path, vfp, cfp, options)
            if found is not None:
                self.counts["shared"] += 1
                return found
            index = self.compile(functions, vocabulary, options, quiet)
            self.counts["compiled"] += 1
            try:
                save_index(path, index)
            except OSError as exc:
                say(f"cannot share the index at {path}: {exc.strerror or exc}")
            return index


def _read(path: Path, vfp: str, cfp: str, options: dict[str, str]) -> IndexData | None:
    """The index at ``path`` when it is there, whole and compiled for these fingerprints and options; else
    None (a corrupt one is compiled again and replaced)."""
    if not path.is_file():
        return None
    try:
        index = read_index_for(path, vfp, cfp)
    except IndexFileError as exc:
        say(f"compiling again: {exc}")
        return None
    return index if options_match(index.header, options) else None


@contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock`` (created if needed) for the block; without one where the
    file system refuses it (then only the atomic rename protects the index)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:  # closing it releases the lock
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        except OSError:
            pass
        yield
