"""An FFT-like all-to-all transpose: 2-D FFTs of an N x N grid split into slabs of rows.

    mpiexec -n P python workloads/transpose.py [--fine | --coarse] [--size N] [--iters K]

Rank r owns N/P consecutive rows of a complex N x N array (N must be a multiple of P). The
iterations alternate a forward 2-D FFT, damped by a Gaussian G of the frequencies, and an inverse
one, so two iterations are a step of spectral diffusion u <- ifft2(fft2(u) * G). Each is done
the way distributed FFTs do it: a 1-D FFT along the local rows, a global transpose, a 1-D FFT
along the rows of the transposed slab (the original columns; forward iterations multiply by G
there) and the transpose back. A transpose packs the slab into P contiguous b x b blocks
(b = N/P), exchanges them with one `Alltoall` (buffer API, b*b complex doubles to every rank)
and unpacks the blocks it received, each transposed, into the new slab: two Alltoalls an
iteration.

--fine (default): N = 24, 2,000 iterations of about 100 us on 2 ranks (numpy's FFT costs some
15 us a call at any size this small). --coarse: N = 480, 100 iterations of 5-6 ms. Both are
multiples of 12, so they run on 2, 3 and 4 ranks.

Self-check: rank 0 gathers the grid and compares it with numpy's serial `fft2(u) * G` and
`ifft2(u)` alternated as many times (to 1e-10 of the largest value). Prints `time_s=<timed loop,
rank 0, between barriers>` and `verified`, or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 24, "iters": 2_000}, "coarse": {"size": 480, "iters": 100}}
WARMUP = 10
#: G = exp(-DIFFUSION * (kx^2 + ky^2)), k in cycles per grid length: a damping that keeps every
#: value bounded however many steps are taken, strong only for the highest frequencies of a
#: large grid (at N = 480 the highest lose 68 % a step, at N = 24 0.3 %).
DIFFUSION = 1e-5
TOLERANCE = 1e-10


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS, fine="24 x 24 grid, iterations of ~50-100 us",
                               coarse="480 x 480 grid, iterations of several ms",
                               helps={"size": "grid size N (a multiple of P)",
                                      "iters": "timed iterations"},
                               argv=argv)


def initial(n: int) -> np.ndarray:
    return np.random.default_rng(5).random((n, n)).astype(np.complex128)


def damping(n: int) -> np.ndarray:
    """G[i, j] for frequency i along the first axis and j along the second; symmetric."""
    k = np.fft.fftfreq(n, 1.0 / n)
    return np.exp(-DIFFUSION * (k[:, None] ** 2 + k[None, :] ** 2))


def transpose(comm: MPI.Comm, slab: np.ndarray, send: np.ndarray, recv: np.ndarray) -> np.ndarray:
    """The slab of the globally transposed array: block j of the slab goes to rank j and the
    block received from rank i becomes, transposed, columns i*b .. (i+1)*b of the new slab."""
    p, b, _ = send.shape
    send[...] = slab.reshape(b, p, b).transpose(1, 0, 2)
    comm.Alltoall(send, recv)
    return np.ascontiguousarray(recv.transpose(2, 0, 1).reshape(b, p * b))


def step(comm: MPI.Comm, u: np.ndarray, g: np.ndarray, forward: bool, send: np.ndarray,
         recv: np.ndarray) -> np.ndarray:
    """One iteration on rank's slab: the forward 2-D FFT times G, or the inverse 2-D FFT."""
    fft = np.fft.fft if forward else np.fft.ifft
    w = fft(transpose(comm, fft(u, axis=1), send, recv), axis=1)
    if forward:
        w *= g
    return transpose(comm, w, send, recv)


def serial(n: int, iters: int) -> np.ndarray:
    """The same iterations on the whole grid with numpy's 2-D FFTs."""
    u = initial(n)
    full = damping(n)
    for it in range(iters):
        u = np.fft.fft2(u) * full if it % 2 == 0 else np.fft.ifft2(u)
    return u


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = ns.size
    if n % size:
        if rank == 0:
            print(f"error: --size {n} is not a multiple of the {size} ranks", file=sys.stderr)
        return 2
    b = n // size
    u = initial(n)[rank * b:(rank + 1) * b].copy()
    # After the forward transpose rank r holds the frequencies r*b .. of the original columns
    # along its rows and every frequency of the original rows along its columns.
    g = damping(n)[rank * b:(rank + 1) * b]
    send = np.empty((size, b, b), np.complex128)
    recv = np.empty((size, b, b), np.complex128)
    total_iters = WARMUP + ns.iters

    t0 = 0.0
    for it in range(total_iters):
        if it == WARMUP:
            comm.Barrier()
            t0 = MPI.Wtime()
        u = step(comm, u, g, it % 2 == 0, send, recv)
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    slabs = comm.gather(u, root=0)
    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        expected = serial(n, total_iters)
        got = np.vstack(slabs)
        ok = bool(np.allclose(got, expected, rtol=0.0,
                              atol=TOLERANCE * float(np.max(np.abs(expected)))))
        told = f"transpose: {n}x{n}, {ns.iters} iterations, P={size}"
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
