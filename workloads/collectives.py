"""A collectives-heavy loop: Bcast, Allreduce, Reduce and Barrier every iteration on small arrays.

    mpiexec -n P python workloads/collectives.py [--fine | --coarse] [--size N] [--iters K]

Every rank holds N random doubles (seeded by its rank). Each iteration rank 0 broadcasts a small
parameter vector (8 doubles, derived from the iteration number); every rank computes from its
data and the parameters a 16-double summary (scale, sort, take order statistics and a weighted
sum); the summaries are Allreduced (sum), Reduced to rank 0 (max) and the loop ends with a Barrier.
Four collectives per iteration, all of a few hundred bytes.

--fine (default): N = 2,000, an iteration of about 50-100 us. --coarse: N = 200,000, an
iteration of several ms (the sort dominates).

Self-check: after the timed loop rank 0 recomputes, serially and for every rank's data, the
summaries of a sample of iterations (every iteration for short runs) and compares them with the
allreduced and reduced results it kept. Prints `time_s=<timed loop, rank 0, between barriers>`
and `verified`, or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 2_000, "iters": 8_000}, "coarse": {"size": 200_000, "iters": 100}}
PARAMS = 8
SUMMARY = 16
WARMUP = 10
CHECKED = 20


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS, fine="2,000 doubles per rank, iterations of ~50-100 us",
                          coarse="200,000 doubles per rank, iterations of several ms",
                          helps={"size": "doubles per rank", "iters": "timed iterations"}, minimum={"size": SUMMARY}, argv=argv)


def data_of(rank: int, n: int) -> np.ndarray:
    return np.random.default_rng([7, rank]).random(n)


def params_of(it: int) -> np.ndarray:
    return 1.0 + np.arange(PARAMS) / PARAMS + (it % 97) / 97.0


def summary(data: np.ndarray, params: np.ndarray) -> np.ndarray:
    """16 numbers from the data under the parameters: order statistics and a weighted sum."""
    s = np.sort(data * params[0] + params[1])
    picks = s[np.linspace(0, s.size - 1, SUMMARY - 1).astype(np.int64)]
    weighted = float(np.dot(s[:PARAMS], params))
    return np.append(picks, weighted)


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    data = data_of(rank, ns.size)
    params = np.empty(PARAMS)
    total = np.empty(SUMMARY)
    biggest = np.empty(SUMMARY)
    total_iters = WARMUP + ns.iters
    every = -(-total_iters // CHECKED)
    kept: list[tuple[int, np.ndarray, np.ndarray]] = []

    t0 = 0.0
    for it in range(total_iters):
        if it == WARMUP:
            comm.Barrier()
            t0 = MPI.Wtime()
        if rank == 0:
            params[:] = params_of(it)
        comm.Bcast(params, root=0)
        mine = summary(data, params)
        comm.Allreduce(mine, total, op=MPI.SUM)
        comm.Reduce(mine, biggest, op=MPI.MAX, root=0)
        if rank == 0 and it % every == 0:
            kept.append((it, total.copy(), biggest.copy()))
        comm.Barrier()
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        everyone = [data_of(r, ns.size) for r in range(size)]
        for it, got_sum, got_max in kept:
            each = np.array([summary(d, params_of(it)) for d in everyone])
            # The reduction's summation order is MPI's; allow for rounding only.
            if not (np.allclose(got_sum, each.sum(axis=0), rtol=1e-12, atol=0.0)
                    and np.array_equal(got_max, each.max(axis=0))):
                ok = False
                break
        told = (f"collectives: {ns.size} doubles per rank, {ns.iters} iterations, P={size}, "
                f"{len(kept)} iterations checked")
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
