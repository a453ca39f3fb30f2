"""Persistent requests in a ring: Send_init/Ssend_init/Recv_init, Start, Startall, Wait,
Waitall, 3 rounds each."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
right, left = (r + 1) % n, (r - 1) % n
out, got = np.full(4, float(r)), np.zeros(4)
ps = w.Send_init(out, right, 5)
pr = w.Recv_init(got, left, 5)
total = 0.0
for _ in range(3):
    MPI.Prequest.Startall([pr, ps])
    MPI.Request.Waitall([pr, ps])
    total += got.sum()
ss = w.Ssend_init(out, right, 6)
rr = w.Recv_init(got, MPI.ANY_SOURCE, 6)
for _ in range(3):
    rr.Start()
    ss.Start()
    ss.Wait()
    rr.Wait()
    total += got.sum()
for q in (ps, pr, ss, rr):
    q.Free()
sums = w.gather(total, root=0)
if r == 0:
    print(sums)
