"""Every rank exchanges a few messages, then blocks forever in a receive nobody sends: the test
stops the run with SIGTERM (collect --timeout) and expects flushed, readable files."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
buf = np.zeros(8, np.uint8)
for i in range(5):
    comm.Sendrecv(buf, dest=(rank + 1) % comm.Get_size(), sendtag=i, recvbuf=buf,
                  source=(rank - 1) % comm.Get_size(), recvtag=i)
comm.Recv(buf, source=MPI.ANY_SOURCE, tag=999)
