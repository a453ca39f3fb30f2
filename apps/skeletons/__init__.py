"""Application-agnostic paradigm skeletons; each owns all communication of its paradigm.

``run(paradigm, world, bundle, group_size)`` dispatches by the command-line paradigm name.
"""
from __future__ import annotations

from typing import Any

from mpi4py import MPI

from apps.skeletons.base import DivideConquer, Reduction

__all__ = ["DivideConquer", "Reduction", "run"]


def run(paradigm: str, world: MPI.Intracomm, app: Reduction | DivideConquer,
        group_size: int = 0) -> Any:
    """Run ``app`` on ``paradigm``. Returns the result on world rank 0 (hypercube: every rank)."""
    if paradigm == "hypercube":
        from apps.skeletons import hypercube
        assert isinstance(app, DivideConquer)
        return hypercube.run(world, app)
    assert isinstance(app, Reduction)
    if paradigm == "pipeline":
        from apps.skeletons import pipeline as mod
    elif paradigm == "master-worker":
        from apps.skeletons import master_worker as mod
    elif paradigm == "tree":
        from apps.skeletons import tree as mod
    else:
        raise ValueError(f"unknown paradigm {paradigm!r}")
    return mod.run(world, app, group_size)
