"""The buffer forms mpi4py accepts for v-collectives, counts as array.array, list, tuple and
NumPy: Alltoallv, a root's Scatterv and Gatherv, Allgatherv; and [buf, count, type]."""
import array

import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
counts = array.array("i", [1] * n)
displs = array.array("i", range(n))
send = array.array("i", [10 * r + k for k in range(n)])
recv = array.array("i", [0] * n)
w.Alltoallv([send, (counts, displs), MPI.INT], [recv, (counts, displs), MPI.INT])
recv2 = np.zeros(n, dtype="i")
w.Alltoallv([np.array(send), list(counts), list(displs), MPI.INT],
            [recv2, np.array(counts), np.array(displs), MPI.INT])
mine = np.zeros(r + 1, dtype="i")
sizes = tuple(range(1, n + 1))
offs = tuple(int(x) for x in np.cumsum((0,) + sizes[:-1]))
full = np.arange(sum(sizes), dtype="i")
w.Scatterv([full, (sizes, offs), MPI.INT] if r == 0 else None, [mine, r + 1, MPI.INT], root=0)
back = np.zeros(sum(sizes), dtype="i")
w.Gatherv(mine, [back, (list(sizes), list(offs)), MPI.INT] if r == 0 else None, root=0)
allv = np.zeros(sum(sizes), dtype="i")
w.Allgatherv([mine, MPI.INT], [allv, (np.array(sizes), np.array(offs)), MPI.INT])
out = w.gather((list(recv), recv2.tolist(), mine.tolist()), root=0)
if r == 0:
    print(out, back.tolist(), allv.tolist())
