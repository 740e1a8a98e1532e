"""Node classes of string values (:mod:`..schema.strings`, :mod:`.formats`): a leaf whose automaton is built without
interegular, and the intersection of string languages, which may be empty."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import dfa as D
from .compose import is_empty, product
from .dfa import ByteDFA
from .nodes import Both, Node


@dataclass(eq=False)
class FastLeaf(Node):
    """A leaf whose ``regex`` is a real regex (recorded in the index header, and what a composition that
    clashes falls back to) but whose automaton ``make(timings)`` is built another, faster way (a counter
    built directly, a pattern through atoms, a URI joined from parts)."""

    regex: str
    make: Callable[[dict[str, float] | None], ByteDFA]

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return self.make(timings)


def empty_dfa() -> ByteDFA:
    """A DFA that accepts nothing (one state, no transitions)."""
    return ByteDFA(np.full((1, 256), -1, dtype=np.int32), np.zeros(1, dtype=bool), 0)


@dataclass(eq=False)
class Meet(Both):
    """The strings every part accepts (a format, a pattern, a length), as :class:`~.nodes.Both`, except that
    an empty intersection is an automaton that accepts nothing rather than an error: the value is then
    impossible where it stands (an ``anyOf`` branch, an optional property), and only a schema that needs it
    is refused (by the final trim). The parts' automata are minimal already (leaves, counters), so they are
    not minimized again; the product is trimmed, and minimized with the whole grammar."""

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        out = self.parts[0].dfa(timings)
        for p in self.parts[1:]:
            out = product(out, p.dfa(timings), "and")
            if is_empty(out):
                return empty_dfa()
            out = D.trim(out)
        return out
