"""A NumPy loop whose temporaries (about 256 KiB) sit at glibc's mmap threshold: untraced, each
is mmapped and page-faulted afresh, unless something in the process has freed a larger malloc'ed
block before (which raises the threshold). Prints, from rank 0, the modules loaded by the time
the program runs and the minor page faults of its loop: a deterministic witness of whether the
tracer changed the program's memory behaviour; and how the program's `MPI` module answers an
attribute (`plain`: a module whose namespace holds it, one dict lookup as untraced) and the type
of its COMM_WORLD."""

import resource
import sys
import types

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
attrs = "plain" if type(MPI) is types.ModuleType and all(
    a in vars(MPI) for a in ("SUM", "ANY_SOURCE", "DOUBLE", "Request", "Wtime")) else "slow"
rank, size = comm.Get_rank(), comm.Get_size()
u = np.random.rand(130, 256)
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"pyarrow", "pandas", "numba", "scipy"})
comm.Barrier()
faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for it in range(300):
    reqs = []
    if rank > 0:
        reqs += [comm.Irecv(u[0], source=rank - 1, tag=1),
                 comm.Isend(u[1].copy(), dest=rank - 1, tag=2)]
    if rank < size - 1:
        reqs += [comm.Irecv(u[-1], source=rank + 1, tag=2),
                 comm.Isend(u[-2].copy(), dest=rank + 1, tag=1)]
    MPI.Request.Waitall(reqs)
    v = u.copy()
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    r = v - u
    res = float(np.sqrt((r * r).sum()))
    u = v
    if it % 10 == 0:
        comm.allreduce(res)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
if rank == 0:
    print(f"heavy={','.join(heavy) or '-'} faults={faults} attrs={attrs} "
          f"world={type(comm).__name__}")
