"""Every completion family (Wait, Test, Waitany, Waitsome, Testall, waitany) on 2 ranks: each
request must get exactly one completion row."""
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD; r = c.rank; o = 1 - r
b = np.zeros(4); g = np.zeros(4)
# Wait, Test loop, Waitany, Waitsome, Testall, lower-case waitany/testsome
rq = c.Irecv(g, o, 1); c.Send(b, o, 1); rq.Wait()
rq = c.Irecv(g, o, 2); c.Send(b, o, 2)
while not rq.Test(): pass
rs = [c.Irecv(g, o, 3), c.Isend(b, o, 3)]
done = 0
while done < 2:
    i = MPI.Request.Waitany(rs); done += 1
rs = [c.Isend(b, o, 4), c.Irecv(g, o, 4)]
n = 0
while n < 2:
    n += len(MPI.Request.Waitsome(rs) or [])
rs = [c.isend("x", o, 5), c.irecv(source=o, tag=5)]
while True:
    f, objs = MPI.Request.testall(rs)
    if f: break
assert objs[1] == "x"
rs = [c.irecv(source=o, tag=6), c.isend("y", o, 6)]
got = []
while len(got) < 2:
    i, obj = MPI.Request.waitany(rs); got.append(i)
