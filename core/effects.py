"""Counter effects, as the index file stores them and both sides apply them (:mod:`callmaybe.compiler.automata.counters`
writes them, :mod:`callmaybe.runtime.decoding.counted` decodes with them). No torch, no regex engine.

An effect is a tuple of ``(k, add, reset, after)``, one per counter ``k`` it touches, sorted by ``k``:
without a reset counter ``k`` grows by ``add``; with one it grows by ``add`` (checked), is reset to 0, then
grows to ``after``. ``()`` is no effect.
"""

from __future__ import annotations


def apply(effect: tuple, counts: list[int], his: tuple[int, ...] | list[int]) -> bool:
    """Apply ``effect`` to ``counts`` (one int per counter) in place; False, ``counts`` unchanged, where an
    advance would pass a counter's bound ``his[k]``."""
    for k, add, _, _ in effect:
        if counts[k] + add > his[k]:
            return False
    for k, add, r, b in effect:
        counts[k] = b if r else counts[k] + add
    return True
