"""Initialises and finalizes MPI itself (mpi4py.rc.initialize and rc.finalize False).

    python self_init.py [init | init_thread | init_thread_multiple] [early]

`init` (default) calls MPI.Init(), `init_thread` MPI.Init_thread(MPI.THREAD_FUNNELED),
`init_thread_multiple` MPI.Init_thread(MPI.THREAD_MULTIPLE); with `early` the program takes
COMM_WORLD before initialising MPI. Then a ring Sendrecv, an Irecv/Isend pair completed by
Waitall, an Allreduce and a gather; MPI.Finalize; rank 0 prints after it.
"""
import sys

import mpi4py

mpi4py.rc.initialize = False
mpi4py.rc.finalize = False
from mpi4py import MPI  # noqa: E402
import numpy as np  # noqa: E402

how = sys.argv[1] if len(sys.argv) > 1 else "init"
early = MPI.COMM_WORLD if "early" in sys.argv[2:] else None
assert not MPI.Is_initialized()
if how == "init":
    MPI.Init()
    level = None
else:
    level = MPI.Init_thread(MPI.THREAD_MULTIPLE if how == "init_thread_multiple"
                            else MPI.THREAD_FUNNELED)
comm = early if early is not None else MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
mine = np.full(4, rank, dtype=np.int64)
got = np.empty(4, dtype=np.int64)
comm.Sendrecv(mine, right, 1, got, left, 1)
again = np.empty(4, dtype=np.int64)
MPI.Request.Waitall([comm.Irecv(again, left, 2), comm.Isend(mine, right, 2)])
total = np.zeros(1)
comm.Allreduce(np.array([float(got[0] + again[0])]), total)
received = comm.gather(int(got[0]), root=0)
MPI.Finalize()
if rank == 0:
    print(f"finalized {MPI.Is_finalized()}, level {level}, received {received}, "
          f"total {total[0]:.0f}")
