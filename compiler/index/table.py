"""The allowed-token table of an index: per-state rows, identical rows stored once, each row as a sorted
token-id list or a packed bitmask (whichever is smaller), and the fewest tokens to completion per state.

Rows are built per *source*, not per state: a state walked alone gives its row from its slice of the walk,
and the members of a state group (:class:`~.walk.GroupWalk`: the positions of a counted string, the contents
of many string values) give theirs from the group's shared walk, a member being named by what it takes of it
(:meth:`~.walk.GroupWalk.serves`, one bit per entry) and by the tokens it walked on its own. Two members that take the same
share and walked the same tokens alone have the same row, so each distinct row is made once (O(vocabulary)
bits), whatever the number of states: the 61 positions of an email's domain label under ``maxLength`` are a
handful of rows, not 61 x 35,000 entries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ...core.indexfile import ROW_BITS, ROW_IDS
from .walk import WalkResult
from ..automata.unique import unique


def content_key(*arrays: np.ndarray) -> bytes:
    """A key of the contents of ``arrays`` (their bytes, or a 16-byte BLAKE2b digest of them past 256
    bytes), for telling rows apart by content."""
    data = arrays[0].tobytes() if len(arrays) == 1 else b"|".join([a.tobytes() for a in arrays])
    return data if len(data) <= 256 else hashlib.blake2b(data, digest_size=16).digest()


class RowStore:
    """Distinct rows of allowed tokens, numbered in the order they are first added, each stored once: as a
    sorted int32 id list, or as a packed bitmask of ceil(W / 8) bytes (little bit order) when it holds more
    than W / 32 tokens (W: ``vocab_size``). :meth:`arrays` gives the index file's row arrays
    (:mod:`callmaybe.core.indexfile`)."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size
        self.nbytes = (vocab_size + 7) // 8
        self._rows: dict[bytes, int] = {}
        self._kinds: list[int] = []
        self._offsets: list[int] = []
        self._counts: list[int] = []
        self._id_parts: list[np.ndarray] = []
        self._bit_parts: list[np.ndarray] = []
        self._n_ids = self._n_bits = 0

    def __len__(self) -> int:
        return len(self._kinds)

    def add(self, parts: Sequence[np.ndarray], ordered: bool = False) -> int:
        """The row of the tokens in ``parts`` (int arrays of token ids; repeats count once), added unless an
        equal row is stored. ``ordered``: one part, sorted and without repeats (a walk's slice)."""
        total = sum(len(p) for p in parts)
        if total * 4 > self.nbytes:  # a bitmask, unless repeats make it short
            mask = np.zeros(self.nbytes * 8, dtype=bool)
            for p in parts:
                mask[p] = True
            count = int(np.count_nonzero(mask))
            if count * 4 > self.nbytes:
                bits = np.packbits(mask, bitorder="little")
                return self._store(b"b" + content_key(bits), ROW_BITS, count, bits)
            ids = np.flatnonzero(mask).astype(np.int32)
        elif ordered and len(parts) == 1:
            ids = np.asarray(parts[0], dtype=np.int32)
        else:
            ids = unique(np.concatenate(parts)).astype(np.int32) if parts else np.zeros(0, np.int32)
        return self._store(b"i" + content_key(ids), ROW_IDS, len(ids), ids)

    def _store(self, key: bytes, kind: int, count: int, data: np.ndarray) -> int:
        row = self._rows.get(key)
        if row is not None:
            return row
        row = self._rows[key] = len(self._kinds)
        self._kinds.append(kind)
        self._counts.append(count)
        if kind == ROW_BITS:
            self._offsets.append(self._n_bits)
            self._bit_parts.append(data)
            self._n_bits += len(data)
        else:
            self._offsets.append(self._n_ids)
            self._id_parts.append(data)
            self._n_ids += len(data)
        return row

    def arrays(self) -> dict[str, np.ndarray]:
        """``row_kind``, ``row_offset``, ``row_count``, ``row_ids``, ``row_bits`` of the stored rows."""
        return {
            "row_kind": np.asarray(self._kinds, dtype=np.uint8),
            "row_offset": np.asarray(self._offsets, dtype=np.int64),
            "row_count": np.asarray(self._counts, dtype=np.int32),
            "row_ids": np.concatenate(self._id_parts).astype(np.int32) if self._id_parts else np.zeros(0, np.int32),
            "row_bits": np.concatenate(self._bit_parts).astype(np.uint8) if self._bit_parts else np.zeros(0, np.uint8),
        }


def build_rows(result: WalkResult, num_states: int, vocab_size: int) -> dict[str, np.ndarray]:
    """Group the walk's allowed (state, token) pairs into deduplicated rows.

    Returns the arrays ``state_row``, ``row_kind``, ``row_offset``, ``row_count``, ``row_ids``,
    ``row_bits`` of the index file format (see :mod:`callmaybe.core.indexfile`); rows are numbered by the
    first state that has them. A bitmask costs ceil(W / 8) bytes and an id list 4 bytes per token, so rows
    of more than W / 32 tokens are stored as bitmasks. A group member's row is made from the group's shared
    walk once per distinct (share, own tokens) pair (see the module docstring), so the work is O(distinct
    rows x W / 8 + members x shared entries / 8 + states), not O(entries).
    """
    store = RowStore(vocab_size)
    state_row = np.zeros(num_states, dtype=np.int32)
    ls, lt, _ = result.lone
    lone = result.lone_slices()
    same = _same_as_earlier(lt, lone)
    member = result.member_index()
    by_sig: dict[tuple, int] = {}
    empty = np.zeros(0, dtype=np.int32)
    for s in range(num_states):
        where = lone.get(s)
        if where is not None:
            earlier = same.get(s)
            # an earlier state with the same tokens: its row (the store would find it again, at a key's cost)
            state_row[s] = state_row[earlier] if earlier is not None else store.add([lt[where[0] : where[1]]],
                                                                                     ordered=True)
            continue
        got = member.get(s)
        if got is None:
            state_row[s] = store.add([empty], ordered=True)
            continue
        gi, i = got
        g = result.groups[gi]
        own = g.own[i][0]
        sig = (gi, g.member_keys()[i], content_key(own))
        row = by_sig.get(sig)
        if row is None:
            row = by_sig[sig] = store.add([g.shared_tokens(i), own])
        state_row[s] = row
    return {"state_row": state_row, **store.arrays()}


def _same_as_earlier(tokens: np.ndarray, slices: dict[int, tuple[int, int]]) -> dict[int, int]:
    """state -> the first state (in state order) whose slice of ``tokens`` holds the same tokens, for the
    states of ``slices`` (state -> (start, end), in state order, together covering ``tokens`` end to end) that
    repeat an earlier one. Slices are told apart by a 64-bit hash of their tokens and positions, and each
    match is checked token by token (a collision only leaves a state out). One numpy pass, where a key per
    state cost 4-5 us (JSONSchemaStore's compose-spec: 39,000 states walked alone, 0.18 s)."""
    if not slices:
        return {}
    states = np.fromiter(slices, dtype=np.int64, count=len(slices))
    starts = np.fromiter((a for a, _ in slices.values()), dtype=np.int64, count=len(slices))
    lengths = np.fromiter((b - a for a, b in slices.values()), dtype=np.int64, count=len(slices))
    if len(states) < 2 or int(starts[0]) != 0 or int(starts[-1] + lengths[-1]) != len(tokens) or (lengths <= 0).any() \
            or not (starts[1:] == starts[:-1] + lengths[:-1]).all():
        return {}
    pos = np.arange(len(tokens), dtype=np.int64) - np.repeat(starts, lengths)  # each token's place in its slice
    mult = np.random.default_rng(0x5EED).integers(1, 2**63, size=int(lengths.max()), dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        h = np.add.reduceat((tokens.astype(np.uint64) + np.uint64(1)) * mult[pos], starts)
        h ^= lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    rep = first[inverse.reshape(-1)]  # each slice's first slice with its hash
    cand = np.flatnonzero(rep != np.arange(len(states)))
    if not len(cand):
        return {}
    owner = np.repeat(np.arange(len(states)), lengths)  # each token's slice
    r = rep[owner]
    wrong = (lengths[r] != lengths[owner]) | (tokens[starts[r] + np.minimum(pos, lengths[r] - 1)] != tokens)
    bad = np.zeros(len(states), dtype=bool)
    bad[owner[wrong]] = True
    keep = cand[~bad[cand]]
    return dict(zip(states[keep].tolist(), states[rep[keep]].tolist()))


# Deduplicate (state, next state) edges with a bitmap of all pairs while it stays this small (bytes).
EDGE_BITMAP_MAX = 1 << 25


def distinct_edges(result: WalkResult, num_states: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (state, next state) pairs of ``result``: int64 arrays (src, dst), sorted.

    Marks a bool bitmap of all state pairs (no comparison sort of millions of entries: ~25 ms against
    ~240 ms for ``np.unique`` on the 7.3 million entries of the 30-function catalog), or sorts when the
    bitmap would exceed :data:`EDGE_BITMAP_MAX` bytes.
    """
    state, _, next_state = result.lone
    keys = [state.astype(np.int64) * num_states + next_state]
    for g in result.groups:  # the members' next states, without deriving their tokens
        keys.append(g.edge_keys(num_states))
    return unique_edges(np.concatenate(keys), num_states)


def unique_edges(key: np.ndarray, num_states: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct edges of ``key`` (int64 ``src * num_states + dst``) as sorted int64 (src, dst) arrays:
    by a bitmap of all pairs up to :data:`EDGE_BITMAP_MAX` bytes, else by a sort of the keys that differ from
    the key before them (a state's tokens are in token order, and neighbouring tokens mostly lead to the same
    state: dss-2.0.0's 5.3 million entries walked alone are 282,000 such keys, sorted in 0.01 s against 0.24 s)."""
    if num_states * num_states <= EDGE_BITMAP_MAX:
        seen = np.zeros(num_states * num_states, dtype=bool)
        seen[key] = True
        edge = np.flatnonzero(seen)
    else:
        if len(key) > 1:
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
        edge = unique(key)
    return edge // num_states, edge % num_states


def min_tokens(result: WalkResult, accepting: np.ndarray) -> np.ndarray:
    """The fewest tokens from each state to an accepting state (int32, shape (S,); large if unreachable),
    over the distinct (state, next state) token edges of ``result`` (:func:`min_tokens_from_edges`)."""
    src, dst = distinct_edges(result, len(accepting))
    return min_tokens_from_edges(src, dst, accepting)


def min_tokens_from_edges(src: np.ndarray, dst: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """The fewest edges from each state to an accepting state (int32, shape (S,); large if unreachable),
    edges ``src[i] -> dst[i]`` (int arrays, any order, repeats allowed). One breadth-first search backwards
    from every accepting state at once, level by level (a level: the unreached predecessors of the last one,
    by the edges sorted by target), so that it costs the edges once, not once per level as a relaxation of
    every edge until nothing changes does."""
    inf = np.iinfo(np.int32).max // 2
    n = len(accepting)
    dist = np.where(accepting, 0, inf).astype(np.int64)
    frontier = np.flatnonzero(accepting)
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    order = np.argsort(dst, kind="stable")
    pred, at = src[order], np.searchsorted(dst[order], np.arange(n + 1))
    level = 0
    while len(frontier):
        level += 1
        lo, hi = at[frontier], at[frontier + 1]
        count = hi - lo
        total = int(count.sum())
        if not total:
            break
        first = np.zeros(len(frontier), dtype=np.int64)
        np.cumsum(count[:-1], out=first[1:])
        found = pred[np.repeat(lo - first, count) + np.arange(total)]
        frontier = unique(found[dist[found] == inf])
        dist[frontier] = level
    return dist.astype(np.int32)
