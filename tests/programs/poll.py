"""Polling on 2 ranks (docs/trace-format.md, `Poll`): rank 0 polls with Iprobe, then with
Test on an Irecv, each time while rank 1 computes for WORK_S before it sends; each poll loop
iteration does a little work of its own. Each loop is one Poll row (its count the failed polls)
followed by the Iprobe row that found the message / the Test row that completed the receive."""
import sys
import time

import numpy as np
from mpi4py import MPI

WORK_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.03
STEP_S = 50e-6          # the poll loop's own work per iteration


def spin(s: float) -> None:
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass


c = MPI.COMM_WORLD
buf = np.zeros(16)
if c.rank == 0:
    c.Barrier()
    while not c.Iprobe(source=1, tag=5):
        spin(STEP_S)
    c.Recv(buf, source=1, tag=5)
    rq = c.Irecv(buf, source=1, tag=6)
    c.Barrier()
    while not rq.Test():
        spin(STEP_S)
else:
    c.Barrier()
    spin(WORK_S)
    c.Send(buf, dest=0, tag=5)
    c.Barrier()
    spin(WORK_S)
    c.Send(buf, dest=0, tag=6)
