"""Where index files live and what they are called: shipped with the package, beside a model, in the cache.

An index is found by what it was compiled for (vocabulary fingerprint, catalog fingerprint, compile
options), never by its file name; names only keep folders readable. Places searched, in order:

1. ``indexes/`` inside the installed package (the indexes callmaybe ships for its default models);
2. ``<model folder>/callmaybe/*.safetensors``: a model publisher ships indexes alongside the weights;
3. ``cache_dir("indexes")``: indexes compiled on this machine.

Imports neither torch nor interegular; compiling a missing index is the caller's job (see ``cli.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
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
                return load_matching(path, vocabulary_fingerprint, catalog_fingerprint, options)
            except IndexFileError as exc:
                say(f"skipping {exc}")
    return None
