"""An mpi4py program for the PMPI library (which records the MPI calls mpi4py makes; run on 2
ranks): a ring exchange of Irecv/Isend completed by Waitall, a Send/Recv each way, a pickle-API
send/recv each way (mpi4py's recv is a matched probe and its receive) and an Allreduce. Each
rank checks what it received (exit 1 if wrong); rank 0 prints "ok"."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r = w.rank
p = 1 - r
out, got = np.full(4, float(r)), np.zeros(4)
for k in range(3):
    reqs = [w.Irecv(got, p, 10 + k), w.Isend(out, p, 10 + k)]
    MPI.Request.Waitall(reqs)
one = np.zeros(2, np.int32)
if r == 0:
    w.Send(np.arange(2, dtype=np.int32), 1, 20)
    w.Recv(one, 1, 21)
else:
    w.Recv(one, 0, 20)
    w.Send(one + 1, 0, 21)
if r == 0:
    w.send({"from": 0, "data": list(range(10))}, 1, 30)
    obj = w.recv(source=1, tag=31)
else:
    obj = w.recv(source=MPI.ANY_SOURCE, tag=30)
    w.send({"from": 1}, 0, 31)
total = np.zeros(1)
w.Allreduce(np.ones(1), total)
expected = (float(p), [1, 2] if r == 0 else [0, 1], p, 2.0)
if (got[0], one.tolist(), obj["from"], total[0]) != expected:
    raise SystemExit(1)
if r == 0:
    print("ok")
