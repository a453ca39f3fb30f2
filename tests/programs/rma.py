"""One-sided communication: fence epochs with Put, Get and Accumulate, a post/start/complete/test
epoch with a Put to the right neighbour, a lock_all epoch with a Put, a flush and a Get back, an
allocated window updated under a lock with Fetch_and_op, then both windows freed; every result
checked."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
right, left = (r + 1) % n, (r - 1) % n

# Put into [0, 8), Get from [0, 4), Accumulate into [4, 8): the epoch's Get and Accumulate
# touch different locations (MPI leaves overlapping ones undefined); as rma.c does
mem = np.zeros(8)
win = MPI.Win.Create(mem, disp_unit=mem.itemsize, comm=w)
win.Fence()
win.Put(np.full(8, float(r)), right)                     # 64 B to the right neighbour
win.Fence()
got = np.zeros(4)
win.Get(got, left, target=[0, 4, MPI.DOUBLE])             # 32 B back from the left one
win.Accumulate(np.ones(4), left, target=[4, 4, MPI.DOUBLE], op=MPI.SUM)   # 32 B on the left one
win.Fence(MPI.MODE_NOSUCCEED)
checks = [got.tolist() == [float((r - 2) % n)] * 4,
          mem.tolist() == [float(left)] * 4 + [left + 1.0] * 4]

# PSCW: exposed to the left neighbour, accessing the right one; 16 B into the right one's [0, 2)
world = w.Get_group()
win.Post(world.Incl([left]))
win.Start(world.Incl([right]))
win.Put(np.full(2, 10.0 + r), right, target=[0, 2, MPI.DOUBLE])
win.Complete()
while not win.Test():     # the exposure epoch ends when a Test returns true
    pass
checks.append(mem[:2].tolist() == [10.0 + left] * 2)
# passive target: 16 B into the right one's [2, 4), flushed, then read back
win.Lock_all()
win.Put(np.full(2, 20.0 + r), right, target=[2, 2, MPI.DOUBLE])
win.Flush(right)
back = np.zeros(2)
win.Get(back, right, target=[2, 2, MPI.DOUBLE])
win.Unlock_all()
checks.append(back.tolist() == [20.0 + r] * 2)
w.Barrier()

counter = MPI.Win.Allocate(8, disp_unit=8, comm=w)
buf = np.frombuffer(counter.tomemory(), dtype=np.int64)
buf[0] = 0
w.Barrier()
old = np.zeros(1, np.int64)
counter.Lock(0)
counter.Fetch_and_op(np.ones(1, np.int64), old, 0, op=MPI.SUM)
counter.Unlock(0)
w.Barrier()
if r == 0:
    counter.Lock(0, MPI.LOCK_SHARED)
    total = np.zeros(1, np.int64)
    counter.Get(total, 0)
    counter.Unlock(0)
    checks.append(int(total[0]) == n)
checks.append(0 <= int(old[0]) < n)
counter.Free()
win.Free()
told = w.gather(f"rank {r}: {len(checks)} checks, {'all passed' if all(checks) else 'FAILED'}")
if r == 0:
    print("\n".join(told))
