"""A 1-D heat-equation solver whose convergence check is hidden behind the next iteration: each
iteration's residual norm is reduced with a non-blocking Iallreduce, completed one iteration later.

    mpiexec -n P python workloads/overlap.py [--fine | --coarse] [--size N] [--iters K]

Rank r owns a contiguous block of the N interior points of a rod (ends held at 1 and 0). An
iteration exchanges one ghost value with each neighbour (Irecv/Isend/Waitall; `MPI.PROC_NULL`
beyond the ends), takes an explicit step u' = u + 0.25 (u[i-1] - 2u[i] + u[i+1]) with numpy, posts
the Iallreduce of its local squared change (one double), and completes the previous iteration's
Iallreduce (Wait): the reduction's latency overlaps the exchange and the step, the way solvers hide
a convergence check. Two result buffers alternate, so the one in flight is never overwritten.

--fine (default): N = 10,000, 3,000 iterations of about 50-100 us on 2 ranks. --coarse: N =
400,000, 200 iterations of several ms.

Self-check: rank 0 gathers the rod and compares it exactly, and every reduced norm to 1e-10
(relative: the reduction adds the partial sums in its own order), with a serial numpy computation
of the same steps. Prints `time_s=<timed loop, rank 0, between barriers>` and `verified`, or
exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 10_000, "iters": 3_000}, "coarse": {"size": 400_000, "iters": 200}}
WARMUP = 10


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS, fine="10,000 points, iterations of ~50-100 us",
                               coarse="400,000 points, iterations of several ms",
                               helps={"size": "interior points N", "iters": "timed iterations"},
                               argv=argv)


def step(u: np.ndarray) -> np.ndarray:
    """One explicit step of the interior u[1:-1] (u[0] and u[-1] are ghosts or the fixed ends)."""
    v = u.copy()
    v[1:-1] = u[1:-1] + 0.25 * (u[:-2] - 2.0 * u[1:-1] + u[2:])
    return v


def serial(n: int, iters: int) -> tuple[np.ndarray, list[float]]:
    """The same steps on one process: the final interior and every iteration's squared change."""
    u = np.zeros(n + 2)
    u[0] = 1.0
    norms = []
    for _ in range(iters):
        v = step(u)
        d = v[1:-1] - u[1:-1]
        norms.append(float(np.sum(d * d)))
        u = v
    return u[1:-1], norms


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = ns.size
    if size > n:
        if rank == 0:
            print(f"error: {size} ranks for {n} points", file=sys.stderr)
        return 2
    counts = [n // size + (1 if r < n % size else 0) for r in range(size)]
    first = sum(counts[:rank])
    u = np.zeros(counts[rank] + 2)       # the block with a ghost (or fixed end) on each side
    if rank == 0:
        u[0] = 1.0
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    local = [np.zeros(1), np.zeros(1)]
    total = [np.zeros(1), np.zeros(1)]
    norms: list[float] = []
    pending = None
    total_iters = WARMUP + ns.iters

    t0 = 0.0
    for it in range(total_iters):
        if it == WARMUP:
            if pending is not None:
                pending.Wait()
                norms.append(float(total[(it - 1) % 2][0]))
                pending = None
            comm.Barrier()
            t0 = MPI.Wtime()
        reqs = [comm.Irecv(u[0:1], source=left, tag=1), comm.Irecv(u[-1:], source=right, tag=0),
                comm.Isend(u[1:2], dest=left, tag=0), comm.Isend(u[-2:-1], dest=right, tag=1)]
        MPI.Request.Waitall(reqs)
        v = step(u)
        d = v[1:-1] - u[1:-1]
        b = it % 2
        local[b][0] = np.sum(d * d)
        req = comm.Iallreduce(local[b], total[b], op=MPI.SUM)
        if pending is not None:
            pending.Wait()
            norms.append(float(total[1 - b][0]))
        pending = req
        u = v
    pending.Wait()
    norms.append(float(total[(total_iters - 1) % 2][0]))
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    blocks = comm.gather(u[1:-1], root=0)
    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        rod, expected = serial(n, total_iters)
        ok = (np.array_equal(np.concatenate(blocks), rod)
              and np.allclose(norms, expected, rtol=1e-10, atol=0.0))
        told = f"overlap: {n} points, {ns.iters} iterations, P={size}"
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
