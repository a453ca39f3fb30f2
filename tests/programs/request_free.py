"""Request.Free of active requests, the scenario of request_free.c (2 ranks): rank 0 frees an
Isend and a started persistent send, and two inactive persistent sends (never started; started
and completed); rank 1 frees an Irecv that named its source and tag (as mpi4py.futures frees
its requests: MPI.Request.Free(request)), which rank 0's Ssend fills."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([5.0, 6.0])
if w.rank == 0:
    w.Isend(a, 1, 1).Free()
    p = w.Send_init(b, 1, 2)
    p.Start()
    p.free()                        # mpi4py's free() calls Free()
    p = w.Send_init(b, 1, 3)
    p.Start()
    p.Wait()
    p.Free()
    w.Send_init(b, 1, 9).Free()
    w.Ssend(a[:2], 1, 4)
    w.Send(a[:1], 1, 5)
elif w.rank == 1:
    late, got, total = np.zeros(2), np.zeros(4), 0.0
    MPI.Request.Free(w.Irecv(late, 0, 4))
    for tag, count in ((1, 4), (2, 2), (3, 2), (5, 1)):
        w.Recv(got[:count], 0, tag)
        total += got[:count].sum()
    print(f"{total:.1f}")
w.Barrier()
