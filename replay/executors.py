"""Where the configurations of a sweep run: ``local`` (threads of this process) or ``mpi``
(processes of an MPI job, through mpi4py.futures, so a sweep can use many nodes).

Both call the same ``SweepPoint`` (replay/sweeps.py) on the same prepared trace, so the rows are
identical; both return them in configuration order.

The MPI executor sends the prepared trace to each worker once (the pool's initializer), then only
configuration indices travel: workers need no shared file system and never re-read the trace.
Run it as (docs/replay.md, "Sweeps on a cluster")::

    mpiexec -n K python -m mpi4py.futures -m hindsight.cli sweep TRACE ... --executor mpi

rank 0 runs the command, the other K - 1 ranks are the workers. Without ``-m mpi4py.futures``
the pool spawns ``--workers`` processes with MPI_Comm_spawn, where the MPI library supports it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable
from hindsight.errors import UserError

EXECUTORS = ("local", "mpi")


class ExecutorError(UserError):
    """The executor cannot run here (mpi4py missing, no MPI workers); one readable line."""


def run_points(executor: str, prep, point: Callable[[Any, int], dict], n: int,
               workers: int | None = None,
               progress: Callable[[int], None] | None = None) -> list[dict]:
    """``[point(prep, i) for i in range(n)]`` on the chosen executor."""
    if executor == "local":
        return _run_local(prep, point, n, workers, progress)
    if executor == "mpi":
        return _run_mpi(prep, point, n, workers, progress)
    raise ExecutorError(f"--executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")


def _run_local(prep, point, n: int, workers: int | None, progress) -> list[dict]:
    workers = workers or min(n, os.cpu_count() or 1)
    rows: list[dict] = [None] * n  # type: ignore[list-item]
    if workers <= 1:
        for i in range(n):
            rows[i] = point(prep, i)
            if progress:
                progress(1)
        return rows
    with ThreadPoolExecutor(max_workers=workers) as ex:
        futs = {ex.submit(point, prep, i): i for i in range(n)}
        for f in as_completed(futs):
            rows[futs[f]] = f.result()
            if progress:
                progress(1)
    return rows


# Worker-side state of the MPI executor: set once per worker process by the pool initializer.
_worker: dict[str, Any] = {}


def _init_worker(prep, point) -> None:
    _worker["prep"] = prep
    _worker["point"] = point


def _run_on_worker(i: int) -> dict:
    return _worker["point"](_worker["prep"], i)


def _run_mpi(prep, point, n: int, workers: int | None, progress) -> list[dict]:
    try:
        from mpi4py import MPI
        from mpi4py.futures import MPIPoolExecutor
    except ImportError as exc:
        raise ExecutorError(f"--executor mpi needs mpi4py ({exc})") from None
    # Under `python -m mpi4py.futures` the pool is the other ranks of COMM_WORLD; otherwise it
    # spawns workers, which needs a count (and an MPI that supports spawning).
    under_futures = MPI.COMM_WORLD.Get_size() > 1
    if not under_futures and not workers:
        raise ExecutorError("--executor mpi: run under `mpiexec -n K python -m mpi4py.futures "
                            "-m hindsight.cli sweep ...` (K >= 2), or give --workers N to spawn "
                            "N worker processes")
    rows: list[dict] = []
    with MPIPoolExecutor(max_workers=None if under_futures else workers,
                         initializer=_init_worker, initargs=(prep, point)) as ex:
        # map keeps configuration order; chunks of a few indices amortise the round trips.
        chunk = max(1, n // (8 * max(ex.num_workers, 1)))
        for row in ex.map(_run_on_worker, range(n), chunksize=chunk):
            rows.append(row)
            if progress:
                progress(1)
    return rows
