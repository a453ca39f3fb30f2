"""A program that calls MPI.Finalize itself, then prints."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
total = np.zeros(1)
w.Allreduce(np.ones(1), total)
w.Barrier()
rank = w.rank
MPI.Finalize()
if rank == 0:
    print("finalized", MPI.Is_finalized(), total[0])
