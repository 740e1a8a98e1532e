"""A loaded index at decode time: the mask of allowed tokens of a state, the next state, forced text.

Masks are looked up, never computed by scanning the vocabulary. :meth:`TokenIndex.mask` returns a
:class:`Mask`: a view of the state's row exactly as the index stores it (a sorted id list or a packed
bitmask, no copy) plus whether EOS is allowed. One is made per distinct row at load (O(states + rows), no
per-token work), so the first step in a state costs what later ones do. The full-width bool tensor and the 0/-inf float bias are built from it on demand and cached. The
next state after a token is the byte DFA walked over the token's bytes (bounded by the longest token),
memoized per (state, token). Loading does no per-token work, so the first mask is ready within
milliseconds.
"""

from __future__ import annotations


import numpy as np
import torch

from ...core.errors import IndexFileError
from ...core.indexfile import IndexData

# Below this many allowed ids, applying a mask scatters the allowed logits into a -inf tensor instead of
# adding a cached full-width bias (measured on 151,936 float32 logits: ~9 us against ~18 us, and no cache).
SCATTER_MAX_IDS = 4096


class Mask:
    """The tokens allowed in one state, as stored in the index.

    ``ids``: int32 (k,) sorted allowed ids, or None; ``bits``: uint8 (ceil(vocab_size/8),) packed bitmask
    (little bit order: bit j of byte i is token 8i+j), or None; exactly one of the two is set. ``eos_ids``
    are allowed too when ``eos`` is true (accepting states). The masks of the index's rows are made at load,
    one per (row, accepting) pair, as views into the loaded arrays (``shared``: their bias tensors are
    cached); a mask narrowed by a token budget is made per step (``shared=False``). The derived tensors are
    built once per instance.
    """

    __slots__ = ("ids", "bits", "eos", "eos_ids", "vocab_size", "shared", "_tensor", "_ids_t")

    def __init__(self, ids: np.ndarray | None, bits: np.ndarray | None, eos: bool, eos_ids: list[int],
                 vocab_size: int, shared: bool = True):
        self.ids, self.bits, self.eos, self.eos_ids, self.vocab_size = ids, bits, eos, eos_ids, vocab_size
        self.shared = shared
        self._tensor: torch.Tensor | None = None
        self._ids_t: torch.Tensor | None = None

    def tensor(self) -> torch.Tensor:
        """Bool tensor (vocab_size,): True where allowed. Built on first call (10-30 us at 151,936), then cached."""
        t = self._tensor
        if t is None:
            if self.ids is not None:
                t = torch.zeros(self.vocab_size, dtype=torch.bool)
                t[torch.from_numpy(self.ids.astype(np.int64))] = True
            else:
                t = torch.from_numpy(np.unpackbits(self.bits, bitorder="little", count=self.vocab_size).view(bool))
            if self.eos:
                t[self.eos_ids] = True
            self._tensor = t
        return t

    def token_ids(self) -> torch.Tensor:
        """int64 tensor (k,): the allowed ids, EOS included when allowed, sorted."""
        t = self._ids_t
        if t is None:
            if self.ids is not None:
                ids = self.ids.astype(np.int64)
                if self.eos:
                    ids = np.union1d(ids, np.asarray(self.eos_ids, dtype=np.int64))
                t = torch.from_numpy(ids)
            else:
                t = self.tensor().nonzero().flatten()
            self._ids_t = t
        return t

    def count(self) -> int:
        """How many tokens are allowed (EOS included)."""
        if self.ids is not None:
            return len(self.token_ids())
        return int(self.tensor().sum())

    def __contains__(self, token: int) -> bool:
        if self.eos and token in self.eos_ids:
            return True
        if self.ids is not None:
            i = int(np.searchsorted(self.ids, token))
            return i < len(self.ids) and int(self.ids[i]) == token
        if not 0 <= token < self.vocab_size:
            return False
        return bool((self.bits[token >> 3] >> (token & 7)) & 1)

    def is_sparse(self) -> bool:
        """True when applying by scattering the allowed logits beats adding a full-width bias."""
        return self.ids is not None and len(self.ids) <= SCATTER_MAX_IDS


def _ids_below(m: Mask, n: int, device) -> torch.Tensor:
    """The ids ``m`` allows below ``n`` (int64, sorted), on ``device``."""
    ids = m.token_ids()
    if len(ids) and int(ids[-1]) >= n:
        ids = ids[ids < n]
    return ids.to(device)


def _lowest(m: Mask) -> int:
    """The lowest id ``m`` allows (0 when it allows none)."""
    ids = m.token_ids()
    return int(ids[0]) if len(ids) else 0


class TokenIndex:
    """Decode-time view of an :class:`~callmaybe.core.indexfile.IndexData` without counters (one with counters is
    a :class:`~.counted.CountedTokenIndex`; :func:`~.index.open_index` picks the one an index needs).

    ``token_bytes``: the vocabulary's bytes per token id (the same table the index was fingerprinted on).
    Raises IndexFileError when the vocabulary has more tokens than the index's vocab_size, or for an index with
    counters given to this class itself (its masks would ignore the counts).
    """

    def __init__(self, data: IndexData, token_bytes: tuple[bytes | None, ...] | list[bytes | None]):
        if type(self) is TokenIndex and data.header.get("counters"):
            raise IndexFileError("an index with counters needs CountedTokenIndex: open it with open_index()")
        self.data = data
        self.vocab_size = data.vocab_size
        if len(token_bytes) > self.vocab_size:
            raise IndexFileError(f"index vocab_size {self.vocab_size} is smaller than the vocabulary's "
                                 f"{len(token_bytes)} tokens")
        self.token_bytes = token_bytes
        self._num_tokens = len(token_bytes)
        self.start = int(data.header["start"])
        self.eos_ids = [int(e) for e in data.header["eos_ids"]]
        byte_class = data.arrays["byte_class"]
        # a flat int32 view of the transition table: indexing it costs what a list does, and making it
        # costs one copy (``tolist`` took ~3 ms on a 3,339 x 74 table). The copy takes the table out of the
        # memory-mapped file at load, so no step pays a page fault for it later.
        trans = np.array(data.arrays["transitions"], dtype=np.int32, order="C", copy=True)
        self._num_states, self._num_classes = trans.shape
        self._trans = memoryview(trans.reshape(-1)).cast("B").cast("i")
        self._trans_arr = trans  # the same table as a 2-D array, for vectorized walks
        self._accepting = data.arrays["accepting"].astype(bool).tolist()
        self._state_row = data.arrays["state_row"].tolist()
        self._min_tokens = data.arrays["min_tokens"].tolist()
        self._class_of_byte = byte_class.tolist()
        self._class_table = bytes(self._class_of_byte)  # byte -> class, for bytes.translate
        self._state_mask = self._make_masks()
        self._next: dict[int, int] = {}
        self._forced: dict[int, bytes] = {}
        self._forced_ids: dict[int, tuple[object, dict[int, tuple[tuple[int, ...], int]]]] = {}
        self._max_min_tokens = int(max(self._min_tokens)) if self._min_tokens else 0
        self._groups: list[tuple[np.ndarray, np.ndarray]] | None = None
        self._min_tokens_arr = data.arrays["min_tokens"].astype(np.int64)
        self._longest: dict[int, int] = {}
        self._biases: dict[tuple[Mask, torch.device], torch.Tensor] = {}
        self._lengths: np.ndarray | None = None

    @property
    def num_states(self) -> int:
        return self._num_states

    def is_accepting(self, state: int) -> bool:
        return self._accepting[state]

    def is_terminal(self, state: int) -> bool:
        """True when no byte can follow ``state`` (the call is complete and nothing may be appended)."""
        c = self._num_classes
        return all(t < 0 for t in self._trans[state * c : (state + 1) * c])

    def min_tokens(self, state: int) -> int:
        """The fewest tokens that complete the call from ``state``."""
        return self._min_tokens[state]

    def mask(self, state: int) -> Mask:
        """The :class:`Mask` of ``state``: its row as stored (ids or packed bits), EOS only if accepting.

        O(1) and the same cost on first use as later: one list lookup (the masks are made at load).
        Raises IndexError for a state outside the index (-1, the dead state, included).
        """
        if state < 0:
            raise IndexError(f"no mask for state {state}")
        return self._state_mask[state]

    def _make_masks(self) -> list[Mask]:
        """One :class:`Mask` per distinct (row, accepting) pair, shared by the states that have it; each is
        a slice of the index's arrays, so this is O(states + rows) with no per-token work (~0.5 ms for
        3,339 states and 765 rows)."""
        rows = np.asarray(self._state_row, dtype=np.int64) * 2 + np.asarray(self._accepting, dtype=np.int64)
        pairs, inverse = np.unique(rows, return_inverse=True)
        keys = pairs.tolist()
        views = self.data.rows([key >> 1 for key in keys])
        masks = [Mask(ids, bits, bool(key & 1), self.eos_ids, self.vocab_size) for key, (ids, bits) in zip(keys, views)]
        return [masks[i] for i in inverse.reshape(-1).tolist()]

    def _bias(self, m: Mask, device: torch.device | str) -> torch.Tensor:
        """Float32 tensor of shape (vocab_size,) on ``device``: 0 where ``m`` allows, -inf elsewhere.

        Adding it to the logits applies the mask in one vectorized add (about 15-20 us for 151,936 logits
        here, against 90-140 us for ``torch.where``). Cached per (shared mask, device); at most 128 are kept
        (600 KB each at Qwen's vocabulary size).
        """
        key = (m, torch.device(device))
        b = self._biases.get(key)
        if b is None:
            if len(self._biases) >= 128:
                self._biases.clear()
            b = torch.zeros(self.vocab_size, dtype=torch.float32)
            b.masked_fill_(~m.tensor(), float("-inf"))
            b = b.to(key[1])
            self._biases[key] = b
        return b

    def apply(self, state: int, logits: torch.Tensor) -> torch.Tensor:
        """:meth:`apply_mask` with the mask of ``state``."""
        return self.apply_mask(self.mask(state), logits)

    def apply_mask(self, m: Mask, logits: torch.Tensor) -> torch.Tensor:
        """A new tensor like ``logits`` (shape (n,), same dtype) with every token ``m`` does not allow set to
        -inf. A short id row scatters the allowed logits into a -inf tensor; other shared rows add the cached
        float32 bias (:meth:`_bias`) on the logits' device (and cast back for half-precision logits); a per-step mask
        selects with its bool tensor. Ids at or past the index's vocab_size (n > vocab_size) are never
        allowed."""
        n = logits.shape[0]
        if n > self.vocab_size:
            out = torch.full_like(logits, float("-inf"))
            out[: self.vocab_size] = self.apply_mask(m, logits[: self.vocab_size])
            return out
        if m.is_sparse():
            ids = _ids_below(m, n, logits.device)
            out = torch.full_like(logits, float("-inf"))
            out[ids] = logits[ids]
            return out
        if not m.shared:
            return logits.masked_fill(~m.tensor()[:n].to(logits.device), float("-inf"))
        out = logits + self._bias(m, logits.device)[:n]
        return out if out.dtype == logits.dtype else out.to(logits.dtype)

    def best(self, m: Mask, logits: torch.Tensor) -> int:
        """The token ``int(torch.argmax(self.apply_mask(m, logits)))`` names (``logits`` (n,), any float dtype),
        without the masked copy: a short id row takes the argmax of its own logits (a gather of a few dozen
        values where the copy writes the whole vocabulary), other rows the argmax of the logits plus the mask in
        float32 (torch's argmax of bfloat16 is 4-5 times slower than of float32 here: 593 against 130 us for
        151,936 logits; the sum is the masked bfloat16 values exactly). Ties go to the lowest id, as torch's
        argmax gives them; where every allowed logit is -inf, or no allowed id is below the logits' length (a
        head narrower than the vocabulary), the lowest allowed id, 0 when none is (the masked copy's argmax would
        name token 0, allowed or not)."""
        n = min(logits.shape[0], self.vocab_size)
        logits = logits[:n]
        if m.is_sparse():
            ids = _ids_below(m, n, logits.device)
            return int(ids[int(torch.argmax(logits[ids]))]) if len(ids) else _lowest(m)
        if not n:
            return _lowest(m)
        if not m.shared:
            masked = logits.float().masked_fill(~m.tensor()[:n].to(logits.device), float("-inf"))
        else:
            masked = logits.float() + self._bias(m, logits.device)[:n]
        tok = int(torch.argmax(masked))
        return _lowest(m) if masked[tok] == float("-inf") else tok  # nothing allowed above -inf

    def budget_mask(self, state: int, left: int) -> Mask:
        """The :class:`Mask` of ``state`` keeping only tokens after which the call can still be completed
        within ``left`` tokens in all (this one included): :meth:`mask` itself unless the budget is tight,
        else a per-step mask (one vectorized walk of the vocabulary, a few milliseconds)."""
        if self.budget_is_loose(left):
            return self.mask(state)
        succ = self.successors(state)
        ok = succ >= 0
        ok[ok] = self._min_tokens_arr[succ[ok]] <= left - 1
        ids = np.flatnonzero(ok).astype(np.int32)
        return Mask(ids, None, self.is_accepting(state), self.eos_ids, self.vocab_size, shared=False)

    def budget_is_loose(self, left: int) -> bool:
        """True when ``left`` tokens complete the call from any state, so the plain mask suffices."""
        return left - 1 >= self._max_min_tokens

    def successors(self, state: int) -> np.ndarray:
        """int32 (vocabulary size,): the next state after each token from ``state``, -1 where not allowed.

        One vectorized walk of all tokens, grouped by length (a few milliseconds for 150k tokens).
        """
        if self._groups is None:
            by_len: dict[int, list[int]] = {}
            for i, t in enumerate(self.token_bytes):
                if t:
                    by_len.setdefault(len(t), []).append(i)
            cls = np.asarray(self._class_of_byte, dtype=np.int64)
            self._groups = []
            for length, ids in sorted(by_len.items()):
                mat = np.frombuffer(b"".join(self.token_bytes[i] for i in ids), dtype=np.uint8)
                self._groups.append((np.asarray(ids), cls[mat.reshape(len(ids), length)]))
        out = np.full(len(self.token_bytes), -1, dtype=np.int32)
        trans = self._trans_arr
        for ids, mat in self._groups:
            cur = np.full(len(ids), state, dtype=np.int64)
            for j in range(mat.shape[1]):
                live = cur >= 0
                cur[live] = trans[cur[live], mat[live, j]]
            out[ids] = cur
        return out

    def allowed(self, state: int) -> np.ndarray:
        """The allowed token ids of ``state`` (int64, sorted; EOS included when accepting)."""
        return self.mask(state).token_ids().numpy()

    def extends_past(self, state: int, length: int) -> bool:
        """True when some token allowed in ``state`` is longer than ``length`` bytes."""
        longest = self._longest.get(state)
        if longest is None:
            if self._lengths is None:
                self._lengths = np.array([len(t) if t else 0 for t in self.token_bytes] +
                                         [0] * (self.vocab_size - len(self.token_bytes)), dtype=np.int32)
            longest = int(self._lengths[self.mask(state).token_ids().numpy()].max(initial=0))
            self._longest[state] = longest
        return longest > length

    def next_state(self, state: int, token: int) -> int:
        """The state after ``token`` from ``state``; -1 when the token is not allowed there.

        Memoized per (state, token) under one int key (no tuple is built on the hot path). A miss walks
        the token's bytes, translated to byte classes in one C call (``bytes.translate``)."""
        if not (0 <= token < self._num_tokens and 0 <= state < self._num_states):
            return -1  # checked before the key is formed: an id out of range would alias another pair's key
        key = state * self.vocab_size + token
        s = self._next.get(key)
        if s is None:
            data = self.token_bytes[token]
            s = self.state_after(state, data) if data else -1
            self._next[key] = s
        return s

    def state_after(self, state: int, data: bytes) -> int:
        """The state after ``data`` from ``state``, or -1 once dead."""
        trans, c = self._trans, self._num_classes
        s = state
        for k in data.translate(self._class_table):
            s = trans[s * c + k]
            if s < 0:
                return -1
        return s

    def forced_tokens(self, state: int, tokenizer) -> tuple[tuple[int, ...], int]:
        """The tokens that write the text forced from ``state`` and the state after them: the tokenizer's own
        (canonical) encoding of :meth:`forced_bytes`, as in SGLang's jump-forward decoding, minus a last token
        that a longer allowed token could extend (token healing: ``fn_`` before ``greet`` is left to the model).
        ``((), state)`` when nothing is forced or the encoding leaves the grammar.

        ``tokenizer``: anything with ``encode(text, add_special_tokens=False) -> list[int]`` over this index's
        vocabulary. Memoized per (tokenizer, state)."""
        entry = self._forced_ids.get(id(tokenizer))
        if entry is None:
            entry = self._forced_ids[id(tokenizer)] = (tokenizer, {})  # the reference keeps the id unique
        memo = entry[1]
        got = memo.get(state)
        if got is None:
            got = memo[state] = self._encode_forced(state, tokenizer)
        return got

    def _encode_forced(self, state: int, tokenizer) -> tuple[tuple[int, ...], int]:
        text = self.forced_bytes(state)
        if not text:
            return (), state
        ids = tokenizer.encode(text.decode("utf-8"), add_special_tokens=False)
        s = before_last = state
        for tok in ids:
            before_last, s = s, self.next_state(s, tok)
            if s < 0:  # the tokenizer's encoding left the grammar: let the model choose instead
                return (), state
        if ids and self.extends_past(before_last, len(self.token_bytes[ids[-1]])):
            ids, s = ids[:-1], before_last
        return tuple(ids), s

    def _stops_forcing(self, state: int, byte_class: int) -> bool:
        """True where forced text must stop before a byte of ``byte_class`` read at automaton ``state`` (never
        here; an index with counters stops before a byte with an effect, allowed or not by the counts)."""
        return False

    def forced_bytes(self, state: int) -> bytes:
        """The longest byte string forced from ``state``: every state on it has exactly one outgoing byte
        and is not accepting. Cut back to the last complete UTF-8 character."""
        got = self._forced.get(state)
        if got is not None:
            return got
        out = bytearray()
        s = state
        seen = set()
        classes, c = self._class_of_byte, self._num_classes
        while not self._accepting[s] and s not in seen:
            seen.add(s)
            live = [b for b in range(256) if self._trans[s * c + classes[b]] >= 0]
            if len(live) != 1 or self._stops_forcing(s, classes[live[0]]):
                break
            out.append(live[0])
            s = self._trans[s * c + classes[live[0]]]
        data = bytes(out)
        # never stop inside a character: drop an incomplete UTF-8 tail
        while data:
            try:
                data.decode("utf-8")
                break
            except UnicodeDecodeError:
                data = data[:-1]
        self._forced[state] = data
        return data
