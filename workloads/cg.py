"""Conjugate gradient on the 1-D Poisson matrix split by rows: a halo exchange and two allreduces
every iteration.

    mpiexec -n P python workloads/cg.py [--fine | --coarse] [--size N] [--iters K]

The matrix is the N x N tridiagonal tridiag(-1, 2, -1) (symmetric positive definite, condition
number about 0.4 N^2, so CG is still far from converged after K < N iterations); the right-hand
side is N seeded random numbers. Rank r owns a contiguous block of rows of every vector. An
iteration is plain CG: the sparse product q = A p needs one value of p from each neighbour, sent
with Irecv/Isend and waited for with Waitall (neighbours beyond the ends are `MPI.PROC_NULL`);
then the local parts of p.q and r.r are Allreduced (buffer API, one double each). The iteration
count is fixed (no stopping on a tolerance), so every run does the same work.

--fine (default): N = 4,096, 2,000 iterations of about 100 us on 2 ranks (mostly the three
synchronisations). --coarse: N = 393,216, 100 iterations of 2.5-4 ms.

Self-check: rank 0 gathers the solution and recomputes the same CG serially, summing each dot
product as the ranks' partial sums in rank order, and compares the solution and the history of
r.r (relative 1e-9: the allreduce may add the partial sums in another order). Prints
`time_s=<timed loop, rank 0, between barriers>` and `verified`, or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 4_096, "iters": 2_000}, "coarse": {"size": 393_216, "iters": 100}}
WARMUP = 10
TOLERANCE = 1e-9


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS, fine="4,096 unknowns, iterations of ~50-100 us",
                               coarse="393,216 unknowns, iterations of several ms",
                               helps={"size": "unknowns N", "iters": "timed iterations"},
                               argv=argv)


def rhs(n: int) -> np.ndarray:
    return np.random.default_rng(11).random(n)


def matvec(p: np.ndarray, left: float, right: float, out: np.ndarray) -> None:
    """out = A p over one block of rows; `left`/`right` are p just outside the block (0 at the
    ends of the global vector)."""
    np.multiply(p, 2.0, out=out)
    out[1:] -= p[:-1]
    out[:-1] -= p[1:]
    out[0] -= left
    out[-1] -= right


def local_dot(a: np.ndarray, b: np.ndarray) -> float:
    """numpy's own pairwise sum, not BLAS: a threaded BLAS dot would start threads on the cores
    the other ranks busy-poll on, and the serial check must add in the same order."""
    return float(np.sum(a * b))


def ratio(a: float, b: float) -> float:
    """a / b for CG's step sizes, 0 where b is 0 (the residual vanished), so that every rank and
    the serial check take the same branch."""
    return a / b if b != 0.0 else 0.0


def blocks(n: int, size: int) -> list[tuple[int, int]]:
    counts = [n // size + (1 if r < n % size else 0) for r in range(size)]
    starts = [sum(counts[:r]) for r in range(size)]
    return [(s, s + c) for s, c in zip(starts, counts)]


def dot(a: np.ndarray, b: np.ndarray, parts: list[tuple[int, int]]) -> float:
    """The dot product as the ranks form it: each block's partial sum, added in rank order."""
    total = 0.0
    for lo, hi in parts:
        total += local_dot(a[lo:hi], b[lo:hi])
    return total


def serial(n: int, iters: int, parts: list[tuple[int, int]]) -> tuple[np.ndarray, list[float]]:
    """The same CG on one process: the solution and r.r after every iteration."""
    b = rhs(n)
    x = np.zeros(n)
    r = b.copy()
    p = r.copy()
    q = np.empty(n)
    rr = dot(r, r, parts)
    history = []
    for _ in range(iters):
        matvec(p, 0.0, 0.0, q)
        pq = dot(p, q, parts)
        alpha = ratio(rr, pq)
        x += alpha * p
        r -= alpha * q
        rr_new = dot(r, r, parts)
        p *= ratio(rr_new, rr)
        p += r
        rr = rr_new
        history.append(rr)
    return x, history


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = ns.size
    if size > n:
        if rank == 0:
            print(f"error: {size} ranks for {n} unknowns", file=sys.stderr)
        return 2
    parts = blocks(n, size)
    lo, hi = parts[rank]
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    x = np.zeros(hi - lo)
    r = rhs(n)[lo:hi].copy()
    p = r.copy()
    q = np.empty(hi - lo)
    # Halo values: p just left and right of the block; they stay 0 at the ends (PROC_NULL).
    halo = np.zeros(2)
    local = np.zeros(1)
    total = np.zeros(1)

    local[0] = local_dot(r, r)
    comm.Allreduce(local, total, op=MPI.SUM)
    rr = float(total[0])
    history = []
    total_iters = WARMUP + ns.iters

    t0 = 0.0
    for it in range(total_iters):
        if it == WARMUP:
            comm.Barrier()
            t0 = MPI.Wtime()
        reqs = [comm.Irecv(halo[0:1], source=left, tag=1),
                comm.Irecv(halo[1:2], source=right, tag=0),
                comm.Isend(p[0:1], dest=left, tag=0), comm.Isend(p[-1:], dest=right, tag=1)]
        MPI.Request.Waitall(reqs)
        matvec(p, halo[0], halo[1], q)
        local[0] = local_dot(p, q)
        comm.Allreduce(local, total, op=MPI.SUM)
        pq = float(total[0])
        alpha = ratio(rr, pq)
        x += alpha * p
        r -= alpha * q
        local[0] = local_dot(r, r)
        comm.Allreduce(local, total, op=MPI.SUM)
        rr_new = float(total[0])
        p *= ratio(rr_new, rr)
        p += r
        rr = rr_new
        history.append(rr)
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    pieces = comm.gather(x, root=0)
    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        expected_x, expected = serial(n, total_iters, parts)
        got = np.concatenate(pieces)
        scale = float(np.max(np.abs(expected_x))) or 1.0
        # Once CG has converged (K near N) r.r is rounding noise: judged against the largest.
        ok = (np.allclose(got, expected_x, rtol=TOLERANCE, atol=TOLERANCE * scale)
              and np.allclose(history, expected, rtol=TOLERANCE,
                              atol=TOLERANCE * max(expected)))
        told = f"cg: N={n}, {ns.iters} iterations, P={size}, r.r {expected[-1]:.3e}"
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
