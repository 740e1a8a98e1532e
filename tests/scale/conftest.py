"""One local Ray for the tests of callmaybe.scale (``ray.init(num_cpus=2)``), skipped where Ray is not installed."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """The ``ray`` module, joined to a local Ray of 2 CPUs (no dashboard, a 300 MB object store), shut down after
    the session."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'callmaybe[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=300 * 1024 ** 2, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()
