"""Application-agnostic paradigm skeletons, and the registry of paradigms (imports no MPI).

``SKELETONS`` maps each paradigm's command-line name to a ``Skeleton``: what the rest of
hindsight (collect, validate, predict, the CLI help texts) needs to know about it. Every other
list of paradigm names is derived from it.

Contract of a skeleton module ``apps.skeletons.<module>`` (imported on use: it imports MPI):

* ``run(world, app, group_size)`` (``run(world, app)`` where ``processor_sets`` is False) runs
  the application bundle ``app`` (an instance of ``bundle``) and owns all of its communication;
  it returns the result on world rank 0 (the hypercube: on every rank), None elsewhere.
* ``schedule(n, ...)``, a pure function of the rank count (and task count), gives every rank's
  ordered actions; ``run`` executes it and ``predict.events`` turns it into a synthetic trace,
  so the two cannot drift apart. Master/worker has no fixed schedule: its order depends on when
  results arrive (``demand_driven``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from apps.skeletons.bundles import DivideConquer, Reduction

__all__ = ["DivideConquer", "Reduction", "SKELETONS", "Skeleton", "analytic_paper", "run",
           "skeleton", "uses_block_stream"]


@dataclass(frozen=True)
class Skeleton:
    """One paradigm's skeleton and the facts about it that other parts of hindsight use."""
    paradigm: str          # command-line name
    module: str            # the skeleton module, apps.skeletons.<module>
    bundle: type           # the user-function bundle its run takes: Reduction or DivideConquer
    processor_sets: bool   # splits COMM_WORLD into groups (--group-size), whose roots send their
    #                        results to world rank 0; False: runs on COMM_WORLD as one
    result_root: int       # group rank that ends up with the group's result (-1: the last)
    power_of_two: bool     # needs a power-of-two number of ranks
    demand_driven: bool    # its message order depends on timing, not only on (P, tasks)
    paper: str | None      # the source paper whose analytic model describes it

    def load(self) -> ModuleType:
        """The skeleton module (imports MPI)."""
        return importlib.import_module(f"apps.skeletons.{self.module}")


SKELETONS: dict[str, Skeleton] = {s.paradigm: s for s in (
    Skeleton("pipeline", "pipeline", Reduction, True, -1, False, False, "paper000"),
    Skeleton("master-worker", "master_worker", Reduction, True, 0, False, True, "paper004"),
    Skeleton("tree", "tree", Reduction, True, 0, False, False, None),
    Skeleton("hypercube", "hypercube", DivideConquer, False, 0, True, False, "paper002"),
)}

#: applications that run master-worker as paper 003's block sort (``master_worker.block_stream``:
#: blocks dealt statically, sorted parts gathered on demand) instead of ``master_worker.run``
BLOCK_STREAM_APPS = ("sorting",)


def skeleton(paradigm: str) -> Skeleton:
    """The registry entry of ``paradigm``; ValueError naming the choices for an unknown one."""
    try:
        return SKELETONS[paradigm]
    except KeyError:
        raise ValueError(f"unknown paradigm {paradigm!r} (choose from "
                         f"{', '.join(SKELETONS)})") from None


def uses_block_stream(app: str, paradigm: str) -> bool:
    """Whether ``app`` on ``paradigm`` runs paper 003's block sort."""
    return paradigm == "master-worker" and app in BLOCK_STREAM_APPS


def analytic_paper(app: str, paradigm: str) -> str | None:
    """The paper whose analytic model describes ``app`` on ``paradigm`` (None: no closed form)."""
    return "paper003" if uses_block_stream(app, paradigm) else skeleton(paradigm).paper


def run(paradigm: str, world: Any, app: Reduction | DivideConquer, group_size: int = 0) -> Any:
    """Run ``app`` on ``paradigm``. Returns the result on world rank 0 (hypercube: every rank)."""
    sk = skeleton(paradigm)
    assert isinstance(app, sk.bundle)
    if sk.processor_sets:
        return sk.load().run(world, app, group_size)
    return sk.load().run(world, app)
