"""A plain mpi4py message-rate test in the style of OSU's osu_bw (the program that
benchmarks/message_rate.py runs untraced and traced): rank 0 posts a window of 64 `Isend`s,
rank 1 64 `Irecv`s, both `Waitall`, then rank 1 sends a 1-byte acknowledgement. For every power
of two from 32 B to 4 KiB: one warm-up block, then BLOCKS blocks of WINDOWS windows; rank 0
prints `bw SIZE MB_PER_S` (the median over the blocks).

    mpiexec -n 2 python benchmarks/osu_bw.py [BLOCKS] [WINDOWS]
"""

import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

WINDOW = 64
SIZES = [32 << k for k in range(8)]


def block(comm: MPI.Comm, bufs: list, ack: np.ndarray, windows: int) -> float:
    """Seconds for `windows` windows (rank 0's clock)."""
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(windows):
        if comm.rank == 0:
            MPI.Request.Waitall([comm.Isend(b, 1, 100) for b in bufs])
            comm.Recv(ack, 1, 101)
        else:
            MPI.Request.Waitall([comm.Irecv(b, 0, 100) for b in bufs])
            comm.Send(ack, 0, 101)
    return time.perf_counter() - t0


def main() -> None:
    blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    windows = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    comm = MPI.COMM_WORLD
    ack = np.zeros(1, np.uint8)
    for size in SIZES:
        bufs = [np.zeros(size, np.uint8) for _ in range(WINDOW)]
        block(comm, bufs, ack, windows)                       # warm-up
        times = [block(comm, bufs, ack, windows) for _ in range(blocks)]
        if comm.rank == 0:
            rate = WINDOW * windows * size / statistics.median(times) / 1e6
            print(f"bw {size} {rate:.3f}", flush=True)


if __name__ == "__main__":
    main()
