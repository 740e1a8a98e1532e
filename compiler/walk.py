"""Walk every token of a vocabulary through a byte DFA from every state at once, over a token trie.

Tokens are sorted and laid out as a trie, one numpy array per depth (the nodes at depth d are the distinct
d-byte prefixes). The walk is breadth-first over depths and carries a frontier of live triples
``(trie node, start state, current state)``: one vectorized gather per depth advances every live triple by
one byte, and a prefix that dies prunes every token below it at once (the prefix-sharing idea of the
outlines "use a trie" pull request and llguidance's token trie, done here level-wise with numpy so Python
never loops over tokens). Work is proportional to the live (prefix, state) pairs, not states x vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class TokenTrie:
    """The regular tokens of a vocabulary as a trie, level by level.

    For depth d = 1..max_len (index d-1 of each list):
    ``byte[d]``: uint8 (nodes,) the last byte of each node's prefix;
    ``child_start[d]``/``child_end[d]``: int64 (nodes,) the range of its children among depth d+1 nodes;
    ``end_start[d]``/``end_end[d]``: int64 (nodes,) the range in ``end_tokens[d]`` of token ids that end here;
    ``end_tokens[d]``: int32 token ids whose bytes end at depth d, grouped by node.
    """

    byte: list[np.ndarray]
    child_start: list[np.ndarray]
    child_end: list[np.ndarray]
    end_start: list[np.ndarray]
    end_end: list[np.ndarray]
    end_tokens: list[np.ndarray]
    num_tokens: int

    @property
    def num_nodes(self) -> int:
        return int(sum(len(b) for b in self.byte))


def build_trie(token_bytes: list[bytes | None] | tuple[bytes | None, ...]) -> TokenTrie:
    """Build the trie of the non-empty, non-None entries of ``token_bytes`` (index = token id)."""
    ids = [i for i, t in enumerate(token_bytes) if t]
    ids.sort(key=lambda i: token_bytes[i])
    n = len(ids)
    lengths = np.fromiter((len(token_bytes[i]) for i in ids), dtype=np.int64, count=n)
    max_len = int(lengths.max()) if n else 0
    flat = np.frombuffer(b"".join(token_bytes[i] for i in ids), dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids_arr = np.asarray(ids, dtype=np.int32)

    byte, parents, ends_tok, ends_node = [], [], [], []
    active = np.arange(n)  # tokens (in sorted order) with length >= d
    prev_node = np.zeros(n, dtype=np.int64)  # node id at depth d-1 of each active token
    for d in range(1, max_len + 1):
        active_mask = lengths[active] >= d
        active = active[active_mask]
        prev = prev_node[active_mask]
        b = flat[offsets[active] + d - 1]
        new = np.ones(len(active), dtype=bool)
        new[1:] = (prev[1:] != prev[:-1]) | (b[1:] != b[:-1])
        node = np.cumsum(new) - 1
        first = np.flatnonzero(new)
        byte.append(b[first])
        parents.append(prev[first])
        ending = lengths[active] == d
        ends_tok.append(ids_arr[active[ending]])
        ends_node.append(node[ending])
        prev_node = node
    child_start, child_end, end_start, end_end, end_tokens = [], [], [], [], []
    for d in range(max_len):
        count = len(byte[d])
        if d + 1 < max_len:
            par = parents[d + 1]
            cs = np.searchsorted(par, np.arange(count), side="left")
            ce = np.searchsorted(par, np.arange(count), side="right")
        else:
            cs = ce = np.zeros(count, dtype=np.int64)
        child_start.append(cs.astype(np.int64))
        child_end.append(ce.astype(np.int64))
        order = np.argsort(ends_node[d], kind="stable")
        en = ends_node[d][order]
        end_tokens.append(ends_tok[d][order])
        end_start.append(np.searchsorted(en, np.arange(count), side="left").astype(np.int64))
        end_end.append(np.searchsorted(en, np.arange(count), side="right").astype(np.int64))
    return TokenTrie(byte, child_start, child_end, end_start, end_end, end_tokens, n)


@dataclass
class WalkResult:
    """Every (state, token) pair a DFA allows, with the state each token leads to.

    ``state``, ``token``, ``next_state``: int32 arrays of equal length, sorted by (state, token).
    """

    state: np.ndarray
    token: np.ndarray
    next_state: np.ndarray


def _expand(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges [starts[i], ends[i]), return (owner index i, position) of every element, vectorized."""
    counts = ends - starts
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(starts)), counts)
    if total == 0:
        return owner, owner
    first = np.zeros(len(starts), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    pos = starts[owner] + (np.arange(total) - first[owner])
    return owner, pos


def walk(transitions: np.ndarray, trie: TokenTrie, states: np.ndarray | None = None) -> WalkResult:
    """Walk all tokens of ``trie`` from each of ``states`` (default: all) through ``transitions``.

    ``transitions``: int32 (num_states, 256), -1 = dead. Returns the allowed (state, token, next state)
    triples: a token is allowed from a state when all its bytes have live transitions.
    """
    num_states = transitions.shape[0]
    if states is None:
        states = np.arange(num_states, dtype=np.int32)
    flat_t = transitions.reshape(-1)
    out_s, out_t, out_n = [], [], []
    if not trie.byte:
        empty = np.zeros(0, dtype=np.int32)
        return WalkResult(empty, empty, empty)
    # depth 1: every start state x every first byte
    n1 = len(trie.byte[0])
    start = np.repeat(states.astype(np.int64), n1)
    node = np.tile(np.arange(n1), len(states))
    cur = flat_t[start * 256 + trie.byte[0][node]]
    live = cur >= 0
    start, node, cur = start[live], node[live], cur[live].astype(np.int64)
    for d in range(len(trie.byte)):
        if len(node) == 0:
            break
        es, ee = trie.end_start[d][node], trie.end_end[d][node]
        owner, pos = _expand(es, ee)
        if len(owner):
            out_s.append(start[owner].astype(np.int32))
            out_t.append(trie.end_tokens[d][pos])
            out_n.append(cur[owner].astype(np.int32))
        if d + 1 >= len(trie.byte):
            break
        owner, child = _expand(trie.child_start[d][node], trie.child_end[d][node])
        nxt = flat_t[cur[owner] * 256 + trie.byte[d + 1][child]]
        live = nxt >= 0
        start, node, cur = start[owner][live], child[live], nxt[live].astype(np.int64)
    if not out_s:
        empty = np.zeros(0, dtype=np.int32)
        return WalkResult(empty, empty, empty)
    s = np.concatenate(out_s)
    t = np.concatenate(out_t)
    n = np.concatenate(out_n)
    order = np.lexsort((t, s))
    return WalkResult(s[order], t[order], n[order])
