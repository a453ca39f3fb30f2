"""Data-parallel gradient descent: every iteration Allreduces a gradient as long as the model.

    mpiexec -n P python workloads/gradient.py [--fine | --coarse] [--size N] [--iters K]

The model is N doubles, x, the same on every rank; each rank holds N doubles of its own data,
d_r, and weights w_r (seeded by its rank). An iteration computes the rank's gradient
g_r = w_r · tanh(x − d_r) (numpy, a few passes over N doubles), sums the gradients of all
ranks with one `Allreduce` of N doubles (MPI.SUM) and steps x −= 0.5 · g / P. This is the
communication of data-parallel training: few collectives, each of a large block, where the
reduction's arithmetic (adding the blocks) is a visible part of the collective's time.

--fine (default): N = 8,192 (64 KiB blocks), an iteration of about 100-200 us on 2 ranks.
--coarse: N = 1,048,576 (8 MiB blocks), an iteration of about 30 ms (on 2 ranks of this 2-core
machine, 1.2-1.3 s a run).

Self-check: after the timed loop rank 0 recomputes the whole descent serially from every rank's
data and compares the final model (to 1e-9 relative: MPI may sum the gradients in another order).
Prints `time_s=<timed loop, rank 0, between barriers>` and `verified`, or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 8_192, "iters": 3_000},
            "coarse": {"size": 1_048_576, "iters": 40}}
WARMUP = 5
STEP = 0.5


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS,
                               fine="8,192 doubles (64 KiB blocks), iterations of ~100-200 us",
                               coarse="1,048,576 doubles (8 MiB blocks), iterations of ~30 ms",
                               helps={"size": "doubles in the model", "iters": "timed iterations"},
                               argv=argv)


def data_of(rank: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([11, rank])
    return rng.standard_normal(n), 0.5 + rng.random(n)


def gradient(x: np.ndarray, d: np.ndarray, w: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.subtract(x, d, out=out)
    np.tanh(out, out=out)
    np.multiply(out, w, out=out)
    return out


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    d, w = data_of(rank, ns.size)
    x = np.zeros(ns.size)
    g = np.empty(ns.size)
    total = np.empty(ns.size)

    t0 = 0.0
    for it in range(WARMUP + ns.iters):
        if it == WARMUP:
            comm.Barrier()
            t0 = MPI.Wtime()
        comm.Allreduce(gradient(x, d, w, g), total, op=MPI.SUM)
        x -= (STEP / size) * total
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        everyone = [data_of(r, ns.size) for r in range(size)]
        ref = np.zeros(ns.size)
        scratch = np.empty(ns.size)
        for _ in range(WARMUP + ns.iters):
            step = np.zeros(ns.size)
            for dr, wr in everyone:
                step += gradient(ref, dr, wr, scratch)
            ref -= (STEP / size) * step
        ok = bool(np.allclose(x, ref, rtol=1e-9, atol=1e-12))
        told = f"gradient: {ns.size} doubles, {ns.iters} iterations, P={size}"
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
