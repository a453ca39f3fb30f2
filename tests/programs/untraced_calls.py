"""Calls the tracer counts but does not record: a request-based one-sided Rput; with traced
non-blocking collectives, a matched probe that finds nothing (a Poll row of one poll, as an
Iprobe that finds nothing), a traced neighbourhood collective, a traced window and one traced
Barrier."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
total = np.zeros(1)
for _ in range(3):
    w.Iallreduce(np.ones(1), total).Wait()
w.Ibarrier().Wait()
# A matched probe that finds nothing (one that found a traced Send would leave it unmatched).
assert w.Improbe(MPI.ANY_SOURCE, 3) is None
cart = w.Create_cart([n], [True])
nb = np.zeros(2)
cart.Neighbor_allgather(np.full(1, float(r)), nb)
win = MPI.Win.Create(np.zeros(4), comm=w)
win.Fence()
win.Put(np.full(4, float(r)), (r + 1) % n)
win.Rput(np.full(4, float(r)), (r + 1) % n).Wait()       # request-based: counted
win.Fence()
win.Free()
w.Barrier()
res = w.gather((total[0], nb.tolist()), root=0)
if r == 0:
    print(res)
