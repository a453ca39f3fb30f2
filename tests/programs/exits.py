"""Rank 1 ends with sys.exit(3) while rank 0 waits for it in a Barrier."""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
comm.Barrier()
if comm.Get_rank() == 1:
    sys.exit(3)
comm.Barrier()
