"""Two ranks that each wait to receive from the other first: a deadlock. `collect --timeout`
stops it and records where each rank was (instrument.stopped)."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
buf = np.zeros(4)
comm.Barrier()
if comm.Get_rank() == 0:
    comm.Recv(buf, source=1, tag=7)
else:
    comm.Recv(buf, source=0, tag=7)
comm.Send(buf, dest=1 - comm.Get_rank(), tag=7)
