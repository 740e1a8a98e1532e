"""One transition table assembled from copies of automata and runs of new states, written once at the end.

The joins (:func:`.compose.structure`, :func:`.compose.seq`, the object automaton) place a copy of each
part's states at an offset, every live target moved up by that offset. Shifting each part into an array of
its own and concatenating them wrote every transition four or five times (a mask, the shifted targets, the
choice, a cast, the concatenation: compose-spec's largest object, 81,000 states, 0.16 s); here each part is
written once into the final table, its dead transitions marked after.
"""

from __future__ import annotations

import numpy as np

from .dfa import ByteDFA


class Assembly:
    """Copies of automata (:meth:`copy`) and new states without transitions (:meth:`fresh`), numbered in the
    order they are added; :meth:`table` writes the transitions, int32 (states, 256), -1 for none."""

    def __init__(self):
        self.size = 0
        self._parts: list[tuple[int, np.ndarray | None, int]] = []  # (offset, transitions or None, states)

    def copy(self, dfa: ByteDFA) -> int:
        """Place a copy of ``dfa``'s states (its transitions moved up by the offset); returns the offset."""
        off = self.size
        self._parts.append((off, dfa.transitions, dfa.num_states))
        self.size += dfa.num_states
        return off

    def fresh(self, k: int) -> int:
        """``k`` new states without transitions; returns the first."""
        off = self.size
        last = self._parts[-1] if self._parts else None
        if last is not None and last[1] is None:  # one run with the run before it
            self._parts[-1] = (last[0], None, last[2] + k)
        else:
            self._parts.append((off, None, k))
        self.size += k
        return off

    def table(self) -> np.ndarray:
        """The transitions of every state added: int32 (size, 256), -1 for none."""
        out = np.empty((self.size, 256), dtype=np.int32)
        for off, trans, k in self._parts:
            dest = out[off:off + k]
            if trans is None:
                dest.fill(-1)
            else:
                np.add(trans, off, out=dest, casting="unsafe")
                np.copyto(dest, -1, where=trans < 0)
        return out
