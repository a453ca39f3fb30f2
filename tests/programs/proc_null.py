"""A non-periodic halo through mpi4py's pickle API (run with 2 ranks): the edge ranks' other
neighbour is MPI.PROC_NULL, whose receives give None (the tracer must too); a sendrecv into a
receive buffer too."""
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
left = r - 1 if r > 0 else MPI.PROC_NULL
right = r + 1 if r < p - 1 else MPI.PROC_NULL
for i in range(3):
    got = comm.sendrecv({"from": r, "i": i}, dest=right, sendtag=1, source=left, recvtag=1)
    assert got == (None if left == MPI.PROC_NULL else {"from": left, "i": i}), got
    got = comm.sendrecv(i, dest=right, sendtag=3, recvbuf=bytearray(256), source=left,
                        recvtag=3)
    assert got == (None if left == MPI.PROC_NULL else i), got
    comm.send(i, dest=left, tag=2)
    back = comm.recv(source=right, tag=2)
    assert back == (None if right == MPI.PROC_NULL else i), back
assert comm.mprobe(source=MPI.PROC_NULL).recv() is None
assert comm.irecv(source=MPI.PROC_NULL).wait() is None
comm.Barrier()
if r == 0:
    print("proc_null: done")
