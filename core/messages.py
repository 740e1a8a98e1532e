"""The one channel for progress and messages: lines and progress bars on stderr.

Every layer reports through :func:`say` and :func:`progress`, never through ``print``, ``logging`` or tqdm
directly, so that a message printed while a bar is drawn appears above the bar instead of through it.
Standard output is left to command results.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm

def say(message: str) -> None:
    """Write ``message`` (one or more lines) on stderr, above any progress bar being drawn."""
    tqdm.write(message, file=sys.stderr)
    sys.stderr.flush()


def progress(iterable: Iterable[Any] | None = None, *, desc: str, unit: str = "it", total: int | None = None,
             unit_scale: bool = False, leave: bool = True, disable: bool = False) -> tqdm:
    """A progress bar on stderr over ``iterable`` (or updated by hand up to ``total``, in ``unit``s).

    ``unit_scale`` shows sizes with k/M/G prefixes in powers of 1024 (for bytes); ``leave=False`` clears the bar
    when it ends.
    """
    return tqdm(iterable, desc=desc, unit=unit, total=total, unit_scale=unit_scale,
                unit_divisor=1024 if unit_scale else 1000, leave=leave, file=sys.stderr,
                disable=disable)
