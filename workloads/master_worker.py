"""Dynamic master/worker with the pickle API: task and result dictionaries, ANY_SOURCE receives.

    mpiexec -n P python workloads/master_worker.py [--fine | --coarse] [--size N] [--tasks K]

Rank 0 is the master, ranks 1..P-1 the workers (P >= 2). The master hands out tasks as Python
dicts (`comm.send`), two per worker to start, then receives results from whichever worker
finishes (`comm.recv(source=ANY_SOURCE)`) and gives that worker the next task until all are done;
then it sends each worker a stop message. A task is numpy work on N doubles (a fixed array every
rank generates once, scaled and shifted by the task's parameters): sort, cumulative sum, a
strided checksum; the result dict carries the task id, the worker's rank and the checksum.

--fine (default): N = 1,000, a task of about 50-100 us. --coarse: N = 20,000, a task of
several ms.

Self-check: every task id comes back exactly once, and the master recomputes every checksum
serially after the timed loop. Prints `time_s=<timed loop, rank 0, between barriers>` and
`verified`, or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 1_000, "tasks": 5_000}, "coarse": {"size": 20_000, "tasks": 200}}
IN_FLIGHT = 2
TASK, RESULT, STOP = 1, 2, 3


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS, fine="tasks of 1,000 doubles, ~50-100 us each",
                          coarse="tasks of 20,000 doubles, several ms each",
                          helps={"size": "doubles per task", "tasks": "number of tasks"}, minimum=None, argv=argv)


def base_data(n: int) -> np.ndarray:
    """The data every task transforms (the same on every rank: generated once, not sent)."""
    return np.random.default_rng(11).random(n)


def work(task: dict, base: np.ndarray) -> float:
    """The task's numpy work; deterministic in the task's parameters."""
    x = (base * task["scale"] + task["shift"]) % 1.0
    s = np.sort(x)
    c = np.cumsum(s)
    return float(c[::7].sum() / task["n"])


def make_task(i: int, n: int) -> dict:
    return {"id": i, "scale": 1.0 + (i % 89) / 89.0, "shift": (i % 13) / 13.0, "n": n,
            "label": f"task-{i}"}


def master(comm: MPI.Intracomm, ns: argparse.Namespace) -> dict[int, dict]:
    size = comm.Get_size()
    results: dict[int, dict] = {}
    duplicates = 0
    following = 0
    outstanding = 0
    for _ in range(IN_FLIGHT):
        for w in range(1, size):
            if following < ns.tasks:
                comm.send(make_task(following, ns.size), dest=w, tag=TASK)
                following += 1
                outstanding += 1
    status = MPI.Status()
    while outstanding:
        res = comm.recv(source=MPI.ANY_SOURCE, tag=RESULT, status=status)
        outstanding -= 1
        duplicates += res["id"] in results
        results[res["id"]] = res
        if following < ns.tasks:
            comm.send(make_task(following, ns.size), dest=status.Get_source(), tag=TASK)
            following += 1
            outstanding += 1
    for w in range(1, size):
        comm.send(None, dest=w, tag=STOP)
    if duplicates:
        results[-1] = {"duplicates": duplicates}
    return results


def worker(comm: MPI.Intracomm, base: np.ndarray) -> None:
    status = MPI.Status()
    while True:
        task = comm.recv(source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == STOP:
            return
        comm.send({"id": task["id"], "worker": comm.Get_rank(), "value": work(task, base)},
                  dest=0, tag=RESULT)


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        print("error: master_worker needs at least 2 ranks", file=sys.stderr)
        return 2
    base = base_data(ns.size)
    work(make_task(0, ns.size), base)  # numpy's first-call costs, outside the timed loop

    comm.Barrier()
    t0 = MPI.Wtime()
    results = master(comm, ns) if rank == 0 else worker(comm, base)
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        ok = sorted(results) == list(range(ns.tasks)) and all(
            results[i]["value"] == work(make_task(i, ns.size), base) for i in range(ns.tasks))
        used = len({r["worker"] for r in results.values() if "worker" in r})
        told = f"master_worker: {ns.tasks} tasks of {ns.size} doubles on {used} workers, P={size}"
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
