"""A buffer-API pipeline: numpy blocks flow through the ranks in a chain, each stage works on them.

    mpiexec -n P python workloads/pipeline.py [--fine | --coarse] [--size N] [--blocks K]

Rank 0 generates K blocks of N doubles (block b from seed b) and applies stage 0; rank s
receives each block from rank s-1 with `Recv` into a preallocated array, applies stage s and
passes it on with `Send`; the last rank folds every block into a checksum. A stage is numpy work
that depends on the stage number (scale and shift, tanh, sort). With P = 1 the one rank does
all stages of a chain of length 1.

--fine (default): N = 2,000, a stage of about 50-100 us. --coarse: N = 30,000, a stage of
several ms.

Self-check: the last rank keeps every block's checksum; rank 0 compares them with a serial
computation of all stages. Prints `time_s=<timed loop, rank 0, between barriers>` and `verified`,
or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 2_000, "blocks": 4_000}, "coarse": {"size": 30_000, "blocks": 150}}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS, fine="blocks of 2,000 doubles, stages of ~50-100 us",
                          coarse="blocks of 30,000 doubles, stages of several ms",
                          helps={"size": "doubles per block", "blocks": "number of blocks"}, minimum=None, argv=argv)


def source(b: int, n: int) -> np.ndarray:
    return np.random.default_rng([5, b]).random(n)


def stage(s: int, x: np.ndarray) -> np.ndarray:
    y = np.tanh(x * (1.0 + 0.25 * s) - 0.5)
    return np.sort(y)


def checksum(x: np.ndarray) -> float:
    return float(np.dot(x[::3], np.arange(1, x[::3].size + 1, dtype=np.float64)))


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    last = size - 1
    buf = np.empty(ns.size)
    sums = np.zeros(ns.blocks)
    # numpy's first-call costs, outside the timed loop
    stage(rank, np.random.default_rng([6, 0]).random(ns.size))

    comm.Barrier()
    t0 = MPI.Wtime()
    for b in range(ns.blocks):
        if rank == 0:
            x = source(b, ns.size)
        else:
            comm.Recv(buf, source=rank - 1, tag=b % 32768)
            x = buf
        y = stage(rank, x)
        if rank < last:
            comm.Send(y, dest=rank + 1, tag=b % 32768)
        else:
            sums[b] = checksum(y)
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    if size > 1:
        if rank == last:
            comm.send(sums, dest=0, tag=1)
        elif rank == 0:
            sums = comm.recv(source=last, tag=1)
    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        expected = np.empty(ns.blocks)
        for b in range(ns.blocks):
            x = source(b, ns.size)
            for s in range(size):
                x = stage(s, x)
            expected[b] = checksum(x)
        ok = bool(np.array_equal(sums, expected))
        told = f"pipeline: {ns.blocks} blocks of {ns.size} doubles through {size} stages"
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
