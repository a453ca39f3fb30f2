"""Rank 1 raises after a few messages while rank 0 waits for a message that never comes: the job
must end (not hang), rank 1 marked `error`, rank 0's flushed events kept."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
buf = np.zeros(4)
for i in range(3):
    if comm.rank == 0:
        comm.Send(buf, 1, tag=i)
    else:
        comm.Recv(buf, 0, tag=i)
if comm.rank == 1:
    raise RuntimeError("deliberate failure on rank 1")
comm.Recv(buf, 1, tag=99)
