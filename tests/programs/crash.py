"""Rank 1 kills itself with SIGKILL after recording 40 messages; run with a small buffer
(HINDSIGHT_BUFFER_EVENTS=16) so that some of its events were flushed before it died."""
import os
import signal

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
buf = np.zeros(8, np.uint8)
for i in range(20):
    if rank == 0:
        comm.Send(buf, 1, tag=i)
        comm.Recv(buf, 1, tag=i)
    elif rank == 1:
        comm.Recv(buf, 0, tag=i)
        comm.Send(buf, 0, tag=i)
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
comm.Barrier()
