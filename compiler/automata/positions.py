"""A regex's character DFA from interegular's parse, by the position automaton and the subset construction.

interegular parses a regex into a tree (alternatives, concatenations, repeats, character groups) and builds
its DFA bottom-up: every concatenation, union and repeat is a product it crawls state by state. A repeat
``X{1,200}`` is 200 concatenations, each crawling the automaton built so far, so its time grows with the
square of the copies (``"(?:<one JSON string character>){1,200}"``: 0.74 s for 2,003 states), and a long
alternation of rules with escaping classes crawls every branch again at each union (0.73 s for 1,145 states).

Here the same tree becomes a *position automaton* (Glushkov, 1961; McNaughton and Yamada, 1960): one
position per character group occurrence (a repeat copies its body), each with the positions that may follow
it, as Python integers used as bit sets; the subset construction (Rabin and Scott, 1959) then builds the DFA
of the sets of positions reachable after each prefix, one AND of bit sets per state and symbol. The result is
an interegular ``FSM`` over interegular's own alphabet (the same symbols), so that the byte expansion reads it
as it read interegular's; both accept the same language, so the minimal byte DFA is the same array
(``tests/compiler/test_positions.py`` compares them on every regex of the compiler's tests' schemas).

Trees this does not handle (lookarounds, flags) return None, and the caller uses interegular's ``to_fsm``.
"""

from __future__ import annotations

from collections.abc import Callable

from interegular.fsm import FSM
from interegular.patterns import Pattern, REFlags, _CharGroup, _Concatenation, _NonCapturing, _Repeated

_NO_FLAGS = REFlags(0)


class _Unsupported(Exception):
    """A node of the tree this construction leaves to interegular."""


def _bits(x: int):
    """The positions in bit set ``x``, lowest first."""
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


class _Positions:
    """The positions of a tree: each one's symbols (the alphabet's transition keys it reads) and the
    positions that may follow it (a bit set)."""

    def __init__(self, alphabet, count: Callable[[int], None] | None):
        self.alphabet = alphabet
        self.every = list(alphabet)  # the alphabet's characters (anything_else included)
        self.symbols: list[frozenset] = []
        self.follow: list[int] = []
        self.count = count

    def position(self, symbols: frozenset) -> int:
        self.symbols.append(symbols)
        self.follow.append(0)
        n = len(self.symbols)
        if self.count is not None and n % 64 == 0:
            self.count(n)  # the automaton's states: raises past the pattern limit
        return n - 1

    def node(self, n) -> tuple[bool, int, int]:
        """``(nullable, first, last)`` of tree node ``n``, its positions added and their follow sets set."""
        if isinstance(n, Pattern):
            if n.added_flags or n.removed_flags:
                raise _Unsupported("flags")
            nullable, first, last = False, 0, 0
            for option in n.options:
                a, f, la = self.node(option)
                nullable, first, last = nullable or a, first | f, last | la
            return nullable, first, last
        if isinstance(n, _Concatenation):
            nullable, first, last = True, 0, 0
            for part in n.parts:
                if isinstance(part, _NonCapturing):
                    raise _Unsupported("lookaround")
                b, f, lb = self.node(part)
                self.link(last, f)
                first = first | f if nullable else first
                last = last | lb if b else lb
                nullable = nullable and b
            return nullable, first, last
        if isinstance(n, _Repeated):
            if n.max is not None and n.max < n.min:
                raise ValueError(f"a repeat {{{n.min},{n.max}}} whose maximum is below its minimum")
            return self.repeat(n)
        if isinstance(n, _CharGroup):
            a = self.alphabet
            if n.negated:
                symbols = frozenset(a[c] for c in self.every if c not in n.chars)
            else:
                symbols = frozenset(a[c] for c in n.chars)
            p = 1 << self.position(symbols)
            return False, p, p
        name = type(n).__name__
        if name.endswith("__EmptyCls"):
            return True, 0, 0
        if name.endswith("__DotCls"):  # every character but a newline (no SINGLE_LINE flag here)
            p = 1 << self.position(frozenset(self.alphabet[c] for c in self.every if c != "\n"))
            return False, p, p
        raise _Unsupported(name)

    def link(self, last: int, first: int) -> None:
        """Positions ``first`` may follow each position of ``last``."""
        if first:
            for p in _bits(last):
                self.follow[p] |= first

    def repeat(self, n: _Repeated) -> tuple[bool, int, int]:
        """``base{min,max}``: ``min`` copies, then the optional ones nested to the right (``(X(X(X)?)?)?``, so
        that each copy links to the next only); unbounded, ``min - 1`` copies and one that follows itself
        (``X+``: one copy, not ``X X*``, so that nested ``((X)+)+`` stays one copy of X, not 2 per level)."""
        if n.max is None:
            if n.min > 0:  # X{m,} = X{m-1} X+
                head = self.repeat(_Repeated(n.base, n.min - 1, n.min - 1)) if n.min > 1 else (True, 0, 0)
                a, f, la = self.node(n.base)
                self.link(la, f)
                hn, hf, hl = head
                self.link(hl, f)
                return hn and a, hf | (f if hn else 0), la | (hl if a else 0)
            a, f, la = self.node(n.base)
            self.link(la, f)
            return True, f, la
        else:
            tail = (True, 0, 0)
            for _ in range(n.max - n.min):
                a, f, la = self.node(n.base)
                rn, rf, rl = tail
                self.link(la, rf)
                tail = (True, f | (rf if a else 0), rl | (la if rn else 0))
        nullable, first, last = True, 0, 0
        for _ in range(n.min):
            a, f, la = self.node(n.base)
            self.link(last, f)
            first = first | f if nullable else first
            last = last | la if a else la
            nullable = nullable and a
        b, f, lb = tail
        self.link(last, f)
        first = first | f if nullable else first
        last = last | lb if b else lb
        return nullable and b, first, last


def _plain(n) -> bool:
    """Whether tree ``n`` has no lookaround and no flags anywhere (under a repeat of no copies too, where
    interegular's construction still raises for a lookaround)."""
    if isinstance(n, _NonCapturing):
        return False
    if isinstance(n, Pattern):
        return not (n.added_flags or n.removed_flags) and all(_plain(o) for o in n.options)
    if isinstance(n, _Concatenation):
        return all(_plain(p) for p in n.parts)
    if isinstance(n, _Repeated):
        return _plain(n.base)
    return True


def character_fsm(pattern: Pattern, count: Callable[[int], None] | None = None) -> FSM | None:
    """The DFA over interegular's alphabet of ``pattern`` (interegular's parse of a regex), or None where the
    tree has what this construction leaves to interegular (lookarounds, flags). Raises ValueError for a repeat
    whose maximum is below its minimum (``a{3,2}``, which interegular refuses too). ``count(n)`` (optional) is
    called with the number of states built so far (positions while the tree is read, then DFA states), at
    least every 64, so that a compile budget can stop an automaton that explodes
    (``^[ab]*a[ab]{20}$``: 2**20 states); what it raises passes through.

    Source: the position automaton (Glushkov, 1961; McNaughton and Yamada, 1960) and the subset construction
    (Rabin and Scott, 1959)."""
    if pattern.prefix_postfix != (0, 0) or not _plain(pattern):
        return None
    alphabet = pattern.get_alphabet(_NO_FLAGS)
    pos = _Positions(alphabet, count)
    try:
        nullable, first, last = pos.node(pattern)
    except _Unsupported:
        return None
    by_symbol: dict[object, int] = {}  # symbol -> the positions that read it
    for p, symbols in enumerate(pos.symbols):
        for s in symbols:
            by_symbol[s] = by_symbol.get(s, 0) | (1 << p)
    follow = pos.follow
    index: dict[int, int] = {}  # a set of positions -> its state (the start state is 0, its own key -1)
    todo: list[int] = [-1]
    index[-1] = 0
    finals = {0} if nullable else set()
    transitions: dict[int, dict] = {}
    k = 0
    while k < len(todo):
        key = todo[k]
        state = k
        k += 1
        if key == -1:
            reach = first
        else:
            reach = 0
            for p in _bits(key):
                reach |= follow[p]
        row = {}
        if reach:
            for symbol, mask in by_symbol.items():
                target = reach & mask
                if not target:
                    continue
                t = index.get(target)
                if t is None:
                    t = index[target] = len(todo)
                    todo.append(target)
                    if target & last:
                        finals.add(t)
                    if count is not None and t % 64 == 0:
                        count(t)
                row[symbol] = t
        transitions[state] = row
    if count is not None:
        count(len(todo))
    return FSM(alphabet=alphabet, states=set(range(len(todo))), initial=0, finals=finals, map=transitions,
               __no_validation__=True)

