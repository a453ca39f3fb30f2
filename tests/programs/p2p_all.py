"""Exercises every traced call kind with known peers, tags and sizes (run with 3 or 4 ranks).

Plain mpi4py: traced with `python -m instrument.run`. tests/test_collect.py knows exactly which
rows each rank must record.
"""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
buf = np.arange(100, dtype=np.int32)          # 400 bytes
got = np.empty_like(buf)

# 1. blocking buffer API, ring with explicit source
comm.Send(buf, dest=(rank + 1) % size, tag=11) if rank % 2 == 0 else None
if rank % 2 == 1:
    comm.Recv(got, source=(rank - 1) % size, tag=11)
    comm.Send(buf, dest=(rank + 1) % size, tag=11)
if rank % 2 == 0:
    st = MPI.Status()
    comm.Recv(got, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
    assert st.Get_source() == (rank - 1) % size

# 2. non-blocking with Waitall, wildcard receive
reqs = [comm.Irecv(got, source=MPI.ANY_SOURCE, tag=22), comm.Isend(buf[:10], dest=(rank + 1) % size, tag=22)]
MPI.Request.Waitall(reqs)

# 3. pickle API: send/recv and isend/irecv+wait
if rank == 0:
    comm.send({"x": list(range(10))}, dest=1, tag=33)
    r = comm.irecv(source=1, tag=34)
    assert r.wait() == "pong"
elif rank == 1:
    assert comm.recv(source=0, tag=33)["x"][-1] == 9
    comm.isend("pong", dest=0, tag=34).wait()

# 4. Sendrecv
comm.Sendrecv(buf, dest=(rank + 1) % size, sendtag=44, recvbuf=got, source=(rank - 1) % size, recvtag=44)

# 5. collectives with a non-zero root
comm.Bcast(buf, root=1)
out = np.empty_like(buf)
comm.Reduce(buf, out, op=MPI.SUM, root=2)
comm.Allreduce(buf, out, op=MPI.SUM)
comm.Barrier()

# 6. derived communicator: even/odd, collectives with comm-local root 1
sub = comm.Split(color=rank % 2, key=rank)
if sub.Get_size() > 1:
    sub.Bcast(buf, root=1)
sub.Barrier()
print(rank, "done")
