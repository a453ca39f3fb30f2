"""Rank 0 posts a receive and cancels it (the lowercase cancel()), then receives rank 1's
message: one Request.Cancel (the scenario of cancel.c)."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
y = np.zeros(4)
cancelled = False
if comm.rank == 0:
    q = comm.Irecv(y, source=MPI.ANY_SOURCE, tag=5)
    q.cancel()              # (mpi4py's cancel() calls MPI_Cancel itself, not Cancel())
    st = MPI.Status()
    q.Wait(st)
    cancelled = st.Is_cancelled()
comm.Barrier()
if comm.rank == 0:
    comm.Recv(y, source=1, tag=5)
    print("cancelled", int(cancelled))
elif comm.rank == 1:
    comm.Send(np.arange(1.0, 5.0), dest=0, tag=5)
