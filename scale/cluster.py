"""Connecting to Ray: the one place that imports it for the command line, and the one-line error without it."""

from __future__ import annotations

import logging
from typing import Any

from ..core.errors import CallmaybeError, InputError

INSTALL = "pip install 'callmaybe[ray]'"


class RayMissing(InputError):
    """``--ray`` was asked for and Ray is not installed (exit status 2)."""


def require_ray() -> Any:
    """The ``ray`` module; raises RayMissing, one line saying how to install it, when it is not installed."""
    try:
        import ray
    except ImportError:
        raise RayMissing(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    return ray


def connect(address: str | None = None) -> Any:
    """Connect this process to Ray and return the ``ray`` module: a cluster already joined in this process is
    kept; ``address`` (``auto``, ``HOST:PORT`` of a head node, ``ray://HOST:10001``) joins that cluster; None
    or ``""`` joins the cluster ``$RAY_ADDRESS`` names, else starts a local one with this machine's cores
    (no dashboard). Raises RayMissing without Ray, CallmaybeError (one line) when the cluster cannot be
    reached."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    try:
        if address:
            ray.init(address=address, logging_level=logging.WARNING)
        else:
            ray.init(include_dashboard=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise CallmaybeError(f"cannot connect to the Ray cluster at {address or 'this machine'}: "
                             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return ray


def cluster_cpus() -> int:
    """CPUs of the connected cluster (at least 1)."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))
