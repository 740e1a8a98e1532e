"""A coarse automaton of "any JSON value", for loose languages (the side a ``oneOf``, ``not`` or ``if``
subtracts, :meth:`~..schema.compiler.SchemaCompiler.loosened`).

A loose language only has to *contain* every valid value of what it stands for: texts that are not JSON at
all may be in it too, since it is only ever subtracted from exact languages, which hold JSON texts alone.
The exact "any value" (:meth:`~..schema.compiler.SchemaCompiler.any_value`) checks UTF-8, escapes, numbers and the
kind of every bracket, which costs 816 states at depth 2 and makes every product it enters large. The coarse
one keeps only what finds the end of a value inside an object or array: the bracket depth and whether a
byte is inside a string. It has ``3 * depth + 5`` states.

Language (``depth`` = D), over the bytes UTF-8 uses: a string (``"``, then any bytes with ``\\`` escaping the next one, then ``"``);
a run of the bytes that start or continue a number or literal (``[-+.0-9A-Za-z]``); or ``[`` / ``{``, then
any bytes with brackets counted (``[``/``{`` open, ``]``/``}`` close, not told apart) and strings skipped, at
most D open at once, up to the bracket that closes the first. Every JSON value nested at most D deep is in
it. Its accepting states take no byte that may follow a value (``,`` ``}`` ``]`` ``:``), so it joins like
any value automaton (:func:`~.compose.seq`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compose import NOT_UTF8
from .dfa import ByteDFA
from .nodes import Node

#: How deep the coarse value follows brackets at least. The schema compiler makes it as deep as the exact
#: side it is subtracted from nests (:meth:`~.nodes.Node.nesting`), so that the loose language contains
#: every value the exact side can write.
LOOSE_DEPTH = 16

_SCALAR = np.frombuffer(b"-+.0123456789" + bytes(range(ord("A"), ord("Z") + 1)) +
                        bytes(range(ord("a"), ord("z") + 1)), dtype=np.uint8)
_OPEN = (ord("["), ord("{"))
_CLOSE = (ord("]"), ord("}"))
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


def coarse_value(depth: int) -> ByteDFA:
    """The coarse "any value" automaton (see the module docstring) following at most ``depth`` >= 1 open
    brackets; ``3 * depth + 5`` states, int32 transitions (states, 256). Raises ValueError for depth < 1."""
    if depth < 1:
        raise ValueError("depth must be at least 1")
    start, done, scalar, string0, escape0 = 0, 1, 2, 3, 4

    def inner(k: int) -> int:  # inside k open brackets
        return 5 + 3 * (k - 1)

    n = 5 + 3 * depth
    t = np.full((n, 256), -1, dtype=np.int32)
    accepting = np.zeros(n, dtype=bool)
    accepting[[done, scalar]] = True
    t[start, _SCALAR] = scalar
    t[start, _QUOTE] = string0
    t[start, list(_OPEN)] = inner(1)
    t[scalar, _SCALAR] = scalar
    t[string0, :] = string0
    t[string0, _QUOTE] = done
    t[string0, _BACKSLASH] = escape0
    t[escape0, :] = string0
    for k in range(1, depth + 1):
        body, string, escape = inner(k), inner(k) + 1, inner(k) + 2
        t[body, :] = body
        t[body, _QUOTE] = string
        t[body, list(_OPEN)] = inner(k + 1) if k < depth else -1
        t[body, list(_CLOSE)] = inner(k - 1) if k > 1 else done
        t[string, :] = string
        t[string, _QUOTE] = body
        t[string, _BACKSLASH] = escape
        t[escape, :] = string
    t[:, NOT_UTF8] = -1  # bytes UTF-8 never uses: free as end markers (compose)
    return ByteDFA(t, accepting, start)


@dataclass(eq=False)
class CoarseValue(Node):
    """The node of :func:`coarse_value` (``depth`` open brackets at most); its ``regex`` is a description."""

    depth: int = LOOSE_DEPTH

    @property
    def regex(self) -> str:
        return f"<coarse JSON value, {self.depth} deep>"

    def regular(self) -> bool:
        return False

    def nesting(self) -> int:
        return self.depth

    def build(self, timings: dict[str, float] | None = None) -> ByteDFA:
        return coarse_value(self.depth)
