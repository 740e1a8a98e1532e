"""The index file: the one contract between compiler/ and runtime/.

One safetensors file (https://github.com/huggingface/safetensors) holding numpy arrays and a msgpack header
stored as the uint8 tensor ``header``. Arrays (S states, C byte classes, R distinct rows, W vocabulary size):

* ``byte_class``  uint8 (256,): the byte class of each byte.
* ``transitions`` int32 (S, C): the byte DFA over classes; -1 = dead. State ``header["start"]`` is initial.
* ``accepting``   uint8 (S,): 1 where the call is complete (EOS allowed there, and only there).
* ``state_row``   int32 (S,): the row of allowed tokens of each state (identical rows are stored once).
* ``row_kind``    uint8 (R,): 0 = sorted token-id list, 1 = packed bitmask (whichever is smaller).
* ``row_offset``  int64 (R,): start of the row in ``row_ids`` (elements) or ``row_bits`` (bytes).
* ``row_count``   int32 (R,): number of allowed tokens in the row (EOS excluded).
* ``row_ids``     int32: concatenated id lists. ``row_bits`` uint8: concatenated bitmasks, W bits each,
  little-endian bit order (bit i of byte k is token 8k + i).
* ``min_tokens``  int32 (S,): the fewest tokens that lead from the state to an accepting state.

An index with counters (version 5, or 4 before guard lists were shared; header ``counters``: the bound ``hi_k`` of each counter, K counters,
X effects, G guarded entries; see :mod:`callmaybe.compiler.automata.counters`) adds:

* ``counter_hi``   int32 (K,): the bounds again, as an array.
* ``counter_live`` uint8 (S, K): 1 where counter k's value matters at the state (0 elsewhere, where the
  runtime keeps it at 0).
* ``trans_effect`` int32 (S, C): the effect of each transition on the counters (0: none).
* ``effect_add`` int32, ``effect_reset`` uint8, ``effect_after`` int32, each (X, K): effect x advances
  counter k by ``add`` (allowed while the count stays <= ``hi_k``), then, where ``reset``, sets it to
  ``after``. Effect 0 is no effect.
* ``state_guard`` int32 (S,) (version 5): the guard list of each state (identical lists are stored once, as
  rows are); ``guard_offset`` int64 (L + 1,), ``guard_token`` int32 (G,), ``guard_effect`` int32 (G,),
  ``guard_need`` int32 (G,): per guard list (a slice of the others, tokens sorted), the allowed tokens that
  have an effect or a need, with them; ``need`` int32 (Y, K): the distinct needs. (Version 4 has no
  ``state_guard``: its guard lists are the states', ``guard_offset`` of shape (S + 1,); it is read as
  ``state_guard`` = 0 .. S - 1.) The rows list every token the automaton
  allows; a guarded token is allowed at counts ``c`` only where ``c_k + need_k <= hi_k`` for every counter
  (its advances and the fewest still required after it). Then its effect updates the counts.
  ``min_tokens`` follows tokens that need no more than the state itself, so it holds at any allowed counts.

The next state after a token is the DFA state after its bytes (``transitions`` walked over the token's byte
classes): storing that instead of a (state, token) -> next table keeps files 100x smaller.

The header holds the index version, the vocabulary fingerprint (SHA-256 of the regular tokens' bytes, EOS
ids and W), W itself (``vocab_size``), the catalog fingerprint, the call regex (``regex``; ``regex_exact``
is false where part of it is a description in the compiler's extended notation, or where it is too long to
store and only its length is given: read it as documentation, not as a grammar), compile options and
statistics, a SHA-256 of every array (``arrays_sha256``) and, from version 3, a SHA-256 of the header itself
(``header_sha256``, over every other field, ``arrays_sha256`` included), so that a file with any byte changed
is refused. The checksums catch accidents (a truncated download, a flipped bit, a hand edit), not an attacker:
anyone who can write the file can recompute them. Imports neither torch nor interegular.

Version policy: ``INDEX_VERSION`` is the version this code writes. A reader reads every version in
:data:`READABLE_VERSIONS` (older ones are upgraded in memory: version 1 called ``vocab_size`` ``width``) and
refuses any other with one line naming the file's version and the versions it reads. An index without
counters is written as version 3 (:data:`PLAIN_VERSION`), which older readers read too. A change that an older
reader would misread (a new array, a changed meaning) bumps the version; publishers who ship indexes in model
folders ship the version their users' callmaybe reads.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from .files import atomic_write_bytes
from .errors import IndexFileError, IndexVersionError

INDEX_VERSION = 5
#: The version of an index without counters: 3, which readers before version 4 read as well.
PLAIN_VERSION = 3
#: The revision of the language the compiler writes for a catalog, recorded in the header as
#: ``grammar_revision`` (absent: 1). Bumped with every compiler change that changes which texts some schema
#: accepts (revision 2: issue 13's exact numbers, lengths, formats and combinations; revision-1 indexes
#: capped integers at 15 digits; revision 3: long counts with counters, so maxLength, pattern repeats and
#: maxItems past the old caps are enforced; revision 4: ``-0`` is written wherever 0 is valid; revision 5:
#: strings in their canonical spelling only, no ``\/`` and no ``\uXXXX`` but for controls). An index of
#: another revision is not reused from the shipped folder, a model folder or the cache: it is compiled again
#: (:func:`~.indexes.find`). The shipped indexes are rebuilt with ``make indexes`` (a test compares them with a
#: fresh compile).
GRAMMAR_REVISION = 5
#: The detail of the one note of the header's ``not_enforced`` list that concerns JSON text rather than a
#: keyword: an open object's extra keys may come twice (RFC 8259 lets names repeat; a parser keeps the last
#: value). The compiler writes it; the server takes schemas with it, and refuses any other note.
REPEATED_KEYS = "extra keys are not checked for repeats"


def _upgrade_v1(header: dict[str, Any]) -> dict[str, Any]:
    header = dict(header)
    header["vocab_size"] = header.pop("width")
    header["index_version"] = header.pop("format_version")  # the version it was written as: 1
    return header


#: index version -> the function that turns its header into the current version's.
READABLE_VERSIONS = {1: _upgrade_v1, 2: lambda header: header, 3: lambda header: header, 4: lambda header: header,
                     5: lambda header: header}
#: the first version whose indexes with counters share guard lists (``state_guard``).
SHARED_GUARDS_SINCE = 5
#: the first version whose header carries ``header_sha256``.
HEADER_DIGEST_SINCE = 3

ARRAYS = (
    "byte_class", "transitions", "accepting", "state_row", "row_kind", "row_offset", "row_count",
    "row_ids", "row_bits", "min_tokens",
)
DTYPES = {
    "byte_class": np.uint8, "transitions": np.int32, "accepting": np.uint8, "state_row": np.int32,
    "row_kind": np.uint8, "row_offset": np.int64, "row_count": np.int32, "row_ids": np.int32,
    "row_bits": np.uint8, "min_tokens": np.int32,
}
#: The arrays of an index with counters (version 5, header ``counters``: each counter's bound): see the
#: module docstring.
COUNTER_ARRAYS = (
    "counter_hi", "counter_live", "trans_effect", "effect_add", "effect_reset", "effect_after",
    "state_guard", "guard_offset", "guard_token", "guard_effect", "guard_need", "need",
)
DTYPES.update({
    "counter_hi": np.int32, "counter_live": np.uint8, "trans_effect": np.int32, "effect_add": np.int32,
    "effect_reset": np.uint8, "effect_after": np.int32, "state_guard": np.int32, "guard_offset": np.int64, "guard_token": np.int32,
    "guard_effect": np.int32, "guard_need": np.int32, "need": np.int32,
})
ROW_IDS, ROW_BITS = 0, 1


def array_names(header: dict[str, Any]) -> tuple[str, ...]:
    """The arrays an index with ``header`` holds: :data:`ARRAYS`, and :data:`COUNTER_ARRAYS` with counters
    (without ``state_guard`` in a file of version 4)."""
    if not header.get("counters"):
        return ARRAYS
    if header.get("index_version", INDEX_VERSION) < SHARED_GUARDS_SINCE:
        return ARRAYS + tuple(n for n in COUNTER_ARRAYS if n != "state_guard")
    return ARRAYS + COUNTER_ARRAYS


@dataclass
class IndexData:
    """An index in memory: the arrays named in :data:`ARRAYS` (see the module docstring) and the header."""

    header: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    @property
    def num_states(self) -> int:
        return int(self.arrays["transitions"].shape[0])

    @property
    def vocab_size(self) -> int:
        return int(self.header["vocab_size"])

    def row(self, row: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Row ``row`` exactly as stored, without a copy: ``(ids, None)`` with the sorted int32 id list, or
        ``(None, bits)`` with the uint8 packed bitmask of ceil(vocab_size / 8) bytes (little bit order)."""
        a = self.arrays
        return self._view(int(a["row_kind"][row]), int(a["row_offset"][row]), int(a["row_count"][row]))

    def rows(self, which: list[int] | None = None) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
        """:meth:`row` of each row in ``which`` (default: every row), in order; the row arrays are read once,
        so this is O(R + len(which)) with no copy of any row."""
        a = self.arrays
        kind, offset, count = a["row_kind"].tolist(), a["row_offset"].tolist(), a["row_count"].tolist()
        return [self._view(kind[r], offset[r], count[r]) for r in (range(len(kind)) if which is None else which)]

    def _view(self, kind: int, offset: int, count: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        if kind == ROW_IDS:
            return self.arrays["row_ids"][offset : offset + count], None
        return None, self.arrays["row_bits"][offset : offset + (self.vocab_size + 7) // 8]

    def row_tokens(self, row: int) -> np.ndarray:
        """The allowed token ids (int32, sorted) of ``row``."""
        ids, bits = self.row(row)
        if ids is not None:
            return ids
        return np.flatnonzero(np.unpackbits(bits, bitorder="little")[: self.vocab_size]).astype(np.int32)

    def allowed_tokens(self, state: int) -> np.ndarray:
        """The allowed token ids (int32, sorted) of ``state``, EOS ids included where it is accepting."""
        ids = self.row_tokens(int(self.state_row[state]))
        if self.accepting[state]:
            ids = np.union1d(ids, np.asarray(self.header["eos_ids"], dtype=np.int32)).astype(np.int32)
        return ids


def revision(header: dict[str, Any]) -> int | str:
    """The grammar revision an index ``header`` was compiled with (see :data:`GRAMMAR_REVISION`; absent: 1):
    an int, or, where the field holds anything but an integer (a string, a float, a bool, null), its
    ``repr`` (never equal to a revision: such a file is treated as of another revision)."""
    value = header.get("grammar_revision", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def _digest(arrays: dict[str, np.ndarray], names: tuple[str, ...] = ARRAYS) -> str:
    h = hashlib.sha256()
    for name in names:
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode() + str(a.shape).encode() + a.dtype.str.encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _canonical(value: Any) -> Any:
    """``value`` with every map's keys sorted, so that equal headers pack to equal bytes."""
    if isinstance(value, dict):
        return {k: _canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def _header_digest(header: dict[str, Any]) -> str:
    """SHA-256 (hex) of the header's fields but ``header_sha256``, packed canonically."""
    rest = {k: v for k, v in header.items() if k != "header_sha256"}
    return hashlib.sha256(msgpack.packb(_canonical(rest), use_bin_type=True)).hexdigest()


def to_bytes(index: IndexData) -> bytes:
    """Serialize ``index`` to the bytes of one safetensors file (header digest filled in)."""
    from safetensors.numpy import save

    names = ARRAYS + COUNTER_ARRAYS if index.header.get("counters") else ARRAYS  # as this version writes them
    arrays = {name: np.ascontiguousarray(index.arrays[name], dtype=DTYPES[name]) for name in names}
    header = dict(index.header)
    header["index_version"] = INDEX_VERSION if names != ARRAYS else PLAIN_VERSION
    header["arrays_sha256"] = _digest(arrays, names)
    header.pop("header_sha256", None)
    header["header_sha256"] = _header_digest(header)
    packed = msgpack.packb(header, use_bin_type=True)
    arrays["header"] = np.frombuffer(packed, dtype=np.uint8)
    return save(arrays, metadata={"format": "callmaybe-index"})


def save_index(path: str | Path, index: IndexData) -> int:
    """Write ``index`` to ``path`` atomically; returns the file size in bytes."""
    data = to_bytes(index)
    atomic_write_bytes(path, data)
    return len(data)


def _foreign(path, names) -> IndexFileError:
    """The error for a readable safetensors file that has no callmaybe header (model weights, say)."""
    names = sorted(names)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return IndexFileError(f"{path}: not a callmaybe index (a safetensors file with tensors {shown or 'none'}, "
                          "and no callmaybe header)")


def read_index(path: str | Path) -> IndexData:
    """Read and check an index file (format, shapes, digest); raises IndexFileError with one line."""
    from safetensors.numpy import load

    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise IndexFileError(f"{path}: index file not found") from None
    except OSError as exc:
        raise IndexFileError(f"{path}: cannot read index file: {exc}") from None
    try:
        tensors = load(raw)
    except Exception as exc:
        raise IndexFileError(f"{path}: corrupt index file ({type(exc).__name__}: {exc})") from None
    if "header" not in tensors:
        raise _foreign(path, tensors)
    try:
        header = msgpack.unpackb(tensors.pop("header").tobytes(), raw=False)
    except Exception as exc:
        raise IndexFileError(f"{path}: corrupt index file ({type(exc).__name__}: {exc})") from None
    header = _current(path, header)
    names = array_names(header)
    missing = [n for n in names if n not in tensors]
    if missing:
        raise IndexFileError(f"{path}: corrupt index file (missing arrays: {', '.join(missing)})")
    if _digest(tensors, names) != header.get("arrays_sha256"):
        raise IndexFileError(f"{path}: corrupt index file (array checksum mismatch)")
    arrays = {n: tensors[n] for n in names}
    if header.get("counters") and "state_guard" not in arrays:  # version 4: one guard list per state
        arrays["state_guard"] = np.arange(len(arrays["accepting"]), dtype=np.int32)
    return IndexData(header=header, arrays=arrays)


def read_header(path: str | Path) -> dict[str, Any]:
    """Read only the msgpack header of an index file (cheap: no other array is read).

    Raises IndexFileError for a file that is not a readable index.
    """
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            if "header" not in f.keys():
                raise _foreign(path, f.keys())
            header = msgpack.unpackb(f.get_tensor("header").tobytes(), raw=False)
    except IndexFileError:
        raise
    except Exception as exc:
        raise IndexFileError(f"{path}: corrupt index file ({type(exc).__name__}: {exc})") from None
    return _current(path, header)


def _current(path, header: Any) -> dict[str, Any]:
    """``header`` upgraded to :data:`INDEX_VERSION`; raises IndexFileError for a version this code cannot read."""
    if not isinstance(header, dict):
        raise IndexFileError(f"{path}: corrupt index file (header is not a map)")
    version = header.get("index_version", header.get("format_version"))
    if version not in READABLE_VERSIONS:
        known = " and ".join(str(v) for v in sorted(READABLE_VERSIONS))
        raise IndexVersionError(f"{path}: index version {version} cannot be read by this callmaybe (it reads "
                             f"versions {known}); recompile the index or upgrade callmaybe")
    if version >= HEADER_DIGEST_SINCE and _header_digest(header) != header.get("header_sha256"):
        raise IndexFileError(f"{path}: corrupt index file (header checksum mismatch)")
    return READABLE_VERSIONS[version](header)


def read_index_for(
    path: str | Path, vocabulary_fingerprint: str | None = None, catalog_fingerprint: str | None = None
) -> IndexData:
    """Read an index and check that it was compiled for this vocabulary and catalog.

    Raises IndexFileError (one line naming the file) for a corrupt file or a fingerprint mismatch.
    """
    index = read_index(path)
    check_fingerprints(index, path, vocabulary_fingerprint, catalog_fingerprint)
    return index


def check_fingerprints(
    index: IndexData, path: str | Path, vocabulary_fingerprint: str | None, catalog_fingerprint: str | None
) -> None:
    """Raise IndexFileError when ``index`` was compiled for another vocabulary or catalog."""
    have = index.header.get("vocabulary_fingerprint", "")
    if vocabulary_fingerprint is not None and have != vocabulary_fingerprint:
        raise IndexFileError(
            f"{path}: index was compiled for another tokenizer "
            f"(vocabulary {have[:12]}, expected {vocabulary_fingerprint[:12]})"
        )
    have = index.header.get("catalog_fingerprint", "")
    if catalog_fingerprint is not None and have != catalog_fingerprint:
        raise IndexFileError(
            f"{path}: index was compiled for another catalog "
            f"(catalog {have[:12]}, expected {catalog_fingerprint[:12]})"
        )


def describe(path: str | Path) -> list[str]:
    """Lines describing an index file (``callmaybe inspect``): version, functions, states, rows, sizes,
    fingerprints, options and what the grammar does not enforce. Raises IndexFileError for a bad file."""
    import json
    import time

    from .files import human_size

    t = time.perf_counter()
    index = read_index(path)
    load_ms = 1000 * (time.perf_counter() - t)
    h, a = index.header, index.arrays
    kinds = a["row_kind"]
    entries = int(sum(int(a["row_count"][r]) for r in a["state_row"]))
    names = h.get("functions", [])
    return [
        f"file: {path} ({human_size(Path(path).stat().st_size)}, read and checked in {load_ms:.1f} ms)",
        f"index version: {h.get('index_version')}, compiler {h.get('compiler_version')}, grammar revision "
        f"{revision(h)}",
        f"functions: {len(names)} ({', '.join(names[:8])}" + (", ..." if len(names) > 8 else "") + ")",
        f"states: {index.num_states} ({int(a['accepting'].sum())} accepting), byte classes: {a['transitions'].shape[1]}",
        f"allowed-token entries: {entries:,}; distinct rows: {len(kinds)} "
        f"({int((kinds == ROW_BITS).sum())} bitmasks, {int((kinds != ROW_BITS).sum())} id lists)",
        f"fewest tokens to complete a call: {int(a['min_tokens'][h['start']])}",
        *([f"counters: {len(h['counters'])} (bounds {', '.join(str(c) for c in h['counters'])}); guarded entries: "
           f"{len(a['guard_token']):,}"] if h.get("counters") else []),
        f"vocabulary: {h.get('vocabulary_name')}, vocab_size {h.get('vocab_size'):,}, EOS {h.get('eos_ids')}",
        f"vocabulary fingerprint: {h.get('vocabulary_fingerprint')}",
        f"catalog fingerprint: {h.get('catalog_fingerprint')}",
        f"options: {json.dumps(h.get('options'))}",
        f"not enforced by the grammar: {len(h.get('not_enforced', []))}"
        + "".join(f"\n  {n}" for n in h.get("not_enforced", [])),
    ]
