"""2-D Jacobi sweep split by rows: halo exchange every iteration, residual allreduce every 10th.

    mpiexec -n P python workloads/stencil.py [--fine | --coarse] [--size N] [--iters K]

The global grid is (N+2) x (N+2) with a fixed boundary (top edge 1, the others 0); rank r owns a
contiguous band of the N interior rows plus one halo row above and below. Every iteration posts
Irecv/Isend for both halos and waits with Waitall, then computes the new grid with numpy the
plain way, which creates temporaries of the band's size (`v = u.copy()`, the four-neighbour sum);
every 10th iteration the residual `r = v - u` is summed and allreduced.

--fine (default): N = 256, the size at which a 2-rank run's band (130 x 258 doubles, 268 KB) is
above glibc's initial mmap threshold, so each temporary is mmapped and page-faulted afresh unless
something raised the threshold; an iteration takes about 80-300 us. --coarse: N = 1024, an
iteration of several ms.

Self-check: rank 0 gathers the grid and compares it, and every allreduced residual, with a serial
numpy computation of the same sweep. Prints `time_s=<timed loop, rank 0, between barriers>` and
`verified`, or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 256, "iters": 3000}, "coarse": {"size": 1024, "iters": 150}}
RESIDUAL_EVERY = 10
WARMUP = 10


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS, fine="256 x 256 grid, iterations of ~100 us",
                          coarse="1024 x 1024 grid, iterations of several ms",
                          helps={"size": "interior grid size N", "iters": "timed iterations"}, minimum=None, argv=argv)


def initial(n: int) -> np.ndarray:
    """The global grid with its boundary: top edge 1, everything else 0."""
    g = np.zeros((n + 2, n + 2))
    g[0, :] = 1.0
    return g


def sweep(u: np.ndarray) -> np.ndarray:
    """One Jacobi step of the interior; the boundary columns and halo rows are copied unchanged."""
    v = u.copy()
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return v


def serial(n: int, iters: int) -> tuple[np.ndarray, list[float]]:
    """The same sweep on one process: the final grid and every residual the parallel run reduces."""
    u = initial(n)
    residuals = []
    for it in range(iters):
        v = sweep(u)
        if it % RESIDUAL_EVERY == 0:
            r = v[1:-1] - u[1:-1]
            residuals.append(float(np.sum(r * r)))
        u = v
    return u, residuals


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = ns.size
    if size > n:
        if rank == 0:
            print(f"error: {size} ranks for {n} rows", file=sys.stderr)
        return 2
    counts = [n // size + (1 if r < n % size else 0) for r in range(size)]
    first = sum(counts[:rank])
    # The band with its halos is rows first .. first+counts[rank]+1 of the global grid.
    u = initial(n)[first:first + counts[rank] + 2].copy()
    up = rank - 1 if rank > 0 else MPI.PROC_NULL
    down = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    local = np.zeros(1)
    total = np.zeros(1)
    residuals = []
    total_iters = WARMUP + ns.iters

    t0 = 0.0
    for it in range(total_iters):
        if it == WARMUP:
            comm.Barrier()
            t0 = MPI.Wtime()
        reqs = [comm.Irecv(u[0], source=up, tag=1), comm.Irecv(u[-1], source=down, tag=0),
                comm.Isend(u[1], dest=up, tag=0), comm.Isend(u[-2], dest=down, tag=1)]
        MPI.Request.Waitall(reqs)
        v = sweep(u)
        if it % RESIDUAL_EVERY == 0:
            r = v[1:-1] - u[1:-1]
            local[0] = np.sum(r * r)
            comm.Allreduce(local, total, op=MPI.SUM)
            residuals.append(float(total[0]))
        u = v
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    bands = comm.gather(u[1:-1], root=0)
    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        grid, expected = serial(n, total_iters)
        # Summation order differs between the ranks' partial sums and the serial sum.
        ok = (np.array_equal(np.vstack(bands), grid[1:-1])
              and np.allclose(residuals, expected, rtol=1e-10, atol=0.0))
        told = f"stencil: {n}x{n}, {ns.iters} iterations, P={size}"
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
