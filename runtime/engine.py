"""The engine: one thread that owns the model and decodes every submitted turn, concurrent turns as rows of one
forward pass (:mod:`.batch`).

The server and the batch commands submit :class:`~.turn.TurnRequest` s; the engine reports each turn's
progress through its ``on_event`` callback, called on the engine's thread:

* ``Event("text", text)``: more text of the answer (streamed token by token, whole UTF-8 characters);
* ``Event("call", (position, ToolCall))``: a call is final (decoded, checked, grounded);
* ``Event("done", TurnResult)``: the turn is over; nothing follows;
* ``Event("error", message)``: the turn failed (one line); nothing follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import CallmaybeError


class QueueFull(CallmaybeError):
    """The engine's queue holds as many turns as it may; the caller should retry later."""


@dataclass(frozen=True)
class Event:
    """One report of a turn's progress (see the module docstring)."""

    kind: str
    data: Any
