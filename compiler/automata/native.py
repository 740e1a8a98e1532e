"""The compiler's inner loops in C (``native.c``), built on this machine at first use and called through ctypes.

A schema's joins minimize hundreds of small automata (jscsrc: ~500, a median of ~30 states); in numpy each
costs ~2 ms, most of it the fixed cost of a few hundred small array operations, and they were 40-45% of the
compile of the slowest JSONSchemaBench schemas. ``cm_minimize`` does the whole of :func:`.dfa.minimize`'s work
(byte classes, trim, Valmari and Lehtinen's partition refinement, the breadth-first numbering) in one call and
returns the same arrays, to the element: the minimal automaton of a language is unique, and both number it the
same way (``tests/compiler/test_native_automata.py`` compares them). ``cm_product`` builds the product of two
automata without counter markers as :func:`.compose.product` does (the same pairs, numbered the same way),
one hash lookup per transition instead of a numpy pass per breadth-first level (jscsrc: 166 products, 0.45 s).
``cm_match`` pairs a state group's rep with its members as :func:`..index.walk._match` does (the same tables):
a loop over the rep states visited, each a dozen numpy operations over the members in Python (vss-extension:
85 pairings, 0.31 s).
``cm_group_walk`` walks the token trie depth first from a group's rep, carrying the members' bits, as the first
part of :func:`..index.walk._walk_group` does level by level in numpy (the same tokens, bits and seeds).
``cm_descend`` is :func:`..index.walk._descend`'s level-wise walk from many starts, its cap included, in one
call (the same triples in the same order); ``cm_sort_triples`` sorts its triples by (state, token) in two
counting sorts. ``cm_byte_classes`` and ``cm_class_columns`` are :func:`.dfa.byte_classes` (the walk's classes
of a catalog's whole automaton: compose-spec's 47,000 states, 0.13 s in numpy, most of it a full copy of the
table to check the hashed classes). ``cm_effect_levels`` is the walk of a counted index's entries over their
tokens' bytes (:meth:`..index.counted_index.TokenEffects.effect_ids`), level by level as the numpy loop, the
pairs of effects not composed yet handed back to Python (vercel: 1.31 -> 0.94 s).

It is compiled once per source, flags and compiler (``cc -O2 -std=c99 -shared -fPIC``, portable: no
``-march=native``) into ``<cache>/kernels/automata-<key>.so`` (:mod:`callmaybe.core.cbuild`). Where it cannot
be built or loaded, each function here returns None (one WARNING line saying why, once per process) and its
caller runs the numpy code; ``CALLMAYBE_DFA=numpy`` chooses the numpy code without the warning (comparisons).
"""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import threading
from pathlib import Path

import numpy as np

from ...core.cbuild import build_key, build_library, compiler_command, open_library
from ...core.errors import CallmaybeError
from ...core.files import cache_dir

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("native.c")
FLAGS = ("-O2", "-std=c99", "-shared", "-fPIC")
#: seconds the build may take (about 0.3 s here); past it, the numpy path, with a warning
BUILD_TIMEOUT = 30.0
#: the most states the C path takes (its indices are int32: states x 256 must fit)
MAX_STATES = (2**31 - 1) // 256
#: the most pairs a product builds in C (64 MB of table); a larger product is left to numpy, which counts
#: each pair against the compile's limits as it builds it
MAX_PAIRS = 65536
#: compose.py's product modes, as cm_product numbers them
MODES = {"or": 0, "and": 1, "minus": 2, "xor": 3}


class _Tuples(ctypes.Structure):
    _fields_ = [("trans", ctypes.POINTER(ctypes.c_int32)), ("tuples", ctypes.POINTER(ctypes.c_int32)),
                ("count", ctypes.c_int64)]


class _Match(ctypes.Structure):
    _fields_ = [("cols", ctypes.POINTER(ctypes.c_int64)), ("phi", ctypes.POINTER(ctypes.c_int64)),
                ("core", ctypes.POINTER(ctypes.c_uint8)), ("ncols", ctypes.c_int64)]


class _GroupWalk(ctypes.Structure):
    _fields_ = [("tok", ctypes.POINTER(ctypes.c_int32)), ("end", ctypes.POINTER(ctypes.c_int64)),
                ("served", ctypes.POINTER(ctypes.c_uint64)), ("met", ctypes.POINTER(ctypes.c_uint64)),
                ("ntok", ctypes.c_int64), ("tok_room", ctypes.c_int64),
                ("seed_depth", ctypes.POINTER(ctypes.c_int32)), ("seed_node", ctypes.POINTER(ctypes.c_int64)),
                ("seed_cur", ctypes.POINTER(ctypes.c_int64)), ("seed_drop", ctypes.POINTER(ctypes.c_uint64)),
                ("nseed", ctypes.c_int64), ("seed_room", ctypes.c_int64)]


class _Descend(ctypes.Structure):
    _fields_ = [("s", ctypes.POINTER(ctypes.c_int32)), ("t", ctypes.POINTER(ctypes.c_int32)),
                ("n", ctypes.POINTER(ctypes.c_int32)), ("count", ctypes.c_int64), ("room", ctypes.c_int64),
                ("capped", ctypes.POINTER(ctypes.c_int64)), ("ncapped", ctypes.c_int64)]


class _Product(ctypes.Structure):
    _fields_ = [("trans", ctypes.POINTER(ctypes.c_int32)), ("accepting", ctypes.POINTER(ctypes.c_uint8)),
                ("pairs", ctypes.c_int64)]


_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
#: each entry point of native.c: (return type, argument types)
_SIGNATURES = {
    "cm_minimize": (_I64, [_I64, _PTR, _PTR, _I64, _PTR, _PTR]),
    "cm_product": (_I64, [_I64, _PTR, _PTR, _I64] * 2 + [ctypes.c_int, _I64, ctypes.POINTER(_Product)]),
    "cm_free_product": (None, [ctypes.POINTER(_Product)]),
    "cm_tuples": (_I64, [ctypes.c_int, _PTR, _PTR, _PTR, ctypes.c_int, _I64, ctypes.POINTER(_Tuples)]),
    "cm_free_tuples": (None, [ctypes.POINTER(_Tuples)]),
    "cm_match": (_I64, [_I64, _I64, _PTR, _PTR, _I64, _I64, _PTR, _I64, _PTR, ctypes.POINTER(_Match)]),
    "cm_free_match": (None, [ctypes.POINTER(_Match)]),
    "cm_group_walk": (_I64, [_PTR, _I64] + [_PTR] * 5 + [_I64, _I64, _PTR, _PTR, ctypes.POINTER(_GroupWalk)]),
    "cm_free_group_walk": (None, [ctypes.POINTER(_GroupWalk)]),
    "cm_descend": (_I64, [_I64, _PTR, _I64] + [_PTR] * 5 + [_I64] + [_PTR] * 3 + [_I64] + [_PTR] * 4 + [_I64] * 3
                   + [ctypes.POINTER(_Descend)]),
    "cm_free_descend": (None, [ctypes.POINTER(_Descend)]),
    "cm_sort_triples": (_I64, [_I64] + [_PTR] * 3 + [_I64] * 2 + [_PTR] * 3),
    "cm_byte_classes": (_I64, [_I64, _PTR, _PTR, _PTR, ctypes.c_int]),
    "cm_class_columns": (None, [_I64, _PTR, _I64, _PTR, _PTR]),
    "cm_effect_levels": (_I64, [_I64, _PTR, _I64] + [_PTR] * 4 + [_I64] + [_PTR] * 3 + [_I64, _I64, _PTR, _PTR]),
}


_lock = threading.Lock()
_loaded: list = []  # [] not tried yet; [None] unavailable; [CDLL] loaded


def build(folder: Path | None = None) -> Path:
    """The built library: found in ``folder`` (default ``<cache>/kernels``) with its SHA-256 as recorded, or
    compiled there now (:func:`~callmaybe.core.cbuild.build_library`). Raises OSError or
    subprocess.SubprocessError (no compiler, a failed or timed-out build)."""
    cc = compiler_command()
    folder = folder or cache_dir("kernels")
    key = build_key(cc, SOURCE.read_bytes(), " ".join(FLAGS).encode())
    return build_library(SOURCE, FLAGS, folder / f"automata-{key}.so", cc, BUILD_TIMEOUT, log)


def library() -> ctypes.CDLL | None:
    """The loaded library, built at the first call, or None where it is unavailable (the reason logged once,
    as a WARNING; nothing logged under ``CALLMAYBE_DFA=numpy``). Never raises."""
    if _loaded:
        return _loaded[0]
    with _lock:
        if _loaded:
            return _loaded[0]
        lib = None
        if os.environ.get("CALLMAYBE_DFA", "").strip().lower() != "numpy":
            try:
                lib = open_library(build(), tuple(_SIGNATURES))  # lacking one: built again next run
                for name, (restype, argtypes) in _SIGNATURES.items():
                    fn = getattr(lib, name)
                    fn.restype, fn.argtypes = restype, argtypes
            except (OSError, subprocess.SubprocessError, AttributeError, CallmaybeError) as exc:
                lib = None
                log.warning("the compiler's C routines unavailable (%s); numpy's used (slower compiles; "
                            "CALLMAYBE_DFA=numpy chooses it without this line)", exc)
        _loaded.append(lib)
        return lib


def byte_classes(transitions: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`.dfa.byte_classes` of ``transitions`` (int (rows, 256): targets, or any values such as a
    transducer's (target, effect) keys): ``(byte_class uint8 (256,), class_transitions int32 (rows,
    classes))``, the same arrays. Returns None where the library is unavailable or a value does not fit int32
    (numpy's way is taken then)."""
    lib = library()
    if lib is None or transitions.ndim != 2 or transitions.shape[1] != 256:
        return None
    if transitions.dtype != np.int32 and transitions.size and (
            int(transitions.min()) < -(2**31) or int(transitions.max()) >= 2**31):
        return None
    t = np.ascontiguousarray(transitions, dtype=np.int32)
    n = int(t.shape[0])
    cls = np.empty(256, dtype=np.uint8)
    first = np.empty(256, dtype=np.int32)
    k = lib.cm_byte_classes(n, t.ctypes.data, cls.ctypes.data, first.ctypes.data, 0)
    out = np.empty((n, k), dtype=np.int32)
    lib.cm_class_columns(n, t.ctypes.data, k, first.ctypes.data, out.ctypes.data)
    return cls, out


def effect_levels(active: np.ndarray, start: int, tok: np.ndarray, cur: np.ndarray, ids: np.ndarray,
                  bytes_by_position: np.ndarray, trans: np.ndarray, effect: np.ndarray,
                  comp: np.ndarray) -> tuple[int, np.ndarray] | None:
    """:meth:`..index.counted_index.TokenEffects.effect_ids`' walk in C, from level ``start``: ``active`` int64
    (levels,), the entries longer than each level (sorted longest first); ``tok`` int32, ``cur`` and ``ids``
    int64 (entries,), updated in place; ``bytes_by_position`` uint8 (positions, vocabulary), C-contiguous;
    ``trans``, ``effect``: int32 (states * 256,); ``comp`` int64 (rows, width), the composed pairs (-1: not
    yet). Returns ``(level, entries)``: the first level that needs a pair ``comp`` lacks and the entries that
    need one (that level not applied), or ``(levels, empty)`` when all are applied. None where the library is
    unavailable."""
    lib = library()
    if lib is None:
        return None
    for a, dtype in ((active, np.int64), (tok, np.int32), (cur, np.int64), (ids, np.int64),
                     (bytes_by_position, np.uint8), (trans, np.int32), (effect, np.int32), (comp, np.int64)):
        if a.dtype != dtype or not a.flags.c_contiguous:
            raise ValueError("effect_levels: an array of the wrong type or layout")
    miss = np.empty(int(active[start]) if start < len(active) else 0, dtype=np.int64)
    nmiss = ctypes.c_int64(0)
    level = lib.cm_effect_levels(len(active), active.ctypes.data, int(start), tok.ctypes.data, cur.ctypes.data,
                                 ids.ctypes.data, bytes_by_position.ctypes.data, bytes_by_position.shape[1],
                                 trans.ctypes.data, effect.ctypes.data, comp.ctypes.data, comp.shape[0],
                                 comp.shape[1], miss.ctypes.data, ctypes.byref(nmiss))
    return int(level), miss[:nmiss.value]


def minimize(transitions: np.ndarray, accepting: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The minimal automaton of ``transitions`` (int (states, 256), -1 for no transition), ``accepting`` (bool
    (states,)) and ``start``: ``(transitions int32 (m, 256), accepting bool (m,))``, its start state 0 and its
    states numbered as :func:`.dfa.minimize` numbers them; an empty language gives arrays of no rows (m = 0).
    Returns None where the library is unavailable or the automaton is too large for it.
    Raises MemoryError when C's allocations fail, ValueError for a target out of range."""
    n = int(transitions.shape[0])
    if n > MAX_STATES or transitions.shape[1:] != (256,):
        return None
    lib = library()
    if lib is None:
        return None
    t = np.ascontiguousarray(transitions, dtype=np.int32)
    a = np.ascontiguousarray(accepting, dtype=np.uint8)
    out_t = np.empty((n, 256), dtype=np.int32)  # untouched pages past the result cost no memory
    out_a = np.empty(n, dtype=np.uint8)
    m = lib.cm_minimize(n, t.ctypes.data, a.ctypes.data, int(start), out_t.ctypes.data, out_a.ctypes.data)
    if m == -1:
        raise MemoryError(f"DFA minimization in C: out of memory for {n:,} states")
    if m < 0:
        raise ValueError(f"DFA minimization in C: a transition's target is outside 0..{n - 1}")
    # most of a large automaton is left after minimization: its rows stay where C wrote them (the pages past
    # them were never touched, so they take no memory); a small remainder is copied out
    return out_t[:m] if 2 * m >= n else out_t[:m].copy(), out_a[:m].astype(bool)


def product(a: tuple[np.ndarray, np.ndarray, int], b: tuple[np.ndarray, np.ndarray, int],
            mode: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The product of automata ``a`` and ``b`` (each ``(transitions int (states, 256), accepting bool, start)``,
    no counter markers) over their reachable pairs, accepting by ``mode`` ("or", "and", "minus", "xor"), as
    :func:`.compose.product` builds it: ``(transitions int32 (pairs, 256), accepting bool (pairs,))``, the same
    arrays. Returns None where the library is unavailable or the product would pass :data:`MAX_PAIRS` pairs.
    Raises MemoryError when C's allocations fail, ValueError for a start outside its automaton."""
    lib = library()
    if lib is None:
        return None
    (ta, acc_a, start_a), (tb, acc_b, start_b) = a, b
    ta, tb = (np.ascontiguousarray(t, dtype=np.int32) for t in (ta, tb))
    acc_a, acc_b = (np.ascontiguousarray(x, dtype=np.uint8) for x in (acc_a, acc_b))
    out = _Product()
    n = lib.cm_product(len(ta), ta.ctypes.data, acc_a.ctypes.data, int(start_a), len(tb), tb.ctypes.data,
                       acc_b.ctypes.data, int(start_b), MODES[mode], MAX_PAIRS, ctypes.byref(out))
    if n == -3:
        return None
    if n == -1:
        raise MemoryError(f"automaton product in C: out of memory for {len(ta):,} x {len(tb):,} states")
    if n < 0:
        raise ValueError("automaton product in C: a start state outside its automaton")
    try:
        trans = np.ctypeslib.as_array(out.trans, shape=(n, 256)).copy()
        accepting = np.ctypeslib.as_array(out.accepting, shape=(n,)).astype(bool)
    finally:
        lib.cm_free_product(ctypes.byref(out))
    return trans, accepting


def tuples(parts: list[tuple[np.ndarray, int]], need_first: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """The product of automata ``parts`` (each ``(transitions int (states, 256), start)``, every byte alike,
    counter markers included) over their reachable tuples of states, as
    :func:`.object_automaton.tagged_product` builds it: ``(transitions int32 (tuples, 256), tuples int32
    (tuples, len(parts)))``, each state's part states (-1: dead), numbered alike. A tuple is built when its
    first part is live (``need_first``) or any part is. Returns None where the library is unavailable, for
    more than 16 parts, when the tuples' keys would pass 62 bits, or past :data:`MAX_PAIRS` tuples. Raises
    MemoryError when C's allocations fail, ValueError for a start outside its automaton."""
    lib = library()
    if lib is None or not 1 <= len(parts) <= 16:
        return None
    width = 1
    for t, _ in parts:
        width *= len(t) + 1
    if width >= 1 << 62:
        return None
    tables = [np.ascontiguousarray(t, dtype=np.int32) for t, _ in parts]
    ns = np.array([len(t) for t in tables], dtype=np.int64)
    starts = np.array([s for _, s in parts], dtype=np.int64)
    pointers = (ctypes.c_void_p * len(tables))(*[t.ctypes.data for t in tables])
    out = _Tuples()
    n = lib.cm_tuples(len(tables), ns.ctypes.data, ctypes.cast(pointers, ctypes.c_void_p), starts.ctypes.data,
                      int(need_first), MAX_PAIRS, ctypes.byref(out))
    if n == -3:
        return None
    if n == -1:
        raise MemoryError(f"tagged product in C: out of memory for {ns.tolist()} states")
    if n < 0:
        raise ValueError("tagged product in C: a start state outside its automaton")
    try:
        trans = np.ctypeslib.as_array(out.trans, shape=(n, 256)).copy()
        tup = np.ctypeslib.as_array(out.tuples, shape=(n, len(tables))).copy()
    finally:
        lib.cm_free_tuples(ctypes.byref(out))
    return trans, tup


def match(ctrans: np.ndarray, rep: int, members: np.ndarray, kind: np.ndarray,
          max_pairs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`..index.walk._match` in C: ``(cols int64 (V,), col_of int64 (states,), phi int64 (k, V), core bool
    (k, V))`` for ``ctrans`` (int (states, classes), -1 dead), ``rep``, ``members`` (int (k,)), ``kind`` (int
    (states,), its :func:`..index.walk.row_kinds`) and ``max_pairs``; the same arrays. Returns None where the
    library is unavailable. Raises MemoryError when C's allocations fail."""
    lib = library()
    if lib is None:
        return None
    ct = np.ascontiguousarray(ctrans, dtype=np.int32)
    kd = np.ascontiguousarray(kind, dtype=np.int64)
    mem = np.ascontiguousarray(members, dtype=np.int64)
    col_of = np.empty(ct.shape[0], dtype=np.int64)
    out = _Match()
    n = lib.cm_match(ct.shape[0], ct.shape[1], ct.ctypes.data, kd.ctypes.data, int(rep), len(mem), mem.ctypes.data,
                     int(max_pairs), col_of.ctypes.data, ctypes.byref(out))
    if n < 0:
        raise MemoryError(f"state pairing in C: out of memory for {len(mem):,} members")
    try:
        cols = np.ctypeslib.as_array(out.cols, shape=(n,)).copy()
        if len(mem):
            phi = np.ctypeslib.as_array(out.phi, shape=(n, len(mem))).T.copy()
            core = np.ctypeslib.as_array(out.core, shape=(n, len(mem))).T.astype(bool)
        else:
            phi, core = np.zeros((0, n), dtype=np.int64), np.zeros((0, n), dtype=bool)
    finally:
        lib.cm_free_match(ctypes.byref(out))
    return cols, col_of, phi, core


def _array(ptr, n: int, dtype, words: int | None = None) -> np.ndarray:
    """A copy of C's ``n`` (x ``words``) values at ``ptr`` (an empty array for none)."""
    shape = (n,) if words is None else (n, words)
    if n == 0:
        return np.zeros(shape, dtype=dtype)
    return np.ctypeslib.as_array(ptr, shape=shape).astype(dtype, copy=True)


def group_walk(transitions: np.ndarray, flat: tuple, rep: int, core: np.ndarray,
               same: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """The shared walk of a state group from ``rep`` (:func:`..index.walk._walk_group`'s first part) in C, over
    ``transitions`` (int32 (states, 256)), the trie ``flat`` (:attr:`..index.trie.TokenTrie.flat`) and the
    member bits ``core``, ``same`` (uint64 (states, words)): ``(tok int32, end int64, served uint64 (n, words),
    met uint64 (n, words), seed_depth int64, seed_node int64, seed_cur int64, seed_drop uint64 (s, words))``,
    tokens and seeds in depth-first order. Returns None where the library is unavailable. Raises MemoryError
    when C's allocations fail."""
    lib = library()
    if lib is None:
        return None
    off, byte, cs, ce, end = flat
    t = np.ascontiguousarray(transitions, dtype=np.int32)
    core = np.ascontiguousarray(core, dtype=np.uint64)
    same = np.ascontiguousarray(same, dtype=np.uint64)
    words = core.shape[1]
    out = _GroupWalk()
    n = lib.cm_group_walk(t.ctypes.data, len(off) - 1, off.ctypes.data, byte.ctypes.data, cs.ctypes.data,
                          ce.ctypes.data, end.ctypes.data, int(rep), words, core.ctypes.data, same.ctypes.data,
                          ctypes.byref(out))
    if n == -1:
        raise MemoryError("the group walk in C: out of memory")
    if n < 0:
        raise ValueError("the group walk in C: no member bits")
    try:
        s = out.nseed
        return (_array(out.tok, n, np.int32), _array(out.end, n, np.int64),
                _array(out.served, n, np.uint64, words), _array(out.met, n, np.uint64, words),
                _array(out.seed_depth, s, np.int64), _array(out.seed_node, s, np.int64),
                _array(out.seed_cur, s, np.int64), _array(out.seed_drop, s, np.uint64, words))
    finally:
        lib.cm_free_group_walk(ctypes.byref(out))


#: What :func:`descend` returns for a walk that passed its entries limit.
PAST_LIMIT = "past the entries limit"


def descend(transitions: np.ndarray, flat: tuple, below: np.ndarray, frontier: tuple[np.ndarray, ...],
            seeds: tuple[np.ndarray, ...], cap: int | None, lookahead: int,
            limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]] | str | None:
    """:func:`..index.walk._descend` in C over ``transitions`` (int32 (states, 256)) and the trie ``flat``
    (:attr:`..index.trie.TokenTrie.flat`, ``below`` its :attr:`~..index.trie.TokenTrie.flat_below`):
    ``frontier`` (start states, depth-1 flat nodes, states) and ``seeds`` (depth index, start state, flat node,
    state; sorted by depth), int64 each; ``cap`` and ``lookahead`` as _descend's (None: no cap); ``limit``: the
    triples it may find (None: any). Returns ``(start, token, next state)`` int32 arrays in _descend's order
    and the start states capped, in the order capped; :data:`PAST_LIMIT` once more than ``limit`` triples are
    found; None where the library is unavailable. Raises MemoryError when C's allocations fail."""
    lib = library()
    if lib is None:
        return None
    off, byte, cs, ce, end = flat
    t = np.ascontiguousarray(transitions, dtype=np.int32)
    fr = [np.ascontiguousarray(a, dtype=np.int64) for a in frontier]
    sd = [np.ascontiguousarray(a, dtype=np.int64) for a in seeds]
    out = _Descend()
    n = lib.cm_descend(t.shape[0], t.ctypes.data, len(off) - 1, byte.ctypes.data, cs.ctypes.data, ce.ctypes.data,
                       end.ctypes.data, below.ctypes.data, len(fr[0]), *(a.ctypes.data for a in fr), len(sd[0]),
                       *(a.ctypes.data for a in sd), -1 if cap is None else int(cap), int(lookahead),
                       -1 if limit is None else int(limit), ctypes.byref(out))
    try:
        if n == -5:
            return PAST_LIMIT
        if n < 0:
            raise MemoryError("the trie walk in C: out of memory")
        capped = _array(out.capped, out.ncapped, np.int64).tolist()
        return _array(out.s, n, np.int32), _array(out.t, n, np.int32), _array(out.n, n, np.int32), capped
    finally:
        lib.cm_free_descend(ctypes.byref(out))


def sort_triples(s: np.ndarray, t: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The triples ``(s, t, x)`` (int32 (n,) each, values >= 0, the ``(s, t)`` pairs distinct) sorted by
    ``(s, t)``: int32 arrays, as :func:`..index.walk._sorted_triples` sorts them. None where the library is
    unavailable. Raises MemoryError when C's allocations fail."""
    lib = library()
    if lib is None:
        return None
    s, t, x = (np.ascontiguousarray(a, dtype=np.int32) for a in (s, t, x))
    out = [np.empty(len(s), dtype=np.int32) for _ in range(3)]
    rc = lib.cm_sort_triples(len(s), s.ctypes.data, t.ctypes.data, x.ctypes.data, int(s.max()) + 1,
                             int(t.max()) + 1, *(a.ctypes.data for a in out))
    if rc < 0:
        raise MemoryError(f"sorting {len(s):,} triples in C: out of memory")
    return out[0], out[1], out[2]
