"""An intercommunicator between the even and the odd ranks: a message across it (counted, not
traced), then its Merge, on which an Allreduce and a ring are traced."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
half = w.Split(r % 2, r)
inter = half.Create_intercomm(0, w, 1 - r % 2, tag=5)
if half.rank == 0:                            # the two leaders greet each other across it
    inter.send(r, dest=0, tag=1)
    other = inter.recv(source=0, tag=1)
merged = inter.Merge(high=r % 2 == 1)         # evens first, then odds
total = np.zeros(1)
merged.Allreduce(np.full(1, float(r)), total)
m, size = merged.rank, merged.size
got = merged.sendrecv(r, dest=(m + 1) % size, source=(m - 1) % size)
checks = [total[0] == sum(range(n)), merged.size == n]
told = w.gather(f"rank {r}: merged rank {m}, {'ok' if all(checks) else 'FAILED'}")
if r == 0:
    print("\n".join(told))
